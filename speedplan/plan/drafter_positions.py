"""Drafters swept past the positions they hold: priced on vLLM, cautioned everywhere.

A draft model or an EAGLE head holds the positions of its config (`max_position_embeddings`, with
rope scaling). The published EAGLE and EAGLE-3 heads for Llama-3.1-8B, which speedplan's vLLM and
TensorRT-LLM files name, hold 2,048 (`plan.defaults.head_positions`); `eagle3:config=PATH` (or a
draft model's config) gives a drafter's own. Past them the engines do not run what a drafter within
its positions runs:

- vLLM caps the drafter's max_model_len at min(drafter, target)
  (`SpeculativeConfig._maybe_override_draft_max_model_len`). Model Runner V1 drafts only while the
  batch's longest sequence + num_speculative_tokens fits it; otherwise every sequence of the step gets
  zero tokens, which the target verifies and rejects (vllm/v1/worker/gpu_model_runner.py,
  `_input_fits_in_drafter` and `sample_tokens`, commit 000fc94b; vLLM issue #58080 measured
  per-position acceptance 0.000 there). The sequence is the verify pass's: num_computed_tokens +
  num_scheduled_tokens (`_prepare_inputs`, seq_lens), the KV length L plus the 1 + k tokens the step
  verifies, so a step with k speculative tokens drafts only while L + 1 + 2k fits: the positions its
  verify pass fills, then the k its drafter writes for the next step (`positions_needed`). Model
  Runner V2 (vLLM 0.33's default) has no such gate: it raises the max_position_embeddings of every
  drafter but an independent draft model to the target's max_model_len where its RoPE type only sizes
  the rotary table (llama3 among them; `SpeculativeConfig._maybe_override_draft_max_position_embeddings`,
  0.33.0 wheel, commit 4ba787ec9, after vLLM issue #48894's device-side assert past the table) and
  drafts on, at an acceptance not measured past the positions the head was trained on; for a draft
  model or another RoPE type it lowers the server's max_model_len to the drafter's
  (`VllmConfig._limit_max_model_len_to_draft`). vLLM profiles price such a step as Model Runner V1
  runs it: AL 1 without drafting (`past_positions`), though their D = 0 upkeep follows V2
  (`zero_draft_forward`).
- SGLang runs the drafter on past its positions; sglang issue #6783 measured an EAGLE-3 head of
  2,048 positions slower than plain decoding on inputs past 2k. SGLang profiles price such a step at
  AL 1 with its drafting paid (`past_positions`): slower than plain decoding, as measured; how much
  acceptance is left there was not measured, so this is the bound that keeps such a drafter out of
  a plan. SGLang's drafter runs D steps (a tree's depth) past the tokens a step accepts, so its
  count is L + 1 + 2D whatever the tree's nodes.
- TensorRT-LLM's behaviour is not stated: priced as if the drafter held the positions.

Every sweep past a drafter's positions carries a caution saying so.
"""

from __future__ import annotations

import numpy as np

from speedplan.plan.mechanisms import Mechanism
from speedplan.specs.model import ModelSpec

PAST_POSITIONS = (
    "past them vLLM's Model Runner V1 drafts nothing (priced so: AL 1, no drafting; V2, vLLM 0.33's default, gives "
    "a head whose RoPE type allows it the target's positions and drafts on at an acceptance not measured there, or "
    "else lowers max_model_len to the drafter's), SGLang runs the drafter on (sglang issue #6783: "
    "slower than plain decoding; priced at AL 1 with its drafting paid) and TensorRT-LLM is priced as if it held them "
    "(docs/engine.md, \"Past the drafter's positions\")"
)


# What each serving engine does past a drafter's positions, as each launch file's note says it
# (serving.text.positions_note); the caution above sums them up.
ENGINE_PAST_POSITIONS = {
    "vllm": ("a batch whose longest sequence (this step's verified tokens included) + num_speculative_tokens passes "
             "them drafts nothing on Model Runner V1 (zero tokens verified, gpu_model_runner._input_fits_in_drafter; "
             "this plan is priced so); Model Runner V2, vLLM 0.33's default, raises an EAGLE or MTP head's positions "
             "to max_model_len where its RoPE type allows (llama3 does) and drafts on, at an acceptance not "
             "measured past them (measure it there, and price it with a head config that holds the context, "
             "eagle3:config=PATH or eagle:config=PATH, and that --acceptance), and otherwise (a draft model, another "
             "RoPE type) lowers max_model_len to the drafter's, refusing longer requests"),
    "sglang": "SGLang runs the drafter on past them (sglang issue #6783: slower than plain decoding there)",
    "trtllm": "what TensorRT-LLM does past them is not stated",
}


def positions_needed(spec_tokens, context):
    """Positions (tokens) a drafter must hold for a step at KV length `context` with `spec_tokens` k
    speculative tokens, as vLLM's V1 gate counts them: the verify pass's sequence, L + 1 + k
    (num_computed_tokens + num_scheduled_tokens), plus the k tokens the drafter then proposes."""
    return np.asarray(context, dtype=float) + 1 + 2 * np.asarray(spec_tokens, dtype=float)


def past_positions(mech: Mechanism | None, engine, draft_len, spec_tokens, context) -> tuple[np.ndarray, np.ndarray]:
    """(dropped, wasted), bool arrays over the grid: the steps `engine` (an EngineProfile) prices at AL 1 because
    `positions_needed` passes the positions `mech`'s drafter holds (`Mechanism.drafter_positions`).

    - dropped, a vLLM profile: no drafting. vLLM counts `spec_tokens` (D for a chain, the N nodes of a tree: its
      num_speculative_tokens); it tests the batch's longest sequence against the schedule's largest D, each row
      here is one context and one D.
    - wasted, an SGLang profile: the drafter runs on. It runs `draft_len` D steps, a tree's depth, not its nodes.

    TensorRT-LLM and speedplan-runtime profiles: neither (priced as given). By `engine_outputs.serving_engine`: a
    calibrated copy keeps its base's engine."""
    from speedplan.plan.engine_outputs import serving_engine

    L = np.asarray(context, dtype=float)
    none = np.zeros(np.broadcast_shapes(np.shape(spec_tokens), np.shape(draft_len), L.shape), dtype=bool)
    held = None if mech is None else mech.drafter_positions()
    engine_name = serving_engine({"engine_family": getattr(engine, "engine", "")})
    if held is None or engine_name not in ("vllm", "sglang"):
        return none, none
    k = np.asarray(spec_tokens if engine_name == "vllm" else draft_len, dtype=float)
    past = none | ((k > 0) & (positions_needed(k, L) > held[0]))
    return (past, none) if engine_name == "vllm" else (none, past)


def widest_spec_tokens(mech: Mechanism, draft_lens, tree_nodes) -> int:
    """The most speculative tokens `mech` is swept with: its largest D, or a tree's most nodes (vLLM counts a tree's
    nodes as its num_speculative_tokens); 0 where it drafts none."""
    from speedplan.plan.grid import mechanism_grid

    g = mechanism_grid(mech, [1], draft_lens, [1], tree_nodes)
    return int(max(g["nodes"] if mech.is_tree else g["draft_len"], default=0))


def drafter_context_cautions(mechs: list[Mechanism], target: ModelSpec, contexts, draft_lens,
                             tree_nodes=()) -> dict[str, str]:
    """{label: why} for each mechanism whose drafter holds fewer positions than the sweep's widest step needs
    (`positions_needed` at the largest context and the most speculative tokens, up to the target's own limit: the
    engines cap the drafter at the target's), whatever its acceptance: vLLM's rule follows the drafter, not the
    acceptance. Mechanisms sharing a drafter share one text (the most it needs, each one's widest step), so that
    the terminal groups them on one line."""
    past: dict[tuple[int, str], list[tuple[Mechanism, int, int]]] = {}
    for m in mechs:
        held, k = m.drafter_positions(), widest_spec_tokens(m, draft_lens, tree_nodes)
        needed = int(positions_needed(k, max(contexts)))
        limit = min(needed, target.max_context) if target.max_context else needed
        if held is not None and k > 0 and 0 < held[0] < limit:
            past.setdefault(held, []).append((m, k, needed))
    cautions = {}
    for (positions, where), group in past.items():
        widths = ", ".join(f"{k} nodes for {m.label}" if m.is_tree else f"D {k} for {m.label}" for m, k, _ in group)
        for m, _, _ in group:
            published = str(m.acceptance_source).startswith("published")
            cautions[m.label] = (
                f"its drafter holds {positions:,} positions ({where}) and the sweep's steps need up to "
                f"{max(n for _, _, n in group):,} (context {max(contexts):,}, then 1 + k tokens verified and k drafted "
                f"for the next step, k the speculative tokens as vLLM counts them: {widths})"
                + (", where its published acceptance was not measured" if published else "")
                + f"; {PAST_POSITIONS}; price a drafter that holds it"
                + (" (its config: draft-model:PATH)" if m.name == "draft-model" else
                   f" (its config: {m.family_name()}:config=PATH)")
                + (", with --acceptance measured at this context" if published else ""))
    return cautions
