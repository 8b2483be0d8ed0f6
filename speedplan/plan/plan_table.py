"""What an engine plan is scored on: tokens/s/GPU of every (mechanism, setting) at every planned
(batch, context) cell, as a launch with or without a drafter sees it.

A launch that loads a drafter keeps its weights and cache at every batch size, D = 0 included,
so a (batch, context) that fits plain decoding alone may not fit it. An engine does not fail
there: its scheduler admits requests while KV cache lasts (vLLM's and SGLang's block managers,
TensorRT-LLM's KV cache manager), so it runs the most sequences that fit and the others wait.
A setting that does not fit a cell is priced there at the most sequences it holds at that
context (`capacity.Capacity`, from the sweep's memory model, priced through the same engine
profile; `PlanTable.runs_at_of`); where it holds none, it scores 0. One approximation: the
setting chosen for the offered batch, where an engine holding fewer would use the schedule's
setting for that many.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from speedplan.plan.capacity import Capacity

OFF_KEY = ("none", 0, 1)  # (frame label, draft_len, verify_tokens) of plain decoding


class PlanTable:
    """tokens/s/GPU of every (label, setting) at every planned (batch, context) cell; NaN where
    that setting does not fit (`runs_at_of`: the batch each setting runs as at each cell)."""

    def __init__(self, frame: pd.DataFrame, weights: pd.Series):
        self.cells = weights.index
        self.w = weights.to_numpy()
        self.batches = np.array(sorted(set(weights.index.get_level_values(0))))
        self.cell_batch = np.searchsorted(self.batches, weights.index.get_level_values(0))
        self.runs_at_key: dict[tuple, np.ndarray] = {}  # set by with_drafter
        f = frame[frame["feasible"]]
        cell = {c: i for i, c in enumerate(self.cells)}
        self.rows: dict[tuple, np.ndarray] = {}  # NaN where infeasible or not planned
        for key, b, c, thr in zip(zip(f["mechanism"], f["draft_len"], f["verify_tokens"]), f["batch"], f["context"],
                                  f["tokens_per_s_per_gpu"].to_numpy(dtype=float)):
            i = cell.get((b, c))
            if i is None:
                continue
            # plain decoding: the "none" rows, or a mechanism's own D = 0 rows if a frame carries those
            key = OFF_KEY if key[0] == "none" or key[1] == 0 else (key[0], int(key[1]), int(key[2]))
            self.rows.setdefault(key, np.full(len(cell), np.nan))[i] = thr
        self.plain = self.rows.setdefault(OFF_KEY, np.full(len(cell), np.nan))  # NaN: an engine's rule holds none

    def with_drafter(self, label: str, zero: np.ndarray | None, capacity: Capacity, runs: bool = True) -> "PlanTable":
        """The table as a plan that loads `label`'s drafter sees it: D = 0 is `zero` (tokens/s/GPU
        of a D = 0 step in that launch where it is not plain decoding's: `zero_draft.ZeroDraft`;
        `runs`: whether the engine runs the drafter at D = 0), else plain decoding's, where some
        setting of that drafter fits (D = 0 does not unload it). Each setting that does not fit
        a cell runs there the most sequences it holds (`capacity`), priced at that many; D = 0
        holds what the launch's best-fitting setting holds. `runs_at_key`: how many, per setting."""
        out = copy.copy(self)
        loaded = np.zeros(len(self.cells), dtype=bool)
        for key, row in self.rows.items():
            if key[0] == label:
                loaded |= np.isfinite(row)
        batch = self.cells.get_level_values(0).to_numpy(dtype=float)
        context = self.cells.get_level_values(1).to_numpy(dtype=float)
        out.rows, out.runs_at_key = dict(self.rows), {}
        off = np.where(loaded, self.plain if zero is None else zero, np.nan)
        held_off = np.zeros(len(self.cells))
        short: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # key: (cells it does not fit, sequences it holds there)
        for key, row in [(k, r) for k, r in self.rows.items() if k[0] == label] + [(OFF_KEY, off)]:
            cells = np.flatnonzero(~np.isfinite(row))
            if key == OFF_KEY:
                held = held_off[cells]
            else:
                held = capacity.most_sequences(label, key[1], key[2], batch[cells], context[cells])
                held_off[cells] = np.maximum(held_off[cells], held)
            short[key] = (cells[held >= 1], held[held >= 1])
            out.rows[key] = row.copy()
            out.runs_at_key[key] = np.where(np.isfinite(row), batch, np.nan)
        spec = [k for k in short if k != OFF_KEY and len(short[k][0])]
        if spec:  # every setting's short cells priced in one call
            cells = np.concatenate([short[k][0] for k in spec])
            thr = capacity.throughput(label, np.concatenate([np.full(len(short[k][0]), k[1]) for k in spec]),
                                      np.concatenate([np.full(len(short[k][0]), k[2]) for k in spec]),
                                      np.concatenate([short[k][1] for k in spec]), context[cells])
            for k, part in zip(spec, np.split(thr, np.cumsum([len(short[k][0]) for k in spec])[:-1])):
                out.rows[k][short[k][0]] = part
        at, n = short[OFF_KEY]
        if len(at):
            out.rows[OFF_KEY][at] = capacity.plain_throughput(label, runs, n, context[at])
        for k, (at, n) in short.items():
            out.runs_at_key[k][at] = n
        return out

    def runs_at_of(self, key) -> np.ndarray:
        """Per cell: the batch `key` runs as there (its own where it fits; NaN where nothing does)."""
        own = self.cells.get_level_values(0).to_numpy(dtype=float)
        return self.runs_at_key.get(key, np.where(np.isfinite(self.rows[key]), own, np.nan))

    def score(self, key, norm: np.ndarray) -> np.ndarray:
        """S[B] = Σ_L w(B, L) · thr / norm (cells that fit nowhere count 0)."""
        return np.bincount(self.cell_batch, np.nan_to_num(self.rows[key]) / norm * self.w, minlength=len(self.batches))
