"""Plain decoding on a server whose speculative launch caps the requests it runs.

SGLang launched with a speculative algorithm runs at most `spec_max_running` requests (48 by
default) whatever draft length its adaptive schedule picks, D = 0 included: above the cap a
"speculation off" bucket runs plain decoding steps of cap requests, the others waiting. A
plan that loads such a drafter prices its D = 0 cells so (`engine_plan._Table.with_drafter`);
plain decoding without a drafter (the "off" plan) still runs every request.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def capped_plain(result, cells: pd.MultiIndex) -> np.ndarray | None:
    """tokens/s/GPU of plain decoding at each (batch, context) cell with min(batch, cap)
    requests per step, under the engine profile that priced `result`; None when that profile
    sets no cap, no cell is above it, or the sweep's pricing is not at hand."""
    from speedplan.plan.sweep import _gpu_pricing, _rows

    cap = float(result.meta.get("engine_spec_max_running") or 0)
    batch = cells.get_level_values(0).to_numpy(dtype=float)
    if cap <= 0 or not (batch > cap).any() or result.pricing is None or result.engine is None:
        return None
    _, hw, target, tp, cost = result.pricing
    running = np.minimum(batch, cap).astype(int)
    zeros = np.zeros(len(cells), dtype=int)
    g = {"batch": running, "draft_len": zeros, "context": cells.get_level_values(1).to_numpy(dtype=int), "nodes": zeros}
    rows = _rows(_gpu_pricing(None, g, cost, target, tp, result.engine), result.engine, hw.name, target, tp)
    return rows["tokens_per_s_per_gpu"].to_numpy(dtype=float)
