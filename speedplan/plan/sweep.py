"""The planner: sweep mechanism × D × B × context into one tidy DataFrame, then read off the
Pareto frontier, the best configuration per batch size and the pick under a latency SLO.

Speculation is part of the step, never a multiplier on a finished table:

    t_step = t_verify(B·(1+D) tokens, or B·(N+1) for a tree) + t_draft(B, D) + t_overhead
    tokens/s/user = AL / t_step     tokens/s/GPU = B·AL / (t_step · gpus)
    speedup = AL · t_base / t_step, with t_base the plain decoding step (forward + overhead)

Times are seconds, throughputs tokens per second.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from speedplan import __version__
from speedplan.plan.acceptance import Acceptance
from speedplan.cost.ops import CostModel, load_cost_model
from speedplan.errors import SpeedplanInputError
from speedplan.cost.forward import forward_cost
from speedplan.plan.mechanisms import REGISTRY, Mechanism, parse_mechanism
from speedplan.plan.pick import best_per_batch, pareto, slo_pick
from speedplan.specs.model import ModelSpec, get_model

# Fraction of device memory usable for weights + KV (the rest: activations, CUDA graphs,
# allocator slack); vLLM's default gpu_memory_utilization is 0.9.
MEMORY_UTILIZATION = 0.9
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_DRAFT_LENS = tuple(range(0, 9))
DEFAULT_TREE_NODES = (8, 16, 32, 64)


@dataclass
class SweepResult:
    frame: pd.DataFrame  # every grid point, infeasible ones included (feasible == False)
    pareto: pd.DataFrame  # feasible Pareto-optimal rows (max tokens/s/user and tokens/s/GPU)
    best: pd.DataFrame  # per (batch, context): feasible row with the highest tokens/s/GPU
    slo_pick: pd.Series | None  # best tokens/s/GPU with tokens/s/user >= the SLO, or None
    meta: dict = field(default_factory=dict)


def _grid(mech: Mechanism | None, batches, draft_lens, contexts, tree_nodes) -> dict[str, np.ndarray]:
    """The (draft_len, tree size, batch, context) points one mechanism contributes; "nodes" is a
    tree's N draft nodes (D + 1 for a chain, where it is unused)."""
    if mech is None:
        d = np.array([0])
        n = np.array([1])
        pairs = np.stack([d, n], axis=1)
    elif mech.is_tree:
        pairs = np.array(
            [(d, n) for d in draft_lens if d >= 1 for n in tree_nodes
             if d <= n <= mech.topk * d],  # engines keep a top-k frontier per level
            dtype=int,
        ).reshape(-1, 2)
    else:
        pairs = np.array([(d, d + 1) for d in draft_lens if d >= 1], dtype=int).reshape(-1, 2)
    bb, cc, pp = np.meshgrid(np.asarray(batches), np.asarray(contexts), np.arange(len(pairs)), indexing="ij")
    pp = pp.ravel()
    return {
        "draft_len": pairs[pp, 0] if len(pairs) else np.zeros(0, int),
        "nodes": pairs[pp, 1] if len(pairs) else np.zeros(0, int),
        "batch": bb.ravel(),
        "context": cc.ravel(),
    }


def _check_axis(name: str, values, low: int, high: int) -> list[int]:
    values = sorted({int(v) for v in values})
    if not values:
        raise SpeedplanInputError(f"{name}: empty")
    if values[0] < low or values[-1] > high:
        raise SpeedplanInputError(f"{name}: values must be in {low}..{high}, got {values[0]}..{values[-1]}")
    return values


def _mechanisms(specs, target: ModelSpec, acceptance) -> tuple[list[Mechanism], dict[str, str]]:
    """The mechanisms to sweep and, when none were named, those skipped with the reason. A
    mechanism named explicitly that cannot run is an error (its `build` says why)."""
    skipped: dict[str, str] = {}
    if specs is None:
        specs = []
        for name, cls in REGISTRY.items():
            reason = cls.skip_by_default(target)
            if reason:
                skipped[name] = reason
            else:
                specs.append(name)
    mechs: list[Mechanism] = []
    for spec in specs:
        if isinstance(spec, Mechanism):  # built by the caller (e.g. validation's fitted drafters)
            mechs.append(spec)
            continue
        name = spec.split(":")[0].strip().lower()
        user_acc = acceptance.get(name, acceptance.get("*")) if isinstance(acceptance, dict) else acceptance
        mechs.append(parse_mechanism(spec, target, user_acc))
    return mechs, skipped


def sweep(
    model: str | ModelSpec = "llama-3.1-8b",
    hardware: str | CostModel = "h100-sxm",
    mechanisms=None,
    batches=DEFAULT_BATCHES,
    draft_lens=DEFAULT_DRAFT_LENS,
    contexts=(4096,),
    tp: int = 1,
    acceptance: Acceptance | dict[str, Acceptance] | None = None,
    tree_nodes=DEFAULT_TREE_NODES,
    min_tokens_per_user: float | None = None,
    command: str = "",
) -> SweepResult:
    """Price every (mechanism, D, B, context) point and rank them.

    `mechanisms` are specs such as "eagle" or "draft-model:llama-3.2-1b" ("draft-model" alone
    takes the target's usual small sibling); None sweeps every mechanism that applies to the
    model and lists the others with the reason in `meta["skipped"]`. `acceptance` replaces the published default for
    every mechanism (one Acceptance) or per mechanism name (dict; key "*" for the rest).

    >>> r = sweep("llama-3.1-8b", "h100-sxm", ["eagle"], [1, 64], range(0, 5))
    >>> sorted(r.frame.mechanism.unique())
    ['eagle', 'none']
    """
    target = model if isinstance(model, ModelSpec) else get_model(model)
    target.check_tp(tp)
    cost = load_cost_model(hardware) if isinstance(hardware, (str, Path)) else hardware  # or a CostModel
    hw = cost.hardware
    batches = _check_axis("--batch", batches, 1, 65536)
    draft_lens = _check_axis("--draft-len", draft_lens, 0, 64)
    contexts = _check_axis("--context", contexts, 1, 10_000_000)
    tree_nodes = _check_axis("tree nodes", tree_nodes, 1, 1024)
    if min_tokens_per_user is not None and not min_tokens_per_user > 0:
        raise SpeedplanInputError(f"--min-tokens-per-user must be > 0, got {min_tokens_per_user}")

    mechs, skipped = _mechanisms(mechanisms, target, acceptance)
    if target.dtype not in hw.peak_flops_per_s:  # e.g. a bf16 checkpoint priced on an fp32-only CPU
        target = replace(target, dtype=hw.default_dtype)
    mechs = [m if getattr(m, "draft", None) is None or m.draft.dtype in hw.peak_flops_per_s
             else replace(m, draft=replace(m.draft, dtype=hw.default_dtype)) for m in mechs]
    if len({m.label for m in mechs}) != len(mechs):
        raise SpeedplanInputError("the same mechanism is listed twice")

    # Plain decoding at each (B, context): the baseline every row divides by.
    base_grid = _grid(None, batches, [0], contexts, tree_nodes)
    base = forward_cost(cost, target, base_grid["batch"], 1, base_grid["context"], tp)
    overhead_s = hw.step_overhead_us * 1e-6
    base_step = base.total_s + overhead_s
    base_key = {(b, c): i for i, (b, c) in enumerate(zip(base_grid["batch"], base_grid["context"]))}

    weights_bytes = target.weight_bytes() / tp
    kv_per_token = target.kv_bytes_per_token_per_rank(tp)
    capacity = hw.memory_bytes * MEMORY_UTILIZATION

    parts = []
    for mech in [None, *mechs]:
        g = _grid(mech, batches, draft_lens, contexts, tree_nodes)
        if not len(g["batch"]):
            continue
        B, D, L, N = g["batch"], g["draft_len"], g["context"], g["nodes"]
        idx = np.array([base_key[(b, c)] for b, c in zip(B, L)], dtype=int)
        if mech is None:
            verify = base
            draft_s = np.zeros(len(B))
            al = np.ones(len(B))
            extra_mem = np.zeros(len(B))
            q = np.ones(len(B))
            name, acc_src = "none", "plain decoding"
        else:
            q = mech.verify_tokens(D, N)
            verify = forward_cost(cost, target, B, q, L, tp, mask="tree" if mech.is_tree else "causal")
            draft = mech.draft_cost(cost, target, B, D, L, N, tp)
            draft_s = draft.total_s + mech.host_draft_s(B, D)
            al = mech.acceptance_length(D, N)
            extra_mem = mech.extra_memory_bytes(target, B, L + q, tp)
            name, acc_src = mech.label, mech.acceptance_source
        t_step = verify.total_s + draft_s + overhead_s
        t_base = base_step[idx]
        memory = weights_bytes + B * (L + q) * kv_per_token + extra_mem
        fits = memory <= capacity
        share = verify.profile_share
        parts.append(pd.DataFrame({
            "model": target.name,
            "hardware": hw.name,
            "mechanism": name,
            "draft_len": D,
            "verify_tokens": q.astype(int),
            "batch": B,
            "context": L,
            "tp": tp,
            "acceptance_length": al,
            "acceptance_source": acc_src,
            "t_plain_s": t_base,
            "t_verify_s": verify.total_s,
            "t_draft_s": draft_s,
            "t_overhead_s": overhead_s,
            "t_step_s": t_step,
            "t_gemm_s": verify.gemm_s,
            "t_attention_s": verify.attention_s,
            "t_tree_mask_s": verify.tree_mask_s,
            "t_comm_s": verify.comm_s,
            "t_elementwise_s": verify.elementwise_s,
            "tokens_per_s_per_user": al / t_step,
            "tokens_per_s_per_gpu": B * al / (t_step * tp),
            "speedup": al * t_base / t_step,
            "memory_bytes": memory,
            "fits_memory": fits,
            "feasible": fits,
            "bound": np.where(verify.gemm_compute_bound_s > 0.5 * verify.gemm_s, "compute", "memory"),
            "gemm_flops_per_byte": verify.gemm_flops / verify.gemm_bytes,
            "gemm_flops_per_s": verify.gemm_flops / verify.gemm_s,
            "cost_source": np.where(share >= 0.999, "profile", np.where(share <= 0.001, "roofline", "mixed")),
            "out_of_range_share": verify.out_of_range_share + np.zeros(len(B)),  # of t_verify priced outside measured range
        }))
    frame = pd.concat(parts, ignore_index=True)
    frame["verify_tokens"] = frame["verify_tokens"].astype(int)  # 1 + D for a chain, N + 1 for a tree

    result = SweepResult(frame, pareto(frame), best_per_batch(frame), None)
    if min_tokens_per_user is not None:
        result.slo_pick = slo_pick(frame, min_tokens_per_user)
    result.meta = {
        "model": target.summary(),
        "hardware": hw.name,
        "hardware_description": hw.description,
        "hardware_source": hw.source,
        "cost_origin": cost.origin,
        "tp": tp,
        "dtype": target.dtype,
        "acceptance": {m.label: m.acceptance_source for m in mechs},
        "ridge_flops_per_byte": hw.ridge_flops_per_byte(target.dtype),
        "peak_flops_per_s": hw.flops_per_s(target.dtype),
        "bytes_per_s": hw.bytes_per_s,
        "min_tokens_per_user": min_tokens_per_user,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "version": __version__,
        "command": command,
        "mechanisms": [m.label for m in mechs],
        "skipped": skipped,
        "topk": {m.label: m.topk for m in mechs if m.is_tree},
    }
    return result
