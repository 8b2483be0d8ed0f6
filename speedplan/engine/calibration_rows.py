"""The rows of `speedplan calibrate` as printed: the table of each row's measurement, prediction and
held-out error, and the notes on how rows were read from benchmark files (a context derived from
the run's token counts, a vLLM run whose output_throughput and mean_tpot_ms disagree)."""

from __future__ import annotations

from speedplan.engine.readers.measurement import Measurement

# a file's field in another unit than the row's quantity: the unit named beside it
_FIELD_SHOWN = {"step_time": "step_time (s)"}
PRINTED_ROWS = 40  # rows with the largest |residual| printed, where a file holds more
# The row column's width, wider where a mechanism's name needs it: the quantity then starts at
# column 39, as the held-out rows benchmarks/fit_engine_profiles.py prints below the table.
LABEL = 27


# quantities priced with the row's acceptance length (tpot_ms = step / AL, tokens_per_s = R·AL / step,
# speedup = R·AL / step over plain decoding's R / step): the table shows the AL they were priced at
WITH_AL = ("tpot_ms", "tokens_per_s", "speedup")


def _order(row: dict) -> tuple:
    """Where a row stands in the table: plain decoding first, then by mechanism, batch, draft length,
    context and temperature, numerically (files given in glob order put B = 1, 32, 64, 8)."""
    return (row["mechanism"] != "none", row["mechanism"], float(row["batch"]), float(row["draft_len"]),
            float(row["context"]), float(row.get("temperature") or 0.0))


def row_table(rows: list[dict], held_out: str) -> list[str]:
    """One line per row (`Calibration.rows`; above PRINTED_ROWS the worst by |residual|), in
    `_order`: its configuration (T=: the temperature a row sampled at, above 0), context (tokens),
    quantity, the file's field it was read from (where some row's file names it otherwise:
    mean_tpot_ms, output_throughput, step_time), the acceptance length it was priced at (AL, where
    its quantity takes one), measured, predicted, residual (predicted / measured − 1 of the
    quantity) and held-out error, under a line saying what the residual's sign means; where the rows
    come from several files, each line ends with its file's number, and a line lists the files."""
    shown = rows
    if len(rows) > PRINTED_ROWS:  # the worst ones; every row is in the profile's fit.rows
        worst = sorted(range(len(rows)), key=lambda i: -abs(rows[i]["residual"]))[:PRINTED_ROWS]
        shown = [rows[i] for i in worst]
    shown = sorted(shown, key=_order)  # stable: repeats keep the order they were read in
    labels = [f"{r['mechanism']} B={r['batch']} D={r['draft_len']}" + (f" T={r['temperature']:g}" if r.get("temperature")
                                                                       else "") for r in shown]  # T: sampled at
    file_of = lambda r: str(r.get("where", "")).rsplit(":", 1)[0] if ":" in str(r.get("where", "")) else None
    files = list(dict.fromkeys(f for f in map(file_of, rows) if f))  # "path:line": in the order read
    several = len(files) > 1  # rows of several files: each line ends with its file's number, listed below
    sources = [f" [{files.index(file_of(r)) + 1}]" if several and file_of(r) else "" for r in shown]
    fields = [_FIELD_SHOWN.get(r.get("field"), r.get("field")) or r["quantity"] for r in shown]
    named = any(f != r["quantity"] for f, r in zip(fields, shown))  # a file's own name: say which field
    als = [f"{r['acceptance_length']:.3g}" if r["quantity"] in WITH_AL and r["mechanism"] != "none" else ""
           for r in shown]
    al_width = max(2, *map(len, als)) if any(als) else 0  # 0: no row's quantity takes its AL
    width = max([LABEL, *map(len, labels)])
    field_width = max(len("read from"), *map(len, fields))
    rates = any(r["quantity"] in ("tokens_per_s", "speedup") for r in shown)
    sign = ("  residual = predicted / measured − 1 of the row's quantity: + is priced slower for a time"
            + (", faster for tokens_per_s and speedup" if rates else "")
            + ("; AL: the acceptance length the row is priced at (tpot_ms = step / AL)" if al_width else ""))
    lines = [sign,
             f"  {'row':<{width}} {'context':>7}  {'quantity':<12}" + (f" {'read from':<{field_width}}" if named else "")
             + (f" {'AL':>{al_width}}" if al_width else "")
             + f" {'measured':>9} {'predicted':>10} {'residual':>8} {held_out}"]
    loos = ["" if r["loo_error"] is None else f"{r['loo_error']:.1%}" for r in shown]
    loo_width = max(map(len, loos), default=0)  # the files' numbers after it line up
    for r, label, field, al, source, loo in zip(shown, labels, fields, als, sources, loos):
        lines.append(f"  {label:<{width}} {r['context']:>7}  {r['quantity']:<12}"
                     + (f" {field:<{field_width}}" if named else "") + (f" {al:>{al_width}}" if al_width else "")
                     + (f" {r['measured']:>9.4g} {r['predicted']:>10.4g} {r['residual']:>+8.1%} {loo:<{loo_width}}"
                        + source).rstrip())
    if len(shown) < len(rows):
        lines.append(f"  ({len(rows) - len(shown):,} more rows, each |residual| below those above: every "
                     "row's residual is in the profile's fit.rows)")
    if several:
        lines.append("  files: " + "; ".join(f"[{i}] {f}" for i, f in enumerate(files, start=1)))
    return lines


def read_notes(rows: list[Measurement]) -> list[str]:
    """The readers' notes on rows of benchmark files (`Measurement.notes`: where a context came from
    when the file did not state it, a vLLM run whose output_throughput disagrees with its
    mean_tpot_ms), each said once with the files and the runs or lines it holds for ("PATH runs
    1-6: ...", "A.json, B.json run 1 each: ..." where files of one run each share it)."""
    said: dict[str, dict[str, list[str]]] = {}  # note -> file -> the runs or lines it was said of
    for m in rows:
        path, _, tag = m.where.rpartition(":")  # PATH:run I (vLLM), PATH:I (SGLang lines)
        for note in m.notes:
            said.setdefault(note, {}).setdefault(path or m.where, []).append(tag)
    out = []
    for note, files in said.items():
        groups: dict[str, list[str]] = {}  # "runs 1-6" -> the files it is said of
        for path, tags in files.items():
            word = "run" if all(t.startswith("run ") for t in tags) else "line"
            numbers = [t.removeprefix("run ") for t in tags]
            groups.setdefault(f"{word}{'s' if len(set(numbers)) > 1 else ''} {_spans(numbers)}", []).append(path)
        out.append("; ".join(f"{', '.join(paths)} {which}" + (" each" if len(paths) > 1 else "")
                             for which, paths in groups.items()) + f": {note}")
    return out


def _spans(numbers: list[str]) -> str:
    """"1-3, 5" for runs or lines 1, 2, 3 and 5."""
    values = sorted({int(n) for n in numbers if n.isdigit()})
    spans: list[list[int]] = []
    for v in values:
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
