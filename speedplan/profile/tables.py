"""Reading a profile folder's files: `meta.json` (provenance) and one CSV per op family
(`gemm.csv`, `attention.csv`, `elementwise.csv`, `floors.csv`), latency in microseconds, one
row per measured point. Every problem names the file, column and line."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.specs.hardware import DTYPE_BYTES

ORIGINS = {"measured": "profile", "derived": "profile", "datasheet-roofline": "roofline"}
META_REQUIRED = ("device_name", "hardware_preset", "origin", "date", "microbench_version", "grid", "versions")
# column -> kind; "pos" positive number, "dtype", "mask", "str", "bool01"
TABLES = {
    "gemm": {"m": "pos", "n": "pos", "k": "pos", "dtype": "dtype", "latency_us": "pos"},
    "attention": {"batch": "pos", "q_len": "pos", "kv_len": "pos", "num_heads": "pos", "num_kv_heads": "pos",
                  "head_dim": "pos", "mask": "mask", "dtype": "dtype", "latency_us": "pos"},
    "elementwise": {"op": "str", "numel": "pos", "nbytes": "pos", "dtype": "dtype", "latency_us": "pos"},
    "floors": {"op": "str", "graph": "bool01", "dtype": "dtype", "latency_us": "pos"},
}


def read_table(path: Path, spec: dict[str, str]) -> dict[str, np.ndarray]:
    """Columns of a profile CSV as arrays; any problem names the file, column and line."""
    try:
        with path.open(newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            lines = [row for row in reader if row]
    except OSError as e:
        raise SpeedplanInputError(f"{path}: cannot read ({e.strerror})") from None
    if not header:
        raise SpeedplanInputError(f"{path}: empty file (no header)")
    header = [h.strip() for h in header]
    for col in spec:
        if col not in header:
            raise SpeedplanInputError(f"{path}: missing column {col!r}")
    if not lines:
        raise SpeedplanInputError(f"{path}: no rows (incomplete profile)")
    out = {}
    for col, kind in spec.items():
        j = header.index(col)
        values = []
        for line_no, row in enumerate(lines, start=2):
            text = row[j].strip() if j < len(row) else ""
            if kind in ("pos", "bool01"):
                try:
                    v = float(text)
                except ValueError:
                    v = math.nan
                ok = v in (0.0, 1.0) if kind == "bool01" else (math.isfinite(v) and v > 0)
                if not ok:
                    want = "0 or 1" if kind == "bool01" else "a positive number"
                    raise SpeedplanInputError(f"{path}: column {col!r} line {line_no}: {text!r} is not {want}")
                values.append(v)
            else:
                allowed = {"dtype": DTYPE_BYTES, "mask": ("causal", "tree")}.get(kind)
                if not text or (allowed is not None and text not in allowed):
                    raise SpeedplanInputError(
                        f"{path}: column {col!r} line {line_no}: {text!r} is not one of {sorted(allowed or ['non-empty'])}")
                values.append(text)
        out[col] = np.asarray(values, dtype=float if kind in ("pos", "bool01") else object)
    return out


def read_meta(path: Path) -> dict:
    meta_path = path / "meta.json"
    if not meta_path.exists():
        raise SpeedplanInputError(f"{meta_path}: missing (not a profile folder)")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as e:
        raise SpeedplanInputError(f"{meta_path}: malformed JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(meta, dict):
        raise SpeedplanInputError(f"{meta_path}: expected a JSON object")
    for key in META_REQUIRED:
        if key not in meta:
            raise SpeedplanInputError(f"{meta_path}: missing field {key!r}")
    if meta["origin"] not in ORIGINS:
        raise SpeedplanInputError(f"{meta_path}: field 'origin' must be one of {sorted(ORIGINS)}, got {meta['origin']!r}")
    if meta.get("complete") is False:
        raise SpeedplanInputError(
            f"{meta_path}: field 'complete' is false: the bench run stopped early; rerun the same "
            "`speedplan bench` command to measure the missing points")
    return meta
