"""Train the EAGLE head on the target's own generations (CPU, minutes).

    python -m speedplan.runtime.training.eagle --out speedplan/data/drafters/eagle_smollm2.pt
    python -m speedplan.runtime.training.eagle --quick --out /tmp/eagle_quick.pt   # seconds, pipeline check

Loss (EAGLE-1, Li et al. 2024, §4.2): SmoothL1 regression of the head's output to the
target's next feature, plus 0.1 x cross-entropy of the head's token distribution against the
target's (both through the target's lm_head on the draft vocabulary). Inputs are the target's
features with uniform noise (EAGLE's robustness trick for drafting from its own features).
Accuracy: held-out top-1 agreement of the head's next-next token with the target's greedy
token, teacher-forced (EAGLE's "acc" at depth 1), over generated positions only.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from speedplan.runtime.training import data as td
from speedplan.runtime.drafters.eagle import EAGLE_WEIGHTS, EagleHead, masked_logits


def head_outputs(head: EagleHead, embed, tokens, hidden, cos, sin, noise: float = 0.0, gen=None):
    """Teacher-forced head pass: pairs (hidden[:, j], tokens[:, j+1]) -> f^ [b, T-1, H]."""
    feats = hidden[:, :-1]
    if noise > 0:
        feats = feats + (torch.rand(feats.shape, generator=gen) - 0.5) * noise
    x = head.inputs(embed, feats, tokens[:, 1:])
    return td.block_train_forward(head.cfg, td.block_weights(head.block), x, cos[:, :-1], sin[:, :-1])


def evaluate(head, target, rows, vocab, corpus, batch: int = 16) -> dict:
    """Held-out: top-1 agreement with the target's greedy token on generated positions."""
    hits = total = 0
    loss_sum = 0.0
    with torch.no_grad():
        for start in range(0, len(corpus.tokens), batch):
            idx = list(range(start, min(start + batch, len(corpus.tokens))))
            tokens, hidden, valid, nxt = td.pad_batch(corpus, idx)
            cos, sin = td.rope_tables(target, tokens.shape[1])
            out = head_outputs(head, target.embed, tokens, hidden, cos, sin)  # [b, T-1, H] predicts t_{j+2}
            want = nxt[:, 1:]  # target's greedy token after position j+1
            mask = valid[:, 1:] & (want >= 0)
            for i in range(len(idx)):  # generated positions only
                mask[i, : corpus.prompt_lens[idx[i]] - 1] = False
            pred = masked_logits(out, rows, vocab, target.cfg.vocab).argmax(-1)
            hits += int(((pred == want) & mask).sum())
            total += int(mask.sum())
            loss_sum += float(F.smooth_l1_loss(out[mask], hidden[:, 1:][mask], reduction="sum")) if mask.any() else 0.0
    return {"top1": hits / max(total, 1), "positions": total, "feature_l1": loss_sum / max(total, 1) / target.cfg.hidden}


def train(args, target=None, tokenizer=None) -> dict:
    """Train and save; `target`/`tokenizer` skip loading the GGUF again (tests)."""
    target, tokenizer, data_meta, train_set, heldout, vocab, rows, t0 = td.prepare_training(args, target, tokenizer)
    head = EagleHead(target.cfg).init_from(target, args.init_layer, args.init_out_scale, args.init_embed_scale)
    head.requires_grad_(True)
    gen = torch.Generator().manual_seed(args.seed)
    before = evaluate(head, target, rows, vocab, heldout)

    def step_loss(tokens, hidden, valid):
        cos, sin = td.rope_tables(target, tokens.shape[1])
        out = head_outputs(head, target.embed, tokens, hidden, cos, sin, args.noise, gen)  # [b, T-1, H]
        mask = valid[:, 1:]
        pred, goal = out[mask], hidden[:, 1:][mask]  # [n, H]
        v_loss = F.smooth_l1_loss(pred, goal)
        p_target = torch.softmax(goal @ rows.T, -1)  # target's next-token distribution (draft vocab)
        p_loss = -(p_target * torch.log_softmax(pred @ rows.T, -1)).sum(-1).mean()
        return v_loss + args.p_weight * p_loss, (v_loss.item(), p_loss.item()), \
            f"v_loss {v_loss:.4f}  p_loss {p_loss:.4f}"

    log, steps, t_train = td.run_steps(args, train_set, head.parameters(), step_loss, clip=0.5)
    head.requires_grad_(False)
    after = evaluate(head, target, rows, vocab, heldout)
    k = max(1, len(log) // 10)
    return td.finish("eagle", args, target, data_meta, train_set, heldout, vocab, steps, before, after, t_train, t0,
                     {"state": {k: v.to(torch.float16) for k, v in head.state_dict().items()}},
                     ("steps", "train_tokens", "loss_first", "loss_last", "heldout_top1_before", "heldout_top1", "train_s"),
                     init_layer=args.init_layer, init_out_scale=args.init_out_scale,
                     init_embed_scale=args.init_embed_scale, noise=args.noise, p_weight=args.p_weight,
                     loss_first=[round(sum(x) / k, 4) for x in zip(*log[:k])],
                     loss_last=[round(sum(x) / k, 4) for x in zip(*log[-k:])])


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m speedplan.runtime.training.eagle", description=__doc__.split("\n")[0])
    td.add_corpus_args(ap, str(EAGLE_WEIGHTS))
    ap.add_argument("--init-layer", type=int, default=-1, help="target layer the head starts from")
    ap.add_argument("--init-out-scale", type=float, default=1.0, help="scale of the copied layer's wo, w_down")
    ap.add_argument("--init-embed-scale", type=float, default=1.0, help="fc's initial weight on the token embedding")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--noise", type=float, default=0.2, help="width of uniform input-feature noise")
    ap.add_argument("--p-weight", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny budget: 6 prompts x 24 tokens, 12 steps")
    args = ap.parse_args(argv)
    if args.quick:
        args.prompts, args.samples, args.new_tokens, args.heldout_every = 6, 1, 24, 3
        args.epochs, args.max_steps, args.batch, args.draft_vocab, args.data = 6, 12, 2, 2048, None
    return args


def main(argv=None) -> None:
    torch.set_num_threads(max(1, torch.get_num_threads()))
    train(parse(argv))


if __name__ == "__main__":
    main()
