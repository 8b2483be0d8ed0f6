"""Distil a draft-model student from SmolLM2: a subset of its layers, LoRA-tuned on the target's
own generations (CPU, minutes).

    python -m speedplan.runtime.training.draft_model --out speedplan/data/drafters/draft_smollm2.pt
    python -m speedplan.runtime.training.draft_model --survey      # untrained top-1 of candidate layer subsets
    python -m speedplan.runtime.training.draft_model --quick --out /tmp/draft_quick.pt   # seconds, pipeline check

Loss: forward KL from the target's next-token distribution to the student's, i.e. soft-label
cross-entropy (Hinton et al. 2015; DistillSpec, Zhou et al. 2024, finds forward KL on
target-generated text a good default), both over the draft vocabulary. Trained: rank-r LoRA
deltas of every kept layer's matrices, the kept layers' RMSNorms and the final norm; the
embedding and lm_head are the target's, frozen. Accuracy: held-out top-1 agreement with the
target's greedy next token, over generated positions only.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from speedplan.runtime.training import data as td
from speedplan.runtime.drafters.draft_model import DRAFT_WEIGHTS, LORA_MATRICES
from speedplan.runtime.drafters.eagle import masked_logits
from speedplan.runtime.transformer import rms_norm


class StudentTrainer(nn.Module):
    """Trainable view of the student: frozen target blocks + LoRA + norms."""

    def __init__(self, target, layers: list[int], rank: int, alpha: float):
        super().__init__()
        self.target, self.layers, self.rank, self.scale = target, layers, rank, alpha / rank
        self.cfg = target.cfg
        self.lora = nn.ParameterDict()
        self.norms = nn.ParameterDict()
        gen = torch.Generator().manual_seed(0)
        for j, layer in enumerate(layers):
            w = td.block_weights(target.blocks[layer])
            for name in LORA_MATRICES:
                out_f, in_f = w[name].shape
                self.lora[f"{j}_{name}_A"] = nn.Parameter(torch.randn(rank, in_f, generator=gen) / in_f ** 0.5)
                self.lora[f"{j}_{name}_B"] = nn.Parameter(torch.zeros(out_f, rank))
            for name in ("attn_norm", "mlp_norm"):
                self.norms[f"{j}_{name}"] = nn.Parameter(w[name].detach().clone())
        self.norms["norm"] = nn.Parameter(target.norm.detach().clone())

    def hidden(self, tokens):
        """tokens [b, T] -> final-norm hidden [b, T, H] (position j predicts token j+1)."""
        cos, sin = td.rope_tables(self.target, tokens.shape[1])
        x = torch.nn.functional.embedding(tokens, self.target.embed)
        for j, layer in enumerate(self.layers):
            w = dict(td.block_weights(self.target.blocks[layer]))
            for name in LORA_MATRICES:
                w[name] = w[name] + self.lora[f"{j}_{name}_B"] @ self.lora[f"{j}_{name}_A"] * self.scale
            w["attn_norm"], w["mlp_norm"] = self.norms[f"{j}_attn_norm"], self.norms[f"{j}_mlp_norm"]
            x = td.block_train_forward(self.cfg, w, x, cos, sin)
        return rms_norm(x, self.norms["norm"], self.cfg.norm_eps)

    def export(self) -> dict:
        lora = {}
        for j in range(len(self.layers)):
            for name in LORA_MATRICES:
                lora[f"{j}.{name}.A"] = self.lora[f"{j}_{name}_A"].detach().to(torch.float16)
                lora[f"{j}.{name}.B"] = self.lora[f"{j}_{name}_B"].detach().to(torch.float16)
        norms = {k.replace("_", ".", 1) if k != "norm" else k: v.detach().to(torch.float16) for k, v in self.norms.items()}
        return {"layers": self.layers, "rank": self.rank, "alpha": self.scale * self.rank, "lora": lora, "norms": norms}


def evaluate(student: StudentTrainer, rows, vocab, corpus, batch: int = 8) -> dict:
    """Held-out top-1 agreement with the target's greedy next token on generated positions."""
    hits = total = 0
    with torch.no_grad():
        for start in range(0, len(corpus.tokens), batch):
            idx = list(range(start, min(start + batch, len(corpus.tokens))))
            tokens, _, valid, nxt = td.pad_batch(corpus, idx)
            mask = valid & (nxt >= 0)
            for i in range(len(idx)):
                mask[i, : corpus.prompt_lens[idx[i]] - 1] = False
            pred = masked_logits(student.hidden(tokens), rows, vocab, student.cfg.vocab).argmax(-1)
            hits += int(((pred == nxt) & mask).sum())
            total += int(mask.sum())
    return {"top1": hits / max(total, 1), "positions": total}


def candidate_subsets(n_layers: int, sizes=(4, 6, 8)) -> dict[str, list[int]]:
    out = {}
    for k in sizes:
        out[f"first{k}"] = list(range(k))
        out[f"spread{k}"] = [round(i * (n_layers - 1) / (k - 1)) for i in range(k)]
        out[f"first{k - 1}+last"] = list(range(k - 1)) + [n_layers - 1]
    return out


def survey(args) -> None:
    """Untrained top-1 of candidate subsets: which layers to keep, before spending training time."""
    target, tokenizer = td.load_target(args.gguf)
    corpus = td.load_or_build(args.data, target, tokenizer, td.training_texts()[: args.prompts], args.new_tokens,
                              args.samples, args.temperature, args.gen_batch)
    train_set, heldout = corpus.split(args.heldout_every)
    vocab = td.draft_vocab(train_set, args.draft_vocab, target.cfg.vocab, tokenizer.eos_ids)
    rows = target.lm_head[vocab].contiguous()
    for name, layers in candidate_subsets(target.cfg.layers).items():
        res = evaluate(StudentTrainer(target, layers, 1, 1.0), rows, vocab, heldout)
        print(f"{name:14s} layers={layers}  heldout_top1={res['top1']:.3f}", flush=True)


def train(args, target=None, tokenizer=None) -> dict:
    """Train and save; `target`/`tokenizer` skip loading the GGUF again (tests)."""
    target, tokenizer, data_meta, train_set, heldout, vocab, rows, t0 = td.prepare_training(args, target, tokenizer)
    layers = [int(x) for x in args.layers.split(",")]
    student = StudentTrainer(target, layers, args.rank, args.alpha)
    before = evaluate(student, rows, vocab, heldout)

    def step_loss(tokens, hidden, valid):
        with torch.no_grad():
            p_target = torch.softmax(hidden[valid] @ rows.T, -1)  # [n, Vr] target's next-token distribution
        logp_student = torch.log_softmax(student.hidden(tokens)[valid] @ rows.T, -1)
        ce = -(p_target * logp_student).sum(-1).mean()
        kl = ce + (p_target * p_target.clamp_min(1e-30).log()).sum(-1).mean()  # CE - entropy(p_target)
        return ce, kl.item(), f"kl {kl:.4f}"

    log, steps, t_train = td.run_steps(args, train_set, student.parameters(), step_loss, clip=1.0)
    after = evaluate(student, rows, vocab, heldout)
    k = max(1, len(log) // 10)
    return td.finish("draft_model", args, target, data_meta, train_set, heldout, vocab, steps, before, after, t_train, t0,
                     student.export(), ("layers", "steps", "train_tokens", "kl_first", "kl_last", "heldout_top1_before",
                                        "heldout_top1", "train_s"),
                     layers=layers, rank=args.rank, alpha=args.alpha,
                     kl_first=round(sum(log[:k]) / k, 4), kl_last=round(sum(log[-k:]) / k, 4))


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m speedplan.runtime.training.draft_model", description=__doc__.split("\n")[0])
    td.add_corpus_args(ap, str(DRAFT_WEIGHTS))
    ap.add_argument("--layers", default="0,1,2,3,4,29", help="target layers the student keeps, in order")
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--survey", action="store_true", help="print untrained top-1 of candidate layer subsets, then exit")
    ap.add_argument("--quick", action="store_true", help="tiny budget: 6 prompts x 24 tokens, 10 steps, 2 layers")
    args = ap.parse_args(argv)
    if args.quick:
        args.prompts, args.samples, args.new_tokens, args.heldout_every, args.layers = 6, 1, 24, 3, "0,29"
        args.epochs, args.max_steps, args.batch, args.draft_vocab, args.data, args.rank = 6, 10, 2, 2048, None, 8
    return args


def main(argv=None) -> None:
    args = parse(argv)
    survey(args) if args.survey else train(args)


if __name__ == "__main__":
    main()
