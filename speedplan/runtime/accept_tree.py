"""Verification of a draft tree (TreeDraft) against the target's logits at every node.

Greedy: from the root (the pending token) follow the child whose token equals the target's
argmax at the current node; stop where no child matches and emit the argmax there.

Sampling: tree drafts are deterministic top-k children, i.e. one-hot draft distributions,
and then multi-candidate speculative sampling (SpecInfer, Miao et al. 2024; EAGLE-2) reduces
to asking, child by child in rank order, "is the target's sample this token?": accept child x
with probability r(x) / sum(r), where r starts as p_target at the node; on rejection set
r(x) = 0 (the residual norm(max(0, r - onehot(x))) of the one-hot rule) and try the next
child. If every child is rejected, emit a sample from norm(r). Each emitted token is exactly
p_target-distributed, as with the chain rule in verify.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

from speedplan.runtime.drafters.base import TreeDraft
from speedplan.runtime.accept import SamplingParams, Verdict, probs_from_logits


def _children(parents: list[int], ranks: list[int]) -> dict[int, list[int]]:
    """node (0 = root) -> its children as input indices (1..N), in rank order."""
    kids: dict[int, list[int]] = {}
    for j, (p, r) in enumerate(zip(parents, ranks)):
        kids.setdefault(p, []).append((r, j + 1))
    return {p: [j for _, j in sorted(c)] for p, c in kids.items()}


def verify_tree(logits: Tensor, draft: TreeDraft, sampling: SamplingParams,
                generator: torch.Generator | None) -> tuple[Verdict, Tensor, Tensor]:
    """logits [b, 1+N, V] at [root, nodes...]. Returns the verdict, the accepted path as input
    indices [b, P] (P = deepest path, padded with 0) and the path's sibling ranks [b, P]."""
    b = logits.shape[0]
    tokens = [[-1] + row for row in draft.tokens.tolist()]  # input index -> token
    parents, ranks = draft.parents.tolist(), draft.ranks.tolist()
    greedy_tok = logits.argmax(-1).tolist() if sampling.greedy else None
    p_target = None if sampling.greedy else probs_from_logits(logits, sampling)  # [b, 1+N, V]
    paths, path_ranks, next_tokens = [], [], []
    for i in range(b):
        kids = _children(parents[i], ranks[i])
        node, path = 0, []
        while True:
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
        path_ranks.append([ranks[i][k - 1] for k in path])
    width = max(1, max(len(p) for p in paths))
    path_t = torch.zeros(b, width, dtype=torch.long, device=logits.device)
    rank_t = torch.zeros(b, width, dtype=torch.long, device=logits.device)
    for i, (p, r) in enumerate(zip(paths, path_ranks)):
        path_t[i, : len(p)] = torch.tensor(p, dtype=torch.long)
        rank_t[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    num_accepted = torch.tensor([len(p) for p in paths], device=logits.device)
    return Verdict(num_accepted, torch.tensor(next_tokens, device=logits.device)), path_t, rank_t
