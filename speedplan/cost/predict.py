"""`speedplan predict ops`: op-latency queries in bulk (contract in DESIGN.md).

ops.csv columns: `op` (gemm or attention); for gemm `m,n,k,dtype`; for attention
`batch,q_len,kv_len,num_heads,num_kv_heads,head_dim,mask,dtype`; unused columns may be blank.
pred.csv is the input plus `latency_us`, `source` (profile or roofline), `bound` and
`out_of_range` (1 where a profile answered from outside its measured range, else 0: `source`
stays "profile" there, and `speedplan predict ops` counts such rows on its last line). An
out-of-range answer carries the edge's utilisation or its trend but is never faster than the
device's peak compute and bandwidth (`speedplan.profile.dense.at_peak_or_slower`).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from speedplan.cost.ops import CostModel
from speedplan.errors import SpeedplanInputError
from speedplan.outputs import write_whole
from speedplan.specs.files import read_problem, refuse_device
from speedplan.specs.hardware import DTYPE_BYTES

GEMM_COLUMNS = ("m", "n", "k")
ATTENTION_COLUMNS = ("batch", "q_len", "kv_len", "num_heads", "num_kv_heads", "head_dim")
OUTPUT_COLUMNS = ["latency_us", "source", "bound", "out_of_range"]


def _cell(row: dict, col: str) -> str:
    """A cell as the CSV reader gives it: text, "" when empty; a number from Python (16, np.int64(16),
    a DataFrame's NaN for an empty cell) reads as its text."""
    value = row.get(col)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def _rows(rows, where: str) -> list[dict]:
    """`rows` as a list of dicts: a list (or any iterable) of them, or a DataFrame with ops.csv's columns."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a DataFrame
        rows = rows.to_dict("records")
    if isinstance(rows, (str, bytes, dict)) or not isinstance(rows, Iterable):
        raise SpeedplanInputError(f"{where}: rows must be a list of dicts of ops.csv columns, got {type(rows).__name__}")
    rows = list(rows)
    wrong = next((i for i, row in enumerate(rows, start=2) if not isinstance(row, dict)), None)
    if wrong is not None:
        raise SpeedplanInputError(f"{where}: row {wrong}: expected a dict of ops.csv columns, "
                                  f"got {type(rows[wrong - 2]).__name__}")
    return rows


def _positive(rows: list[dict], columns, where: str) -> dict[str, np.ndarray]:
    out = {}
    for col in columns:
        values = []
        for i, row in rows:
            if col not in row:
                raise SpeedplanInputError(f"{where}: row {i}: no column {col!r} (a {_cell(row, 'op') or '?'} row "
                                          "needs it)")
            text = _cell(row, col)
            try:
                if "_" in text or not text.isascii():  # float() reads "1_6" as 16 and Arabic-Indic digits too
                    raise ValueError
                v = float(text)
            except ValueError:
                raise SpeedplanInputError(f"{where}: row {i}: column {col!r} must be a number, got {text!r}") from None
            if not (math.isfinite(v) and 0 < v < 1e9 and v == int(v)):
                raise SpeedplanInputError(f"{where}: row {i}: column {col!r} must be a positive integer below 1e9, "
                                          f"got {text!r}")
            values.append(v)
        out[col] = np.array(values)
    return out


# An op of more multiply-adds than this (2e16 FLOPs: 20 s at an H100's bf16 peak) is no decode or
# prefill op of any model: a 1e9 x 1e9 x 1e9 GEMM was answered in 73,000 years, labelled `profile`.
MOST_MACS = 1e16


def _not_absurd(macs: np.ndarray, lines: list, what: str, where: str) -> None:
    big = np.flatnonzero(macs > MOST_MACS)
    if len(big):
        raise SpeedplanInputError(f"{where}: row {lines[big[0]]}: {what} = {macs[big[0]]:.3g} multiply-adds, above "
                                  f"{MOST_MACS:g} (seconds of a whole GPU): no model's op is that large; check the sizes")


def predict_ops(cost: CostModel, rows: list[dict], where: str = "ops.csv", lines=None) -> list[dict]:
    """Answer each row (a dict of ops.csv columns); returns rows with latency_us (a float, µs;
    pred.csv prints it to 4 decimals), source, bound and out_of_range. Cells may be text (as csv gives them) or numbers. `lines`: each
    row's line in the file, for messages (default: 2, 3, ... after a header)."""
    if not (callable(getattr(cost, "gemm", None)) and callable(getattr(cost, "attention", None))):
        raise SpeedplanInputError(f"predict_ops: cost must be a CostModel (speedplan.cost.ops.load_cost_model"
                                  f"(\"h100-sxm\")), got {type(cost).__name__}")
    rows = _rows(rows, where)
    lines = list(lines) if lines is not None and len(lines) == len(rows) else list(range(2, len(rows) + 2))
    gemm, attn = [], []
    for i, row in zip(lines, rows):  # line numbers as a spreadsheet shows them
        op = _cell(row, "op").lower()
        dtype = _cell(row, "dtype").lower()
        if dtype not in DTYPE_BYTES:
            short = " (the row has fewer cells than the header)" if row.get("dtype", "") is None else ""
            raise SpeedplanInputError(f"{where}: row {i}: column 'dtype' must be one of {', '.join(DTYPE_BYTES)}, "
                                      f"got {dtype!r}{short}")
        if op == "gemm":
            gemm.append((i, row))
        elif op == "attention":
            mask = _cell(row, "mask").lower()
            if mask not in ("causal", "tree"):
                raise SpeedplanInputError(f"{where}: row {i}: column 'mask' must be causal or tree, got {mask!r}")
            attn.append((i, row))
        else:
            raise SpeedplanInputError(f"{where}: row {i}: column 'op' must be gemm or attention, got {op!r}")
        peaks = getattr(getattr(cost, "hardware", None), "peak_flops_per_s", None)
        if isinstance(peaks, dict) and not peaks.get(dtype):  # was "hardware cpu-local has no bf16 peak", no row
            have = ", ".join(d for d in DTYPE_BYTES if peaks.get(d))
            raise SpeedplanInputError(f"{where}: row {i}: column 'dtype' {dtype!r}: hardware {cost.hardware.name} has "
                                      f"no {dtype} peak; it prices {have}")
    results: dict[int, tuple[float, str, str, bool]] = {}
    for dtype in sorted({_cell(r, "dtype").lower() for _, r in gemm}):
        sel = [(i, r) for i, r in gemm if _cell(r, "dtype").lower() == dtype]
        a = _positive(sel, GEMM_COLUMNS, where)
        _not_absurd(a["m"] * a["n"] * a["k"], [i for i, _ in sel], "M·N·K", where)
        c = cost.gemm(a["m"], a["n"], a["k"], dtype)
        for j, (i, _) in enumerate(sel):
            results[i] = (float(c.latency_us[j]), str(c.source[j]), str(c.bound[j]), bool(c.out_of_range[j]))
    for dtype in sorted({_cell(r, "dtype").lower() for _, r in attn}):
        sel = [(i, r) for i, r in attn if _cell(r, "dtype").lower() == dtype]
        a = _positive(sel, ATTENTION_COLUMNS, where)
        uneven = np.flatnonzero(a["num_heads"] % a["num_kv_heads"])
        if len(uneven):
            raise SpeedplanInputError(f"{where}: row {sel[uneven[0]][0]}: num_heads must be a multiple of num_kv_heads")
        longer = np.flatnonzero(a["q_len"] > a["kv_len"])
        if len(longer):
            raise SpeedplanInputError(f"{where}: row {sel[longer[0]][0]}: q_len {a['q_len'][longer[0]]:g} is more than "
                                      f"kv_len {a['kv_len'][longer[0]]:g}, which counts the new tokens too")
        _not_absurd(a["batch"] * a["q_len"] * a["kv_len"] * a["num_heads"] * a["head_dim"], [i for i, _ in sel],
                    "batch·q_len·kv_len·num_heads·head_dim", where)
        mask = np.array([_cell(r, "mask").lower() for _, r in sel])
        c = cost.attention(a["batch"], a["q_len"], a["kv_len"], a["num_heads"], a["num_kv_heads"], a["head_dim"], mask, dtype)
        for j, (i, _) in enumerate(sel):
            results[i] = (float(c.latency_us[j]), str(c.source[j]), str(c.bound[j]), bool(c.out_of_range[j]))
    out = []
    for i, row in zip(lines, rows):
        latency, source, bound, outside = results[i]
        out.append({**row, "latency_us": latency, "source": source, "bound": bound, "out_of_range": int(outside)})
    return out


def predict_ops_file(cost: CostModel, in_path: Path, out_path: Path) -> int:
    """Read ops.csv, write pred.csv (atomically); returns the number of ops answered."""
    in_path = Path(in_path)
    refuse_device(in_path)  # /dev/zero: read without end
    try:
        with in_path.open(newline="", encoding="utf-8-sig") as f:  # -sig: Excel's "CSV UTF-8" starts with a BOM
            reader = csv.DictReader(f)
            known = {"op", "dtype", "mask", *GEMM_COLUMNS, *ATTENTION_COLUMNS}  # "OP", " dtype": read as ours
            if reader.fieldnames:
                reader.fieldnames = [c.strip().lower() if c and c.strip().lower() in known else c
                                     for c in reader.fieldnames]
            if not reader.fieldnames or "op" not in reader.fieldnames or "dtype" not in reader.fieldnames:
                found = ", ".join(repr(c) for c in (reader.fieldnames or [])[:8]) or "none"
                raise SpeedplanInputError(f"{in_path}: needs a header with at least the columns 'op' and 'dtype' "
                                          f"(found {found})")
            fieldnames = list(reader.fieldnames)
            rows, lines = [], []
            for row in reader:  # the line each row ends on: blank lines and quoted line breaks counted
                rows.append(row)
                lines.append(reader.line_num)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise SpeedplanInputError(f"{in_path}: cannot read ({read_problem(e)})") from None
    twice = [c for i, c in enumerate(fieldnames) if c in fieldnames[:i]]
    if twice:
        raise SpeedplanInputError(f"{in_path}: column {twice[0]!r} appears twice")
    ours = [c for c in fieldnames if c in OUTPUT_COLUMNS]
    if ours:
        raise SpeedplanInputError(f"{in_path}: column {ours[0]!r} is one predict writes; remove it from the input")
    long = next((i for i, row in zip(lines, rows) if None in row), None)
    if long is not None:
        raise SpeedplanInputError(f"{in_path}: row {long}: more cells than the header has columns")
    if not rows:
        raise SpeedplanInputError(f"{in_path}: no rows")
    answered = predict_ops(cost, rows, str(in_path), lines)
    out_path = Path(out_path).expanduser()
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=fieldnames + OUTPUT_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows({**r, "latency_us": f"{r['latency_us']:.4f}"} for r in answered)  # µs to 0.1 ns
    write_whole(out_path, text.getvalue())
    return len(answered)
