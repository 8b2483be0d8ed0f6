"""Speculative-decoding mechanisms: each one's drafting cost, verify shape, extra memory and
default acceptance, written side by side so a reader finds them together.

| mechanism   | drafting cost (per target step)                                  | verify          |
|-------------|------------------------------------------------------------------|-----------------|
| ngram       | host-side prompt lookup: NGRAM_LOOKUP_US + per sequence          | chain of 1+D    |
| draft-model | draft forward at 2 tokens/seq (absorbs the bonus token), then    | chain of 1+D    |
|             | D−1 draft forwards at 1 token/seq; own weights and KV cache      |                 |
| eagle / mtp | D sequential forwards of one decoder layer + fc/eh_proj + lm_head| chain of 1+D    |
|             | (full vocab, or EAGLE-3's reduced draft vocab: `eagle:vocab=N`)  |                 |
| eagle-tree  | depth-D expansion: level 1 at 1 token/seq, levels 2..D at top-k  | tree of N nodes |
|             | frontier tokens/seq, each through the head + lm_head             | (+ tree mask)   |
| medusa      | one forward of D heads (ResBlock h×h + own lm_head each)         | tree of N nodes |
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from speedplan.plan.acceptance import Acceptance
from speedplan.errors import SpeedplanInputError
from speedplan.cost.forward import ForwardCost, forward_cost
from speedplan.specs.model import ModelSpec, get_model

MECHANISMS = ("ngram", "draft-model", "eagle", "eagle-tree", "mtp", "medusa")
TREE_MECHANISMS = ("eagle-tree", "medusa")

# Host-side n-gram lookup per step (assumption: vLLM/SGLang run it on the CPU in tens of
# microseconds; not measured by speedplan).
NGRAM_LOOKUP_US = 20.0
NGRAM_LOOKUP_US_PER_SEQ = 1.0

# Published acceptance defaults, each with the row of ../shared/cases/published_cases.csv it
# comes from. Chain mechanisms store α; tree mechanisms store α for geometric per-rank
# acceptance fitted so the best tree at the row's settings reproduces the row's AL
# (tests/test_acceptance.py checks each fit).
DEFAULT_ACCEPTANCE: dict[str, tuple[Acceptance, str]] = {
    "ngram": (
        Acceptance.iid(1 - 1 / 1.73, "published"),
        "Spec-Bench leaderboard (A100), Vicuna-7B-v1.3, PLD: AL 1.73; alpha = 1 - 1/AL (long-draft limit)",
    ),
    "draft-model": (
        Acceptance.iid(0.75, "published"),
        "Leviathan et al. 2023 Tab.2, T5-XXL/T5-small, EnDe, T=0: alpha 0.75",
    ),
    "eagle": (
        Acceptance.iid(1 - 1 / 3.61, "published"),
        "Spec-Bench leaderboard (A100), Vicuna-7B-v1.3, EAGLE: AL 3.61; alpha = 1 - 1/AL (long-draft limit; "
        "the row used a tree, so this chain alpha is optimistic)",
    ),
    "eagle-tree": (
        Acceptance.iid(0.564, "published"),
        "Spec-Bench leaderboard (RTX3090), Vicuna-7B-v1.3, EAGLE2: AL 4.36; geometric per-rank alpha 0.564 fitted "
        "to a 60-node, depth-6, top-10 tree (EAGLE-2 defaults)",
    ),
    "mtp": (
        Acceptance.positional([0.85], "published"),
        "DeepSeek-V3 tech report (quoted): 2nd-token acceptance 0.85-0.90; lower bound, repeated past D=1",
    ),
    "medusa": (
        Acceptance.iid(0.153, "published"),
        "Spec-Bench leaderboard (A100), Vicuna-7B-v1.3, Medusa: AL 2.32; geometric per-rank alpha 0.153 fitted "
        "to a 63-node, depth-4, top-10 tree (Medusa default sparse tree size)",
    ),
}

# Settings of the published rows above that the tree fits assume (see tests).
DEFAULT_TREE_FITS = {"eagle-tree": (4.36, 6, 60, 10), "medusa": (2.32, 4, 63, 10)}


@dataclass(frozen=True)
class Mechanism:
    """One mechanism as the planner sweeps it.

    `draft` is the draft model (draft-model) or the one-layer head spec (eagle, mtp);
    `topk` bounds children per tree node; `draft_vocab` is the head's output vocabulary."""

    name: str
    acceptance: Acceptance
    acceptance_source: str
    draft: ModelSpec | None = None
    topk: int = 8
    draft_vocab: int | None = None
    host_draft_us: float = NGRAM_LOOKUP_US  # ngram: host lookup per step (µs) ...
    host_draft_us_per_seq: float = NGRAM_LOOKUP_US_PER_SEQ  # ... plus this per sequence

    @property
    def is_tree(self) -> bool:
        return self.name in TREE_MECHANISMS

    @property
    def label(self) -> str:
        if self.name == "draft-model" and self.draft is not None:
            return f"draft-model:{self.draft.name}"
        return self.name

    # ---- verify shape ---------------------------------------------------------------
    def verify_tokens(self, draft_len, nodes) -> np.ndarray:
        """Tokens per sequence in the verify pass: 1 + D for a chain; for a tree, its N
        draft nodes plus the root (the last accepted token)."""
        return np.where(self.is_tree, np.asarray(nodes) + 1, np.asarray(draft_len) + 1)

    def acceptance_length(self, draft_len, nodes) -> np.ndarray:
        if self.is_tree:
            return self.acceptance.tree_al(draft_len, nodes, self.topk)
        return self.acceptance.chain_al(draft_len)

    # ---- drafting cost --------------------------------------------------------------
    def draft_cost(self, cost, target: ModelSpec, batch, draft_len, context, nodes, tp: int) -> ForwardCost:
        """Time to draft D tokens (or a depth-D tree) for `batch` sequences (seconds)."""
        batch, draft_len, context, nodes = np.broadcast_arrays(
            *(np.asarray(x, float) for x in (batch, draft_len, context, nodes))
        )
        zero = np.zeros_like(batch)
        if self.name == "ngram":
            host_s = (self.host_draft_us + self.host_draft_us_per_seq * batch) * 1e-6
            return ForwardCost(zero, zero, zero, zero, host_s, zero, zero, zero, zero)
        if self.name == "medusa":
            h, v = target.hidden, self.draft_vocab or target.vocab
            res = cost.gemm(batch, h, h, target.dtype)
            head = cost.gemm(batch, v, h, target.dtype)
            per_head_s = (res.latency_us + head.latency_us) * 1e-6
            flops = 2 * batch * (h * h + v * h)
            return ForwardCost(per_head_s * draft_len, zero, zero, zero, zero, flops * draft_len,
                               (h * h + v * h) * target.dtype_bytes * draft_len, zero,
                               np.where(res.from_profile & head.from_profile, 1.0, 0.0))
        draft = self.draft
        dtp = 1 if self.name == "draft-model" else tp
        if self.name == "eagle-tree":
            first = self._head_pass(cost, draft, target, batch, 1, context, dtp)
            level = self._head_pass(cost, draft, target, batch, self.topk, context + nodes / 2, dtp)
            return first + level.scaled(np.maximum(draft_len - 1, 0))
        # Chain drafters: the first pass also absorbs the target's bonus token (2 tokens).
        step = self._head_pass if self.name in ("eagle", "mtp") else self._model_pass
        first = step(cost, draft, target, batch, 2, context, dtp)
        rest = step(cost, draft, target, batch, 1, context + draft_len / 2, dtp)
        return first.scaled(draft_len > 0) + rest.scaled(np.maximum(draft_len - 1, 0))

    @staticmethod
    def _model_pass(cost, draft, target, batch, q_len, context, tp) -> ForwardCost:
        return forward_cost(cost, draft, batch, q_len, context, tp, lm_head_rows=batch)

    @staticmethod
    def _head_pass(cost, head, target, batch, q_len, context, tp) -> ForwardCost:
        """One EAGLE/MTP head forward: fuse projection (2h→h), one decoder layer, lm_head."""
        layer = forward_cost(cost, head, batch, q_len, context, tp)
        fuse = cost.gemm(batch * q_len, target.hidden, 2 * target.hidden, target.dtype)
        fuse_s = fuse.latency_us * 1e-6
        zero = np.zeros_like(fuse_s)
        fuse_flops = 2 * batch * q_len * target.hidden * 2 * target.hidden
        return layer + ForwardCost(fuse_s, zero, zero, zero, zero, fuse_flops,
                                   2.0 * target.hidden**2 * target.dtype_bytes + zero, zero,
                                   fuse.from_profile.astype(float))

    # ---- memory ---------------------------------------------------------------------
    def extra_memory_bytes(self, target: ModelSpec, batch, context, tp: int) -> np.ndarray:
        """Weights and KV the drafter adds on the most loaded GPU (bytes)."""
        batch, context = np.broadcast_arrays(np.asarray(batch, float), np.asarray(context, float))
        if self.name == "ngram":
            return np.zeros_like(batch)
        if self.name == "medusa":
            h, v = target.hidden, self.draft_vocab or target.vocab
            return np.zeros_like(batch) + (h * h + v * h) * target.dtype_bytes * 8  # up to 8 heads
        draft = self.draft
        if self.name == "draft-model":
            return draft.weight_bytes() + batch * context * draft.kv_bytes_per_token()
        # head: one layer (+ fuse projection, + own lm_head when the vocab is reduced)
        weights = draft.layer_params(draft.moe is not None) + 2 * target.hidden**2
        if self.draft_vocab:
            weights += self.draft_vocab * target.hidden
        return weights * target.dtype_bytes / tp + batch * context * draft.kv_bytes_per_token() / tp


def head_spec(target: ModelSpec, name: str, draft_vocab: int | None = None) -> ModelSpec:
    """The one-layer head an EAGLE (dense layer) or MTP (the target's own layer type,
    MoE included) drafter runs, as a ModelSpec of the target's dimensions."""
    if name == "mtp" and target.moe is not None:
        moe = replace(target.moe, first_dense_layers=0)
        return replace(target, name=f"{target.name}-mtp", layers=1, moe=moe, mtp_layers=0)
    inter = target.dense_intermediate if target.dense_intermediate > 0 else 4 * target.hidden
    return replace(
        target, name=f"{target.name}-{name}-head", layers=1, moe=None, intermediate=inter,
        vocab=draft_vocab or target.vocab, mtp_layers=0,
    )


def parse_mechanism(spec: str, target: ModelSpec, acceptance: Acceptance | None = None) -> Mechanism:
    """`ngram`, `draft-model:llama-3.2-1b`, `eagle`, `eagle:vocab=32000`, `eagle-tree:topk=8`,
    `mtp`, `medusa`. `acceptance` (user or trace) replaces the published default."""
    name, _, arg = spec.strip().partition(":")
    name = name.lower()
    if name not in MECHANISMS:
        raise SpeedplanInputError(f"unknown mechanism {spec!r}; use one of {', '.join(MECHANISMS)}")
    options: dict[str, str] = {}
    draft = None
    if name == "draft-model":
        if not arg:
            raise SpeedplanInputError("draft-model needs a draft: draft-model:MODEL (preset or config.json path)")
        draft = get_model(arg)
        if draft.vocab != target.vocab:
            raise SpeedplanInputError(
                f"draft {draft.name} has vocab {draft.vocab}, target {target.name} has {target.vocab}: "
                "a draft model must share the target's tokenizer"
            )
    elif arg:
        for item in arg.split(","):
            key, eq, value = item.partition("=")
            if not eq or key not in ("topk", "vocab"):
                raise SpeedplanInputError(f"mechanism {spec!r}: options are topk=N and vocab=N")
            options[key] = value
    try:
        topk = int(options.get("topk", 8))
        vocab = int(options["vocab"]) if "vocab" in options else None
    except ValueError:
        raise SpeedplanInputError(f"mechanism {spec!r}: topk and vocab take integers") from None
    if not 1 <= topk <= 64:
        raise SpeedplanInputError(f"mechanism {spec!r}: topk must be in 1..64")
    if vocab is not None and not 1 <= vocab <= target.vocab:
        raise SpeedplanInputError(f"mechanism {spec!r}: vocab must be in 1..{target.vocab}")
    if name == "mtp" and target.mtp_layers == 0:
        raise SpeedplanInputError(f"model {target.name} has no MTP layers (num_nextn_predict_layers = 0); use eagle")
    if name in ("eagle", "eagle-tree", "mtp"):
        draft = head_spec(target, name, vocab)
    if acceptance is None:
        acceptance, source = DEFAULT_ACCEPTANCE[name]
        source = f"published: {source}"
    else:
        source = acceptance.source
    return Mechanism(name, acceptance, source, draft, topk, vocab)
