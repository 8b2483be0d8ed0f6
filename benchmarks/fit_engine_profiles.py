"""Fit the shipped engine profiles (vllm, sglang, trtllm) to ../shared/cases/engine_measurements.csv
and write them to speedplan/specs/presets/engines/.

    python benchmarks/fit_engine_profiles.py            # fit, print every row's residual, write
    python benchmarks/fit_engine_profiles.py --check    # fit and compare with the shipped files

Each engine starts from the documented values below (every one with its source); the terms the
usable rows identify are then fitted by `speedplan.engine.calibrate`, the same code as
`speedplan calibrate`. Which rows were usable, and why the others were not, is printed and
stored in the profile's "fit" section.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_cases import CASES, as_pairs, load_cases  # noqa: E402

from speedplan.engine.calibrate import calibrate  # noqa: E402
from speedplan.engine.profile import PRESET_DIR, EngineProfile, Term  # noqa: E402
from speedplan.engine.run_calibration import render_calibration  # noqa: E402

A = "assumption: "
LAUNCH = (5.0, "document: CUDA's host-side cost of one kernel launch, 4-6 µs as commonly measured; assumption "
               "of 5 µs (not measured by speedplan)")
GRAPHS = "document: decode steps replay CUDA graphs, so no per-layer kernel is launched from the host"
PLAIN_SAMPLE = (1.0, A + "one read-and-write pass over the logits (greedy or a fused sampling kernel)")
SPEC_SAMPLE = (3.0, A + "rejection sampling reads the verify logits about three times (target probabilities, "
                        "accept test, bonus/recovery sample)")

# Terms every GPU engine here shares, unless it says otherwise.
COMMON = {
    "launch_us": LAUNCH,
    "layer_launches": (0.0, GRAPHS),
    "sample_passes_plain": PLAIN_SAMPLE,
    "sample_passes_spec": SPEC_SAMPLE,
    "host_token_us": (2.0, A + "positions and KV slots of one verified token"),
    "overlap_plain": (1.0, A + "plain steps are scheduled while the GPU runs the previous one"),
}

BASES = {
    "vllm": {
        "engine": "vLLM",
        "version": "V1 engine, 2025 releases (CUDA graphs; EAGLE/EAGLE-3 drafting loop outside the target's graph; "
                   "scheduling overlapped for plain steps, not at the speculative sync point)",
        "description": "vLLM serving with --speculative-config. Terms fitted to the vLLM rows of shared/cases that "
                       "state an acceptance length and a speedup, and their sources' plain-decoding runs (see fit); "
                       "the others from documents or stated assumptions. Newer releases that schedule speculative steps asynchronously overlap more: "
                       "fit your own with speedplan calibrate.",
        "free": ["host_step_us", "draft_step_launches", "overlap_plain"],
        "terms": {
            "host_step_us": (900.0, A + "scheduler, input preparation and output processing of one step"),
            "host_seq_us": (38.0, "document: openfabric-systems/simllm PR #204 profiled vLLM 0.27.1's engine loop: the "
                                  "scheduler costs 12.7 µs per running request and is 18.6% of the loop, KV allocation, "
                                  "output processing and output updates another 37.4%: 12.7 × 56.0 / 18.6 = 38 µs"),
            "overlap_spec": (0.0, A + "the accepted counts are needed before the next step is scheduled"),
            "draft_step_launches": (50.0, A + "kernels around each draft forward launched from the host"),
        },
    },
    "sglang": {
        "engine": "SGLang",
        "version": "0.4-0.5 releases with spec v1 workers (EAGLE/EAGLE3 drafting in CUDA graphs; overlap scheduler "
                   "off for speculative steps)",
        "description": "SGLang serving with --speculative-algorithm EAGLE/EAGLE3. Terms fitted to the SGLang rows of "
                       "shared/cases that state GPU, TP, acceptance length and a speedup (see fit). Spec v2 "
                       "(SGLANG_ENABLE_SPEC_V2, default in 0.5.23) overlaps speculative steps too: fit your own "
                       "with speedplan calibrate.",
        "free": None,
        "terms": {
            "host_step_us": (900.0, A + "scheduler, batch preparation and output processing of one step"),
            "host_seq_us": (30.0, A + "per running request: batch tensors, stop checks, detokenisation"),
            "overlap_plain": (1.0, "document: SGLang's overlap scheduler (on by default) runs the next batch's "
                                   "scheduling while the GPU computes (server_args --disable-overlap-schedule)"),
            "overlap_spec": (0.0, "document: SGLang before spec v2 disables the overlap scheduler for EAGLE/EAGLE3 "
                                  "(server_args: 'Overlap scheduler is disabled because of using eagle3 or standalone "
                                  "speculative decoding'; /work/research/engines.md section D)"),
            "draft_step_launches": (10.0, A + "the EAGLE draft loop replays a CUDA graph; a few host launches per step"),
        },
    },
    "trtllm": {
        "engine": "TensorRT-LLM",
        "version": "PyTorch backend, 2025-2026 (one-model Eagle3 and MTP inside the target's CUDA graph; overlap "
                   "scheduler on for them)",
        "description": "trtllm-serve with speculative_config. No row of shared/cases states what a fit needs for "
                       "TensorRT-LLM (see fit), so every term is a document or a stated assumption: calibrate it "
                       "with your own measurements.",
        "free": None,
        "terms": {
            "host_step_us": (400.0, A + "the C++ batch manager and Python executor of one step"),
            "host_seq_us": (10.0, A + "per running request"),
            "host_token_us": (1.0, A + "per verified token"),
            "overlap_plain": (1.0, "document: TorchLlmArgs.disable_overlap_scheduler defaults to False"),
            "overlap_spec": (1.0, "document: support_overlap_scheduler() is true for one-model Eagle3 and MTP "
                                  "(_torch/speculative/interface.py; /work/research/engines.md section D); NGram "
                                  "runs without overlap"),
            "draft_step_launches": (0.0, "document: one-model drafting runs inside the target's CUDA graph"),
        },
    },
}


def base_profile(name: str) -> EngineProfile:
    b = BASES[name]
    terms = {**COMMON, **b["terms"]}
    return EngineProfile(name, b["engine"], b["version"], b["description"],
                         {t: Term(v, src) for t, (v, src) in terms.items()})


def fit(name: str, cases) -> tuple[EngineProfile, str]:
    base = base_profile(name)
    rows = [c for c in cases if c.engine == name]
    if not rows:
        return base, f"{name}: no usable rows; every term documented or assumed\n"
    result = calibrate(base, as_pairs(rows), BASES[name]["free"], name=name,
                       described=f"{CASES.name}: {len({c.source for c in rows})} sources")
    result.profile.fit["sources"] = sorted({c.source for c in rows})
    speedups = [(r["measured"], r["predicted"]) for r in result.rows if r["quantity"] == "speedup"]
    agree = sum((m >= 1) == (p >= 1) for m, p in speedups)
    result.profile.fit["speculate_or_not_agrees"] = f"{agree} of {len(speedups)} speedup rows"
    return result.profile, (render_calibration(result)
                            + f"\n  speculate-or-not (speedup >= 1) agrees at {agree} of {len(speedups)} speedup rows\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped profiles instead of writing")
    args = ap.parse_args(argv)
    cases, skipped = load_cases()
    print(f"{len(cases)} usable rows of {CASES}; {len(skipped)} left out:")
    reasons: dict[str, int] = {}
    for _, _, why in skipped:
        reasons[why] = reasons.get(why, 0) + 1
    for why, n in sorted(reasons.items(), key=lambda x: -x[1]):
        print(f"  {n:3d}  {why}")
    status = 0
    for name in BASES:
        profile, text = fit(name, cases)
        print(text)
        data = profile.to_json()
        data["fit_left_out"] = reasons
        path = PRESET_DIR / f"{name}.json"
        if args.check:
            shipped = json.loads(path.read_text())
            same = {t: round(v["value"], 6) for t, v in shipped["terms"].items()} == \
                   {t: round(v["value"], 6) for t, v in data["terms"].items()}
            print(f"{path.name}: {'matches the fit' if same else 'DIFFERS from the fit'}")
            status |= not same
        else:
            path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
            print(f"wrote {path}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
