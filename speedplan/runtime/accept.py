"""Verification of draft tokens against the target: greedy, and exact speculative sampling.

Rule (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding",
Algorithm 1; Chen et al. 2023): for draft positions i = 1..D in order, accept draft token x_i
with probability min(1, p_target(x_i) / p_draft(x_i)). At the first rejection, emit one token
sampled from the residual norm(max(0, p_target - p_draft)) at that position and stop. If all
D drafts are accepted, emit a bonus token sampled from p_target at position D+1. Every
emitted token is then distributed exactly as plain sampling from p_target.

Both distributions are the *adjusted* ones: temperature and top-p are applied identically to
draft and target logits by `probs_from_logits` before the rule is used.

What counts: `num_accepted` is drafts accepted (0..D, the histogram the trace records); the
tokens emitted per step are num_accepted + 1 (the acceptance length AL includes the bonus or
correction token). Worked example, one step, D=2: p_target(x_1)=0.6, p_draft(x_1)=0.8 -> accept
with 0.75; p_target(x_2)=0.3, p_draft(x_2)=0.1 -> accept with 1. If both are accepted the step
emits x_1, x_2 and a bonus from p_target at position 3: 3 tokens, num_accepted = 2.

Deterministic drafters (n-gram lookup, top-k tree expansion) have a one-hot p_draft; pass
`p_draft=None`. Then the rule is: accept x_i with probability p_target(x_i), else sample from
p_target with x_i removed, renormalised.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 means greedy (argmax); top_p in (0, 1] keeps the smallest nucleus."""

    temperature: float = 0.0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not (self.temperature >= 0.0):
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def probs_from_logits(logits: Tensor, sampling: SamplingParams) -> Tensor:
    """[..., V] logits -> [..., V] probabilities after temperature and top-p."""
    probs = torch.softmax(logits.float() / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        cum = sorted_p.cumsum(-1)
        drop = cum - sorted_p >= sampling.top_p  # tokens wholly outside the nucleus
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """[b, V] probabilities -> [b] token ids."""
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def residual(p_target: Tensor, p_draft: Tensor) -> Tensor:
    """norm(max(0, p_target - p_draft)) over the last dim; where it is all zero (p_draft
    equals p_target, so rejection had probability 0) fall back to p_target."""
    r = (p_target - p_draft).clamp_min(0.0)
    total = r.sum(-1, keepdim=True)
    return torch.where(total > 0, r / total.clamp_min(1e-30), p_target)


@dataclass
class Verdict:
    num_accepted: Tensor  # [b] drafts accepted, 0..D
    next_token: Tensor  # [b] bonus (all accepted) or correction token


def verify_greedy(target_logits: Tensor, draft: Tensor, num_valid: Tensor) -> Verdict:
    """Accept the longest prefix of `draft` [b, D] equal to the target's argmax.
    target_logits [b, 1+D, V]: position i predicts the token after input i."""
    target_tok = target_logits.argmax(-1)  # [b, 1+D]
    d = draft.shape[1]
    valid = torch.arange(d, device=draft.device)[None, :] < num_valid[:, None]
    match = (draft == target_tok[:, :d]) & valid  # [b, D]
    num_accepted = match.long().cumprod(-1).sum(-1)  # [b]
    return Verdict(num_accepted, target_tok.gather(1, num_accepted[:, None])[:, 0])


def verify_sampling(p_target: Tensor, draft: Tensor, num_valid: Tensor, p_draft: Tensor | None,
                    generator: torch.Generator | None) -> Verdict:
    """Speculative sampling (module docstring). p_target [b, 1+D, V]; draft [b, D];
    p_draft [b, D, V] or None for a deterministic (one-hot) drafter; num_valid [b] <= D."""
    b, d = draft.shape
    pt_draft = p_target[:, :d].gather(-1, draft[:, :, None])[..., 0]  # [b, D] p_target(x_i)
    if p_draft is None:
        pd_draft = torch.ones_like(pt_draft)
    else:
        pd_draft = p_draft.gather(-1, draft[:, :, None])[..., 0]  # [b, D] p_draft(x_i)
    u = torch.rand(b, d, generator=generator, device=draft.device)
    ok = u * pd_draft < pt_draft  # u < p_target / p_draft without dividing by zero
    valid = torch.arange(d, device=draft.device)[None, :] < num_valid[:, None]
    num_accepted = (ok & valid).long().cumprod(-1).sum(-1)  # [b]
    rows = torch.arange(b, device=draft.device)
    p_at = p_target[rows, num_accepted]  # [b, V] target distribution where we stop
    rejected = num_accepted < num_valid  # stopped on a rejection, not past the last draft
    if bool(rejected.any()):
        pos = num_accepted.clamp_max(d - 1)
        if p_draft is None:
            q_at = torch.zeros_like(p_at).scatter_(-1, draft[rows, pos][:, None], 1.0)
        else:
            q_at = p_draft[rows, pos]
        p_at = torch.where(rejected[:, None], residual(p_at, q_at), p_at)
    return Verdict(num_accepted, sample(p_at, generator))
