"""What an engine plan is scored on: tokens/s/GPU of every (mechanism, setting) at every planned
(batch, context) cell, as a launch with or without a drafter sees it.

A launch that loads a drafter keeps its weights and cache at every batch size, D = 0 included,
so a (batch, context) that fits plain decoding alone may not fit it. An engine does not fail
there: its scheduler admits requests while KV cache lasts (vLLM's and SGLang's block managers,
TensorRT-LLM's KV cache manager), so it runs the most sequences that fit and the others wait.
Such a cell is priced at the tokens/s/GPU of the largest planned batch below it, at the same
context, where the launch fits (`PlanTable.runs_at`), with the setting planned there; where no
smaller batch fits either, it scores 0.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

OFF_KEY = ("none", 0, 1)  # (frame label, draft_len, verify_tokens) of plain decoding


class PlanTable:
    """tokens/s/GPU of every (label, setting) at every planned (batch, context) cell; NaN where
    that setting does not fit. `runs_at`: the batch each cell runs at (its own; a smaller one
    where a loaded drafter leaves room for fewer sequences; NaN where nothing fits)."""

    def __init__(self, frame: pd.DataFrame, weights: pd.Series):
        self.cells = weights.index
        self.w = weights.to_numpy()
        self.batches = np.array(sorted(set(weights.index.get_level_values(0))))
        self.cell_batch = np.searchsorted(self.batches, weights.index.get_level_values(0))
        self.runs_at = weights.index.get_level_values(0).to_numpy(dtype=float)
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
        self.plain = self.rows[OFF_KEY]

    def with_drafter(self, label: str, zero: np.ndarray | None = None) -> "PlanTable":
        """The table as a plan that loads `label`'s drafter sees it: a cell fits where some
        setting of that drafter fits; D = 0 there is `zero` (tokens/s/GPU of a D = 0 step in
        that launch where it is not plain decoding's: `zero_draft.ZeroDraft`), else plain
        decoding's. A cell that does not fit runs as the largest fitting batch below it (module
        docstring)."""
        out = copy.copy(self)
        loaded = np.zeros(len(self.cells), dtype=bool)
        for key, row in self.rows.items():
            if key[0] == label:
                loaded |= np.isfinite(row)
        source = self._largest_below(loaded)
        fill = lambda row: np.where(loaded, row, np.where(source >= 0, row[np.maximum(source, 0)], np.nan))
        off = np.where(loaded, self.plain if zero is None else zero, np.nan)
        out.rows = {key: fill(row) if key[0] == label else row for key, row in self.rows.items()}
        out.rows[OFF_KEY] = fill(off)
        batch = self.cells.get_level_values(0).to_numpy(dtype=float)
        out.runs_at = np.where(loaded, batch, np.where(source >= 0, batch[np.maximum(source, 0)], np.nan))
        return out

    def _largest_below(self, fits: np.ndarray) -> np.ndarray:
        """Per cell: the index of the cell of the largest smaller batch at the same context where
        `fits`, or -1."""
        batch = self.cells.get_level_values(0).to_numpy(dtype=float)
        context = self.cells.get_level_values(1).to_numpy(dtype=float)
        out = np.full(len(self.cells), -1)
        for i in np.flatnonzero(~fits):
            below = np.flatnonzero(fits & (context == context[i]) & (batch < batch[i]))
            if len(below):
                out[i] = below[np.argmax(batch[below])]
        return out

    def score(self, key, norm: np.ndarray) -> np.ndarray:
        """S[B] = Σ_L w(B, L) · thr / norm (cells that fit nowhere count 0)."""
        return np.bincount(self.cell_batch, np.nan_to_num(self.rows[key]) / norm * self.w, minlength=len(self.batches))
