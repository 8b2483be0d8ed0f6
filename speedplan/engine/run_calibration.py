"""What `speedplan calibrate` runs: read measurement files, fit, render, write the profile."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np

from speedplan.engine.calibrate import FOLDS, LOO_ROWS, Calibration, Setting, bound_side, calibrate
from speedplan.engine.calibration_acceptance import (SWEEP_DEPTH, Unmeasured, fit_acceptance_rates, shape_from_lengths,
                                                     shape_text, sweep_acceptance)
from speedplan.engine.calibration_checks import (check_distinct, check_models, check_reachable,
                                                 check_setting, check_speedups)
from speedplan.engine.calibration_notes import one_sided, outliers
from speedplan.engine.calibration_rows import PRINTED_ROWS, read_notes, row_table  # noqa: F401 (PRINTED_ROWS: callers)
from speedplan.engine.calibration_temperature import sweep_temperature, temperature_note
from speedplan.engine.profile import TERMS, EngineProfile, get_engine
from speedplan.engine.readers.measurements import Measurement, check_consistent, measurements_from_rows, read_measurements
from speedplan.engine.readers.measurement import MAX_ROWS, canonical_mechanism, drafts_ran_short, no_acceptance
from speedplan.engine.readers.vllm_metrics import (DRAFT_TOKENS, DRAFTS, check_totals, looks_like_vllm_metrics,
                                                   plain_server_scrape, read_vllm_metrics)
from speedplan.errors import SpeedplanInputError
from speedplan.outputs import target, write_whole
from speedplan.plan.mechanisms import TREE_MECHANISMS
from speedplan.specs.files import refuse_wide_text


SGLANG_DRAFTERS = ("eagle", "eagle3", "mtp")  # what SGLang's EAGLE worker drafts with (mtp: a model's NextN layers)


def _fit_terms(free, fit):
    """The terms to fit, given as `free` or as `fit` (the CLI's --fit); a list or "a,b" text."""
    if fit is not None and free is not None:
        raise SpeedplanInputError("calibrate: give the terms to fit once, as free= or fit=")
    free = fit if fit is not None else free
    if isinstance(free, str):  # "host_step_us,host_seq_us", as --fit takes them
        free = [t.strip() for t in free.split(",") if t.strip()]
    return free


def calibrate_files(model: str, hardware: str, tp: int, engine: str, files: list, mechanism: str = "eagle3",
                    free: list[str] | None = None, name: str | None = None, fit: list[str] | str | None = None,
                    fit_acceptance: bool = False) -> Calibration:
    """Fit `engine`'s terms (a name or a JSON file) to every row of `files` (a list of CSV,
    vllm bench serve JSON, SGLang bench_speculative lines or a vLLM /metrics scrape), all run on
    (model, hardware, tp GPUs). `mechanism` names the drafter of SGLang bench rows; `free` (or
    `fit`, as --fit names it) the terms to fit (None: the base profile's fit order); `name` the
    fitted profile's name; `fit_acceptance`: rows that state no acceptance length get one rate per
    mechanism, fitted with the terms (`calibration_acceptance`)."""
    free = _fit_terms(free, fit)
    head, colon, options = canonical_mechanism(str(mechanism)).partition(":")  # EAGLE-3, NEXTN: as speedplan names them
    if head.lower() not in SGLANG_DRAFTERS:  # named for SGLang bench rows; wrong even where unused
        raise SpeedplanInputError(f"--mechanism {mechanism!r}: names the drafter of SGLang bench_speculative rows, one "
                                  f"of {', '.join(SGLANG_DRAFTERS)} (with its options, e.g. eagle3:config=PATH); "
                                  "rows with topk > 1 are that EAGLE head's tree")
    mechanism = head.lower() + colon + options
    if getattr(files, "ndim", None) == 1 and hasattr(files, "tolist"):  # a numpy array or a Series of paths
        files = files.tolist()
    if isinstance(files, (str, Path)) or not isinstance(files, (list, tuple)) or not files:
        raise SpeedplanInputError(f"calibrate: files must be a list of measurement files, got {files!r}")
    wrong = [f for f in files if not isinstance(f, (str, os.PathLike)) or not str(f).strip()]
    if wrong:
        raise SpeedplanInputError(f"calibrate: files must be a list of measurement file paths, got {wrong[0]!r} in it")
    check_distinct(files)
    for f in files:  # a UTF-16 scrape, read leniently, would pass for no scrape and leave a CSV blamed
        refuse_wide_text(f)
    setting = _setting(model, hardware, tp)
    scrapes = [Path(f) for f in files if _is_metrics(Path(f))]
    if fit_acceptance and scrapes:
        raise SpeedplanInputError(f"--fit-acceptance: {scrapes[0]} is a /metrics scrape, which gives the runs' "
                                  "acceptance; give one or the other")
    counters = [read_vllm_metrics(f) for f in scrapes]
    for c in counters:
        check_totals(c)
    acceptance = Unmeasured() if fit_acceptance else _scrape_acceptance(counters)
    rows = [m for f in files if Path(f) not in scrapes for m in read_measurements(f, mechanism, acceptance)]
    if not rows:
        raise SpeedplanInputError("calibrate: no measurements (a /metrics scrape gives acceptance, not step times)")
    named = [(m.where, m.model) for m in rows if m.model] + [(c.path, c.models[0]) for c in counters if c.models]
    check_models(named, setting.target.name, model)
    unused = [] if getattr(acceptance, "users", None) else scrapes  # a scrape no row took its acceptance from
    described = f"{', '.join(str(Path(f).absolute()) for f in files if Path(f) not in unused)}; {setting.label}"
    result = _fit(engine, rows, setting, free, name, described, getattr(acceptance, "taken_by", None))
    result.notes += [f"{f}: not used: every run states its own acceptance length" for f in unused] + read_notes(rows)
    names = sorted({n for _, n in named})
    if names:  # fine-tunes have any name: said, not refused, unless plainly another size (_check_models)
        result.notes.append(f"the files name the model {' and '.join(names)}; priced as {setting.target.name}")
    return result


def calibrate_rows(model: str, hardware: str, tp: int = 1, engine: str | EngineProfile = "vllm", rows=(),
                   free: list[str] | None = None, name: str | None = None, described: str = "",
                   fit: list[str] | str | None = None, fit_acceptance: bool = False) -> Calibration:
    """`speedplan calibrate` from Python: fit `engine`'s terms (a name, a JSON file or a profile)
    to `rows` measured on (model, hardware, tp), with the same checks as the command (the TP the
    model can run, rows that contradict each other). `rows`: Measurement records, dicts keyed
    like the CSV's columns, or a DataFrame with those columns (docs/engine.md, "`speedplan calibrate`").

        cal = calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", [
            {"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1024, "tpot_ms": 7.0},
            {"mechanism": "eagle3", "batch": 8, "draft_len": 3, "context": 1024, "speedup": 1.8,
             "acceptance_length": 2.8}], name="my-vllm")
        sweep(engine=cal.profile)
    """
    free = _fit_terms(free, fit)  # fit=, as the CLI's --fit names it, was a TypeError
    if not isinstance(fit_acceptance, (bool, np.bool_)):  # "no" is true: it had turned the fit on
        raise SpeedplanInputError(f"calibrate: fit_acceptance must be True or False, got {fit_acceptance!r:.60}")
    where = lambda i: f"row {i}"
    if rows is None or isinstance(rows, (str, bytes)):
        raise SpeedplanInputError(f"calibrate: rows must be a list of measurements (dicts or Measurement records), "
                                  f"got {rows!r}")
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a DataFrame: rows named by its index
        labels = list(rows.index)
        rows = rows.to_dict("records")
        where = lambda i: f"row {labels[i]!r}"
    if isinstance(rows, (dict, Measurement)):
        raise SpeedplanInputError("calibrate: rows must be a list of measurements (one dict or Measurement each), "
                                  f"got one {type(rows).__name__}")
    if not isinstance(rows, Iterable):
        raise SpeedplanInputError(f"calibrate: rows must be a list of measurements (dicts or Measurement records), "
                                  f"got {type(rows).__name__}")
    rows = list(rows)
    if not rows:
        raise SpeedplanInputError("calibrate: no measurements")
    records = [r for r in rows if isinstance(r, Measurement)]
    if records and len(records) != len(rows):
        raise SpeedplanInputError("calibrate: rows mix Measurement records and dicts; give one kind")
    unmeasured = Unmeasured() if fit_acceptance else None  # dicts without acceptance_length: fitted
    measured = records or measurements_from_rows(rows, acceptance=unmeasured or no_acceptance, where=where)
    setting = _setting(model, hardware, tp)
    check_models([(m.where, m.model) for m in measured if m.model], setting.target.name, model)
    return _fit(engine, measured, setting, free, name, f"{described or 'measurements given in Python'}; {setting.label}",
                unmeasured.taken_by if unmeasured else None)


def _setting(model: str, hardware: str, tp: int) -> Setting:
    from speedplan.cost.ops import load_cost_model
    from speedplan.plan.sweep_inputs import integer
    from speedplan.specs.model import get_model

    target = get_model(model)  # a preset name, a config.json path or a ModelSpec
    tp = integer(tp)  # np.int64 from a notebook
    target.check_tp(tp)
    cost = load_cost_model(hardware)
    cost.hardware.check_tp(tp)  # the all-reduce is priced within one node, as in a sweep
    return Setting(target.priced_on(cost.hardware), cost, tp, f"{target.name} on {hardware}, TP={tp}")


def _fit(engine, rows: list[Measurement], setting: Setting, free, name, described: str,
         unmeasured: list[str] | None = None) -> Calibration:
    """Check the rows and fit; `unmeasured`: where the rows are whose acceptance the reader supplied
    (--fit-acceptance), fitted first with the terms, then given to the fit as measured."""
    from speedplan.engine.profile import preset_names

    if name is not None and not isinstance(name, str):
        raise SpeedplanInputError(f"calibrate: name must be text, got {name!r}")
    if name is not None and str(name).strip().lower() in preset_names():  # it would read as the shipped one
        raise SpeedplanInputError(f"calibrate: name {name!r} is a shipped engine profile's; give the calibrated "
                                  f"profile its own (--name {str(name).strip()}-mine, or another --out file name)")
    if len(rows) > MAX_ROWS:
        raise SpeedplanInputError(f"calibrate: {len(rows):,} rows; calibrate reads at most {MAX_ROWS:,} in all "
                                  "(a few hundred configurations identify every term: average repeated runs first)")
    base = get_engine(engine)
    from speedplan.serving import check_runs_on

    check_runs_on(base, setting.cost.hardware)  # TensorRT-LLM's terms fitted on an MI300X: no sweep could use them
    _check_engine(rows, base)
    check_setting(rows, setting)
    repeats = check_consistent(rows, base.spec_max_running)  # notes on repeats far apart but kept
    check_speedups(rows)
    shapes, spent, note = {}, 0, None
    if unmeasured is not None:  # fitted first, with the terms; its parameters come out of the terms' allowance
        rows, fit, note = fit_acceptance_rates(base, rows, setting, free, unmeasured)
        shapes, spent = fit.shapes, fit.parameters
        described += "".join(f"; acceptance fitted: {m} {shape_text(*a)}" for m, a in shapes.items())
    result = calibrate(base, [(m, setting) for m in rows], free, name=name, described=described, spent=spent)
    if shapes:
        result.acceptance_shapes = shapes
        result.profile = replace(result.profile, fit={**result.profile.fit, "acceptance_fitted": {
            m: {"p_1": p1, "decay": r} for m, (p1, r) in shapes.items()}})
    result.notes += [note] if note else []
    check_reachable(result, setting)
    result.notes.append(temperature_note(rows, result.profile))
    result.notes += repeats
    # the base's version and description are of the rows it was fitted to, not of these: said as the base's
    p = result.profile
    result.profile = replace(p, version=f"as measured (calibrated {p.fit['created'][:10]} from base {base.name})",
                             description=f"Calibrated by speedplan calibrate to {len(rows)} row{'s' * (len(rows) != 1)} ({described}) from "
                             f"base profile {base.name} ({base.engine} {base.version}).",
                             fit={**p.fit, "base_version": base.version, "base_description": base.description})
    return result


def _check_engine(rows: list[Measurement], base: EngineProfile) -> None:
    """Refuse rows a file shows another engine ran than `base` describes (SGLang's bench_speculative.py launches
    SGLang servers; a bench_serving line with server_info was an SGLang server's): fitted into a vLLM profile, SGLang's
    host work would be priced as vLLM's and its launch files would be vLLM's."""
    from speedplan.plan.engine_outputs import serving_engine

    family = serving_engine({"engine_family": base.engine})
    other = next((m for m in rows if m.engine and family and m.engine != family), None)
    if other is not None:
        raise SpeedplanInputError(f"{other.where}: a run of {other.engine} (the file shows it), and --engine {base.name} "
                                  f"describes {base.engine}: calibrate from a profile of the engine that ran it "
                                  f"(--engine {other.engine}, or your own calibrated from it)")


def _is_metrics(path: Path) -> bool:
    """Whether `path` is a vLLM /metrics scrape, by content (a scrape saved as metrics.csv is still
    one); the whole file: a server's histograms can fill 300 kB before its spec_decode counters."""
    if not path.is_file():  # a device or a pipe: read_measurements names it
        return False
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return looks_like_vllm_metrics(text) or plain_server_scrape(text)  # the latter: read, and refused, as a scrape


def _scrape_acceptance(scrapes):
    """Acceptance length at D from vLLM's per-position counters: 1 + Σ_{i<D} accepted_i / drafts.
    A chain's first D positions are accepted alike whatever K the server ran, so a scrape taken
    at K gives every D ≤ K (one scrape; several are a contradiction unless the caller says which).
    A scrape is one server, one drafter: rows of one mechanism take their acceptance from it."""
    if not scrapes:
        return lambda mechanism, draft_len: None
    if len(scrapes) > 1:
        raise SpeedplanInputError(f"calibrate: {len(scrapes)} vLLM /metrics scrapes; give one (rows of other "
                                  "runs should state acceptance_length)")
    counters = scrapes[0]
    users: list[str] = []  # the mechanism whose rows take their acceptance from it

    def acceptance(mechanism: str, draft_len: int):
        if users and mechanism != users[0]:  # one scrape is one server, one drafter
            raise SpeedplanInputError(f"{counters.path} is one server's counters, one drafter's acceptance: rows of "
                                      f"{users[0]} take theirs from it, so rows of {mechanism} cannot; give them their "
                                      "own acceptance_length")
        if mechanism.split(":")[0] in TREE_MECHANISMS:
            raise SpeedplanInputError(f"{counters.path} gives a chain's acceptance per position; rows of {mechanism} "
                                      "need their own acceptance_length")
        rates = counters.position_rates
        if draft_len > len(rates):
            raise SpeedplanInputError(f"{counters.path}: the scrape has {len(rates)} draft positions, a row has "
                                      f"draft_len {draft_len}")
        mean = drafts_ran_short(counters.mean_draft_tokens, len(rates))
        if mechanism.split(":")[0] != "ngram" and mean is not None:
            raise SpeedplanInputError(
                f"{counters.path}: the server drafted {mean:.2f} tokens per draft ({DRAFT_TOKENS} / {DRAFTS}) against "
                f"the {len(rates)} positions it counts: its draft length varied (a per-batch-size schedule), so "
                "accepted per position over all drafts understates the acceptance of full-length drafts; scrape a "
                "server with a fixed num_speculative_tokens")
        if not users:
            users.append(mechanism)
        return 1.0 + sum(rates[:draft_len])

    acceptance.users = users  # empty after reading: every row stated its own acceptance
    return acceptance


def render_calibration(result: Calibration) -> str:
    """Fitted terms, each row's residual and leave-one-out error, the terms kept and why."""
    p = result.profile
    n = len(result.rows)
    lines = [f"calibrated {p.name} from base {p.fit.get('base')} on {n} row{'s' * (n != 1)}"]
    for term in result.fitted:
        spec, value = TERMS[term], p.terms[term].value
        side = bound_side(term, value)
        edge = None if side is None else (spec.low, spec.high)[side]
        bound = ("" if side is None else f"  (at {edge:g}, its physical limit)" if spec.physical[side] else
                 f"  (at its {('lower', 'upper')[side]} bound {edge:g}: the rows would take it further; check the rows "
                 "or fit fewer terms)")
        lines.append(f"  fitted {term:<20} {_shown_value(term, value):>10.4g} {spec.unit}{bound}")
    for term, why in result.kept.items():
        lines.append(f"  kept   {term:<20} {_shown_value(term, p.terms[term].value):>10.4g} {TERMS[term].unit}  ({why})")
    for term, why in result.not_tried.items():
        lines.append(f"  base   {term:<20} {_shown_value(term, p.terms[term].value):>10.4g} {TERMS[term].unit}  "
                     + (f"({why})" if "never fitted" in why else f"({why}; not tried unless named in --fit)"))
    lines += row_table(result.rows, "leave-one-out" if result.held_out == "leave-one-out" else f"{FOLDS}-fold")
    fast = np.flatnonzero(result.too_fast) if result.too_fast is not None else []
    if len(fast):
        settings = sorted({result.rows[i]["setting"] for i in fast})
        lines.append(f"  note: {len(fast)} of {len(result.rows)} rows ran faster than their kernels alone can on "
                     f"{'; '.join(settings)} (no host work, no launches: "
                     + ", ".join(f"{result.rows[i]['mechanism']} B={result.rows[i]['batch']} D={result.rows[i]['draft_len']}"
                                 for i in fast[:4]) + (", ..." if len(fast) > 4 else "")
                     + "); no host or launch term can fit them (only kernel_scale < 1, kernels faster than the "
                       "profile measured): check --hardware and --tp, and that the quantity is what the column says "
                       "(tokens_per_s counts every request's output tokens)")
    lines.extend(f"  note: {note}" for note in result.notes)
    lines.extend(f"  note: {note}" for note in filter(None, [one_sided(result), outliers(result)]))
    resid = np.abs(result.residual)
    loo = result.loo_error[np.isfinite(result.loo_error)]
    if len(loo):
        folds = ("" if result.held_out == "leave-one-out" else
                 f" (each row predicted by a fit without its fold, row i in fold i mod {FOLDS}: leave-one-out "
                 f"refits once a row, so it is taken up to {LOO_ROWS} rows)")
        tail = f"; {result.held_out} median {np.median(loo):.1%}, max {loo.max():.1%}{folds}"
    elif not result.fitted:  # nothing moved: the rows are priced with the base's values as they are
        tail = ("; no term fitted, so the residuals are the base profile's own (name the terms these rows measure "
                "with --fit, e.g. kernel_scale for verify_ms rows)")
    else:
        tail = "; leave-one-out: needs more rows than fitted terms"
    lines.append(f"  |residual| median {np.median(resid):.1%}, max {resid.max():.1%}{tail}")
    return "\n".join(lines)


def _shown_value(term: str, value: float) -> float:
    """A term's value as printed: 0 where a fit left it a rounding error from 0 (2e-15 µs)."""
    spec = TERMS[term]
    return 0.0 if abs(value) <= 1e-9 * (spec.high - spec.low) else value


def check_out(out: str | Path) -> None:
    """Refuse an --out inside the installed speedplan package: `--out
    speedplan/specs/presets/engines/vllm.json` replaced the shipped vLLM profile, and a new name
    there became a shipped profile of every later run (a user walkthrough of 2026-12-05)."""
    import speedplan

    package = Path(speedplan.__file__).resolve().parent
    here = target(out).absolute().resolve()
    if here == package or package in here.parents:
        raise SpeedplanInputError(f"--out {out}: is inside the speedplan package ({package}), beside the engine "
                                  "profiles it ships; write your profile elsewhere (e.g. --out my-vllm.json) and "
                                  "give it to speedplan sweep --engine FILE")


def write_profile(profile: EngineProfile, out: Path) -> Path:
    """Write the profile JSON atomically (a temporary file renamed into place); through a
    symbolic link, into the file it points to. Never inside the package (`check_out`)."""
    check_out(out)
    out = target(out)
    if out.exists() and out.is_dir():
        raise SpeedplanInputError(f"--out {out}: is a folder; give a .json file name")
    return write_whole(out, json.dumps(profile.to_json(), indent=1, ensure_ascii=False) + "\n")


def _sweep_label(name: str, model: str | None) -> str:
    """The label `speedplan sweep --model MODEL` gives mechanism `name` (a bare draft-model becomes
    its default draft's, a tree's topk variants one tree); `name` itself where it does not parse."""
    if model is None:
        return name
    from speedplan.plan.mechanisms import parse_mechanism
    from speedplan.specs.model import get_model

    try:
        return parse_mechanism(name, get_model(model)).label.lower()
    except SpeedplanInputError:
        return name


def sweep_arguments(result: Calibration, model: str | None = None) -> list[str]:
    """What `speedplan sweep` needs besides --engine to plan for the runs calibrated on: their
    contexts (--context; the median where they span more than three) and each chain mechanism's
    measured acceptance length at the draft length most of its runs used (--acceptance
    MECH:al=A@D), or, where its runs measured two or more draft lengths, the per-position rates
    whose chain gives each (`shape_from_lengths`: --acceptance MECH:positions=...; a tree's AL is not
    a chain's, so trees are left to ranks= or a trace), both of the
    runs at the temperature most of them sampled at (--temperature T where above 0). Where an
    acceptance is given, --mechanism names the mechanisms the runs measured: `eagle3:` would also
    reach the EAGLE-3 tree, whose AL a chain's does not give (it would be extrapolated)."""
    temperature = sweep_temperature(result.rows)
    rows = {(r["mechanism"], r["batch"], r["draft_len"], r["context"], r["acceptance_length"]) for r in result.rows
            if float(r.get("temperature") or 0.0) == temperature}
    # one name per mechanism the sweep tells apart (given `model`): the one most rows measured;
    # `draft_model` beside `draft-model:llama-3.2-1b`, or a tree's topk=2 and topk=4, were both
    # named, and the sweep refused its own calibrate's command ("listed twice")
    count: dict[str, int] = {}
    for r in rows:
        count[r[0]] = count.get(r[0], 0) + 1
    chosen: dict[str, str] = {}
    for mech in sorted(count, key=lambda m: (-count[m], m)):
        chosen.setdefault(_sweep_label(mech, model) if mech != "none" else mech, mech)
    rows = {r for r in rows if r[0] in chosen.values()}
    contexts = sorted({int(round(c)) for _, _, _, c, _ in rows})
    args = ["--context", ",".join(map(str, contexts)) if len(contexts) <= 3 else str(int(np.median(contexts)))]
    runs: dict[str, dict[int, list[float]]] = {}
    for mech, _, d, _, al in rows:
        if mech != "none" and d and mech.split(":")[0] not in TREE_MECHANISMS and al:
            runs.setdefault(mech, {}).setdefault(int(d), []).append(float(al))
    for mech, by_d in sorted(runs.items()):
        d = max(by_d, key=lambda k: (len(by_d[k]), k))
        fitted = result.acceptance_shapes.get(mech)  # acceptance fitted (--fit-acceptance): its shape, as the rows were priced
        if fitted is None and len(by_d) > 1:  # measured at several D: their shape, not one D's i.i.d. extrapolation
            fitted = shape_from_lengths({k: float(np.mean(v)) for k, v in by_d.items()})
        args += ["--acceptance", sweep_acceptance(mech, fitted, max(SWEEP_DEPTH, *by_d)) if fitted is not None
                 else f"{mech}:al={np.mean(by_d[d]):.3g}@{d}"]
    if runs:
        args = [a for mech in sorted({m for m, *_ in rows if m != "none"}) for a in ("--mechanism", mech)] + args
    return args + (["--temperature", f"{temperature:g}"] if temperature > 0 else [])
