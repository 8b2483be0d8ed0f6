"""Fit the shipped engine profiles (vllm, sglang, trtllm) to ../shared/cases/engine_measurements.csv
and write them to speedplan/specs/presets/engines/.

    python benchmarks/fit_engine_profiles.py            # fit, print every row's residual, write
    python benchmarks/fit_engine_profiles.py --check    # fit and compare with the shipped files
    python benchmarks/fit_engine_profiles.py --assume-gpu H200   # the fits if the GPU-less sources ran on an H200
    python benchmarks/fit_engine_profiles.py --by-source   # each source predicted by a fit to the others

Each engine starts from the documented values of engine_bases.json (every one with its source); the terms the
usable rows identify are then fitted by `speedplan.engine.calibrate`, the same code as
`speedplan calibrate`. Which rows were usable, and why the others were not, is printed and
stored in the profile's "fit" section.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_cases import ASSUMED, CASES, GPUS, HELD_OUT, as_pairs, load_cases  # noqa: E402

from speedplan.engine.calibrate import calibrate, predict, price  # noqa: E402
from speedplan.engine.profile import PRESET_DIR, EngineProfile, Term  # noqa: E402
from speedplan.engine.memory_rule import memory_rule  # noqa: E402
from speedplan.engine.run_calibration import render_calibration  # noqa: E402

# The documented starting values, each [value, source]: engine_bases.json.
BASES_FILE = Path(__file__).resolve().parent / "engine_bases.json"
_DATA = json.loads(BASES_FILE.read_text())
COMMON = _DATA["common"]
BASES = _DATA["engines"]


def base_profile(name: str) -> EngineProfile:
    b = BASES[name]
    terms = {**COMMON, **b["terms"]}
    return EngineProfile(name, b["engine"], b["version"], b["description"],
                         {t: Term(v, src) for t, (v, src) in terms.items()},
                         memory=memory_rule(b.get("memory"), f"{BASES_FILE.name} {name}"))


def fit(name: str, cases) -> tuple[EngineProfile, str]:
    base = base_profile(name)
    rows = [c for c in cases if c.engine == name]
    if not rows:
        return base, f"{name}: no usable rows; every term documented or assumed\n"
    sources = sorted({c.source.split(" (")[0] for c in rows})
    assumed = sum(bool(c.assumed) for c in rows)
    described = (f"{CASES.name}: {'; '.join(sources)}"
                 + (f"; GPU or TP assumed for {assumed} of {len(rows)} rows" if assumed else ""))
    result = calibrate(base, as_pairs(rows), BASES[name]["free"], name=name, described=described)
    result.profile.fit["sources"] = sorted({c.source for c in rows})
    speedups = [(r["measured"], r["predicted"]) for r in result.rows if r["quantity"] == "speedup"]
    agree = sum((m >= 1) == (p >= 1) for m, p in speedups)
    result.profile.fit["speculate_or_not_agrees"] = f"{agree} of {len(speedups)} speedup rows"
    return result.profile, (render_calibration(result)
                            + f"\n  speculate-or-not (speedup >= 1) agrees at {agree} of {len(speedups)} speedup rows\n")


# The fit's optimum moves in the sixth significant digit from one CPU to another (the Intel Xeon of
# 2026-12-03 refitted sglang.json's host_step_us as 4256.942976 µs where the AMD EPYC that wrote it
# had 4256.942981 µs: floating-point order in the BLAS), so --check compares each fitted term to a
# relative 1e-5, far below what a term's value means, instead of to six decimals.
TERM_RTOL = 1e-5
# A held-out error comes from a refit without its row, started at the base values; where the rows leave
# the objective several minima, that refit's stopping point moves further: on the Zen 4 EPYC of
# 2026-12-07 sglang.json's rows 7 and 8 had leave-one-out errors 0.00581338 and 0.0861238 where the
# Zen 3 EPYC that wrote them had 0.00581242 and 0.0861300 (1.7e-4 and 7e-5 apart, relative), with
# every term within TERM_RTOL. --check compares held-out errors, diagnostics of the fit and not
# part of the profile's pricing, to a relative 1e-3 (0.1% of the error).
HELD_OUT_RTOL = 1e-3
HELD_OUT_FIELDS = ("loo_error", "loo_median_error", "loo_max_error")


def differences(shipped, fitted, where: str = "") -> list[str]:
    """Where a shipped profile's JSON differs from what the fit writes now: every field, its sources, fit rows,
    residuals and held-out notes as well as its terms (a stale source text had passed a check of the values alone),
    numbers within TERM_RTOL (held-out errors within HELD_OUT_RTOL), the "created" stamps left out."""
    if isinstance(shipped, dict) and isinstance(fitted, dict):
        keys = (shipped.keys() | fitted.keys()) - {"created"}
        return [d for k in sorted(keys) for d in (differences(shipped.get(k), fitted.get(k), f"{where}.{k}")
                                                  if k in shipped and k in fitted else [f"{where}.{k}: only in one"])]
    if isinstance(shipped, list) and isinstance(fitted, list):
        if len(shipped) != len(fitted):
            return [f"{where}: {len(shipped)} items, the fit writes {len(fitted)}"]
        return [d for i, (a, b) in enumerate(zip(shipped, fitted)) for d in differences(a, b, f"{where}[{i}]")]
    numbers = (int, float)
    if isinstance(shipped, numbers) and isinstance(fitted, numbers) and not isinstance(shipped, bool):
        rtol = HELD_OUT_RTOL if where.rsplit(".", 1)[-1] in HELD_OUT_FIELDS else TERM_RTOL
        return [] if math.isclose(shipped, fitted, rel_tol=rtol, abs_tol=1e-9) else [f"{where}: {shipped} -> {fitted}"]
    if shipped == fitted:
        return []
    a, b = str(shipped), str(fitted)
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))  # where they part
    start = max(at - 20, 0)
    return [f"{where}: ...{a[start:at + 40]!r} -> ...{b[start:at + 40]!r}"]


# Shipped profiles derived from a fitted one: name -> (the fitted profile, {term: value}, the terms' source,
# version, description). vLLM schedules speculative steps asynchronously by default since v0.14 (PR #31998,
# January 2026; 0.33.0: vllm/config/vllm.py, async_scheduling None -> True; with the V1 model runner not for
# CPU ngram, pipeline parallelism or disable_padded_drafter_batch), which the fitted rows (April-May 2025) predate.
DERIVED = {
    "vllm-async": ("vllm", {"overlap_spec": 1.0},
                   "document: vLLM 0.33.0 schedules the next step while the GPU runs this one with speculation too "
                   "(vllm/config/vllm.py: async_scheduling unset becomes True; under its default Model Runner V2 for "
                   "every method it runs (n-gram, EAGLE/EAGLE-3/MTP, draft models), under the V1 runner for "
                   "EAGLE/MTP, ngram_gpu and draft models, not CPU ngram; PR #31998, v0.14); taken as hiding a "
                   "speculative step's host work as a plain step's (overlap_plain); not fitted: no row of shared/cases "
                   "ran it",
                   "V1 engine, v0.14 and later (0.33.0 checked): async scheduling with speculation",
                   "The vllm profile (its fitted terms, fitted to 2025 rows without async scheduling) with a speculative "
                   "step's host work hidden behind the GPU as a plain step's, as vLLM's default async scheduling does "
                   "since v0.14: an assumption no row of shared/cases tests; calibrate on your own runs."),
}


def derived_profile(name: str, fitted: EngineProfile, cases) -> EngineProfile:
    """Shipped profile `name` of DERIVED, from its fitted base profile; its `fit` says how it prices
    the base's fitted rows (`cases`) once its terms are set (no leave-one-out: nothing is refitted)."""
    base, values, source, version, description = DERIVED[name]
    profile = fitted.with_terms(values, source, name=name, version=version, description=description)
    rows = [c for c in cases if c.engine == base]
    predicted = predict(profile.values(), price(as_pairs(rows), profile.spec_max_running))
    if [round(r["measured"], 9) for r in fitted.fit["rows"]] != [round(c.value, 9) for c in rows]:
        raise SystemExit(f"{name}: the {base} fit's rows are not its usable rows in order")
    err = sorted(abs(p / c.value - 1) for c, p in zip(rows, predicted))
    n = len(err)
    fit = {**fitted.fit, "described": f"{fitted.fit['described']}; then {', '.join(values)} set, not fitted",
           "median_abs_residual": err[n // 2] if n % 2 else (err[n // 2 - 1] + err[n // 2]) / 2,
           "max_abs_residual": err[-1], "loo_median_error": None, "loo_max_error": None,
           "rows": [{**r, "predicted": float(p), "residual": float(p / c.value - 1), "loo_error": None}
                    for r, c, p in zip(fitted.fit["rows"], rows, predicted)]}
    return replace(profile, fit=fit)


def held_out_check(profile: EngineProfile, held) -> str:
    """How `profile` predicts the usable rows kept out of its fit (HELD_OUT), one line each."""
    rows = [c for c in held if c.engine == profile.name]
    if not rows:
        return ""
    predicted = predict(profile.values(), price(as_pairs(rows), profile.spec_max_running))
    lines = [f"  held out of the fit (out-of-sample): {HELD_OUT[rows[0].source]}"]
    for c, p in zip(rows, predicted):
        lines.append(f"  {c.mechanism} B={c.batch} D={c.draft_len}".ljust(39) + f"{c.quantity:12} {c.value:10.4g} "
                     f"{p:11.4g} {100 * (p / c.value - 1):+8.1f}%")
    return "\n".join(lines) + "\n" + host_terms_alone(profile, rows)


HOST_ALONE = ["host_step_us", "host_spec_seq_us"]  # the host terms a user's calibrate would fit first


def host_terms_alone(profile: EngineProfile, rows) -> str:
    """Whether host work can explain held-out rows: `profile` calibrated on them alone with only
    HOST_ALONE free, each row as that fit prices it; and, for a batch-1 speculative row with a plain
    TPOT beside it, the verify kernels priced over the plain kernels against the measured whole
    speculative step over the plain step (AL / speedup x plain TPOT - plain TPOT), ms."""
    pairs = as_pairs(rows)
    fitted = calibrate(profile, pairs, HOST_ALONE, name=profile.name, described="held-out rows alone")
    lines = [f"  calibrated on these rows alone (--fit {','.join(HOST_ALONE)}): "
             + ", ".join(f"{t} {fitted.profile.terms[t].value:.0f} µs" for t in HOST_ALONE)]
    for c, p in zip(rows, fitted.predicted):
        lines.append(f"  {c.mechanism} B={c.batch} D={c.draft_len}".ljust(39) + f"{c.quantity:12} {c.value:10.4g} "
                     f"{p:11.4g} {100 * (p / c.value - 1):+8.1f}%")
    priced = price(pairs, profile.spec_max_running)
    tpot = [c.value for c in rows if c.quantity == "tpot_ms" and c.batch == 1 and c.draft_len == 0]
    for i, c in enumerate(rows):
        if tpot and c.quantity == "speedup" and c.batch == 1 and c.acceptance_length:
            verify = priced.step.ops_s[i] - priced.step.draft_ops_s[i] - priced.plain.ops_s[i]
            measured = c.acceptance_length / c.value * tpot[0] - tpot[0]
            lines.append(f"  B=1: verify kernels priced {verify * 1e3:+.1f} ms over the plain step's; the measured "
                         f"speculative step, drafting included, took {measured:+.1f} ms over its plain step")
    return "\n".join(lines) + "\n"


def by_source(name: str, cases) -> str:
    """Leave one source out: for each source of `name`'s usable rows, the fit to the other sources'
    rows (same base, same free terms) predicts that source's rows, as a source the shipped fit never
    saw would be predicted. Per source: |error| median and max, and speculate-or-not agreement."""
    rows = [c for c in cases if c.engine == name]
    sources = sorted({c.source for c in rows})
    if len(sources) < 2:
        return f"{name}: {len(sources)} source(s) with usable rows; nothing to leave out\n"
    lines, errors, agree, speedups = [f"{name}: each source predicted by a fit to the other {len(sources) - 1}"], [], 0, 0
    for source in sources:
        train = [c for c in rows if c.source != source]
        test = [c for c in rows if c.source == source]
        fitted = calibrate(base_profile(name), as_pairs(train), BASES[name]["free"], name=name, described="by source")
        predicted = predict(fitted.profile.values(), price(as_pairs(test), fitted.profile.spec_max_running))
        err = [abs(p / c.value - 1) for c, p in zip(test, predicted)]
        sp = [(c.value, p) for c, p in zip(test, predicted) if c.quantity == "speedup"]
        ok = sum((m >= 1) == (p >= 1) for m, p in sp)
        errors += err
        agree, speedups = agree + ok, speedups + len(sp)
        med = sorted(err)[len(err) // 2] if len(err) % 2 else sum(sorted(err)[len(err) // 2 - 1:len(err) // 2 + 1]) / 2
        lines.append(f"  {source[:70]:70s} {len(test):3d} rows (fit on {len(train):3d}): median {100 * med:5.1f}%, "
                     f"max {100 * max(err):5.1f}%" + (f"; speculate-or-not {ok} of {len(sp)}" if sp else ""))
    errors.sort()
    n = len(errors)
    med = errors[n // 2] if n % 2 else (errors[n // 2 - 1] + errors[n // 2]) / 2
    lines.append(f"  all {n} rows out of source: median {100 * med:.1f}%, max {100 * errors[-1]:.1f}%"
                 + (f"; speculate-or-not {agree} of {speedups}" if speedups else ""))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped profiles instead of writing")
    ap.add_argument("--assume-gpu", metavar="GPU", choices=sorted(GPUS),
                    help="assume this GPU for the sources that state none (engine_cases.ASSUMED) instead of "
                         "their recorded one: a sensitivity check; nothing is written or compared")
    ap.add_argument("--by-source", action="store_true",
                    help="leave each source out in turn and predict it from a fit to the others; nothing written")
    args = ap.parse_args(argv)
    if args.by_source:
        cases, _ = load_cases(held_out=True)
        fitted = [c for c in cases if c.source not in HELD_OUT]
        for name in BASES:
            print(by_source(name, fitted))
        return 0
    if args.assume_gpu:
        for source, assumption in ASSUMED.items():
            ASSUMED[source] = {**assumption, "gpu": args.assume_gpu,
                               "why": assumption["why"] + f" [sensitivity check: {args.assume_gpu} assumed instead]"}
    cases, skipped = load_cases(held_out=True)
    held = [c for c in cases if c.source in HELD_OUT]
    cases = [c for c in cases if c.source not in HELD_OUT]
    print(f"{len(cases)} usable rows of {CASES} fitted, {len(held)} held out; {len(skipped)} left out:")
    reasons: dict[str, int] = {}
    for _, _, why in skipped:
        reasons[why] = reasons.get(why, 0) + 1
    for why, n in sorted(reasons.items(), key=lambda x: -x[1]):
        print(f"  {n:3d}  {why}")
    status = 0
    fitted: dict[str, EngineProfile] = {}
    for name in [*BASES, *DERIVED]:
        if name in DERIVED:
            profile = derived_profile(name, fitted[DERIVED[name][0]], cases)
            print(f"{name}: the {DERIVED[name][0]} fit with {', '.join(DERIVED[name][1])} set (not fitted)")
        else:
            profile, text = fit(name, cases)
            fitted[name] = profile
            print(text + held_out_check(profile, held))
        data = profile.to_json()
        data["fit_left_out"] = reasons
        kept_out = {c.source: HELD_OUT[c.source] for c in held if c.engine == name}
        if kept_out:
            data["fit_held_out"] = kept_out  # usable rows kept out of the fit, printed as an out-of-sample check
        path = PRESET_DIR / f"{name}.json"
        if args.assume_gpu:
            print(f"{path.name}: not written or compared (--assume-gpu {args.assume_gpu} is a sensitivity check)")
        elif args.check:
            if not path.is_file():
                print(f"{path.name}: missing")
                status = 1
                continue
            shipped = json.loads(path.read_text())
            diffs = differences(shipped, json.loads(json.dumps(data, ensure_ascii=False)))
            print(f"{path.name}: " + ("matches the fit (every field)" if not diffs else
                                      f"DIFFERS from the fit at {len(diffs)} field(s): " + "; ".join(diffs[:5])))
            status |= bool(diffs)
        else:
            path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
            print(f"wrote {path}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
