"""What `speedplan calibrate` runs: read measurement files, fit, render, write the profile."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from speedplan.engine.calibrate import Calibration, Setting, calibrate
from speedplan.engine.profile import TERMS, EngineProfile, get_engine
from speedplan.engine.readers.measurements import Measurement, check_consistent, measurements_from_rows, read_measurements
from speedplan.engine.readers.measurement import drafts_ran_short
from speedplan.engine.readers.vllm_metrics import DRAFT_TOKENS, DRAFTS, looks_like_vllm_metrics, read_vllm_metrics
from speedplan.errors import SpeedplanInputError
from speedplan.outputs import target, writing
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
    if isinstance(files, (str, Path)) or not isinstance(files, (list, tuple)) or not files:
        raise SpeedplanInputError(f"calibrate: files must be a list of measurement files, got {files!r}")
    seen: dict = {}
    for f in files:  # the same file twice counted every row twice in the fit
        key = Path(f).resolve() if Path(f).exists() else Path(f)
        if key in seen:
            raise SpeedplanInputError(f"--measurements: {f} is given twice; give each file once")
        seen[key] = f
    setting = _setting(model, hardware, tp)
    scrapes = [Path(f) for f in files if _is_metrics(Path(f))]
    acceptance = _scrape_acceptance([read_vllm_metrics(f) for f in scrapes])
    rows = [m for f in files if Path(f) not in scrapes for m in read_measurements(f, mechanism, acceptance)]
    if not rows:
        raise SpeedplanInputError("calibrate: no measurements (a /metrics scrape gives acceptance, not step times)")
    described = f"{', '.join(Path(f).name for f in files)}; {setting.label}"
    return _fit(engine, rows, setting, free, name, described)


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
    from speedplan.specs.model import get_model

    target = get_model(model)
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
    base = get_engine(engine)
    check_consistent(rows, base.spec_max_running)
    return calibrate(base, [(m, setting) for m in rows], free, name=name, described=described)


def _is_metrics(path: Path) -> bool:
    try:
        head = path.read_text(errors="replace")[:200_000]
    except OSError:
        return False
    return looks_like_vllm_metrics(head)  # by content: a scrape saved as metrics.csv is still one


def _scrape_acceptance(scrapes):
    """Acceptance length at D from vLLM's per-position counters: 1 + Σ_{i<D} accepted_i / drafts.
    A chain's first D positions are accepted alike whatever K the server ran, so a scrape taken
    at K gives every D ≤ K (one scrape; several are a contradiction unless the caller says which)."""
    if not scrapes:
        return lambda mechanism, draft_len: None
    if len(scrapes) > 1:
        raise SpeedplanInputError(f"calibrate: {len(scrapes)} vLLM /metrics scrapes; give one (rows of other "
                                  "runs should state acceptance_length)")
    counters = scrapes[0]

    def acceptance(mechanism: str, draft_len: int):
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
        return 1.0 + sum(rates[:draft_len])

    return acceptance


def render_calibration(result: Calibration) -> str:
    """Fitted terms, each row's residual and leave-one-out error, the terms kept and why."""
    p = result.profile
    lines = [f"calibrated {p.name} from base {p.fit.get('base')} on {len(result.rows)} rows"]
    for term in result.fitted:
        spec, value = TERMS[term], p.terms[term].value
        edge = spec.low if value - spec.low <= 1e-6 * (spec.high - spec.low) else (
            spec.high if spec.high - value <= 1e-6 * (spec.high - spec.low) else None)
        bound = (f"  (at its {'lower' if edge == spec.low else 'upper'} bound {edge:g}: the rows would take it "
                 "further; check the rows or fit fewer terms)" if edge is not None else "")
        lines.append(f"  fitted {term:<20} {value:>10.4g} {spec.unit}{bound}")
    for term, why in result.kept.items():
        lines.append(f"  kept   {term:<20} {p.terms[term].value:>10.4g} {TERMS[term].unit}  ({why})")
    for term, why in result.not_tried.items():
        lines.append(f"  base   {term:<20} {p.terms[term].value:>10.4g} {TERMS[term].unit}  "
                     + (f"({why})" if "never fitted" in why else f"({why}; not tried unless named in --fit)"))
    lines.append("  row                                  quantity      measured   predicted  residual  leave-one-out")
    contexts = {r["context"] for r in result.rows}
    for r in result.rows:
        loo = "" if r["loo_error"] is None else f"{r['loo_error']:.1%}"
        label = f"{r['mechanism']} B={r['batch']} D={r['draft_len']}" + (f" ctx={r['context']}" if len(contexts) > 1 else "")
        lines.append(f"  {label:<36} {r['quantity']:<12} {r['measured']:>10.4g} {r['predicted']:>11.4g} "
                     f"{r['residual']:>+9.1%}  {loo}")
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
    resid = np.abs(result.residual)
    loo = result.loo_error[np.isfinite(result.loo_error)]
    if len(loo):
        tail = f"; leave-one-out median {np.median(loo):.1%}, max {loo.max():.1%}"
    elif not result.fitted:  # nothing moved: the rows are priced with the base's values as they are
        tail = ("; no term fitted, so the residuals are the base profile's own (name the terms these rows measure "
                "with --fit, e.g. kernel_scale for verify_ms rows)")
    else:
        tail = "; leave-one-out: needs more rows than fitted terms"
    lines.append(f"  |residual| median {np.median(resid):.1%}, max {resid.max():.1%}{tail}")
    return "\n".join(lines)


def write_profile(profile: EngineProfile, out: Path) -> Path:
    """Write the profile JSON atomically (a temporary file renamed into place); through a
    symbolic link, into the file it points to."""
    out = target(out)
    if out.exists() and out.is_dir():
        raise SpeedplanInputError(f"--out {out}: is a folder; give a .json file name")
    with writing(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(json.dumps(profile.to_json(), indent=1, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
    return out
