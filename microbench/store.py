"""The resumable profile writer: one CSV per op family, one row appended (and flushed to disk)
per measured point, `meta.json` with provenance rewritten at start and end.

A run killed at any moment loses at most the block of points (with --one-by-one, the point)
being measured: rerun with the same arguments and only points without a row are measured. A
torn last line (killed mid-write) is dropped on reopen. One run writes a folder at a time: a
second is refused while `.bench.lock` names a live process of this machine (`LOCK`).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from .grid import KEY_COLUMNS, elementwise_nbytes, family_of, point_key
from .timing import Timing

MAX_OTHER_CPU = 0.25  # cores' worth of other processes' CPU above which a CPU timing counts as busy (retried)
LOCK = ".bench.lock"  # pid and host of the run writing the folder
VALUE_COLUMNS = ["latency_us", "min_us", "p90_us", "repeats", "calls_per_repeat", "other_cpu"]
EXTRA_COLUMNS = {"elementwise": ["nbytes"]}


def table_columns(family: str) -> list[str]:
    return KEY_COLUMNS[family] + EXTRA_COLUMNS.get(family, []) + VALUE_COLUMNS


def _read_rows(path: Path) -> list[dict]:
    """Rows of a CSV written by this module, dropping a torn last line in place."""
    if not path.exists():
        return []
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
        path.write_bytes(data)
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def is_busy(other_cpu) -> bool:
    """Whether a point was timed while other processes used more than MAX_OTHER_CPU cores: its
    `other_cpu` as a CSV cell or a Timing gives it (blank, None or text: not known, not busy)."""
    try:
        return float(other_cpu if other_cpu not in (None, "") else "nan") > MAX_OTHER_CPU
    except (TypeError, ValueError):
        return False


def lock_holder(out: Path) -> int | None:
    """The pid of a live process of this machine whose bench run is writing `out`, or None."""
    try:
        pid, host = (out / LOCK).read_text().split()[:2]
        if host != os.uname().nodename or int(pid) == os.getpid():
            return None
        os.kill(int(pid), 0)
        return int(pid)
    except (OSError, ValueError):  # no lock, a torn one, or its process is gone
        return None


class ProfileStore:
    """Appends measured points to `out/<table>.csv`; knows which points are already there."""

    def __init__(self, out: Path, meta: dict):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        holder = lock_holder(self.out)
        if holder is not None:
            raise ValueError(f"{self.out}: another speedplan bench (pid {holder}) is writing this folder; wait for it "
                             "or use another --out folder")
        meta_path = self.out / "meta.json"
        old = json.loads(meta_path.read_text(encoding="utf-8-sig")) if meta_path.exists() else {}  # BOM: an editor's
        for field in ("device", "device_name", "hardware_preset", "threads"):
            if old and old.get(field) != meta.get(field):
                raise ValueError(f"{meta_path}: holds a profile of {field}={old.get(field)!r}, "
                                 f"not {meta.get(field)!r}; use another --out folder")
        (self.out / LOCK).write_text(f"{os.getpid()} {os.uname().nodename}\n")
        self.meta = {**old, **meta, "complete": False}
        self.meta["wall_s"] = float(old.get("wall_s", 0.0))
        self.meta["grid"] = sorted(set(old.get("grid", [])) | set(meta.get("grid", [])))
        self._write_meta()
        self.done: dict[str, set[tuple[str, ...]]] = {}
        self.rows: dict[str, int] = {}
        self.busy = 0  # rows timed while the machine was busy (`is_busy`), in every table
        for table in ("gemm", "attention", "elementwise", "floors", "gemm_cupy"):
            family = "gemm" if table == "gemm_cupy" else table
            rows = _read_rows(self.out / f"{table}.csv")
            self.done[table] = {tuple(r[c] for c in KEY_COLUMNS[family]) for r in rows}
            self.rows[table] = len(rows)
            self.busy += sum(is_busy(r.get("other_cpu")) for r in rows)

    def _write_meta(self) -> None:
        tmp = self.out / "meta.json.tmp"
        tmp.write_text(json.dumps(self.meta, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self.out / "meta.json")

    def has(self, point, table: str | None = None) -> bool:
        return point_key(point) in self.done[table or family_of(point)]

    def append(self, point, timing: Timing, table: str | None = None) -> None:
        family = family_of(point)
        table = table or family
        path = self.out / f"{table}.csv"
        columns = table_columns(family)
        row = {c: getattr(point, c) for c in KEY_COLUMNS[family]}
        if family == "elementwise":
            row["nbytes"] = elementwise_nbytes(point)
        row.update(latency_us=f"{timing.latency_us:.4f}", min_us=f"{timing.min_us:.4f}",
                   p90_us=f"{timing.p90_us:.4f}", repeats=timing.repeats,
                   calls_per_repeat=timing.calls_per_repeat,
                   other_cpu="" if timing.other_cpu is None else timing.other_cpu)
        new = not path.exists() or path.stat().st_size == 0
        with path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
            if new:
                writer.writeheader()
            writer.writerow(row)
            f.flush()
            os.fsync(f.fileno())
        self.done[table].add(point_key(point))
        self.rows[table] = self.rows.get(table, 0) + 1
        self.busy += is_busy(timing.other_cpu)

    def finish(self, complete: bool, wall_s: float, extra: dict | None = None) -> dict:
        self.meta.update(extra or {})
        self.meta["complete"] = complete
        self.meta["wall_s"] = round(self.meta["wall_s"] + wall_s, 2)
        self.meta["points"] = {t: n for t, n in self.rows.items() if n}
        self.meta["busy_points"] = int(self.busy)  # timed while other processes used > MAX_OTHER_CPU cores
        self._write_meta()
        (self.out / LOCK).unlink(missing_ok=True)
        return self.meta
