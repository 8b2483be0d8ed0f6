"""Top-k tree expansion (EAGLE-2 style dynamic tree), for any drafter that can score a frontier.

A `FrontierScorer` is given the tree built so far (node 0 is the pending token) and a set of
frontier nodes, and returns the draft model's log-probabilities of the next token after each
frontier node. A frontier node's parent was in the previous frontier, so a scorer runs only
the frontier through its model (1 token per sequence at level 1, `topk` at each later level,
as engines and speedplan's pricing do), with the K/V of node j in slot committed + j.
`TreeDrafter` grows the tree `depth` times: every frontier node gets its
`topk` best children, each scored by its path's cumulative log-probability, and the `topk`
best new nodes form the next frontier. Finally the `nodes` best nodes by cumulative score are
kept (a child never outscores its parent, so the kept set is a tree) and verified in one
target pass with the tree mask.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from speedplan.runtime.drafters.base import DraftRequest, Drafter, TreeDraft
from speedplan.runtime.options import tree_capacity


class FrontierScorer(Protocol):
    needs_hidden: bool

    def score_frontier(self, request: DraftRequest, tokens: Tensor, parents: Tensor, frontier: Tensor) -> Tensor:
        """tokens/parents [b, n] (node 0 = pending token, parent -1); frontier [b, F] node ids.
        Returns [b, F, Vd] log-probabilities of the token after each frontier node, over the
        scorer's vocabulary: token ids `token_ids` [Vd] if it has that attribute and it is not
        None (a reduced draft vocabulary), else the whole vocabulary."""


def tree_masks(parents: Tensor) -> tuple[Tensor, Tensor]:
    """parents [b, n] with parents[:, 0] = -1 and parents[:, i] < i ->
    ancestors [b, n, n] bool (node i sees j iff j is i or an ancestor of i), depth [b, n].
    Walks every node up to the root at once: one tensor step per tree level, not per node."""
    b, n = parents.shape
    device = parents.device
    nodes = torch.arange(n, device=device).expand(b, n)
    rows = torch.arange(b, device=device)[:, None].expand(b, n)
    anc = torch.zeros(b, n, n, dtype=torch.bool, device=device)
    anc[rows, nodes, nodes] = True
    depth = torch.zeros(b, n, dtype=torch.long, device=device)
    up = parents.clone()  # each node's ancestor at the current distance (-1 past the root)
    while bool((up >= 0).any()):
        live = up >= 0
        anc[rows[live], nodes[live], up[live]] = True
        depth += live
        up = torch.where(live, parents.gather(1, up.clamp_min(0)), up)
    return anc, depth


def frontier_masks(parents: Tensor, frontier: Tensor) -> tuple[Tensor, Tensor]:
    """The tree masks' rows of the frontier nodes [b, F]: ancestors [b, F, n], depth [b, F]
    (for `Transformer.forward(..., tree_nodes=frontier)`)."""
    anc, depth = tree_masks(parents)
    return anc.gather(1, frontier[:, :, None].expand(-1, -1, anc.shape[2])), depth.gather(1, frontier)


class TreeDrafter(Drafter):
    name = "tree"
    is_tree = True

    def __init__(self, scorer: FrontierScorer, topk: int = 4, depth: int = 4, nodes: int = 16):
        if topk < 1 or depth < 1 or nodes < 1:
            raise ValueError("tree topk, depth and nodes must be >= 1")
        self.scorer, self.topk, self.depth = scorer, topk, depth
        self.nodes = min(nodes, tree_capacity(topk, depth))  # `speedplan run` notes the cap (RunOptions.tree_note)
        self.needs_hidden = getattr(scorer, "needs_hidden", False)

    def tree_shape(self) -> dict:
        return {"topk": self.topk, "depth": self.depth, "nodes": self.nodes}

    def draft_layers(self) -> int | None:
        return self.scorer.draft_layers() if hasattr(self.scorer, "draft_layers") else None

    def draft_vocab_size(self) -> int | None:
        return self.scorer.draft_vocab_size() if hasattr(self.scorer, "draft_vocab_size") else None

    def start(self, prompts, hidden, rows) -> None:
        if hasattr(self.scorer, "start"):
            self.scorer.start(prompts, hidden, rows)

    def accepted(self, rows, num_accepted, hidden) -> None:
        if hasattr(self.scorer, "accepted"):
            self.scorer.accepted(rows, num_accepted, hidden)

    def propose(self, request: DraftRequest) -> TreeDraft:
        device = request.rows.device
        b = len(request.tokens)
        tokens = torch.tensor([[t[-1]] for t in request.tokens], device=device)  # [b, 1] root
        parents = torch.full((b, 1), -1, dtype=torch.long, device=device)
        ranks = torch.zeros(b, 1, dtype=torch.long, device=device)
        scores = torch.zeros(b, 1, device=device)  # cumulative log-prob of each node's path
        frontier = torch.zeros(b, 1, dtype=torch.long, device=device)
        for _ in range(self.depth):
            logp = self.scorer.score_frontier(request, tokens, parents, frontier)  # [b, F, Vd]
            top = logp.topk(self.topk, dim=-1)  # [b, F, k]
            ids = getattr(self.scorer, "token_ids", None)  # a reduced draft vocabulary's token ids
            children = top.indices if ids is None else ids[top.indices]
            f = frontier.shape[1]
            cand = scores.gather(1, frontier)[:, :, None] + top.values  # [b, F, k]
            first_new = tokens.shape[1]
            tokens = torch.cat([tokens, children.reshape(b, -1)], 1)
            parents = torch.cat([parents, frontier[:, :, None].expand(b, f, self.topk).reshape(b, -1)], 1)
            ranks = torch.cat([ranks, torch.arange(1, self.topk + 1, device=device).repeat(f)[None].expand(b, -1)], 1)
            scores = torch.cat([scores, cand.reshape(b, -1)], 1)
            frontier = first_new + cand.reshape(b, -1).topk(min(self.topk, f * self.topk), dim=-1).indices
        return self._prune(tokens, parents, ranks, scores)

    def _prune(self, tokens, parents, ranks, scores) -> TreeDraft:
        """Keep the `nodes` best non-root nodes (ties: shallower first), in creation order."""
        b, n = tokens.shape
        order_key = scores[:, 1:] - 1e-6 * torch.arange(1, n, device=tokens.device)  # earlier wins ties
        keep = order_key.topk(self.nodes, dim=-1).indices.sort(-1).values + 1  # [b, N] old ids
        new_id = torch.full((b, n), -1, dtype=torch.long, device=tokens.device)
        new_id[:, 0] = 0
        new_id.scatter_(1, keep, torch.arange(1, self.nodes + 1, device=tokens.device).expand(b, -1))
        new_parents = new_id.gather(1, parents.gather(1, keep))
        if bool((new_parents < 0).any()):
            raise RuntimeError("tree pruning dropped a parent of a kept node")
        return TreeDraft(tokens.gather(1, keep), new_parents, ranks.gather(1, keep))
