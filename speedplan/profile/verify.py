"""Verification attention derived from what is measured.

AIConfigurator measures decode attention at q_len = 1 and causal prefills at q_len = kv_len;
verification runs q = 1 + D new tokens (or N tree nodes) against L keys (the new ones
included), which neither table holds. The model, exact at both ends:

    T(b, q, L) = T_dec(b, L) + w(q, L) · max(T_ctx(b, L) − T_dec(b, L), 0)
    w(q, L)    = (W(q) − W(1)) / (W(L) − W(1)),   W(q) = q·L − q(q − 1)/2

W(q) is the causal work of the last q rows of an L × L attention, so w runs from 0 at q = 1
(the decode call) to 1 at q = L (the prefill call): the extra q − 1 rows cost what they cost
inside a measured prefill of the same length and batch. Without a prefill table the answer
is T_once, "the KV cache is read once per (sequence, KV head) and padded rows cost compute":
the speed of light of the verify call (`attention_sol_us`, G·q rows padded to 128-row tiles)
over the decode call's own utilisation, which equals T_dec while G·q fits the decode call's
tile. T_once is also the model's lower bound.

Worked number (H100, 32 heads / 8 KV heads / d 128, b = 8, q = 4, L = 8192; vLLM 0.24 tables):
T_dec = 100.5 µs, T_ctx ≈ 7,200 µs, w = (32,762 − 8,192) / (33,558,528 − 8,192) = 7.3e-4,
so T = 100.5 + 7.3e-4 · 7,100 = 105.7 µs.

Uncertainty (docs/profiles.md, "Uncertainty"; on the three systems' tables): for q = 2..16
this model sits 2-22% above T_once (median 1.02 at q = 2, 1.19-1.22 at q = 16). The upper bound
is AIConfigurator's own rule, T_dec(b · q, L) (every draft token read as its own sequence),
1.26× T_once at q = 2 and 4.4× at q = 16. Nothing measured separates these; a q_len sweep
would (docs/profiles.md lists the shapes, already in speedplan.profile.grid's `gpu` grid).
"""

from __future__ import annotations

import numpy as np


def causal_work(q, seq_len) -> np.ndarray:
    """Query-key pairs of the last q rows of a causal L × L attention: q·L − q(q − 1)/2."""
    q, seq_len = np.asarray(q, dtype=float), np.asarray(seq_len, dtype=float)
    return q * seq_len - q * (q - 1) / 2


def bridge_weight(q, seq_len) -> np.ndarray:
    """w(q, L): 0 at q = 1, 1 at q = L (q is clipped to [1, L])."""
    seq_len = np.asarray(seq_len, dtype=float)
    q = np.clip(np.asarray(q, dtype=float), 1, seq_len)
    span = causal_work(seq_len, seq_len) - causal_work(1, seq_len)
    return np.where(span > 0, (causal_work(q, seq_len) - causal_work(1, seq_len)) / np.where(span > 0, span, 1), 1.0)


def verify_latency_us(t_decode_us, t_prefill_us, t_once_us, q, seq_len) -> np.ndarray:
    """The model above; where `t_prefill_us` is NaN (no prefill table), T_once."""
    increment = bridge_weight(q, seq_len) * np.maximum(np.asarray(t_prefill_us) - t_decode_us, 0.0)
    return np.where(np.isfinite(increment), t_decode_us + increment, t_once_us)
