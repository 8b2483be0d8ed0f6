"""Published acceptance defaults: what a mechanism is assumed to accept when the user gives
nothing, each taken from one row of ../shared/cases/ (published_cases.csv, papers at bs=1;
engine_measurements.csv, engines) and naming it.

How a default is chosen, most specific first:

1. a row for this (target, draft) pair: the target preset's own head or draft;
2. a stand-in row, said so: the same architecture's row (LLaMA-3.3-70B for llama-3.1-70b);
3. for draft models, the draft's size against the target's: α rises with log(draft/target
   params), fitted to Leviathan et al.'s three T5 drafts of one target (a 3B draft accepts
   more than a 1B one);
4. the family's row for some other target, said so.

A head family (EAGLE-1/2 `eagle` and `eagle-tree`; EAGLE-3 `eagle3` and `eagle3-tree`) gets
one per-rank vector, so its chains and its trees agree (acceptance.py). A row reporting a
tree's AL is turned into a geometric per-rank α by Sequoia's DP at the tree shape the row
used (or the shape stated as assumed); `FITS` lists what each default reproduces and
tests/plan/test_defaults.py checks it. Defaults are point estimates from other models,
hardware and datasets: the report shows what the best D and speedup become at AL ±10%.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.plan.acceptance import Acceptance, conditional_from_position_rates, rate_for
from speedplan.specs.model import ModelSpec

PC = "published_cases.csv"
EM = "engine_measurements.csv"


@dataclass(frozen=True)
class Published:
    """One default: its family, the target preset it is for (None: the family's fallback),
    the fitted rate, the row, and what the fit reproduces: ("tree", depth, nodes, topk, AL)
    or ("chain", D, AL)."""

    family: str
    target: str | None
    alpha: float
    row: str
    fit: tuple
    how: str = ""
    lower_rank_share: float = 1.0  # c in ranks = [α, c·α(1−α), c·α(1−α)², ...]; 1 = geometric
    positions: int = 0  # positions the row's head holds (its config's max_position_embeddings); 0: not recorded
    positions_from: str = ""  # the head checkpoint and where its positions are stated

    def acceptance(self) -> Acceptance:
        return Acceptance.head_ranks(self.alpha, self.lower_rank_share, "published")

    def source(self, target: str) -> str:
        note = "" if self.target is not None else f"; no row for {target}: the family's row for another target"
        return f"published: {self.row}; {self.how}{note}"


# EAGLE-3 heads: the lower ranks catch less than a geometric split of the rank-1 misses. One
# source measured one head as a chain and as trees (engine_measurements.csv: "SpecForge issue #339", Qwen3-30B-A3B,
# H100 TP2): the chain (steps 3, topk 1: AL 1.86) gives α = 0.4945, the largest tree (steps 8,
# topk 8, 60 draft tokens: AL 3.20) then gives c = 0.682; the same c reproduces that source's
# other trees and AngelSlim #163's within 6% (tests/plan/test_defaults.py). Used for every EAGLE-3
# target; EAGLE-1/2 heads keep the geometric split (c = 1).
EAGLE3_LOWER_RANK_SHARE = 0.682

# The positions the published heads hold, where a source states them (the EAGLE repo trains its heads
# at --max-length 2048; SafeAILab/EAGLE issue #311). Not recorded for the other rows' heads. vLLM PR
# #22935 on Llama-3.1-8B-Instruct: "a standard EAGLE head, which can only handle 2048 positional
# embeddings"; vLLM issue #48894 quotes yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's config.json,
# "max_position_embeddings: 2048". docs/engine.md, "Past the drafter's positions".
LLAMA_EAGLE_POSITIONS = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B, vLLM PR #22935"
LLAMA_EAGLE3_POSITIONS = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's config.json, quoted in vLLM issue #48894"

HEADS: tuple[Published, ...] = (
    Published("eagle", "llama-3.1-8b", 0.5155,
              f'{PC}: "EAGLE-3 paper Tab.1", LLaMA-3.1-8B-Instruct, EAGLE-2 head and tree, MT-bench, T=0: AL 4.05',
              ("tree", 6, 60, 10, 4.05),
              "geometric per-rank alpha 0.516 fitted to a depth-6, 60-node, top-10 tree (EAGLE-2 settings, assumed)",
              positions=2048, positions_from=LLAMA_EAGLE_POSITIONS),
    Published("eagle", "llama-3.1-70b", 0.4493,
              f'{PC}: "EAGLE-3 paper Tab.1", LLaMA-3.3-70B-Instruct (stand-in: same architecture as llama-3.1-70b), '
              "EAGLE-2 head and tree, MT-bench, T=0: AL 3.67",
              ("tree", 6, 60, 10, 3.67),
              "geometric per-rank alpha 0.449 fitted to a depth-6, 60-node, top-10 tree (EAGLE-2 settings, assumed)"),
    Published("eagle", None, 0.5640,
              f'{PC}: "Spec-Bench leaderboard (RTX3090)", Vicuna-7B-v1.3, EAGLE2: AL 4.36',
              ("tree", 6, 60, 10, 4.36),
              "geometric per-rank alpha 0.564 fitted to a depth-6, 60-node, top-10 tree (EAGLE-2 defaults, assumed)"),
    Published("eagle3", "llama-3.1-8b", 0.8298,
              f'{PC}: "EAGLE-3 paper Tab.1", LLaMA-3.1-8B-Instruct, EAGLE-3 head and tree, MT-bench, T=0: AL 6.13',
              ("tree", 7, 60, 10, 6.13),
              "rank-1 alpha 0.830 fitted to a depth-7, 60-node, top-10 tree (EAGLE repo defaults total_token=60, "
              "depth=7, top_k=10, assumed) with the EAGLE-3 lower-rank share 0.682 (SpecForge #339)",
              EAGLE3_LOWER_RANK_SHARE, positions=2048, positions_from=LLAMA_EAGLE3_POSITIONS),
    Published("eagle3", "llama-3.1-70b", 0.7845,
              f'{EM}: "sglang PR #4716", Llama-3.3-70B-Instruct (stand-in: same architecture as llama-3.1-70b), '
              "EAGLE3-LLaMA3.3-Instruct-70B, H100 TP8, steps 8, topk 8, 64 draft tokens, MT-Bench: AL 5.88",
              ("tree", 8, 63, 8, 5.88),
              "rank-1 alpha 0.785 fitted to that depth-8, 63-node, top-8 tree with the EAGLE-3 lower-rank share "
              "0.682 (SpecForge #339)", EAGLE3_LOWER_RANK_SHARE),
    Published("eagle3", "qwen3-30b-a3b", 0.4945,
              f'{EM}: "SpecForge issue #339", Qwen3-30B-A3B, zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead, H100 TP2, '
              "bs 1, steps 3, topk 1 (a chain), MT-Bench: AL 1.86; its steps-8 top-8 60-token tree: AL 3.20",
              ("chain", 3, 1.86),
              "chain alpha 0.495 fitted to D=3; lower-rank share 0.682 fitted to the same source's tree",
              EAGLE3_LOWER_RANK_SHARE),
    Published("eagle3", "qwen3-next-80b-a3b", 0.7146,
              f'{EM}: "sglang PR #14607", Qwen3-Next-80B-A3B-Instruct-FP8 (the same model in fp8), '
              "lukeysong/qwen3-next-draft, H20 TP4, bs 1, steps 3, topk 1 (a chain), mtbench: AL 2.59 "
              "(gsm8k 3.13, humaneval 3.45, math500 3.52)",
              ("chain", 3, 2.59),
              "chain alpha 0.715 fitted to D=3 (MT-Bench); lower-rank share 0.682 (SpecForge #339)",
              EAGLE3_LOWER_RANK_SHARE),
    Published("eagle3", "gpt-oss-120b", 0.6815,
              f'{EM}: "vllm PR #32628", openai/gpt-oss-120b, vanilla EAGLE-3 head, HumanEval, per-position '
              "acceptance at K = 3..8 (K = 8: 71%, 49%, 32%, 21%, 14%, 9%, 5%, 3%): AL 3.04 at K = 8",
              ("chain", 8, 3.04),
              "chain alpha 0.681 fitted to K=8 (the same head's K = 3..7 within 6%); a code dataset; lower-rank "
              "share 0.682 (SpecForge #339)", EAGLE3_LOWER_RANK_SHARE),
    Published("eagle3", "glm-4.7-flash", 0.5882,
              f'{EM}: "SafeAILab/EAGLE PR #330", zai-org/GLM-4.7-Flash, thoughtworks/GLM-4.7-Flash-Eagle3, H100 TP1, '
              "steps 3, topk 4, 6 draft tokens, MT-Bench: AL 2.4",
              ("tree", 3, 5, 4, 2.4),
              "rank-1 alpha 0.588 fitted to that depth-3, 5-node, top-4 tree with the EAGLE-3 lower-rank share "
              "0.682 (SpecForge #339)", EAGLE3_LOWER_RANK_SHARE),
    Published("eagle3", None, 0.8298,
              f'{PC}: "EAGLE-3 paper Tab.1", LLaMA-3.1-8B-Instruct, EAGLE-3 head and tree, MT-bench, T=0: AL 6.13',
              ("tree", 7, 60, 10, 6.13),
              "rank-1 alpha 0.830 fitted to a depth-7, 60-node, top-10 tree (assumed) with the EAGLE-3 lower-rank "
              "share 0.682 (SpecForge #339)", EAGLE3_LOWER_RANK_SHARE),
    Published("medusa", None, 0.1532,
              f'{PC}: "Spec-Bench leaderboard (A100)", Vicuna-7B-v1.3, Medusa: AL 2.32',
              ("tree", 4, 63, 10, 2.32),
              "geometric per-rank alpha 0.153 fitted to a 63-node, depth-4, top-10 tree (Medusa default sparse tree)"),
)


def head_row_for(family: str, target: str) -> bool:
    """Whether the family has a published row for this target preset (not the fallback's)."""
    return any(p.family == family and p.target == target for p in HEADS)


def head_positions(family: str, target: str) -> tuple[int, str] | None:
    """(positions, what says so) of the head the family's published row for this target measured
    (not the fallback's), or None where no source states them."""
    row = next((p for p in HEADS if p.family == family and p.target == target), None)
    return (row.positions, row.positions_from) if row is not None and row.positions else None


def head_default(family: str, target: str) -> tuple[Acceptance, str]:
    """The family's per-rank vector for this target preset: its own row, else the fallback."""
    rows = [p for p in HEADS if p.family == family]
    row = next((p for p in rows if p.target == target), None) or next(p for p in rows if p.target is None)
    return row.acceptance(), row.source(target)


# ---- n-gram ---------------------------------------------------------------------------------
# Conditional acceptance of a proposed token, and the chance a step finds a match at all.
NGRAM_ALPHA = 0.593  # Σ_{i=1..5} α^i = 5 · 0.27: the row's 27% of drafted tokens at K = 5
NGRAM_MATCH = 0.489  # 1 + match · 5 · 0.27 = 1.66, the TensorRT-LLM row's AL at max_draft_len 5
NGRAM_SOURCE = (
    f'published: alpha 0.593 from {EM}: "defilantech/LLMKube issue #1423", vLLM 0.25.1, Qwen3-Coder-30B-A3B, '
    "ngram K=5, T=0: 27% of drafted tokens accepted (vLLM counts only proposed tokens, so this is per "
    f'proposed token); match probability 0.489 from {EM}: "TensorRT-LLM tech blog 7", Llama-4-Scout, '
    "NGram max_draft_len 5: AL 1.66 (1 + match x 5 x 0.27); steps without a match verify one token"
)


def ngram_default() -> tuple[Acceptance, str]:
    return Acceptance.iid(NGRAM_ALPHA, "published", match=NGRAM_MATCH), NGRAM_SOURCE


# ---- MTP ------------------------------------------------------------------------------------
# DeepSeek-V3 has one MTP layer; SGLang reuses it for every draft step. Fitted to the two rows:
# p_1 = 0.720 and each reuse multiplies by 0.886: AL(2) = 1 + p1 + p1·p2 = 2.18, AL(3) = 2.44.
MTP_FIRST = 0.720
MTP_REUSE_DECAY = 0.886
MTP_ROW = f'{EM}: "LMSYS/SGLang blog Accelerating SGLang with Multiple Token Prediction"'  # the rows, as cited
MTP_SOURCE = (
    f"published: {MTP_ROW}, DeepSeek-V3, "
    "H200, NextN topk 1, 3- and 4-token windows (D = 2, 3): AL 2.18 and 2.44; fitted p_1 = 0.720 and a decay "
    "of 0.886 per step that reuses the model's one MTP layer (p_i = 0.720 x 0.886^(i-1))"
)


MTP_TARGETS = ("deepseek-v3",)  # the presets MTP_SOURCE's rows measured


def mtp_row_for(target: str) -> bool:
    """Whether the MTP rows were measured on this target preset (not borrowed from DeepSeek-V3)."""
    return target in MTP_TARGETS


def mtp_default(target: ModelSpec, depth: int = 16) -> tuple[Acceptance, str]:
    """Per-position rates: a position with its own trained MTP layer keeps p_1 (no published
    row measures trained layers past the first; assumed), each position past the model's
    MTP layers reuses the last one and decays by MTP_REUSE_DECAY per reuse."""
    layers = max(target.mtp_layers, 1)
    p = MTP_FIRST * mtp_shape(target, depth)
    note = "" if mtp_row_for(target.name) else f"; no row for {target.name}: DeepSeek-V3's rows"
    note += f"; {layers} MTP layer{'s' if layers > 1 else ''}: positions past {layers} reuse the last one"
    return Acceptance.positional(p, "published"), MTP_SOURCE + note


def mtp_shape(target: ModelSpec, depth: int = 16) -> np.ndarray:
    """Each position's rate over p_1 under `mtp_default`'s rule: 1 for a position with its own MTP
    layer, MTP_REUSE_DECAY per reuse of the last one past them."""
    layers = max(target.mtp_layers, 1)
    return np.array([MTP_REUSE_DECAY ** max(i - layers + 1, 0) for i in range(depth)])


def mtp_from_al(target: ModelSpec, al: float, draft_len: int) -> tuple[Acceptance, str] | None:
    """A user's acceptance length `al` measured at `draft_len` (al=A@D) as MTP's positional rates:
    the p_1 whose `mtp_shape` chain of `draft_len` gives `al` (bisection; AL rises with p_1), so
    other draft lengths follow the decay that reusing the MTP layer brings, not one rate at every
    depth. Worked example (one MTP layer): al=2.6@3 -> p_1 0.766 (then 0.679, 0.601, ...), AL 2.89
    at D = 7, where one i.i.d. rate (0.717) gives 3.29. None where no p_1 below 1 reaches `al`
    (the caller keeps the i.i.d. rate)."""
    shape = mtp_shape(target)
    chain = lambda p1: 1.0 + float(np.sum(np.cumprod(p1 * shape[:draft_len])))  # AL of D drafts at those rates
    if chain(0.999) < al:
        return None
    p1, layers = rate_for(chain, al), max(target.mtp_layers, 1)
    source = (f"user: al={al:g} at D={draft_len}, as MTP rates: p_1 {p1:.3f} for its {layers} MTP "
              f"layer{'s' if layers > 1 else ''}, x {MTP_REUSE_DECAY} per reuse past {'them' if layers > 1 else 'it'} "
              "(the decay fitted to the LMSYS/SGLang MTP blog's rows)")
    return Acceptance.positional(tuple(p1 * shape), source), source


# ---- draft models ---------------------------------------------------------------------------
# Leviathan et al. 2023 Tab.2, T5-XXL (11B) target, EnDe, T=0, with three drafts: (draft params,
# α). Parameter counts are the T5 paper's (Raffel et al. 2020: small 60M, base 220M, large 770M).
T5_TARGET_PARAMS = 11e9
DRAFT_SIZE_ROWS = ((60e6, 0.75, "T5-small"), (220e6, 0.80, "T5-base"), (770e6, 0.82, "T5-large"))
DRAFT_ALPHA_RANGE = (0.5, 0.9)  # clamp: the fit is extrapolated beyond the rows' size ratios


def _size_line(rows=DRAFT_SIZE_ROWS) -> tuple[float, float]:
    x = np.log10([p / T5_TARGET_PARAMS for p, _, _ in rows])
    slope, intercept = np.polyfit(x, [a for _, a, _ in rows], 1)
    return float(slope), float(intercept)


def draft_size_alpha(draft_params: float, target_params: float, rows=DRAFT_SIZE_ROWS,
                     clamp: tuple[float, float] = DRAFT_ALPHA_RANGE) -> float:
    """α = slope · log10(draft/target params) + intercept, fitted to the three T5 `rows` (the
    greedy ones: slope 0.063 per decade) and clamped to `clamp`. A 1.24B draft of an 8B target
    (ratio 0.154) gets 0.847; a 3.2B draft (ratio 0.400) gets 0.873."""
    slope, intercept = _size_line(rows)
    alpha = slope * np.log10(draft_params / target_params) + intercept
    return float(np.clip(alpha, *clamp))


# (target, draft) pairs with a published per-position acceptance (unconditional rates r_i, as
# vLLM counts them): rule 1 of the module docstring, before the draft-size rule.
DRAFT_PAIRS = {
    ("gpt-oss-120b", "gpt-oss-20b"): (
        (0.775, 0.619, 0.490),
        f'published: {EM}: "vllm PR #33318 benchmark summary", openai/gpt-oss-120b with openai/gpt-oss-20b, '
        "K = 3, mt-bench, T=0: per-position acceptance 77.5%, 61.9%, 49.0% (AL 2.88); positions past 3 "
        "repeat the third's conditional rate",
    ),
}


def draft_model_default(target: ModelSpec, draft: ModelSpec) -> tuple[Acceptance, str]:
    pair = DRAFT_PAIRS.get((target.name, draft.name))
    if pair is not None:
        return Acceptance.positional(conditional_from_position_rates(pair[0]), "published"), pair[1]
    ratio = draft.param_count() / target.param_count()
    alpha = draft_size_alpha(draft.param_count(), target.param_count())
    rows = ", ".join(f"{name} {a}" for _, a, name in DRAFT_SIZE_ROWS)
    lo, hi = (p / T5_TARGET_PARAMS for p in (DRAFT_SIZE_ROWS[0][0], DRAFT_SIZE_ROWS[-1][0]))
    where = (f"extrapolated past their largest ratio {hi:.2g}" if ratio > hi else
             f"extrapolated below their smallest ratio {lo:.2g}" if ratio < lo else
             f"within their ratios {lo:.2g}-{hi:.2g}")
    source = (f'published: {PC}: "Leviathan et al. 2023 Tab.2", T5-XXL target, EnDe, T=0 ({rows}); no row for '
              f"{target.name} with {draft.name}: alpha from the draft's size, {alpha:.3f} at draft/target params "
              f"{ratio:.3f} (log-linear fit to the three rows, {where}; a "
              "translation task, chat usually accepts less)")
    return Acceptance.iid(alpha, "published"), source
