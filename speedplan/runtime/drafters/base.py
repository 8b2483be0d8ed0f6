"""The drafter interface: what a drafter is given each step, and what it returns.

A drafter proposes draft tokens for the *active* sequences of a batch. The runtime calls, per
batch of sequences ("wave"):

    drafter.start(prompts, hidden, rows)   once, after the target's prefill
    loop:
        draft = drafter.propose(request)   -> ChainDraft [b, D] or TreeDraft [b, N]
        ... target verifies, accepts, rolls back its KV ...
        drafter.accepted(rows, num_accepted, hidden)

Conventions shared with `speedplan.runtime.generate`:
- `request.tokens[i]` is everything sequence i has (prompt + generated). Its last token is
  *pending*: sampled but not yet in the target's KV cache; the target KV holds
  `len(tokens[i]) - 1` tokens. Drafts continue after the pending token.
- `request.hidden[i]` (only if `needs_hidden`) is the target's final-norm hidden state at the
  last KV position, i.e. of token `tokens[i][-2]` (what EAGLE/MTP heads consume together with
  the embedding of the pending token).
- `accepted(rows, num_accepted, hidden)`: `num_accepted[i]` drafts of sequence `rows[i]` were
  accepted; `hidden[i, :num_accepted[i] + 1]` are the target hidden states of the tokens just
  committed (the old pending token, then the accepted drafts, in order). A drafter with its
  own KV cache rolls it back to match here (or lazily on the next propose).
- Rows are cache rows (0..B-1) and stay fixed for a sequence for the whole wave; sequences
  that finish drop out of `rows`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from speedplan.runtime.accept import SamplingParams, probs_from_logits, sample


@dataclass
class DraftRequest:
    rows: Tensor  # [b] cache rows of the active sequences
    tokens: list[list[int]]  # per active sequence: prompt + generated; the last one is pending
    hidden: Tensor | None  # [b, hidden] target hidden state at the last KV position
    draft_len: int  # D for chains; tree drafters use their own shape
    sampling: SamplingParams
    generator: torch.Generator | None


@dataclass
class ChainDraft:
    tokens: Tensor  # [b, D] draft tokens (padding past num_valid is ignored)
    num_valid: Tensor  # [b] how many of the D tokens are real drafts
    p_draft: Tensor | None = None  # [b, D, V] draft distribution (after temperature/top-p); None = one-hot


@dataclass
class TreeDraft:
    """N draft nodes under the pending token (node 0). Node j+1 is tokens[:, j]; its parent
    is parents[:, j] in 0..j (node index, 0 = root), so parents come before children.
    ranks[:, j] is the node's 1-based rank among its siblings (the drafter's top-k order).
    Drafts are deterministic (one-hot p_draft), which the tree sampling rule relies on."""

    tokens: Tensor  # [b, N]
    parents: Tensor  # [b, N]
    ranks: Tensor  # [b, N]

    @property
    def nodes(self) -> int:
        return self.tokens.shape[1]


class Drafter:
    """Base class: override `propose`; `start` and `accepted` default to no-ops."""

    name = "base"
    needs_hidden = False  # set True to receive target hidden states
    is_tree = False

    def start(self, prompts: list[list[int]], hidden: Tensor | None, rows: Tensor) -> None:
        """After prefill. hidden [B, T, hidden]: target states of prompt[:-1] (padded), if needed."""

    def propose(self, request: DraftRequest) -> ChainDraft | TreeDraft:
        raise NotImplementedError

    def accepted(self, rows: Tensor, num_accepted: Tensor, hidden: Tensor | None) -> None:
        """After verification; see the module docstring."""

    def tree_shape(self) -> dict | None:
        """{"topk", "depth", "nodes"} for tree drafters (written to the trace), else None."""
        return None

    def draft_layers(self) -> int | None:
        """Decoder layers of the draft network (a draft model's depth), if it has one."""
        return None

    def draft_vocab_size(self) -> int | None:
        """Size of a reduced draft vocabulary (EAGLE-3 style), if the drafter has one."""
        return None


def draft_chain(draft_len: int, logits, advance, request: DraftRequest, token_ids: Tensor | None = None,
                vocab_size: int | None = None) -> tuple[Tensor, Tensor | None]:
    """`draft_len` tokens, each from the drafter's logits at the last one: `logits()` gives
    [b, Vd] for the current position, `advance(tok)` feeds token `tok` [b] one position on.
    A drafter with a reduced vocabulary (EAGLE-3 style) scores only its Vd tokens, whose ids
    are `token_ids` [Vd], and samples among them, as engines do; None: Vd is the whole vocabulary.
    Greedy takes the argmax; sampling draws from p_draft (after temperature and top-p) and
    returns those distributions over the whole vocabulary (`vocab_size`, 0 outside the draft
    vocabulary) [b, D, V] for the acceptance rule."""
    drafts, probs = [], []
    for i in range(draft_len):
        step_logits = logits()
        if request.sampling.greedy:
            tok = step_logits.argmax(-1)
        else:
            p_draft = probs_from_logits(step_logits, request.sampling)
            tok = sample(p_draft, request.generator)
            if token_ids is not None:
                p_draft = p_draft.new_zeros(p_draft.shape[0], vocab_size).index_copy_(1, token_ids, p_draft)
            probs.append(p_draft)
        if token_ids is not None:
            tok = token_ids[tok]
        drafts.append(tok)
        if i + 1 < draft_len:
            advance(tok)
    tokens = torch.stack(drafts, 1) if drafts else torch.zeros(len(request.rows), 0, dtype=torch.long)
    return tokens, torch.stack(probs, 1) if probs else None
