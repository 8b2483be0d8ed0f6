"""What `speedplan calibrate` runs: read measurement files, fit, render, write the profile."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from speedplan.engine.calibrate import FOLDS, LOO_ROWS, Calibration, Setting, calibrate
from speedplan.engine.calibration_rows import PRINTED_ROWS, read_notes, row_table  # noqa: F401 (PRINTED_ROWS: callers)
from speedplan.engine.profile import TERMS, EngineProfile, get_engine
from speedplan.engine.readers.measurements import Measurement, check_consistent, measurements_from_rows, read_measurements
from speedplan.engine.readers.measurement import MAX_ROWS, drafts_ran_short, shown
from speedplan.engine.readers.vllm_metrics import DRAFT_TOKENS, DRAFTS, looks_like_vllm_metrics, read_vllm_metrics
from speedplan.errors import SpeedplanInputError
from speedplan.outputs import target, write_whole
from speedplan.plan.mechanisms import TREE_MECHANISMS


SGLANG_DRAFTERS = ("eagle", "eagle3", "mtp")  # what SGLang's EAGLE worker drafts with (mtp: a model's NextN layers)


def calibrate_files(model: str, hardware: str, tp: int, engine: str, files: list, mechanism: str = "eagle3",
                    free: list[str] | None = None, name: str | None = None) -> Calibration:
    """Fit `engine`'s terms (a name or a JSON file) to every row of `files` (a list of CSV,
    vllm bench serve JSON, SGLang bench_speculative lines or a vLLM /metrics scrape), all run on
    (model, hardware, tp GPUs). `mechanism` names the drafter of SGLang bench rows; `free` the
    terms to fit (None: the base profile's fit order); `name` the fitted profile's name."""
    head, colon, options = str(mechanism).strip().partition(":")
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
    _check_distinct(files)
    setting = _setting(model, hardware, tp)
    scrapes = [Path(f) for f in files if _is_metrics(Path(f))]
    counters = [read_vllm_metrics(f) for f in scrapes]
    acceptance = _scrape_acceptance(counters)
    rows = [m for f in files if Path(f) not in scrapes for m in read_measurements(f, mechanism, acceptance)]
    if not rows:
        raise SpeedplanInputError("calibrate: no measurements (a /metrics scrape gives acceptance, not step times)")
    named = [(m.where, m.model) for m in rows if m.model] + [(c.path, c.models[0]) for c in counters if c.models]
    _check_models(named, setting.target.name, model)
    unused = [] if getattr(acceptance, "users", None) else scrapes  # a scrape no row took its acceptance from
    described = f"{', '.join(Path(f).name for f in files if Path(f) not in unused)}; {setting.label}"
    result = _fit(engine, rows, setting, free, name, described)
    result.notes += [f"{f}: not used: every run states its own acceptance length" for f in unused] + read_notes(rows)
    names = sorted({n for _, n in named})
    if names:  # fine-tunes have any name: said, not refused, unless plainly another size (_check_models)
        result.notes.append(f"the files name the model {' and '.join(names)}; priced as {setting.target.name}")
    return result


def _check_distinct(files: list) -> None:
    """Each file once: the same path twice, or two paths with the same content (a copy), would
    count every row twice in the fit."""
    seen: dict = {}
    contents: dict[bytes, object] = {}  # sha256 of each file's bytes -> the file
    for f in files:
        key = Path(f).resolve() if Path(f).exists() else Path(f)
        if key in seen:
            raise SpeedplanInputError(f"--measurements: {f} is given twice; give each file once")
        seen[key] = f
        if Path(f).is_file():
            try:
                digest = hashlib.sha256(Path(f).read_bytes()).digest()
            except OSError:
                continue  # read_measurements names it
            if digest in contents:
                raise SpeedplanInputError(f"--measurements: {f} has the same content as {contents[digest]}: one run "
                                          "counted twice; give it once")
            contents[digest] = f


_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # a Hugging Face repo id (org/name), not an alias or a path
_SIZE = re.compile(r"\d+(?:\.\d+)?[bm]")  # a parameter count in a model name: 8b, 70b, 1.5b, 135m


def _words(name: str) -> list[str]:
    """A model name's words, lower case, without its organisation: meta-llama/Llama-3.1-8B → llama, 3.1, 8b."""
    return [w for w in re.split(r"[-_\s]+", name.strip().rstrip("/").split("/")[-1].lower()) if w]


def _check_models(named: list[tuple[str, str]], target: str, given: str) -> None:
    """Refuse names that are plainly two models: two sizes of one family in two files (Llama-3.1-8B
    and Llama-3.1-70B) or in a file and --model (Llama-3.1-70B for llama-3.1-8b), or two repo ids
    (org/name) neither of which holds the other. Other names are not refused: a fine-tune, a
    local path or a --served-model-name alias ("llama8b", which the /metrics scrape labels where
    the bench JSON has the repo id) has any name; the caller notes them."""
    first: dict[str, str] = {}  # each name once, where it is first named
    for where, model in named:
        first.setdefault(model, where)
    named = [(where, model) for model, where in first.items()]
    for i, (where, model) in enumerate(named):
        for other_where, other in named[:i]:
            size = _other_size(other, model)
            if size:
                raise SpeedplanInputError(f"{where}: names the model {shown(model)}, {other_where} {shown(other)}: "
                                          f"two sizes ({size}) of one model; give one model's files")
            words, others = "-".join(_words(model)), "-".join(_words(other))
            if _REPO.fullmatch(model) and _REPO.fullmatch(other) and words not in others and others not in words:
                raise SpeedplanInputError(f"{where}: names the model {shown(model)}, {other_where} {shown(other)}: "
                                          "measurements of two models contradict each other; give one model's files")
        size = _other_size(target, model)
        if size:
            raise SpeedplanInputError(f"{where}: names the model {shown(model)}, another size than --model {given} "
                                      f"({target}, {size}): give the --model the measurements ran")


def _other_size(reference: str, name: str) -> str | None:
    """"8b against 70b" where `name` has every word of `reference` but its one size, and another
    size (Llama-3.1-70B-Instruct against llama-3.1-8b), else None."""
    mine, theirs = _words(reference), _words(name)
    sizes = [w for w in mine if _SIZE.fullmatch(w)]
    their_sizes = [w for w in theirs if _SIZE.fullmatch(w)]
    if (len(sizes) == 1 and their_sizes and sizes[0] not in their_sizes
            and all(w in theirs for w in mine if w not in sizes)):
        return f"{sizes[0]} against {their_sizes[0]}"
    return None


def calibrate_rows(model: str, hardware: str, tp: int = 1, engine: str | EngineProfile = "vllm", rows=(),
                   free: list[str] | None = None, name: str | None = None, described: str = "") -> Calibration:
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
    where = lambda i: f"row {i}"
    if rows is None or isinstance(rows, (str, bytes)):
        raise SpeedplanInputError(f"calibrate: rows must be a list of measurements (dicts or Measurement records), "
                                  f"got {rows!r}")
    if isinstance(free, str):  # "host_step_us,host_seq_us", as --fit takes them
        free = [t.strip() for t in free.split(",") if t.strip()]
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
    measured = records or measurements_from_rows(rows, where=where)
    setting = _setting(model, hardware, tp)
    return _fit(engine, measured, setting, free, name, f"{described or 'measurements given in Python'}; {setting.label}")


def _setting(model: str, hardware: str, tp: int) -> Setting:
    from speedplan.cost.ops import load_cost_model
    from speedplan.plan.sweep_inputs import integer
    from speedplan.specs.model import get_model

    target = get_model(model)  # a preset name, a config.json path or a ModelSpec
    tp = integer(tp)  # np.int64 from a notebook
    target.check_tp(tp)
    cost = load_cost_model(hardware)
    return Setting(target.priced_on(cost.hardware), cost, tp, f"{target.name} on {hardware}, TP={tp}")


def _fit(engine, rows: list[Measurement], setting: Setting, free, name, described: str) -> Calibration:
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
    check_consistent(rows, base.spec_max_running)
    return calibrate(base, [(m, setting) for m in rows], free, name=name, described=described)


def _is_metrics(path: Path) -> bool:
    """Whether `path` is a vLLM /metrics scrape, by content (a scrape saved as metrics.csv is still
    one); the whole file: a server's histograms can fill 300 kB before its spec_decode counters."""
    if not path.is_file():  # a device or a pipe: read_measurements names it
        return False
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return looks_like_vllm_metrics(text)


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
    lines = [f"calibrated {p.name} from base {p.fit.get('base')} on {len(result.rows)} rows"]
    for term in result.fitted:
        spec, value = TERMS[term], p.terms[term].value
        side = 0 if value - spec.low <= 1e-6 * (spec.high - spec.low) else (
            1 if spec.high - value <= 1e-6 * (spec.high - spec.low) else None)
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


def write_profile(profile: EngineProfile, out: Path) -> Path:
    """Write the profile JSON atomically (a temporary file renamed into place); through a
    symbolic link, into the file it points to."""
    out = target(out)
    if out.exists() and out.is_dir():
        raise SpeedplanInputError(f"--out {out}: is a folder; give a .json file name")
    return write_whole(out, json.dumps(profile.to_json(), indent=1, ensure_ascii=False) + "\n")


def sweep_arguments(result: Calibration) -> list[str]:
    """What `speedplan sweep` needs besides --engine to plan for the runs calibrated on: their
    contexts (--context; the median where they span more than three) and each chain mechanism's
    measured acceptance length at the draft length most of its runs used (--acceptance
    MECH:al=A@D; a tree's AL is not a chain's, so trees are left to ranks= or a trace)."""
    rows = {(r["mechanism"], r["batch"], r["draft_len"], r["context"], r["acceptance_length"]) for r in result.rows}
    contexts = sorted({int(round(c)) for _, _, _, c, _ in rows})
    args = ["--context", ",".join(map(str, contexts)) if len(contexts) <= 3 else str(int(np.median(contexts)))]
    runs: dict[str, dict[int, list[float]]] = {}
    for mech, _, d, _, al in rows:
        if mech != "none" and d and mech.split(":")[0] not in TREE_MECHANISMS and al:
            runs.setdefault(mech, {}).setdefault(int(d), []).append(float(al))
    for mech, by_d in sorted(runs.items()):
        d = max(by_d, key=lambda k: (len(by_d[k]), k))
        args += ["--acceptance", f"{mech}:al={np.mean(by_d[d]):.3g}@{d}"]
    return args
