"""Price one sweep's grid: each mechanism's kernels and step parts once (`price_grid`, engine
independent but for an engine's speculative cap), then any engine profile's step model over
them (`engine_rows`, `priced_frame`). `plan.sweep` builds the grid and reads the plan off the
frame; `plan.capacity` and `sweep.reprice` price through the same functions (`plan.zero_draft`
prices its D = 0 steps with the same cost and step models).

    t_step = engine step (speedplan.engine.step) of the verify, draft and sampling kernels
    tokens/s/user = AL / t_step     tokens/s/GPU = R·AL / (t_step · gpus)
    speedup = (R·AL / t_step) / (B / t_plain)

Times are seconds, memory bytes, throughputs tokens per second.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from speedplan.cost.forward import ForwardCost, forward_cost
from speedplan.cost.ops import CostModel
from speedplan.engine.profile import EngineProfile
from speedplan.engine.step import StepParts, plain_parts, speculative_parts, step_cost, without_drafting
from speedplan.plan.drafter_positions import past_positions
from speedplan.plan.engine_outputs import engine_profile_name
from speedplan.plan.mechanisms import Mechanism
from speedplan.plan.memory import memory_bytes, step_usable_bytes
from speedplan.specs.model import ModelSpec

FRAME_COLUMNS = [
    "model", "hardware", "engine", "mechanism", "draft_len", "verify_tokens", "batch", "context", "tp",
    "acceptance_length", "acceptance_source", "past_positions",
    "running", "t_plain_s", "t_step_s", "t_verify_s", "t_draft_s", "t_sample_s", "t_launch_s", "t_draft_host_s", "t_host_s",
    "t_host_exposed_s",
    "t_gemm_s", "t_attention_s", "t_tree_mask_s", "t_comm_s", "t_elementwise_s",
    "tokens_per_s_per_user", "tokens_per_s_per_gpu", "speedup", "memory_bytes", "fits_memory", "feasible",
    "bound", "gemm_flops_per_byte", "gemm_flops_per_s", "cost_source", "out_of_range_share",
]


@dataclass(frozen=True)
class GridPricing:
    """One mechanism's engine-independent pricing (None: plain decoding): its grid, the verify
    and draft kernels and the step's parts (`engine.step.StepParts`). Any engine profile turns
    it into rows (`engine_rows`) without pricing a kernel again."""

    mech: Mechanism | None
    grid: dict
    verify_tokens: np.ndarray  # expected tokens verified per sequence
    verify: ForwardCost
    draft: ForwardCost
    parts: StepParts
    acceptance_length: np.ndarray
    memory_bytes: np.ndarray
    running: np.ndarray  # requests a step runs (the batch, or an engine's speculative cap)
    spec_cap: float = 0.0  # the engine's spec_max_running this pricing was made for
    window_pool: float | None = None  # the engine memory rule's window_pool its memory_bytes were made with
    temperature: float = 0.0  # the sampling temperature served: above 0 the sampler takes sample_passes_random more


def price_grid(mech: Mechanism | None, g: dict, cost: CostModel, target: ModelSpec, tp: int,
               engine: EngineProfile, temperature: float = 0.0) -> GridPricing:
    """Kernels and step parts at the requests each step runs: the batch, or for a speculative
    step of an engine with a cap, min(batch, cap); `temperature` the sampling temperature served."""
    R = engine.running(g["batch"], mech is not None)
    p = _priced(mech, {**g, "batch": R}, cost, target, tp, engine.memory.window_pool, temperature)
    return replace(p, grid=g, running=R, spec_cap=engine.terms["spec_max_running"].value,
                   window_pool=engine.memory.window_pool, temperature=temperature)


def _priced(mech: Mechanism | None, g: dict, cost: CostModel, target: ModelSpec, tp: int,
            window_pool: float | None = None, temperature: float = 0.0) -> GridPricing:
    B, D, L, N = g["batch"], g["draft_len"], g["context"], g["nodes"]
    if mech is None:
        q = np.ones(len(B))
        verify = forward_cost(cost, target, B, 1, L, tp)
        draft = ForwardCost.zeros(len(B))
        parts = plain_parts(cost, target, B, verify, temperature)
        al = np.ones(len(B))
    else:
        q = mech.verify_tokens(D, N)
        verify = forward_cost(cost, target, B, q, L, tp, mask="tree" if mech.is_tree else "causal")
        draft = mech.draft_cost(cost, target, B, D, L, N, tp)
        parts = speculative_parts(cost, target, mech, B, D, N, q, verify, draft, temperature)
        al = mech.acceptance_length(D, N)
    memory = memory_bytes(mech, target, B, D, L, N, tp, window_pool)
    return GridPricing(mech, g, q, verify, draft, parts, np.asarray(al, dtype=float), memory, B)


def engine_rows(p: GridPricing, engine: EngineProfile, hardware: str, target: ModelSpec, tp: int) -> pd.DataFrame:
    """The rows of one mechanism, priced through `engine`'s step model. Speedup and
    feasibility are added by the caller, which has every mechanism's rows."""
    mech, g, verify, draft, al = p.mech, p.grid, p.verify, p.draft, p.acceptance_length
    B, D, L, N = g["batch"], g["draft_len"], g["context"], g["nodes"]
    terms = engine.values()
    # the verify width of a step that drafts: 1 + D, or N + 1 for a tree (n-gram steps without a
    # match are priced at their expected tokens q but keep this shape)
    width = (1 + np.asarray(N if mech is not None and mech.is_tree else D)).astype(int)
    # past the drafter's positions: vLLM drafts nothing (AL 1, no drafting), SGLang's drafter runs on (AL 1)
    dropped, wasted = past_positions(mech, engine, D, width - 1, L)
    step = step_cost(terms, without_drafting(p.parts, dropped) if dropped.any() else p.parts)
    al, draft_s = np.where(dropped | wasted, 1.0, al), np.where(dropped, 0.0, draft.total_s)
    k = terms["kernel_scale"]  # this machine's kernels over the profile's (1 unless fitted)
    name, acc_src = ("none", "plain decoding") if mech is None else (mech.label, mech.acceptance_source)
    t_step = step.total_s
    share = verify.profile_share
    return pd.DataFrame({
        "model": target.name, "hardware": hardware, "engine": engine_profile_name({"engine": engine.name, "engine_source": engine.origin}), "mechanism": name,
        "draft_len": D, "verify_tokens": width, "batch": B, "context": L, "tp": tp,
        "acceptance_length": al, "acceptance_source": acc_src, "past_positions": dropped | wasted,
        "running": p.running, "t_plain_s": np.nan, "t_step_s": t_step, "t_verify_s": k * verify.total_s, "t_draft_s": k * draft_s,
        "t_sample_s": step.sample_s, "t_launch_s": step.launch_s, "t_draft_host_s": step.draft_host_s,
        "t_host_s": step.host_s,
        "t_host_exposed_s": step.exposed_host_s,
        "t_gemm_s": k * verify.gemm_s, "t_attention_s": k * verify.attention_s, "t_tree_mask_s": k * verify.tree_mask_s,
        "t_comm_s": k * verify.comm_s, "t_elementwise_s": k * verify.elementwise_s,
        "tokens_per_s_per_user": al / t_step, "tokens_per_s_per_gpu": p.running * al / (t_step * tp),
        "speedup": np.nan, "memory_bytes": p.memory_bytes, "fits_memory": True, "feasible": True,
        "bound": np.where(verify.gemm_compute_bound_s > 0.5 * verify.gemm_s, "compute", "memory"),
        "gemm_flops_per_byte": verify.gemm_flops / verify.gemm_bytes,
        "gemm_flops_per_s": verify.gemm_flops / (k * verify.gemm_s),
        "cost_source": np.where(share >= 0.999, "profile", np.where(share <= 0.001, "roofline", "mixed")),
        "out_of_range_share": verify.out_of_range_share + np.zeros(len(B)),  # of t_verify priced outside measured range
    })


def priced_frame(pricings: list[GridPricing], engine: EngineProfile, hw, target: ModelSpec, tp: int) -> pd.DataFrame:
    """Every mechanism's rows under `engine`, with speedup against the same engine's plain
    decoding and feasibility (weights + KV + drafter state within the memory `engine`'s memory rule
    leaves usable, `plan.memory.step_usable_bytes`)."""
    frame = pd.concat([engine_rows(p, engine, hw.name, target, tp) for p in pricings], ignore_index=True)
    base = frame[frame["mechanism"] == "none"].set_index(["batch", "context"])["t_step_s"]
    frame["t_plain_s"] = base.reindex(pd.MultiIndex.from_arrays([frame["batch"], frame["context"]])).to_numpy()
    frame["speedup"] = (frame["acceptance_length"] * frame["running"] / frame["t_step_s"]) / (
        frame["batch"] / frame["t_plain_s"])
    usable = np.concatenate([np.broadcast_to(step_usable_bytes(engine, hw, p.mech, target, p.grid["draft_len"],
                                                               p.grid["context"], p.grid["nodes"], tp),
                                             np.shape(p.grid["batch"])) for p in pricings])
    frame["fits_memory"] = frame["memory_bytes"].to_numpy() <= usable
    frame["feasible"] = frame["fits_memory"]
    return frame[FRAME_COLUMNS]
