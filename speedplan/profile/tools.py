"""Work on whole profiles: leave-one-out check of the lookup, datasheet-roofline profiles for
hardware not yet measured, and profiles derived from a measured one for a sibling chip."""

from __future__ import annotations

import csv
import datetime
import json
from pathlib import Path

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.outputs import PROFILE, check_replaceable, discard, move_into_place, staging_folder
from speedplan.specs.hardware import get_hardware
from speedplan.profile.attention import AttentionTable
from speedplan.profile.dense import ANSWERS
from speedplan.profile.load import load_profile
from speedplan.profile.lookup import ElementwiseTable, GemmTable
from speedplan.profile.tables import TABLES
from speedplan.cost.roofline import (allreduce_sol_us, attention_roofline, attention_sol_us, elementwise_roofline,
                                     elementwise_sol_us, gemm_roofline, gemm_sol_us, prefill_sol_us)

TABLE_CLASSES = {"gemm": GemmTable, "attention": AttentionTable, "elementwise": ElementwiseTable}
LOO_SAMPLE = 1000  # points left out per family (a shipped GPU profile has ~80,000; each needs its own table)

_QUERY = {
    "gemm": ("m", "n", "k"),
    "attention": ("batch", "q_len", "kv_len", "num_heads", "num_kv_heads", "head_dim", "mask"),
    "elementwise": ("nbytes",),
}


def _lookup(table, family: str, rows: dict, idx, dtype: str):
    if family == "elementwise":  # each op is checked against its own series
        return table.lookup(rows["nbytes"][idx], dtype, op=rows["op"][idx])
    return table.lookup(*(rows[c][idx] for c in _QUERY[family]), dtype)


def leave_one_out(path: str | Path, sample: int = LOO_SAMPLE) -> dict:
    """Relative error |pred − meas| / meas of each measured point predicted from the profile
    without it (the profile's hardware facts stay those of the full profile); a family with
    more than `sample` points is checked on a random `sample` of them (seed 0).

    Returns {"median_error", "p90_error", "points", "families": {family: {...}}}; errors are
    fractions (0.02 = 2%)."""
    profile = load_profile(path)
    profile.check_repeated_points()
    hw = profile.hardware
    families, pooled, unchecked = {}, [], []
    for family, cls in TABLE_CLASSES.items():
        rows = profile.tables.get(family)
        if rows is None:
            continue
        unchecked.append(family)  # until a point of it is predicted without itself
        n = len(rows["latency_us"])
        points = np.arange(n) if n <= sample else np.sort(np.random.default_rng(0).choice(n, sample, replace=False))
        errors, how = [], []
        extra = (profile.table("prefill"),) if family == "attention" else ()
        for i in points:
            keep = np.arange(n) != i
            table = cls({c: v[keep] for c, v in rows.items()}, hw, *extra)
            pred, code = _lookup(table, family, rows, [i], str(rows["dtype"][i]))
            if np.isfinite(pred[0]):
                errors.append(abs(pred[0] - rows["latency_us"][i]) / rows["latency_us"][i])
                how.append(str(ANSWERS[code[0]]) if np.issubdtype(np.asarray(code).dtype, np.integer) else str(code[0]))
        if errors:
            e = np.asarray(errors)
            families[family] = {"median_error": float(np.median(e)), "p90_error": float(np.percentile(e, 90)),
                                "max_error": float(e.max()), "points": len(e),
                                "answers": {h: how.count(h) for h in sorted(set(how))}}
            pooled.extend(errors)
            unchecked.remove(family)
    if not pooled:
        raise SpeedplanInputError(f"{path}: no table has two or more points to check")
    e = np.asarray(pooled)
    result = {"profile": shown_name(path), "origin": profile.origin, "median_error": float(np.median(e)),
              "p90_error": float(np.percentile(e, 90)), "points": len(e), "families": families}
    notes = []
    if profile.origin == "datasheet-roofline":
        notes.append("tables are the datasheet roofline itself (not measured): the errors say only how well the grid "
                     "reproduces the roofline between and beyond its points, nothing measured")
    spikes = gemm_spikes(profile.tables.get("gemm"))
    if spikes:
        m, n, k, dt, lat, _, m_lo, lo, m_hi, hi = spikes[0]
        one = len(spikes) == 1
        notes.append(f"{len(spikes)} GEMM point{' is' if one else 's are'} over 2x the time of both {'its' if one else 'their'} "
                     f"M neighbours (same N, K, dtype){':' if one else ', e.g.'} M={m:g} N={n:g} K={k:g} {dt} takes "
                     f"{lat:g} us where M={m_lo:g} takes {lo:g} and M={m_hi:g} {hi:g}; {'it is' if one else 'they are'} "
                     "priced as measured (a kernel choice at that M, or a timing glitch)")
    busy, timed = busy_points(Path(path))
    if busy:
        notes.append(f"{busy} of {timed} points were timed while other processes used more than 0.25 cores "
                     "(column other_cpu): with every core busy such timings run up to several times slow; "
                     "measure again on an idle machine")
    if unchecked:  # a table of one point, or none its neighbours can answer: said, not left out in silence
        notes.append(f"not checked: {', '.join(unchecked)} (no point of it can be predicted from the others)")
    if notes:
        result["note"] = "; ".join(notes)
    cross = _cupy_cross_check(Path(path), profile)
    if cross:
        result["cupy_cross_check"] = cross
    return result


def gemm_spikes(rows, factor: float = 2.0) -> list[tuple]:
    """(m, n, k, dtype, latency µs, the slower neighbour's µs) of each GEMM point more than `factor` x
    the time of both its neighbours along M (same N, K, dtype), worst first: H100's fp8 M=17 N=2048
    K=768 takes 56.6 µs where M=16 takes 5.5 and M=32 6.0, and predict had priced M=17 above M=32."""
    import pandas as pd

    if rows is None:
        return []
    d = pd.DataFrame({c: rows[c] for c in ("m", "n", "k", "dtype", "latency_us")}).sort_values(["dtype", "n", "k", "m"])
    g = d.groupby(["dtype", "n", "k"], observed=True)["latency_us"]
    below, above = g.shift(1), g.shift(-1)
    m = d.groupby(["dtype", "n", "k"], observed=True)["m"]
    near = np.fmax(below, above)
    spike = (d["latency_us"] > factor * below) & (d["latency_us"] > factor * above)
    out = d[spike].assign(near=near[spike], ratio=d["latency_us"][spike] / near[spike], m_below=m.shift(1)[spike],
                          below=below[spike], m_above=m.shift(-1)[spike], above=above[spike])
    out = out.sort_values("ratio", ascending=False)
    # then each neighbour: (M, µs) below and above
    return [(float(r.m), float(r.n), float(r.k), str(r.dtype), float(r.latency_us), float(r.near),
             float(r.m_below), float(r.below), float(r.m_above), float(r.above)) for r in out.itertuples()]


def busy_points(folder: Path) -> tuple[int, int]:
    """(points timed while other processes used more than microbench's MAX_OTHER_CPU cores, points
    with an other_cpu value) over the CSV tables of a bench folder; (0, 0) for tables without the column."""
    import csv

    from microbench.store import is_busy

    busy = timed = 0
    for table in sorted(folder.glob("*.csv")) if folder.is_dir() else []:
        with table.open(newline="", encoding="utf-8-sig") as f:
            cells = [row.get("other_cpu") for row in csv.DictReader(f)]
        timed += sum(c not in (None, "") for c in cells)
        busy += sum(map(is_busy, cells))
    return busy, timed


def _cupy_cross_check(path: Path, profile) -> dict | None:
    """Median and p90 of cupy / torch latency on shared GEMM points (gemm_cupy.csv)."""
    if not (path / "gemm_cupy.csv").exists():
        return None
    from speedplan.profile.tables import read_table

    cupy = read_table(path / "gemm_cupy.csv", TABLES["gemm"])
    torch_rows = profile.tables["gemm"]
    index = {(m, n, k, d): lat for m, n, k, d, lat in zip(*(torch_rows[c] for c in ("m", "n", "k", "dtype", "latency_us")))}
    ratios = [lat / index[key] for key, lat in
              zip(zip(*(cupy[c] for c in ("m", "n", "k", "dtype"))), cupy["latency_us"]) if key in index]
    if not ratios:
        return None
    return {"median_ratio": float(np.median(ratios)), "p90_ratio": float(np.percentile(ratios, 90)), "points": len(ratios)}


def _write_profile_folder(out: Path, tables: dict[str, list[dict]], meta: dict, readme: str,
                          more: dict[str, str] | None = None) -> Path:
    """Write a profile folder (one CSV per table, meta.json, README.md, and `more` {name: text})
    beside `out` and move it into place, replacing a profile folder there and refusing anything else."""
    check_replaceable(out, PROFILE)
    tmp = staging_folder(out)
    try:
        for family, rows in tables.items():
            _write_csv(tmp / f"{family}.csv", list(rows[0]), rows)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        (tmp / "README.md").write_text(readme)
        for name, text in (more or {}).items():
            (tmp / name).write_text(text)
        move_into_place(tmp, out)
    except BaseException:
        discard(tmp)
        raise
    return out


def _write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _grid_rows(grid) -> dict[str, list[dict]]:
    from dataclasses import asdict

    from microbench.grid import elementwise_nbytes

    out = {"gemm": [asdict(p) for p in grid.gemm], "attention": [asdict(p) for p in grid.attention],
           "elementwise": [asdict(p) | {"nbytes": elementwise_nbytes(p)} for p in grid.elementwise]}
    return {k: v for k, v in out.items() if v}


def write_roofline_profile(hardware: str, grid, out: str | Path) -> Path:
    """A profile folder whose tables are the datasheet roofline of preset `hardware` at the
    points of `grid` (origin "datasheet-roofline"): a placeholder with the shape of a measured
    profile, replaced by `speedplan bench --device cuda` output when the chip is measured."""
    hw = get_hardware(hardware, folders=False)
    out = Path(out).expanduser()
    tables = {}
    for family, rows in _grid_rows(grid).items():
        cols = {c: np.array([r[c] for r in rows], dtype=object if c in ("dtype", "mask", "op") else float)
                for c in rows[0]}
        if family == "gemm":
            lat = np.concatenate([gemm_roofline(hw, cols["m"][s], cols["n"][s], cols["k"][s], dt)[0]
                                  for dt in dict.fromkeys(cols["dtype"]) if (s := cols["dtype"] == dt).any()])
            order = np.concatenate([np.flatnonzero(cols["dtype"] == dt) for dt in dict.fromkeys(cols["dtype"])])
        elif family == "attention":
            order = np.concatenate([np.flatnonzero(cols["dtype"] == dt) for dt in dict.fromkeys(cols["dtype"])])
            lat = np.concatenate([attention_roofline(hw, *(cols[c][s] for c in _QUERY["attention"][:-1]),
                                                     cols["mask"][s], dt)[0]
                                  for dt in dict.fromkeys(cols["dtype"]) if (s := cols["dtype"] == dt).any()])
        else:
            order = np.arange(len(rows))
            lat = elementwise_roofline(hw, cols["nbytes"])
        tables[family] = [rows[i] | {"latency_us": f"{v:.4f}"} for i, v in zip(order, lat)]
    meta = {
        "origin": "datasheet-roofline", "hardware_preset": hw.name, "device_name": hw.description,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "microbench_version": "none (not measured)", "grid": grid.description, "versions": {},
        "complete": True, "source": hw.source,
        "note": "NOT MEASURED: datasheet roofline of the preset at the grid points (tile quantisation, "
                f"kernel floor {hw.kernel_floor_us} us, tree-mask penalty {hw.tree_mask_penalty} assumed). "
                "Replace with `speedplan bench --device cuda` output.",
    }
    return _write_profile_folder(out, tables, meta, readme=(
        f"# {hw.name}: datasheet roofline, not measured\n\nThese tables are the datasheet roofline of the "
        f"`{hw.name}` preset ({hw.source}) evaluated at the benchmark grid's points; no GPU was measured. "
        "Regenerate with `speedplan profile roofline`; replace with a measured profile from "
        f"`speedplan bench --device cuda --grid gpu --out profiles/{hw.name}`.\n"))


def _device_kind(preset: str) -> str:
    """"CPU" for a CPU preset, else the GPU's vendor ("AMD GPU", "NVIDIA GPU": one vendor's kernels
    are not another's). A profile measured on a CPU names a CPU preset (`profile.load` holds it to that)."""
    if get_hardware(preset).is_cpu:
        return "CPU"
    words = get_hardware(preset).description.split()
    return f"{words[0]} GPU" if words and words[0] in ("AMD", "NVIDIA") else "GPU"


def derive_profile(source: str | Path, hardware: str, out: str | Path) -> Path:
    """A profile for preset `hardware` derived from a measured one: each point keeps its
    measured utilisation (speed of light / measured latency), so its latency scales by the
    ratio of the two chips' speeds of light at that shape (bandwidth ratio where memory-bound,
    compute ratio where compute-bound). Floors are copied; MoE tables are left out (a fused
    layer has no speed of light here to carry). Marked origin "derived"."""
    src = load_profile(source)
    if src.origin != "measured":
        raise SpeedplanInputError(f"{source}: can only derive from a measured profile (origin is {src.origin!r})")
    kinds = _device_kind(src.hardware.name), _device_kind(get_hardware(hardware, folders=False).name)
    if kinds[0] != kinds[1]:
        a = lambda kind: ("an " if kind.split()[0] in ("AMD", "NVIDIA") else "a ") + kind  # as said aloud
        raise SpeedplanInputError(f"{source}: {a(kinds[0])} profile cannot be derived for {hardware} ({a(kinds[1])}): "
                                  "derive carries each shape's efficiency to a sibling chip, and one kind's kernels "
                                  "are not another's; measure it (speedplan bench) or import one (profile import-aic)")
    target_meta = {**src.meta, "hardware_preset": get_hardware(hardware).name}
    measured = src.hardware.extra.get("measured", {})  # fractions of peak and floors carry over
    target_hw = get_hardware(hardware).with_overrides(**measured)
    sol = {
        "gemm": lambda hw, t, dt: gemm_sol_us(hw, t["m"], t["n"], t["k"], dt),
        "attention": lambda hw, t, dt: attention_sol_us(hw, *(t[c] for c in _QUERY["attention"][:-1]), dt),
        "prefill": lambda hw, t, dt: prefill_sol_us(hw, t["batch"], t["seq_len"], t["num_heads"], t["num_kv_heads"],
                                                    t["head_dim"], dt),
        "elementwise": lambda hw, t, dt: elementwise_sol_us(hw, t["nbytes"]),
        "allreduce": lambda hw, t, dt: allreduce_sol_us(hw, t["nbytes"], t["num_gpus"]),
    }
    tables, left_out = {}, {}
    for family in TABLES:
        if not (Path(source) / f"{family}.csv").exists() or family == "moe":
            continue
        with (Path(source) / f"{family}.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        t = src.tables[family]
        if family != "floors":
            ratio = np.ones(len(rows))
            for dt in np.unique(t["dtype"]):
                s = t["dtype"] == dt
                if family in ("gemm", "attention", "prefill") and dt not in target_hw.peak_flops_per_s:
                    ratio[s] = np.nan  # the target has no such units (fp8 on an A100): no speed of light to scale to
                    left_out.setdefault(str(dt), []).append(family)
                    continue
                part = {c: v[s] for c, v in t.items()}
                ratio[s] = sol[family](target_hw, part, dt) / sol[family](src.hardware, part, dt)
            rows = [row for row, r in zip(rows, ratio) if np.isfinite(r)]
            for row, r in zip(rows, ratio[np.isfinite(ratio)]):
                for col in ("latency_us", "min_us", "p90_us"):
                    if row.get(col):
                        row[col] = f"{float(row[col]) * r:.4f}"
        if rows:
            tables[family] = rows
    named = shown_name(source)
    meta = {**target_meta, "origin": "derived", "derived_from": named,
            "origin_label": f"derived by roofline ratio from {src.origin_label} {src.hardware.name}",
            "device_name": f"{get_hardware(hardware).description} (derived from {src.meta.get('device_name')})",
            "note": f"DERIVED, not measured: latencies of {named} scaled point by point by the ratio of the "
                    f"{hardware} and {src.hardware.name} datasheet rooflines (same efficiency per shape)."
                    + "".join(f" Its {dt} {', '.join(fams)} rows are left out: {get_hardware(hardware).name} states "
                              f"no {dt} peak (no such units)." for dt, fams in left_out.items())}
    if isinstance(meta.get("tables"), dict):  # the rows each table holds here (MoE left out), not the source's
        meta["tables"] = {family: len(rows) for family, rows in tables.items()}
    return _write_profile_folder(Path(out), tables, meta, f"# {hardware}: derived from {named}, not measured\n\n{meta['note']}\n",
                                 _licence_files(Path(source), meta["note"]))


def shown_name(path: str | Path) -> str:
    """How outputs name a profile folder: a shipped one as "NAME (shipped)", not by the place the
    package is installed in (a site-packages path means nothing on another machine); any other by its path."""
    from speedplan.cost.ops import shipped_profile_name

    return f"{name} (shipped)" if (name := shipped_profile_name(path)) else str(path)


def _licence_files(source: Path, change: str) -> dict[str, str]:
    """The source profile's licence and notice (AIConfigurator's tables are Apache-2.0: a work
    derived from them carries the licence, and its NOTICE states the change, §4 (a)-(c))."""
    files = {p.name: p.read_text() for p in sorted(source.glob("LICENSE*")) if p.is_file()}
    notice = source / "NOTICE.md"
    if notice.is_file():
        files["NOTICE.md"] = notice.read_text().rstrip("\n") + f"\n\nChanged by `speedplan profile derive`: {change}\n"
    return files
