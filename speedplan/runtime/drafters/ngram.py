"""Prompt-lookup (n-gram) drafting: find the latest earlier occurrence of the sequence's last
n tokens (n from n_max down to n_min) and propose the tokens that followed it. No model."""

from __future__ import annotations

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view

from speedplan.runtime.drafters.base import ChainDraft, DraftRequest, Drafter


def lookup(tokens: np.ndarray, draft_len: int, n_min: int, n_max: int) -> np.ndarray:
    """Up to `draft_len` tokens that followed the most recent earlier match of the longest
    suffix n-gram (n_max..n_min); empty if none matches."""
    length = len(tokens)
    for n in range(min(n_max, length - 1), n_min - 1, -1):
        suffix = tokens[length - n:]
        windows = sliding_window_view(tokens[: length - 1], n)  # starts 0..length-1-n
        hits = np.flatnonzero((windows == suffix).all(axis=1))
        if hits.size:
            start = int(hits[-1]) + n
            return tokens[start : start + draft_len]
    return tokens[:0]


class NgramDrafter(Drafter):
    name = "ngram"

    def __init__(self, n_min: int = 1, n_max: int = 3):
        if not (1 <= n_min <= n_max):
            raise ValueError(f"need 1 <= n_min <= n_max, got {n_min}, {n_max}")
        self.n_min, self.n_max = n_min, n_max

    def propose(self, request: DraftRequest) -> ChainDraft:
        d = request.draft_len
        drafts = torch.zeros(len(request.tokens), d, dtype=torch.long)
        valid = torch.zeros(len(request.tokens), dtype=torch.long)
        for i, toks in enumerate(request.tokens):
            found = lookup(np.asarray(toks, dtype=np.int64), d, self.n_min, self.n_max)
            drafts[i, : len(found)] = torch.from_numpy(found)
            valid[i] = len(found)
        device = request.rows.device
        return ChainDraft(drafts.to(device), valid.to(device), None)
