"""Reading a profile folder's files: `meta.json` (provenance) and one CSV per op family,
latency in microseconds, one row per measured point. Every problem names the file, column and
line. Columns are read and checked as whole arrays (pandas' C parser): a shipped GPU profile
has ~80,000 rows, and the sweep reads one on every run.

Families (docs/profiles.md): `gemm`, `attention` (decode / verify: q_len new tokens on kv_len
keys), `prefill` (causal prefill of seq_len tokens, no cached prefix), `elementwise`,
`allreduce`, `moe`, `floors`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.specs.files import read_json, read_problem
from speedplan.specs.hardware import DTYPE_BYTES

ORIGINS = {"measured": "profile", "derived": "profile", "datasheet-roofline": "roofline"}
META_REQUIRED = ("device_name", "hardware_preset", "origin", "date", "microbench_version", "grid", "versions")
# column -> kind; "pos" positive number, "count" positive whole number (a shape, a byte count), "dtype",
# "mask", "str", "bool01"
TABLES = {
    "gemm": {"m": "count", "n": "count", "k": "count", "dtype": "dtype", "latency_us": "pos"},
    "attention": {"batch": "count", "q_len": "count", "kv_len": "count", "num_heads": "count", "num_kv_heads": "count",
                  "head_dim": "count", "mask": "mask", "dtype": "dtype", "latency_us": "pos"},
    "prefill": {"batch": "count", "seq_len": "count", "num_heads": "count", "num_kv_heads": "count", "head_dim": "count",
                "dtype": "dtype", "latency_us": "pos"},
    "elementwise": {"op": "str", "numel": "count", "nbytes": "count", "dtype": "dtype", "latency_us": "pos"},
    "allreduce": {"num_gpus": "count", "nbytes": "count", "dtype": "dtype", "latency_us": "pos"},
    "moe": {"tokens": "count", "hidden": "count", "inter": "count", "experts": "count", "topk": "count", "tp": "count", "ep": "count",
            "dtype": "dtype", "distribution": "str", "latency_us": "pos"},
    "floors": {"op": "str", "graph": "bool01", "dtype": "dtype", "latency_us": "pos"},
}
REQUIRED_TABLES = ("gemm",)
MAX_POS = 1e15  # no shape, byte count or latency (µs: 30 years) of a real measurement comes near this


def file_line(path: Path, i: int) -> int:
    """The line of `path` (1 = the header) holding data row `i` as pandas read it: blank lines, which
    pandas skips, are counted (an error had named line 6 for a bad value on line 7 below a blank one)."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            next(f, None)
            for n, line in enumerate(f, start=2):
                if line.strip():
                    if i == 0:
                        return n
                    i -= 1
    except OSError:
        pass
    return i + 2


def read_table(path: Path, spec: dict[str, str]) -> dict[str, np.ndarray]:
    """Columns of a profile CSV as arrays (numbers as float, text as object); any problem
    names the file, column and line."""
    import pandas as pd

    text_cols = {c: "category" for c, kind in spec.items() if kind not in ("pos", "count", "bool01")}  # few distinct values
    try:
        frame = pd.read_csv(path, dtype=text_cols, keep_default_na=False, engine="c")
    except pd.errors.EmptyDataError:
        raise SpeedplanInputError(f"{path}: empty file (no header)") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as e:
        raise SpeedplanInputError(f"{path}: cannot read ({read_problem(e)})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    for col in spec:
        if col not in frame.columns:
            raise SpeedplanInputError(f"{path}: missing column {col!r}")
    if frame.empty:
        raise SpeedplanInputError(f"{path}: no rows (incomplete profile)")
    out = {}
    for col, kind in spec.items():
        series = frame[col]
        if kind in ("pos", "count", "bool01"):
            numeric = series.dtype.kind in "iuf"
            values = (series.to_numpy(dtype=float) if numeric else
                      pd.to_numeric(series.astype(str).str.strip(), errors="coerce").to_numpy(dtype=float))
            ok = np.isin(values, (0.0, 1.0)) if kind == "bool01" else np.isfinite(values) & (values > 0) & (values <= MAX_POS)
            if kind == "count":  # M = 1.5 had been read as a GEMM shape
                ok &= np.mod(values, 1.0, where=ok, out=np.ones_like(values)) == 0
            want = ("0 or 1" if kind == "bool01" else f"a positive {'whole ' * (kind == 'count')}number up to "
                    f"{MAX_POS:g}")
            out[col] = values
        else:
            allowed = {"dtype": list(DTYPE_BYTES), "mask": ["causal", "tree"]}.get(kind)
            names = np.array([str(c).strip() for c in series.cat.categories], dtype=object)  # a hand-edited file may pad
            codes = series.cat.codes.to_numpy()  # -1: no value (a short row)
            values = np.where(codes >= 0, names[codes], "")
            good = np.isin(names, allowed) if allowed is not None else names != ""
            ok = (codes >= 0) & good[codes]
            want = f"one of {sorted(allowed or ['non-empty'])}"
            out[col] = values
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise SpeedplanInputError(f"{path}: column {col!r} line {file_line(path, i)}: {str(frame[col].iloc[i])!r} is not {want}")
    if "num_kv_heads" in out:  # grouped-query attention: each KV head serves num_heads / num_kv_heads query heads
        bad = np.flatnonzero(np.mod(out["num_heads"], out["num_kv_heads"]) != 0)
        if len(bad):
            i = int(bad[0])
            raise SpeedplanInputError(f"{path}: column 'num_kv_heads' line {file_line(path, i)}: {out['num_kv_heads'][i]:g} does not "
                                      f"divide num_heads {out['num_heads'][i]:g} (no attention splits its heads so)")
    if "q_len" in out:  # kv_len counts the step's own tokens too (docs/profiles.md)
        bad = np.flatnonzero(out["q_len"] > out["kv_len"])
        if len(bad):
            i = int(bad[0])
            raise SpeedplanInputError(f"{path}: column 'q_len' line {file_line(path, i)}: {out['q_len'][i]:g} is more "
                                      f"than kv_len {out['kv_len'][i]:g}, which counts the new tokens too")
    return out


def read_tables(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Every family's table present in profile folder `path` (gemm.csv is required)."""
    for f in path.iterdir():  # "attention.CSV" had been skipped without a word, its family priced by the roofline
        if (f.name.lower() in {f"{n}.csv" for n in TABLES} and f.name not in {f"{n}.csv" for n in TABLES}
                and not (path / f.name.lower()).exists()):  # a case-blind file system finds it anyway
            raise SpeedplanInputError(f"{f}: speedplan reads this table only as {f.name.lower()} (lower case); rename it")
    for name in REQUIRED_TABLES:
        if not (path / f"{name}.csv").exists():
            raise SpeedplanInputError(f"{path / f'{name}.csv'}: missing (incomplete profile)")
    return {name: read_table(path / f"{name}.csv", spec) for name, spec in TABLES.items()
            if (path / f"{name}.csv").exists()}


def read_meta(path: Path) -> dict:
    meta_path = path / "meta.json"
    if not meta_path.exists():
        raise SpeedplanInputError(f"{meta_path}: missing (not a profile folder)")
    meta = read_json(meta_path)  # a leading byte-order mark is skipped, as by the other readers
    if not isinstance(meta, dict):
        raise SpeedplanInputError(f"{meta_path}: expected a JSON object")
    if "sweep_id" in meta:  # what speedplan sweep writes
        raise SpeedplanInputError(f"{path}: a sweep's report folder, not a profile folder (speedplan hardware lists "
                                  "the profiles)")
    for key in META_REQUIRED:
        if key not in meta:
            raise SpeedplanInputError(f"{meta_path}: missing field {key!r}")
    if meta["origin"] not in ORIGINS:
        raise SpeedplanInputError(f"{meta_path}: field 'origin' must be one of {sorted(ORIGINS)}, got {meta['origin']!r}")
    if meta.get("complete") is False:
        from microbench.store import lock_holder

        holder = lock_holder(meta_path.parent)
        raise SpeedplanInputError(
            f"{meta_path}: field 'complete' is false: " + (
                f"a speedplan bench (pid {holder}) is still measuring this folder; wait for it to finish"
                if holder is not None else "the bench run stopped early; rerun the same `speedplan bench` "
                "command to measure the missing points"))
    return meta
