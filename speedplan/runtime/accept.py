"""Accepting drafts: the target's verdict on a chain (greedy, and exact speculative sampling)
and on a tree (`verify_tree`).

Chains.

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

Trees. Verification of a draft tree (TreeDraft) against the target's logits at every node.

Greedy: from the root (the pending token) follow the child whose token equals the target's
argmax at the current node; stop where no child matches and emit the argmax there.

Sampling: tree drafts are deterministic top-k children, i.e. one-hot draft distributions,
and then multi-candidate speculative sampling (SpecInfer, Miao et al. 2024; EAGLE-2) reduces
to asking, child by child in rank order, "is the target's sample this token?": accept child x
with probability r(x) / sum(r), where r starts as p_target at the node; on rejection set
r(x) = 0 (the residual norm(max(0, r - onehot(x))) of the one-hot rule) and try the next
child. If every child is rejected, emit a sample from norm(r). Each emitted token is exactly
p_target-distributed, as with the chain rule above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from speedplan.runtime.drafters.base import TreeDraft


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


# ---- trees ----------------------------------------------------------------------------------
def _children(parents: list[int], ranks: list[int]) -> dict[int, list[int]]:
    """node (0 = root) -> its children as input indices (1..N), in rank order."""
    kids: dict[int, list[int]] = {}
    for j, (p, r) in enumerate(zip(parents, ranks)):
        kids.setdefault(p, []).append((r, j + 1))
    return {p: [j for _, j in sorted(c)] for p, c in kids.items()}


def verify_tree(logits: Tensor, draft: TreeDraft, sampling: SamplingParams,
                generator: torch.Generator | None) -> tuple[Verdict, Tensor, Tensor, list[list[list[int]]]]:
    """logits [b, 1+N, V] at [root, nodes...]. Returns the verdict, the accepted path as input
    indices [b, P] (P = deepest path, padded with 0), the path's sibling ranks [b, P] and, per
    sequence, the sibling ranks offered at each node of the path that has children (root
    first): the chances the acceptance rule had, which a per-rank fit needs (a pruned tree
    does not offer every rank at every depth)."""
    b = logits.shape[0]
    tokens = [[-1] + row for row in draft.tokens.tolist()]  # input index -> token
    parents, ranks = draft.parents.tolist(), draft.ranks.tolist()
    greedy_tok = logits.argmax(-1).tolist() if sampling.greedy else None
    p_target = None if sampling.greedy else probs_from_logits(logits, sampling)  # [b, 1+N, V]
    paths, path_ranks, next_tokens, offered = [], [], [], []
    for i in range(b):
        kids = _children(parents[i], ranks[i])
        node, path, chances = 0, [], []
        while True:
            if kids.get(node):
                chances.append(sorted(ranks[i][k - 1] for k in kids[node]))
            if greedy_tok is not None:
                want = greedy_tok[i][node]
                match = next((k for k in kids.get(node, []) if tokens[i][k] == want), None)
                if match is None:
                    next_tokens.append(want)
                    break
            else:
                r = p_target[i, node].clone()
                match = None
                for k in kids.get(node, []):
                    x = tokens[i][k]
                    if float(torch.rand(1, generator=generator, device=r.device)) * float(r.sum()) < float(r[x]):
                        match = k
                        break
                    r[x] = 0.0
                if match is None:
                    next_tokens.append(int(torch.multinomial(r / r.sum(), 1, generator=generator)))
                    break
            path.append(match)
            node = match
        paths.append(path)
        offered.append(chances)
        path_ranks.append([ranks[i][k - 1] for k in path])
    width = max(1, max(len(p) for p in paths))
    path_t = torch.zeros(b, width, dtype=torch.long, device=logits.device)
    rank_t = torch.zeros(b, width, dtype=torch.long, device=logits.device)
    for i, (p, r) in enumerate(zip(paths, path_ranks)):
        path_t[i, : len(p)] = torch.tensor(p, dtype=torch.long)
        rank_t[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    num_accepted = torch.tensor([len(p) for p in paths], device=logits.device)
    return Verdict(num_accepted, torch.tensor(next_tokens, device=logits.device)), path_t, rank_t, offered
