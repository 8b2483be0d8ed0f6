"""A drafter backed by a small causal LM with its own KV cache (the same tokenizer as the
target). It proposes chains (D sequential decode steps) and can score a tree frontier, so it
serves both the chain path and `TreeDrafter`. `truncated_target` builds the test fixture: the
target's first k layers plus its final norm and lm_head, sharing the target's weights.

Its KV cache mirrors the target's committed tokens. `start` prefills it with every prompt but
its pending last token, as the target's prefill does (serving engines prefill a draft model with
the request, not inside the first decode step; before 2026-12-01 16:20 this happened at the
first propose and was timed as drafting). At each propose it first feeds the tokens it has not
seen (ragged per row: the pending token and the ones accepted since), then drafts; afterwards
its length pointer is moved back to the committed prefix, so rejected drafts are forgotten the
same way the target forgets them.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from speedplan.runtime.transformer import Transformer
from speedplan.runtime.drafters.base import ChainDraft, DraftRequest, Drafter, draft_chain
from speedplan.runtime.drafters.tree import frontier_masks
from speedplan.runtime.generate import prefill


def truncated_target(target: Transformer, layers: int) -> Transformer:
    """A Transformer running the target's first `layers` blocks (weights shared, not copied)."""
    if not 1 <= layers <= target.cfg.layers:
        raise ValueError(f"layers must be in 1..{target.cfg.layers}")
    small = Transformer(target.cfg.truncated(layers), max_positions=target.rope_cos.shape[0])
    small.blocks = nn.ModuleList(list(target.blocks[:layers]))
    small.embed, small.norm = target.embed, target.norm
    small.lm_head_weight = target.lm_head_weight
    small.lm_head_packed = target.lm_head_packed
    return small.to(target.embed.device).eval()


class LMDrafter(Drafter):
    name = "lm"

    def __init__(self, model: Transformer, max_len: int = 4096):
        self.model, self.max_len = model, max_len
        self.cache = None

    def draft_layers(self) -> int:
        return self.model.cfg.layers

    @property
    def token_ids(self) -> Tensor | None:
        """Token ids of the draft model's logit columns (None: column j is token j)."""
        return self.model.draft_token_ids

    def start(self, prompts, hidden, rows) -> None:
        """Prefill the draft cache with each prompt but its last token, as the target's prefill does."""
        self.cache, _ = prefill(self.model, prompts, self.max_len, 0)

    def _catch_up(self, request: DraftRequest, keep_last: bool) -> Tensor:
        """Feed each row's unseen tokens (all but the pending one unless keep_last); returns
        final-norm hidden [b, hidden] of each row's last fed token."""
        rows = request.rows
        seen = self.cache.lengths[rows].tolist()
        upto = [len(t) - (0 if keep_last else 1) for t in request.tokens]
        chunks = [t[s:u] for t, s, u in zip(request.tokens, seen, upto)]
        width = max(1, max(len(c) for c in chunks))
        x = torch.zeros(len(chunks), width, dtype=torch.long, device=rows.device)
        for i, c in enumerate(chunks):
            x[i, : len(c)] = torch.tensor(c, dtype=torch.long)
        hidden = self.model(x, self.cache, rows)  # [b, W, hidden]; padding slots are stale-harmless
        counts = torch.tensor([len(c) for c in chunks], device=rows.device)
        self.cache.commit(rows, counts)
        return hidden[torch.arange(len(chunks)), (counts - 1).clamp_min(0)]

    def propose(self, request: DraftRequest) -> ChainDraft:
        rows, d = request.rows, request.draft_len
        committed = torch.tensor([len(t) - 1 for t in request.tokens], device=rows.device)
        h = self._catch_up(request, keep_last=True)  # [b, hidden] at the pending token
        state = {"h": h}

        def advance(tok: Tensor) -> None:
            state["h"] = self.model(tok[:, None], self.cache, rows)[:, 0]
            self.cache.commit(rows, torch.ones_like(tok))

        tokens, p_draft = draft_chain(d, lambda: self.model.draft_logits(state["h"]), advance, request,
                                      self.token_ids, self.model.cfg.vocab)  # logits [b, Vd]
        self.cache.set_lengths(rows, committed)  # forget the drafts (and the pending token)
        return ChainDraft(tokens, torch.full((len(rows),), d, device=rows.device), p_draft)

    def score_frontier(self, request: DraftRequest, tokens: Tensor, parents: Tensor, frontier: Tensor) -> Tensor:
        """Tree scoring: run the frontier after the committed prefix and the tree nodes run at
        earlier levels (its ancestors; not kept)."""
        if any(len(t) - 1 != s for t, s in zip(request.tokens, self.cache.lengths[request.rows].tolist())):
            self._catch_up(request, keep_last=False)
        anc, depth = frontier_masks(parents, frontier)
        h = self.model(tokens.gather(1, frontier), self.cache, request.rows, anc, depth, frontier)  # [b, F, hidden]
        return torch.log_softmax(self.model.draft_logits(h), -1)  # [b, F, Vd], columns `token_ids`
