"""vLLM (`vllm serve --speculative-config`): the speculative-decoding options of one `ServingPlan`.

Files: `vllm_speculative_config.json` (pure JSON) and `vllm_serve.sh`. Checked against the
vLLM 0.33.0 release (commit 4ba787ec9): vllm/config/speculative.py and
vllm/v1/spec_decode/dynamic/utils.py (docs/serving.md lists each option with its file).
"""

from __future__ import annotations

import json

from speedplan.errors import SpeedplanInputError
from speedplan.serving.plan import (NGRAM_LOOKUP_MAX, NGRAM_LOOKUP_MIN, OFF, OPEN_END_BATCH, Mode, ServingPlan,
                                    Support, check_engine, eagle_head, hf_repo, mtp_layers, segments)
from speedplan.serving.text import header, json_one_key_per_line, shell, unsupported
from speedplan.serving.context import limit_flag

NAME = "vllm"
PLATFORMS = ("cuda", "rocm", "cpu")  # vLLM ships CUDA, ROCm and CPU builds (docs/getting_started/installation)
VERSION = (
    "vLLM 0.33.0 (commit 4ba787ec9): vllm/config/speculative.py (SpeculativeConfig) and "
    "vllm/v1/spec_decode/dynamic/utils.py (num_speculative_tokens_per_batch_size, [start, end, K] entries)"
)
METHODS = {"ngram": "ngram", "draft-model": "draft_model", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp"}

_SCHEDULE = Mode("schedule", "any", off=True, how=(
    "num_speculative_tokens_per_batch_size: [first_batch, last_batch, K] inclusive ranges, any K >= 0 "
    "per range (validate_and_normalize_dynamic_sd_schedule)"))


def support(mechanism: str, mtp_layers: int = 0) -> Support | None:
    """Every chain method vLLM 0.33 has; no trees (tree attention removed, PR #42121) and no
    Medusa (SpeculativeMethod has no "medusa" in 0.33)."""
    if mechanism not in METHODS:
        return None
    return Support((_SCHEDULE,))


def draft_tp_options(mechanism: str, tp: int) -> set[int]:
    """Draft TPs vLLM runs a draft model at: the target's. SpeculativeConfig accepts
    draft_tensor_parallel_size 1 or tp (_verify_and_get_draft_tp), but Model Runner V1 refuses
    a draft TP unlike the target's (v1/spec_decode/draft_model.py, _raise_if_draft_tp_mismatch)
    and V2's StandaloneARSpeculator builds the draft without a TP-1 process group
    (v1/worker/gpu/spec_decode/standalone_ar/speculator.py), so TP 1 is not planned."""
    return {tp}


def vllm_speculative_config(plan: ServingPlan) -> dict:
    """The dict for `vllm serve --speculative-config` (vllm/config/speculative.py field names)."""
    segs = segments(plan)
    k_max = max([plan.draft_len] + [d for _, _, d in segs])
    if plan.mechanism not in METHODS:
        raise SpeedplanInputError(f"vLLM cannot serve mechanism {plan.mechanism}")
    cfg: dict = {"method": METHODS[plan.mechanism]}
    if plan.mechanism == "draft-model":
        cfg["model"] = hf_repo(plan.draft_model)
    elif plan.mechanism in ("eagle", "eagle3"):
        cfg["model"] = eagle_head(plan, NAME)
    cfg["num_speculative_tokens"] = k_max
    layers = mtp_layers(plan.model) if plan.mechanism == "mtp" else None
    if layers and k_max > layers and k_max % layers:
        # vLLM takes K above the MTP layers only as a multiple of them (config/speculative.py: "must be
        # divisible by n_predict"); the per-batch K below is not so checked, so it carries the plan
        cfg["num_speculative_tokens"] = -(-k_max // layers) * layers
        segs = segs or [(1, OPEN_END_BATCH, k_max)]
    if plan.mechanism == "ngram":
        cfg.update(prompt_lookup_max=NGRAM_LOOKUP_MAX, prompt_lookup_min=NGRAM_LOOKUP_MIN)
    if plan.mechanism == "draft-model":
        cfg["draft_tensor_parallel_size"] = plan.draft_tp or plan.tp
    if segs and any(d != cfg["num_speculative_tokens"] for _, _, d in segs):
        cfg["num_speculative_tokens_per_batch_size"] = [[lo, hi, d] for lo, hi, d in segs]
    return cfg


def _notes(plan: ServingPlan, cfg: dict) -> list[str]:
    notes = []
    if "num_speculative_tokens_per_batch_size" in cfg:
        notes += ["vLLM's dynamic speculative decoding is documented as tested with EAGLE, EAGLE-3 and DFlash; "
                  "Model Runner V1 turns it off for methods other than ngram/eagle/eagle3/mtp/draft_model/dflash.",
                  "vLLM turns the schedule off (static num_speculative_tokens) when --data-parallel-size > 1.",
                  "with Model Runner V1 (VLLM_USE_V2_MODEL_RUNNER=0, or where vLLM falls back to it: no Triton, a "
                  "feature V2 lacks) a schedule downgrades full CUDA graphs to "
                  "PIECEWISE (vllm/config/vllm.py _maybe_override_dynamic_sd_cudagraph_mode), which this plan does "
                  "not price; 0.33's default Model Runner V2 keeps them.",
                  "vLLM releases before dynamic speculative decoding (vLLM PR #32374) have no "
                  "num_speculative_tokens_per_batch_size: there, remove it and set num_speculative_tokens to the D "
                  "planned above for the batch size you serve most; that D is then drafted at every batch size."]
        if any(d == 0 for _, _, d in segments(plan)):
            notes.append("K = 0 in a range turns drafting off for those batch sizes (the validator allows K >= 0)"
                         + ("; vLLM 0.33's Model Runner V2 still runs the drafter's forward over each step's tokens "
                            "to keep its KV cache current (propose with num_speculative_tokens = 0), which the "
                            "speedup and loss columns include." if plan.drafter_kept_warm else "."))
            notes.append("vLLM issue #49548 (open) reports aggregate throughput collapsing under concurrency once "
                         "a schedule crosses into K = 0 (MTP, Model Runner V1 with PIECEWISE graphs); not priced: "
                         "measure throughput around the planned switch-off batch size before relying on it.")
    if plan.priced_by.startswith("vllm: ") and not plan.priced_by.startswith("vllm: file "):  # the shipped profile
        notes.append("the shipped vllm engine profile describes 2025 releases, whose speculative steps could not overlap "
                     "host work with the GPU (overlap_spec 0); async scheduling with EAGLE/MTP speculation arrived in "
                     "v0.14 (vLLM PR #31998), so on the release this file is for, speculation may lose less at large "
                     "batch sizes than priced above (where this plan switches off it may still gain), while the best D "
                     "there may be shorter (with host work hidden, a longer draft's extra verify work weighs more): "
                     "sweep with --engine vllm-async (that overlap assumed, not measured) to see the other side, "
                     "and calibrate on your own runs (speedplan calibrate --engine vllm ...) and sweep with the result.")
    notes.append("the schedule is by batch size only: vLLM 0.33 accepts [start, end, K] entries; context-aware "
                 "[bs_lo, bs_hi, ctx_lo, ctx_hi, K] entries exist only in open RFC #48627 / PR #48944, so they are "
                 "not emitted" + (f" (this plan's D per batch size serves contexts {', '.join(map(str, plan.contexts))})."
                                   if len(plan.contexts) > 1 else f" (this plan is for context {plan.context} tokens)."
                                   if plan.context else "."))
    if plan.mechanism == "ngram":
        notes.append(f"prompt_lookup_min/max = {NGRAM_LOOKUP_MIN}/{NGRAM_LOOKUP_MAX} are not planned by "
                     "speedplan; tune them for your workload.")
    if plan.mechanism in ("eagle", "eagle3") and cfg["model"].startswith("<"):
        notes.append("replace the <...> placeholder with a trained head for this target.")
    if plan.mechanism == "draft-model":
        notes.append("draft_tensor_parallel_size is the target's: vLLM 0.33's draft-model path refuses another "
                     "value (v1/spec_decode/draft_model.py).")
    if plan.mechanism == "mtp":
        # only the published MTP default lowers acceptance past the layers; a rate given with --acceptance (or a
        # trace) prices every position as given, which "Speedups from" above then names
        lowered = plan.acceptance_published
        notes.append("num_speculative_tokens above the model's MTP layers runs them again in turn (draft step i "
                     "uses layer i mod layers, model_executor/models/deepseek_mtp.py), and vLLM takes such a K only "
                     "as a multiple of the layers; "
                     + ("speedplan priced those positions with a lower acceptance." if lowered else
                        "speedplan priced those positions with the acceptance named above, as given: not lowered "
                        "for the reused layer."))
        if cfg["num_speculative_tokens"] != max([plan.draft_len] + [d for _, _, d in segments(plan)]):
            notes.append(f"num_speculative_tokens is {cfg['num_speculative_tokens']}, the next multiple of the "
                         "model's MTP layers, so that vLLM accepts it; num_speculative_tokens_per_batch_size holds "
                         "the planned draft lengths.")
    return notes


# vLLM 0.33.0 wheel (commit 4ba787ec9), vllm/config/model.py:249 ModelConfig.max_model_len: None by default,
# derived from the model's config (_get_and_verify_max_len, line 2642: max_position_embeddings with rope
# scaling); -1 or "auto" (line 259) fits it to memory instead. vllm/v1/core/kv_cache_planning.py:
# get_kv_cache_configs (line 1461) runs _auto_fit_max_model_len only for -1 (line 1545), then per worker
# _check_enough_kv_cache_memory (line 1554; the function at line 50, check_enough_kv_cache_memory at line
# 151), which raises ValueError ("To serve at least one request with the model's max seq len ...") when the
# KV cache left after profiling cannot hold one sequence of max_model_len tokens (FullAttentionSpec
# .max_memory_usage_bytes, v1/kv_cache_interface.py:643, every KV layer of target and drafter). The 0.11.0
# wheel (commit f71952c1c) raises the same from vllm/v1/core/kv_cache_utils.py:678. So vLLM refuses to start:
# --max-model-len is written where the full context does not fit (`serving.context`).
def max_model_len(plan: ServingPlan) -> tuple[list[str], list[str]]:
    """`--max-model-len N` and its note where one sequence of the model's full context does not fit
    the KV cache the launch leaves (`ServingPlan.context_fit`); nothing where it fits."""
    return limit_flag(plan, "--max-model-len", lambda n, fit: (
        "vLLM 0.33 refuses to start when its KV cache cannot hold one sequence of max_model_len tokens, which "
        "defaults to the full context (check_enough_kv_cache_memory, v1/core/kv_cache_planning.py); "
        f"{fit.chosen()}. Activations and CUDA graphs, which speedplan does not model, take part of that memory: if "
        "vLLM still refuses, lower it, or pass --max-model-len auto (vLLM 0.33 fits it to the memory left)."))


# vLLM's defaults for `vllm serve` (UsageContext.OPENAI_API_SERVER) when --max-num-seqs and
# --max-num-batched-tokens are not given: vllm/engine/arg_utils.py EngineArgs.get_batch_defaults
# (the 0.33.0 wheel, lines 2973-3037): 1024 requests and 16384 tokens a step on a GPU of at least
# 160 GiB (B200, MI300X), 1024 and 8192 on one of at least 70 GiB that is not an A100 (H100, H200),
# 256 and 2048 on the others (A100, L40S), 128 and 2048 per worker on a CPU. A speculative step
# schedules 1 + D tokens per request, so the token budget caps it too.
def default_batch_limits(hardware: str, tp: int) -> tuple[int, int] | None:
    """(max_num_seqs, max_num_batched_tokens) vLLM takes on `hardware` by default; None where the
    hardware is not a preset speedplan knows (a file of the user's)."""
    from speedplan.specs.hardware import get_hardware

    try:
        hw = get_hardware(hardware)
    except SpeedplanInputError:
        return None
    if hw.platform == "cpu":
        return 128 * tp, 2048 * tp
    if hw.memory_bytes >= 160 * 2**30:
        return 1024, 16384
    if hw.memory_bytes >= 70 * 2**30 and "a100" not in hw.name.lower():
        return 1024, 8192
    return 256, 2048


def batch_limits(plan: ServingPlan) -> tuple[list[str], list[str]]:
    """`--max-num-seqs N` and `--max-num-batched-tokens T` where the plan runs more requests, or
    more tokens a step (B·(1+D)), than vLLM's defaults on the plan's hardware take: without them
    vLLM queues the rest, and the plan's throughput at those batch sizes is not what it serves."""
    limits = default_batch_limits(plan.hardware, plan.tp)
    rows = [(int(r[0]), int(r[1])) for r in plan.per_batch if len(r) < 5 or r[4]]
    if limits is None or not rows:
        return [], []
    seqs, tokens = max(b for b, _ in rows), max(b * (1 + d) for b, d in rows)
    flags, why = [], []
    if seqs > limits[0]:
        flags += ["--max-num-seqs", str(seqs)]
        why.append(f"--max-num-seqs {seqs}: the plan runs up to {seqs} requests at once, above the {limits[0]} vLLM "
                   f"runs by default on {plan.hardware}")
    if tokens > limits[1]:
        flags += ["--max-num-batched-tokens", str(tokens)]
        why.append(f"--max-num-batched-tokens {tokens}: a step of the plan schedules up to {tokens} tokens (B·(1+D)), "
                   f"above vLLM's default budget of {limits[1]} on {plan.hardware}; new requests' prefill chunks "
                   "share that budget and get only what the running requests leave of it: raise it for that headroom")
    return flags, ([("; ".join(why) + " (EngineArgs.get_batch_defaults, vllm/engine/arg_utils.py)")] if why else [])


def render(plan: ServingPlan) -> dict[str, str]:
    """`vllm_speculative_config.json` (pure JSON) and `vllm_serve.sh` (command with comments)."""
    check_engine(plan, NAME, f"{NAME} render")
    length, length_notes = max_model_len(plan)
    limits, limit_notes = batch_limits(plan)
    length, length_notes = length + limits, length_notes + limit_notes
    serve = ["vllm serve", hf_repo(plan.model), "--tensor-parallel-size", str(plan.tp)] + length
    if plan.mechanism == OFF:
        text = header(plan, VERSION, "no --speculative-config: plain decoding at every batch size.", length_notes)
        return {"vllm_serve.sh": "#!/bin/sh\n" + text + shell(serve)}
    if plan.mechanism not in METHODS:
        reason = ("vLLM 0.33 has no token-tree speculation: speculative_token_tree and the tree attention "
                  "backend were removed (vLLM PR #42121); plan a chain (eagle or eagle3) instead."
                  if plan.mechanism.endswith("tree") else
                  "vLLM 0.33's SpeculativeMethod has no medusa (v0.11 had it)." if plan.mechanism == "medusa"
                  else f"vLLM 0.33 has no {plan.mechanism}.")
        return {"vllm_serve.sh": unsupported(plan, NAME, VERSION, reason)}
    cfg = vllm_speculative_config(plan)
    if "num_speculative_tokens_per_batch_size" in cfg:
        expressed = ("num_speculative_tokens_per_batch_size, inclusive [first_batch, last_batch, K] ranges; "
                     f"num_speculative_tokens = {cfg['num_speculative_tokens']} is the maximum (buffer sizing), "
                     "and vLLM clips every range to it.")
    elif plan.schedule:
        expressed = f"the schedule is flat: fixed num_speculative_tokens = {cfg['num_speculative_tokens']}."
    else:
        expressed = f"fixed num_speculative_tokens = {cfg['num_speculative_tokens']}."
    body = json.dumps(cfg, separators=(", ", ": "))
    command = shell(serve + ["--speculative-config", body])
    return {
        "vllm_speculative_config.json": json_one_key_per_line(cfg),
        "vllm_serve.sh": "#!/bin/sh\n" + header(plan, VERSION, expressed, _notes(plan, cfg) + length_notes) + command,
    }
