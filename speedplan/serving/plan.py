"""What gets served: a `ServingPlan` (mechanism, per-batch draft lengths, tree, TP) and the
facts every engine's config needs about it (Hugging Face repos, published heads, schedule
ranges), and `Support`: what one engine can run for a mechanism and how it can vary D with
the batch size (each engine module's `support()`; the planner plans within it).

Conventions shared by all engines:

- The plan's schedule `((batch, D), ...)` is read as "D from this batch up to the next listed
  batch"; the first range starts at batch 1 and the last one is open (`OPEN_END_BATCH`, which
  engines clip to their own max batch size). D = 0 means speculation off.
- Mechanism "none": speculation off at every batch size (plain decoding wins everywhere).
- A tree `{"topk", "depth", "nodes"}` counts draft nodes without the root: a chain of D drafts is
  depth D and D nodes.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanisms import MECHANISMS
from speedplan.serving.context import ContextFit

OPEN_END_BATCH = 65536
OFF = "none"  # the mechanism of a plan that turns speculation off everywhere


@dataclass(frozen=True)
class Mode:
    """One way an engine sets the draft length across batch sizes.

    shape: "fixed" (one setting at every B), "any" (any D per batch range), or "first-max"
    (any D per range as long as none exceeds the smallest batch's D, which must be >= 1:
    TensorRT-LLM's draft_len_schedule). `off`: D = 0 may be set for some batch sizes inside
    the mode. `trees`: tree settings (depth, nodes) may be served (fixed shape only)."""

    name: str
    shape: str
    off: bool
    how: str
    trees: bool = False
    max_draft_len: int | None = None

    def __post_init__(self) -> None:
        if self.shape not in ("fixed", "any", "first-max"):
            raise ValueError(f"mode shape {self.shape!r}")


@dataclass(frozen=True)
class Support:
    """How an engine runs one mechanism: its modes, notes for the file comments, and whether
    at D = 0 it still runs the loaded drafter's forward to keep its KV cache current (priced by
    the engine profile's zero_draft_forward; False: the drafter idles, its cache going stale)."""

    modes: tuple[Mode, ...]
    note: str = ""
    drafter_runs_at_zero: bool = True

# n-gram lookup window; speedplan does not plan it (acceptance is workload-bound), so these are
# fixed, stated defaults: vLLM's own docs example uses prompt_lookup_max=4.
NGRAM_LOOKUP_MAX = 4
NGRAM_LOOKUP_MIN = 2

# speedplan preset -> Hugging Face repo served (instruct variants of the preset architectures).
HF_REPOS: dict[str, str] = {
    "smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "llama-3.2-1b": "meta-llama/Llama-3.2-1B-Instruct",
    "llama-3.2-3b": "meta-llama/Llama-3.2-3B-Instruct",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3.1-405b": "meta-llama/Llama-3.1-405B-Instruct",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "deepseek-v3.2": "deepseek-ai/DeepSeek-V3.2",
    "qwen3-next-80b-a3b": "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "glm-4.7-flash": "zai-org/GLM-4.7-Flash",
}

# Public EAGLE-1/2 heads per engine, only where that engine's own PRs/docs ran it for that target
# (vLLM PRs #17202 and #24343 in ../shared/cases/engine_measurements.csv). Anything else: placeholder.
EAGLE_HEADS: dict[str, dict[str, str]] = {
    "vllm": {"llama-3.1-8b": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"},
    "sglang": {},
    "trtllm": {},
}

# Public EAGLE-3 heads per engine, only where that engine's own docs/tests use the head for that
# target, or a run on that engine in ../shared/cases/engine_measurements.csv did (checkpoint formats
# differ between engines). Anything else gets a placeholder. Qwen3-30B-A3B on SGLang: SpecForge
# issue #339 (sgl-project) served zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead there. Left out: sglang
# PR #14607's Qwen3-Next head, a training checkpoint inside lukeysong/qwen3-next-draft
# (epoch_1_step_120000), not a repo an engine loads by its id.
EAGLE3_HEADS: dict[str, dict[str, str]] = {
    "vllm": {
        "llama-3.1-8b": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "qwen3-8b": "RedHatAI/Qwen3-8B-speculator.eagle3",
        "qwen3-32b": "RedHatAI/Qwen3-32B-speculator.eagle3",
    },
    "sglang": {"llama-3.1-8b": "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B",
               "qwen3-30b-a3b": "zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead"},
    "trtllm": {"llama-3.1-8b": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
}


@dataclass(frozen=True)
class ServingPlan:
    """The plan to serve: mechanism, draft length D at the reference batch, per-batch schedule."""

    model: str  # target: speedplan preset name (e.g. "llama-3.1-70b") or a path
    mechanism: str  # one of MECHANISMS, or OFF ("none": no speculation at any batch size)
    draft_len: int  # D at the reference batch size (>= 1; 0 only for OFF)
    schedule: tuple[tuple[int, int], ...]  # ((batch, draft_len), ...) sorted by batch; 0 = off
    tp: int = 1
    draft_model: str | None = None  # for draft-model: preset name or path of the draft
    tree: dict | None = None  # for eagle-tree / eagle3-tree / medusa: {"topk", "depth", "nodes"}
    hardware: str = ""  # for comments only
    mode: str = ""  # how the engine gets the schedule when it has several ways ("adaptive" for SGLang)
    draft_tp: int | None = None  # draft model's tensor parallel size (None: the target's)
    per_batch: tuple = ()  # planner rows for the comment: (batch, D, speedup, loss_vs_best[, runs_at_batch: 0 = nothing fits])
    other_contexts: tuple = ()  # the same rows at the plan's other contexts: (context, batch, D, speedup, loss, runs_at_batch)
    context: int | None = None  # context length (tokens) the plan was made for, for comments
    contexts: tuple = ()  # every context (tokens) the plan's one D per batch size was chosen over, when several
    unsupported: tuple = ()  # swept mechanisms this engine cannot run (said where the plan is off)
    priced_by: str = ""  # the engine profile that priced the plan (name: how its terms were set), for comments
    sources: str = ""  # where the rest came from (latency, acceptance), for comments
    fits_memory: bool = True  # False: plain decoding fits at no planned batch size (OFF, said in the header)
    spec_max_running: float | None = None  # the pricing profile's cap on a speculative step (0: none; None: the engine's default)
    drafter_kept_warm: bool = False  # at D = 0 the loaded drafter still runs a forward to keep its KV cache current
    acceptance_published: bool = True  # the acceptance priced is a published default (False: the user's or a trace's)
    engine: str | None = None  # the serving engine whose plan this is (serving_plans sets it); None: hand-built, any engine
    context_fit: ContextFit | None = None  # one full-context sequence against the launch's KV cache (None: not checked)
    drafter_positions: int = 0  # positions the drafter holds (its config's, or the published head's); 0: not known

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS and self.mechanism != OFF:
            raise SpeedplanInputError(
                f"unknown mechanism {self.mechanism!r}; expected one of {', '.join(MECHANISMS)} or {OFF}"
            )
        low = 0 if self.mechanism == OFF else 1
        if not _is_int(self.draft_len) or self.draft_len < low:
            raise SpeedplanInputError(f"draft_len must be an integer >= {low}, got {self.draft_len!r}")
        if not _is_int(self.tp) or self.tp < 1:
            raise SpeedplanInputError(f"tp must be an integer >= 1, got {self.tp!r}")
        if not str(self.model).strip():
            raise SpeedplanInputError("serving plan needs a target model")
        schedule = tuple(tuple(entry) for entry in self.schedule)
        for entry in schedule:
            if len(entry) != 2 or not all(_is_int(x) for x in entry) or entry[0] < 1 or entry[1] < 0:
                raise SpeedplanInputError(
                    f"schedule entries must be (batch >= 1, draft_len >= 0) integers, got {entry!r}"
                )
        batches = [b for b, _ in schedule]
        if batches != sorted(set(batches)):
            raise SpeedplanInputError(f"schedule batches must be strictly increasing, got {batches}")
        object.__setattr__(self, "schedule", tuple((int(b), int(d)) for b, d in schedule))
        object.__setattr__(self, "draft_len", int(self.draft_len))
        object.__setattr__(self, "tp", int(self.tp))
        if self.mechanism == "draft-model" and not self.draft_model:
            raise SpeedplanInputError("mechanism draft-model needs draft_model (preset name or path)")
        if self.mechanism in ("eagle-tree", "eagle3-tree") and self.tree is None:
            raise SpeedplanInputError(f"mechanism {self.mechanism} needs tree={{'topk', 'depth', 'nodes'}}")
        if self.draft_tp is not None and (not _is_int(self.draft_tp) or self.draft_tp < 1):
            raise SpeedplanInputError(f"draft_tp must be an integer >= 1, got {self.draft_tp!r}")
        if self.tree is not None:
            _check_tree(self.tree, self.mechanism)
            object.__setattr__(self, "tree", {k: int(self.tree[k]) for k in ("topk", "depth", "nodes")})
        if self.mechanism == "mtp":
            _check_has_mtp(self.model)
        if self.context_fit is not None and not isinstance(self.context_fit, ContextFit):
            raise SpeedplanInputError(f"context_fit must be a ContextFit (serving.context) or None, "
                                      f"got {type(self.context_fit).__name__}")
        if self.engine is not None:  # "vLLM " -> "vllm"; an unknown name fails here, not when rendered
            from speedplan.serving import engine_module

            object.__setattr__(self, "engine", engine_module(self.engine).NAME)


def check_engine(plan: ServingPlan, engine: str, where: str) -> None:
    """Refuse to render `engine`'s files from a plan made for another engine (`plan.engine`): they
    would carry that engine's draft lengths, speedups and caps under this engine's name. A
    hand-built plan (engine None) serves any engine."""
    if plan.engine is not None and plan.engine != engine:
        raise SpeedplanInputError(f"{where}: the plan was made for {plan.engine}, not {engine}, and carries "
                                  f"{plan.engine}'s draft lengths and speedups; render {engine}'s own plan "
                                  f"(serving_plans(result, plan_engines(result))[{engine!r}])")


def _is_int(x: object) -> bool:
    """Python or numpy integers (planner schedules come out of DataFrames), never bools."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check_tree(tree: dict, mechanism: str) -> None:
    for key in ("topk", "depth", "nodes"):
        if not _is_int(tree.get(key)) or tree[key] < 1:
            raise SpeedplanInputError(f"tree[{key!r}] must be an integer >= 1, got {tree.get(key)!r}")
    # EAGLE-2 keeps at most topk nodes per level, so a dynamic tree holds depth..topk*depth nodes
    # (TensorRT-LLM enforces the same bounds on max_total_draft_tokens).
    if mechanism in ("eagle-tree", "eagle3-tree") and not tree["depth"] <= tree["nodes"] <= tree["topk"] * tree["depth"]:
        raise SpeedplanInputError(
            f"tree nodes must lie in [depth, topk*depth] = [{tree['depth']}, "
            f"{tree['topk'] * tree['depth']}], got {tree['nodes']}"
        )


def mtp_layers(model: str) -> int | None:
    """MTP layers of a preset target or of a config.json folder; None for a repo id (left to the engine)."""
    from pathlib import Path

    from speedplan.specs.model import get_model

    key = str(model).strip().lower()
    if key in HF_REPOS:
        return get_model(key).mtp_layers
    if (Path(str(model)) / "config.json").is_file():
        return get_model(str(model)).mtp_layers
    return None


def _check_has_mtp(model: str) -> None:
    """A preset without MTP layers cannot serve mechanism mtp; paths are left to the engine."""
    if mtp_layers(model) == 0:
        raise SpeedplanInputError(f"model {model} has no MTP layers; mechanism mtp needs one that does")


# ---- shared pieces ---------------------------------------------------------------------------
def hf_repo(model: str) -> str:
    """Hugging Face repo id for a speedplan preset (HF_REPOS, else the repo its file's `_source`
    names: a preset dropped in as one file was served under its bare name); anything else (a path
    or repo id) as given."""
    key = str(model).strip().lower()
    if key in HF_REPOS:
        return HF_REPOS[key]
    from speedplan.specs.hub import hf_repo_of
    from speedplan.specs.model import get_model, preset_names

    return (hf_repo_of(get_model(key).source) if key in preset_names() else None) or str(model)


def _preset(model: str) -> str:
    return str(model).strip().lower()


def _placeholder_name(model: str) -> str:
    """The model as a placeholder names it: a preset as given, a path or repo id by its last part
    (/data/nemo or /data/nemo/config.json: nemo; meta-llama/Llama-3.1-8B: Llama-3.1-8B)."""
    parts = [p for p in str(model).strip().replace("\\", "/").split("/") if p]
    if len(parts) > 1 and parts[-1].lower().endswith(".json"):
        parts = parts[:-1]
    return parts[-1] if parts else str(model)


def eagle_head(plan: ServingPlan, engine: str) -> str:
    """The head to load: an EAGLE-1/2 head for eagle / eagle-tree, an EAGLE-3 head otherwise."""
    name = _placeholder_name(plan.model)
    if plan.mechanism in ("eagle", "eagle-tree"):
        return EAGLE_HEADS[engine].get(_preset(plan.model), f"<path-to-eagle-head-for-{name}>")
    return EAGLE3_HEADS[engine].get(_preset(plan.model), f"<path-to-eagle3-head-for-{name}>")


def medusa_head(plan: ServingPlan) -> str:
    return f"<path-to-medusa-heads-for-{_placeholder_name(plan.model)}>"


def segments(plan: ServingPlan) -> list[tuple[int, int, int]]:
    """Inclusive (first_batch, last_batch, D) ranges covering 1..OPEN_END_BATCH; equal neighbours merged."""
    return point_ranges(list(plan.schedule))


def point_ranges(points) -> list[tuple[int, int, int]]:
    """`segments` of schedule `points` ((B, D), ascending): the first range from 1, the last to
    OPEN_END_BATCH, equal neighbours merged."""
    out: list[tuple[int, int, int]] = []
    for i, (batch, d) in enumerate(points):
        lo = 1 if i == 0 else batch
        hi = points[i + 1][0] - 1 if i + 1 < len(points) else max(OPEN_END_BATCH, batch)
        if out and out[-1][2] == d:
            out[-1] = (out[-1][0], hi, d)
        else:
            out.append((lo, hi, d))
    return out
