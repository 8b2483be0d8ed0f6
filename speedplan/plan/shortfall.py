"""Why a sweep serves nothing, or not every batch size: what plain decoding needs per GPU
against the memory that is usable. The CLI prints these; a library caller can too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from speedplan.plan.memory import MEMORY_UTILIZATION

if TYPE_CHECKING:
    from speedplan.plan.sweep import SweepResult


def memory_shortfall(result: SweepResult) -> str | None:
    """Why nothing can be served, when plain decoding fits in memory at no swept (batch,
    context): the smallest such configuration's bytes per GPU against the usable memory. None
    when some plain configuration fits. The CLI makes this an input error (a TP or a context
    the model cannot run); library callers still get a report that says so."""
    from speedplan.plan.api_checks import sweep_result

    plain = sweep_result(result, "memory_shortfall").frame
    plain = plain[plain["mechanism"] == "none"]
    if plain.empty or plain["fits_memory"].any():
        return None
    meta = result.meta
    weights, usable = meta["weight_bytes_per_gpu"], meta["memory_bytes"] * MEMORY_UTILIZATION
    return (f"{meta['model']['model']} on {meta['hardware']} at TP {meta['tp']} fits in memory at no swept batch "
            f"and context: {plain_memory_need(result)}; "
            + ("the weights alone do not fit: try a larger --tp" if weights > usable
               else "try smaller --batch, a shorter --context or a larger --tp"))


def plain_memory_need(result: SweepResult, batch: int | None = None) -> str:
    """What the smallest plain-decoding configuration (at `batch`, if given) needs per GPU
    against what is usable, with enough digits to show a shortfall, e.g. "plain decoding at
    B=128, context 4096 needs 84.8 GB per GPU (weights 16.1 GB) and 72.0 GB are usable (90% of 80 GB, vLLM's default gpu_memory_utilization, assumed for every engine)"."""
    plain = result.frame[result.frame["mechanism"] == "none"]
    if batch is not None:
        plain = plain[plain["batch"] == batch]
    row = plain.loc[plain["memory_bytes"].idxmin()]
    meta = result.meta
    need, weights, total = row["memory_bytes"] / 1e9, meta["weight_bytes_per_gpu"] / 1e9, meta["memory_bytes"] / 1e9
    usable = total * MEMORY_UTILIZATION
    digits = 1 if round(need, 1) > round(usable, 1) else 3
    return (f"plain decoding at B={int(row['batch'])}, context {int(row['context'])} needs {need:.{digits}f} GB per GPU "
            f"(weights {weights:.1f} GB) and {usable:.{digits}f} GB are usable ({MEMORY_UTILIZATION:.0%} of {total:.0f} GB, vLLM's default gpu_memory_utilization, assumed for every engine)")
