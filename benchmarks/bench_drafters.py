"""Measured AL and speedup of every drafter (ngram, draft-model, eagle, eagle-tree) at D = 1..7,
B = 1, greedy, on evaluation prompts of `speedplan.runtime.prompts` (never seen in training).

Speedup = decode seconds of plain decoding / decode seconds of speculative decoding of the
same prompts in the same process (greedy, so both emit the same tokens; prefill excluded).
AL = tokens emitted per sequence-step, bonus token included. For eagle-tree, D is the tree
depth; the tree has `--tree-topk` children per frontier node and `--tree-nodes-per-depth` x D
nodes verified per step.

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_drafters.py --out /tmp/drafters_cpu.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import torch

from speedplan.runtime.training import data as td
from speedplan.runtime.drafters.draft_model import draft_model_drafter
from speedplan.runtime.drafters.eagle import eagle_drafter, eagle_tree_drafter
from speedplan.runtime.drafters.ngram import NgramDrafter
from speedplan.runtime.generate import generate
from speedplan.runtime.io.prompts import stdlib_prompts


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=8, help="evaluation prompts used (spread over the half)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--draft-lens", default="1,2,3,4,5,6,7")
    ap.add_argument("--mechanisms", default="ngram,draft-model,eagle,eagle-tree")
    ap.add_argument("--tree-topk", type=int, default=3)
    ap.add_argument("--tree-nodes-per-depth", type=int, default=2)
    ap.add_argument("--out", default=None, help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    target, tokenizer = td.load_target()
    target.pack_cpu_weights()
    evaluation = stdlib_prompts("evaluation")
    picked = evaluation[:: max(1, len(evaluation) // args.prompts)][: args.prompts]
    prompts = [td.chat_ids(tokenizer, p.text) for p in picked]
    run = dict(batch=1, max_new_tokens=args.max_new_tokens, eos_ids=tokenizer.eos_ids)
    generate(target, prompts[:1], None, 0, **{**run, "max_new_tokens": 8})  # warm-up
    plain = generate(target, prompts, None, 0, **run)
    print(f"plain: {plain.generated_tokens} tokens, {plain.tokens_per_s:.1f} tok/s, "
          f"{1e3 * plain.decode_s / max(1, len(plain.steps)):.1f} ms/step", flush=True)
    makers = {
        "ngram": lambda d: NgramDrafter(1, 3),
        "draft-model": lambda d: draft_model_drafter(target),
        "eagle": lambda d: eagle_drafter(target),
        "eagle-tree": lambda d: eagle_tree_drafter(target, topk=args.tree_topk, depth=d,
                                                   nodes=args.tree_nodes_per_depth * d),
    }
    rows = []
    print(f"{'mechanism':12s} {'D':>2s} {'AL':>6s} {'speedup':>8s} {'tok/s':>7s} {'draft ms':>9s} {'verify ms':>9s} {'same':>5s}")
    for mech in args.mechanisms.split(","):
        for d in (int(x) for x in args.draft_lens.split(",")):
            res = generate(target, prompts, makers[mech](d), d, **run)
            steps = max(1, len(res.steps))
            row = {"mechanism": mech, "draft_len": d, "batch": 1, "acceptance_length": round(res.acceptance_length, 3),
                   "speedup": round(plain.decode_s / res.decode_s, 3), "tokens_per_s": round(res.tokens_per_s, 2),
                   "t_draft_ms": round(1e3 * sum(s.t_draft_s for s in res.steps) / steps, 2),
                   "t_verify_ms": round(1e3 * sum(s.t_verify_s for s in res.steps) / steps, 2),
                   "same_tokens_as_plain": res.token_ids == plain.token_ids}
            if mech == "eagle-tree":
                row["tree"] = {"topk": args.tree_topk, "depth": d, "nodes": args.tree_nodes_per_depth * d}
            rows.append(row)
            print(f"{mech:12s} {d:2d} {row['acceptance_length']:6.2f} {row['speedup']:8.2f} {row['tokens_per_s']:7.1f} "
                  f"{row['t_draft_ms']:9.1f} {row['t_verify_ms']:9.1f} {str(row['same_tokens_as_plain']):>5s}", flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "prompts": [p.id for p in picked], "max_new_tokens": args.max_new_tokens, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "plain_tokens_per_s": round(plain.tokens_per_s, 2),
            "plain_ms_per_step": round(1e3 * plain.decode_s / max(1, len(plain.steps)), 2), "rows": rows}, indent=1))


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"wall {time.perf_counter() - t0:.0f} s")
