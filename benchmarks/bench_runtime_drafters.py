"""AL and speedup of every available drafter at D = 1..7 on the evaluation prompts (greedy).

For each mechanism and D, runs the runtime on the same evaluation-half stdlib prompts as a
plain-decoding baseline and reports AL, decode tokens/s, speedup and whether the text is
identical to plain decoding. The baseline runs before and after the sweep (both are printed;
the speedup uses their mean) so that drift from other jobs on the machine shows. Mechanisms whose module or
trained weights are missing are reported as unavailable, not skipped silently.

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_runtime_drafters.py --prompts 8 --max-new-tokens 64
"""

from __future__ import annotations

import argparse
import json
import os

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", default="smollm2")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--draft-lens", default="1,2,3,4,5,6,7")
    ap.add_argument("--mechanisms", default="ngram,draft-model,eagle,eagle-tree")
    ap.add_argument("--out", default=None, help="also write the rows as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)

    from speedplan.errors import SpeedplanInputError
    from speedplan.runtime.api import DrafterOptions, encode_prompts, load_target, make_drafter
    from speedplan.runtime.generate import generate
    from speedplan.runtime.io.prompts import stdlib_prompts

    target = load_target(args.weights)
    texts = [p.text for p in stdlib_prompts("evaluation", limit=args.prompts)]
    ids = encode_prompts(target.tokenizer, texts, chat=True)
    common = dict(batch=args.batch, max_new_tokens=args.max_new_tokens, eos_ids=target.tokenizer.eos_ids)
    plain = generate(target.model, ids, None, 0, **common)
    rows = [{"mechanism": "none", "D": 0, "AL": 1.0, "tokens_per_s": round(plain.tokens_per_s, 2), "when": "before"}]
    print(json.dumps(rows[0]), flush=True)
    for mech in args.mechanisms.split(","):
        for d in [int(x) for x in args.draft_lens.split(",")]:
            options = DrafterOptions(tree_depth=d, tree_nodes=max(d, 2 * d + 2))
            try:
                drafter = make_drafter(mech, target.model, options)
            except SpeedplanInputError as e:
                rows.append({"mechanism": mech, "unavailable": str(e)})
                print(json.dumps(rows[-1]), flush=True)
                break
            res = generate(target.model, ids, drafter, d, **common)
            rows.append({"mechanism": mech, "D": d, "AL": round(res.acceptance_length, 3),
                         "tokens_per_s": round(res.tokens_per_s, 2),
                         "identical": res.token_ids == plain.token_ids,
                         "t_draft_share": round(sum(s.t_draft_s for s in res.steps) / res.decode_s, 3)})
            print(json.dumps(rows[-1]), flush=True)
    again = generate(target.model, ids, None, 0, **common)
    rows.append({"mechanism": "none", "D": 0, "AL": 1.0, "tokens_per_s": round(again.tokens_per_s, 2), "when": "after"})
    print(json.dumps(rows[-1]), flush=True)
    base = (plain.tokens_per_s + again.tokens_per_s) / 2
    for row in rows:
        if "tokens_per_s" in row and row["mechanism"] != "none":
            row["speedup"] = round(row["tokens_per_s"] / base, 3)
            print(f"{row['mechanism']:>12} D={row['D']}  AL {row['AL']:.3f}  {row['tokens_per_s']:6.2f} tok/s  "
                  f"speedup {row['speedup']:.2f}x  identical={row['identical']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"weights": args.weights, "prompts": args.prompts, "max_new_tokens": args.max_new_tokens,
                       "batch": args.batch, "threads": torch.get_num_threads(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
