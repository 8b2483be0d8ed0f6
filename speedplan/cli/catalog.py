"""`speedplan models` and `speedplan hardware`: the presets with their key numbers and sources."""

from __future__ import annotations

from typing import List, Optional

import typer


def models(
    configs: Optional[List[str]] = typer.Argument(
        None, help="config.json files or folders to read instead of the presets (shows how speedplan reads them)"),
) -> None:
    """List model presets with their key numbers: speedplan models

    Check how a Hugging Face config is read before sweeping it: speedplan models path/to/config.json
    """
    from speedplan.specs.model import attention_label, get_model, preset_names

    models = [get_model(name) for name in configs or preset_names()]
    variants = ("sliding_window", "linear_attention", "sparse_attention")  # one "attention" column instead
    header = {"experts": "experts_active/total"}  # "8/256": 8 routed experts of 256 run per token
    typer.echo(table([{**{header.get(k, k): v for k, v in m.summary().items() if k not in variants},
                       "attention": attention_label(m.summary()) or "full", "dtype": m.dtype,
                       "source": _cut(m.source, 90)} for m in models]))


def hardware(names: Optional[List[str]] = typer.Argument(
        None, metavar="[NAME]...", help="Presets, shipped profiles or hardware files to show (default: every preset "
        "and shipped profile).")) -> None:
    """List hardware presets with their datasheet numbers (memory: what the driver reports), where op
    latencies come from (a shipped measured profile or the datasheet roofline) and sources: speedplan hardware"""
    import json

    from speedplan.cost.ops import PROFILE_DIR, latency_origin
    from speedplan.profile.load import origin_label
    from speedplan.specs.hardware import PRESETS

    peak = lambda h, dtype: round(h.peak_flops_per_s[dtype] / 1e12, 2) if h.peak_flops_per_s.get(dtype) else "-"
    row = lambda h: {  # noqa: E731
        "hardware": h.name, "bf16_tflops": peak(h, "bf16"), "fp8_tflops": peak(h, "fp8"),
        "mem_tb_s": round(h.hbm_bytes_per_s / 1e12, 3), "mem_gb": round(h.memory_bytes / 1e9, 1),
        "link_gb_s": round(h.link_bytes_per_s / 1e9, 1), "sms": str(h.sm_count or "-"),
        "latency": latency_origin(h.name), "source": _cut(h.source, 63),
    }
    rows = [row(h) for h in PRESETS.values()]
    for folder in sorted(PROFILE_DIR.iterdir()):  # shipped profiles of a machine that has no preset of its own
        meta_path = folder / "meta.json"
        if folder.name in PRESETS or not meta_path.is_file():
            continue
        meta = json.loads(meta_path.read_text())
        base = next((r for r in rows if r["hardware"] == meta.get("hardware_preset")), None)
        if base is not None:
            rows.append({**base, "hardware": folder.name,
                         "latency": f"{origin_label(meta)} (preset {base['hardware']}'s other facts)",
                         "source": _cut(str(meta.get("device_name") or base["source"]), 63)})
    if names:  # one of the rows above by name, else a hardware file or profile folder (an unknown name: exit 2)
        known = {r["hardware"]: r for r in rows}
        rows = [known[n] if n in known else _file_row(n, row) for n in names]
    typer.echo(table(rows))


def _file_row(path: str, row) -> dict:
    """A listing row of a hardware JSON file or a profile folder (`row` of its hardware), the latency
    column saying where its op latencies come from."""
    from speedplan.cost.ops import load_cost_model

    cost = load_cost_model(path)
    return {**row(cost.hardware), "hardware": path, "latency": cost.origin}


def engines(profile: Optional[List[str]] = typer.Argument(
        None, metavar="[PROFILE]...", help="Engine profiles to show in full, each term with its value, unit and "
        "source: a shipped name or a JSON file from speedplan calibrate.")) -> None:
    """List engine profiles: the engine and version each describes, how much of a GPU its memory rule
    lets weights and KV cache hold, and how its terms were set: speedplan engines. Name a profile
    (speedplan engines vllm, or a file from speedplan calibrate) to see every term and its source."""
    from speedplan.engine.profile import get_engine, preset_names

    if profile:
        shown = [get_engine(p) for p in profile]  # all read before anything prints: a bad one is exit 2 alone
        typer.echo("\n\n".join(_engine_detail(e) for e in shown))
        return
    rows = []
    for name in preset_names():
        e = get_engine(name)
        fitted = sum(t.source.startswith("fitted") for t in e.terms.values())
        fit = e.fit or {}
        to = (f" to {len(fit.get('rows', []))} rows{e.fitted_at()} ({fit['described']}), |residual| median "
              f"{fit['median_abs_residual']:.1%}" if fitted and fit.get("described") else "")
        rows.append({"engine": e.name, "describes": _cut(f"{e.engine} {e.version}", 60),
                     "memory": e.memory.summary(), "terms fitted": f"{fitted} of {len(e.terms)}{to}"})
    typer.echo(table(rows))


def _engine_detail(e) -> str:
    """One engine profile in full: what it describes, its memory rule, how its terms were set, and
    each term's value, unit and source."""
    from speedplan.engine.profile import TERMS

    lines = [e.label(), f"  {e.description}" if e.description else "", f"  memory: {e.memory.summary()} ({e.memory.source})",
             f"  terms: {e.provenance()}"]
    width = max(len(n) for n in e.terms)
    for name, term in e.terms.items():
        lines.append(f"  {name.ljust(width)}  {term.value:,.4g} [{TERMS[name].unit}]: {term.source}")
    return "\n".join(line for line in lines if line)


def _cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, an ellipsis marking a cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: list[dict]) -> str:
    """Rows of equal keys as a plain-text table, columns left-aligned."""
    if not rows:
        return ""
    cols = list(rows[0])
    cell = lambda v: f"{v:g}" if isinstance(v, float) else str(v)
    widths = {c: max(len(c), *(len(cell(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(cell(r[c]).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)
