"""EAGLE head drafter (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking
Feature Uncertainty", EAGLE-1 layout): one decoder layer that predicts the target's next
final-norm hidden state ("feature") from the current feature and the next token.

    x_j      = fc([embed(t_{j+1}) ; f_j])          # [b, T, 2H] -> [b, T, H]
    f^_{j+1} = Block(x_j)                          # one target-shaped decoder layer, RMSNorms kept
    logits   = lm_head(f^_{j+1})                   # the target's lm_head (frozen), feeding t_{j+2}

The head owns fc and the Block; the target's embedding and lm_head are shared, not copied.
Drafting D tokens autoregressively feeds the head its own predicted feature f^ with the token
it just drafted, so the head keeps its own one-layer KV cache of (feature, token) pairs.
The same head scores a top-k frontier for `TreeDrafter` (mechanism eagle-tree).

Pairs and the pending token: the head's cache holds pairs (f_j, t_{j+1}) for committed target
positions j. `pending` holds the target features whose pairs are not in the cache yet; their
tokens are always the *last* len(pending) tokens of the sequence (the pending token last).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speedplan.runtime.transformer import Block, KVCache, LlamaConfig, Transformer, linear, pack_weight
from speedplan.runtime.drafters.base import ChainDraft, DraftRequest, Drafter, draft_chain
from speedplan.runtime.drafters.tree import TreeDrafter, frontier_masks

WEIGHTS_DIR = Path(__file__).resolve().parents[2] / "data" / "drafters"  # package data
EAGLE_WEIGHTS = WEIGHTS_DIR / "eagle_smollm2.pt"


class EagleHead(nn.Module):
    """fc [H, 2H] and one Block of the target's shape (its two RMSNorms included)."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg.truncated(1)
        self.fc = nn.Parameter(torch.empty(cfg.hidden, 2 * cfg.hidden))
        self.block = Block(self.cfg)

    def init_from(self, target: Transformer, layer: int, out_scale: float = 1.0, embed_scale: float = 1.0) -> "EagleHead":
        """Start from target layer `layer` with its output projections (wo, w_down) scaled by
        `out_scale` (0 = the block starts as the identity), fc = [embed_scale * I ; I]."""
        eye = torch.eye(self.cfg.hidden)
        with torch.no_grad():
            self.fc.copy_(torch.cat([eye * embed_scale, eye], 1))
            self.block.load_state_dict(target.blocks[layer].state_dict())
            self.block.attn.wo.mul_(out_scale)
            self.block.mlp.w_down.mul_(out_scale)
        return self

    def inputs(self, embed: Tensor, feats: Tensor, next_tokens: Tensor, packed: Tensor | None = None) -> Tensor:
        """feats [b, T, H], next_tokens [b, T] -> block input [b, T, H]."""
        return linear(torch.cat([F.embedding(next_tokens, embed), feats], -1), self.fc, packed)


def masked_logits(hidden: Tensor, lm_head_rows: Tensor, vocab: Tensor, vocab_size: int,
                  packed: Tensor | None = None) -> Tensor:
    """[..., H] -> [..., V] logits scored on the draft vocabulary only (-inf elsewhere), so
    argmax, top-k and sampling return real token ids and never propose an unscored token."""
    scored = linear(hidden, lm_head_rows, packed).float()  # [..., Vr]
    if scored.shape[-1] == vocab_size:
        return scored
    full = torch.full((*hidden.shape[:-1], vocab_size), float("-inf"), device=hidden.device)
    full[..., vocab] = scored
    return full


def load_eagle_head(target: Transformer, path: str | Path = EAGLE_WEIGHTS) -> tuple[EagleHead, Tensor, dict]:
    """(head, draft vocab ids, provenance meta) from a file written by `training.eagle`."""
    from speedplan.runtime.io.weights import load_trained

    saved = load_trained(path, target, "EAGLE head", "eagle")
    head = EagleHead(target.cfg)
    head.load_state_dict({k: v.float() for k, v in saved["state"].items()})
    dev = target.embed.device
    return head.to(device=dev, dtype=target.embed.dtype).eval().requires_grad_(False), saved["vocab"].long().to(dev), saved["meta"]


class EagleDrafter(Drafter):
    """Chain drafter (`propose`) and frontier scorer (`score_frontier`) on an EagleHead."""

    name = "eagle"
    needs_hidden = True
    level1_in_one_pass = True  # False: a tree's pending pairs, then its root, in two passes (the same drafts)

    def __init__(self, target: Transformer, head: EagleHead, vocab: Tensor, grow: int = 256):
        self.target, self.head, self.vocab, self.grow = target, head, vocab, grow  # vocab: [Vr] draft ids
        self.lm_head_rows = target.lm_head[vocab].contiguous()  # [Vr, H] draft vocabulary rows
        whole = torch.arange(target.cfg.vocab, device=vocab.device)
        self.token_ids = None if torch.equal(vocab, whole) else vocab  # token ids of the logit columns
        self.packed = {"fc": pack_weight(head.fc), "lm_head": pack_weight(self.lm_head_rows)}
        for mod in (head.block.attn, head.block.mlp):
            for name in mod.packed:
                mod.packed[name] = pack_weight(getattr(mod, name))
        self.cache: KVCache | None = None
        self.pending: list[Tensor] = []  # per cache row: [p, H] features not yet in the cache
        self.tree_feats: Tensor | None = None  # [b, 1, H] input feature of the tree's root pair
        self.tree_out: Tensor | None = None  # [b, n, H] head outputs of the tree's nodes so far

    # ---- state ----------------------------------------------------------------------------------

    def draft_vocab_size(self) -> int:
        return len(self.vocab)
    def start(self, prompts: list[list[int]], hidden: Tensor | None, rows: Tensor) -> None:
        """hidden [B, T, H]: target features of prompt[:-1]. Prefill: every prompt pair but
        the last goes into the head's cache now; the last (with the pending token) stays."""
        batch = int(rows.max()) + 1
        self.cache = KVCache(self.head.cfg, batch, max(len(p) for p in prompts) + self.grow,
                             hidden.device, hidden.dtype)
        self.pending = [hidden.new_zeros(0, hidden.shape[-1]) for _ in range(batch)]
        for i, r in enumerate(rows.tolist()):
            self.pending[r] = hidden[i, : len(prompts[i]) - 1].clone()
        self._feed_pending(rows, prompts, keep_last=True)

    def accepted(self, rows: Tensor, num_accepted: Tensor, hidden: Tensor | None) -> None:
        """The old pending token and the accepted drafts are committed: their target features
        become pending pairs (tokens: the drafts, then the next pending token)."""
        for i, (r, n) in enumerate(zip(rows.tolist(), num_accepted.tolist())):
            self.pending[r] = torch.cat([self.pending[r], hidden[i, : n + 1]])

    def _ensure_room(self, rows: Tensor, extra: int) -> None:
        need = int(self.cache.lengths[rows].max()) + extra
        if need > self.cache.max_len:  # grow: copy the committed K/V into a larger cache
            old = self.cache
            self.cache = KVCache(self.head.cfg, old.batch, need + self.grow, old.k.device, old.k.dtype)
            self.cache.k[..., : old.max_len, :] = old.k
            self.cache.v[..., : old.max_len, :] = old.v
            self.cache.lengths.copy_(old.lengths)

    def _forward(self, feats: Tensor, tokens: Tensor, rows: Tensor, ancestors=None, depth=None, nodes=None) -> Tensor:
        """Head pass over pairs (feats [b, T, H], tokens [b, T]) after each row's committed
        pairs; writes their K/V past the committed length (not committed). -> [b, T, H]."""
        x = self.head.inputs(self.target.embed, feats, tokens, self.packed["fc"])
        step = Transformer._step_inputs(self.target, tokens, self.cache, rows, ancestors, depth, nodes)  # target's RoPE
        return self.head.block(x, 0, self.cache, step)

    def _feed_pending(self, rows: Tensor, seqs: list[list[int]], keep_last: bool,
                      commit_last: bool = True) -> tuple[Tensor, Tensor]:
        """Run each row's pending pairs (all, or all but the last when keep_last) and commit
        them (all but the last fed one when not commit_last: its K/V stays in the first slot
        past the committed pairs, where a tree keeps its root); seqs are the rows' token lists.
        Returns the head output at each row's last fed pair [b, H] and the pair counts [b]."""
        chunks = []
        for r, toks in zip(rows.tolist(), seqs):
            p = self.pending[r]
            n = len(p) - (1 if keep_last else 0)
            chunks.append((p[:n], toks[len(toks) - len(p): len(toks) - len(p) + n]))
            self.pending[r] = p[n:] if commit_last else p[max(n - 1, 0):]
        width = max(1, max(len(c[1]) for c in chunks))
        feats = self.target.embed.new_zeros(len(chunks), width, self.cfg_hidden)
        tokens = torch.zeros(len(chunks), width, dtype=torch.long, device=rows.device)
        for i, (f, t) in enumerate(chunks):
            feats[i, : len(t)], tokens[i, : len(t)] = f, torch.tensor(t, dtype=torch.long)
        counts = torch.tensor([len(c[1]) for c in chunks], device=rows.device)
        self._ensure_room(rows, width + 64)
        out = self._forward(feats, tokens, rows)  # [b, W, H]; padded pairs sit past the length: harmless
        self.cache.commit(rows, counts if commit_last else (counts - 1).clamp_min(0))
        return out[torch.arange(len(chunks)), (counts - 1).clamp_min(0)], counts

    @property
    def cfg_hidden(self) -> int:
        return self.head.cfg.hidden

    def _logits(self, feats: Tensor) -> Tensor:
        """[..., H] -> [..., Vd] fp32 logits over the draft vocabulary (columns: `token_ids`)."""
        return linear(feats, self.lm_head_rows, self.packed["lm_head"]).float()

    # ---- chain ----------------------------------------------------------------------------------
    def propose(self, request: DraftRequest) -> ChainDraft:
        rows, d = request.rows, request.draft_len
        feat, counts = self._feed_pending(rows, request.tokens, keep_last=False)  # [b, H]: f^ after the pending token
        committed = self.cache.lengths[rows].clone()
        self._ensure_room(rows, d + 1)
        state = {"feat": feat}

        def advance(tok: Tensor) -> None:
            state["feat"] = self._forward(state["feat"][:, None], tok[:, None], rows)[:, 0]  # own feature + token
            self.cache.commit(rows, torch.ones_like(tok))

        tokens, p_draft = draft_chain(d, lambda: self._logits(state["feat"]), advance, request,
                                      self.token_ids, self.target.cfg.vocab)  # logits [b, Vd]
        self.cache.set_lengths(rows, committed)  # drafted pairs were scratch: forget them
        valid = torch.where(counts > 0, d, 0)  # a 1-token prompt has no pair to draft from yet
        return ChainDraft(tokens, valid, p_draft)

    # ---- tree (FrontierScorer for TreeDrafter) --------------------------------------------------
    def score_frontier(self, request: DraftRequest, tokens: Tensor, parents: Tensor, frontier: Tensor) -> Tensor:
        """Node 0 is the pair (last target feature, pending token); node i > 0 is the pair
        (f^ of its parent, its token). Only the frontier runs, after the committed pairs and
        the tree nodes run at earlier levels (its ancestors; nothing committed). Returns
        [b, F, Vd] log-probabilities over the draft vocabulary (columns: `token_ids`)."""
        rows = request.rows
        b, n = tokens.shape
        h = self.cfg_hidden
        if n == 1 and self.level1_in_one_pass and all(len(self.pending[r]) for r in rows.tolist()):
            # a new tree, level 1 in one head pass (as the chain's first pass, and SGLang's draft
            # extend): the pending pairs with the root's last; all but the root's are committed,
            # and the root's K/V stays in slot committed + 0, node 0's slot
            root_in = torch.stack([self.pending[r][-1] for r in rows.tolist()])
            out, _ = self._feed_pending(rows, request.tokens, keep_last=False, commit_last=False)
            self.tree_feats, self.tree_out = root_in[:, None], out[:, None]  # node 0's input and output
            return torch.log_softmax(self._logits(out[:, None]), -1)  # [b, 1, Vd]
        if n == 1:  # a new tree with a row lacking pairs (a 1-token prompt): catch up, then the root
            self._feed_pending(rows, request.tokens, keep_last=True)
            root = torch.stack([self.pending[r][-1] if len(self.pending[r]) else
                                self.target.embed.new_zeros(self.cfg_hidden) for r in rows.tolist()])
            self.tree_feats = root[:, None]  # inputs of node 0
            self.tree_out = root.new_zeros(b, 1, self.cfg_hidden)
        if self.tree_out.shape[1] < n:  # head outputs per node id; nodes not run yet stay zero
            self.tree_out = torch.cat([self.tree_out, self.tree_out.new_zeros(b, n - self.tree_out.shape[1], h)], 1)
        parent_out = self.tree_out.gather(1, parents.gather(1, frontier).clamp_min(0)[:, :, None].expand(-1, -1, h))
        inputs = torch.where((frontier == 0)[:, :, None], self.tree_feats, parent_out)  # [b, F, H]
        anc, depth = frontier_masks(parents, frontier)
        self._ensure_room(rows, n + 1)
        out = self._forward(inputs, tokens.gather(1, frontier), rows, anc, depth, frontier)  # [b, F, H]
        self.tree_out.scatter_(1, frontier[:, :, None].expand(-1, -1, h), out)
        return torch.log_softmax(self._logits(out), -1)  # [b, F, Vd], columns `token_ids`


def eagle_drafter(target: Transformer, path: str | Path = EAGLE_WEIGHTS) -> EagleDrafter:
    head, vocab, _ = load_eagle_head(target, path)
    return EagleDrafter(target, head, vocab)


def eagle_tree_drafter(target: Transformer, topk: int = 4, depth: int = 4, nodes: int = 16,
                       path: str | Path = EAGLE_WEIGHTS) -> TreeDrafter:
    """EAGLE-2 style dynamic tree: top-k expansion scored by the EAGLE head."""
    drafter = TreeDrafter(eagle_drafter(target, path), topk, depth, nodes)
    drafter.name = "eagle-tree"
    return drafter
