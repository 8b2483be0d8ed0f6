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
    from speedplan.report.catalog import model_rows

    typer.echo(table([{**r, "source": _cut(r["source"], 90)} for r in model_rows(configs)]))


def hardware(names: Optional[List[str]] = typer.Argument(
        None, metavar="[NAME]...", help="Presets, shipped profiles or hardware files to show (default: every preset "
        "and shipped profile).")) -> None:
    """List hardware presets with their datasheet numbers (memory: what the driver reports), where op
    latencies come from (a shipped measured profile or the datasheet roofline) and sources: speedplan hardware"""
    from speedplan.report.catalog import hardware_rows

    typer.echo(table([{**r, "source": _cut(r["source"], 63)} for r in hardware_rows(names)]))


def engines(profile: Optional[List[str]] = typer.Argument(
        None, metavar="[PROFILE]...", help="Engine profiles to show in full, each term with its value, unit and "
        "source: a shipped name or a JSON file from speedplan calibrate.")) -> None:
    """List engine profiles: the engine and version each describes, how much of a GPU its memory rule
    lets weights and KV cache hold, and how its terms were set: speedplan engines. Name a profile
    (speedplan engines vllm, or a file from speedplan calibrate) to see every term and its source."""
    from speedplan.engine.profile import get_engine

    if profile:
        shown = [get_engine(p) for p in profile]  # all read before anything prints: a bad one is exit 2 alone
        typer.echo("\n\n".join(_engine_detail(e) for e in shown))
        return
    from speedplan.report.catalog import engine_rows

    typer.echo(table([{**r, "describes": _cut(r["describes"], 60)} for r in engine_rows()]))


def mechanisms(
        model: Optional[str] = typer.Option(None, help="A model preset or config.json: show which mechanisms a sweep of it "
                                            "prices by default, why the others are left out, and their default acceptance."),
        tp: int = typer.Option(1, help="Tensor-parallel size of the target (with --model)."),
        draft_len: int = typer.Option(3, help="Draft length D, 1..16, at which the acceptance length is shown (with --model; "
                                      "trees: 16 verified nodes)."),
) -> None:
    """List speculative-decoding mechanisms: the spec --mechanism reads, what the target verifies and
    how each drafts: speedplan mechanisms. With --model, which a sweep prices and their published
    default acceptance with its source: speedplan mechanisms --model llama-3.1-8b"""
    from speedplan.report.catalog import mechanism_rows

    rows = mechanism_rows(model, tp, draft_len, names=("--tp", "--draft-len", "--model"))
    width = {"drafting": 100, "swept": 70, "acceptance source": 90}
    typer.echo(table([{k: _cut(v, width[k]) if k in width else v for k, v in r.items()} for r in rows]))


def _engine_detail(e) -> str:
    """One engine profile in full: what it describes, its memory rule, how its terms were set, and
    each term's value, unit and source."""
    from speedplan.engine.profile import TERMS

    lines = [e.label(), f"  {e.description}" if e.description else "", f"  memory: {e.memory.summary()} ({e.memory.source})",
             f"  terms: {e.provenance()}"]
    width = max(len(n) for n in e.terms)
    kept = (e.fit or {}).get("kept") or {}  # a calibration's terms it tried and kept at the base's value, with why
    kept_values = (e.fit or {}).get("kept_values") or {}  # their values then: a term edited since is not "kept"
    for name, term in e.terms.items():
        unchanged = isinstance(kept_values.get(name), (int, float)) and term.value == float(kept_values[name])
        why = (f"kept at the base's value by its calibration ({kept[name]}); the base's source: "
               if isinstance(kept.get(name), str) and unchanged else "")
        lines.append(f"  {name.ljust(width)}  {term.value:,.4g} [{TERMS[name].unit}]: {why}{term.source}")
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
