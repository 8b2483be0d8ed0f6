"""`speedplan bench` and `speedplan profile check|roofline|derive|import-aic`: measuring,
importing and checking profiles.

Thin: parse, one library call, render. torch is imported only inside `bench`'s body (through
microbench), so importing the command line stays free of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from speedplan.cli.options import check_output
from speedplan.errors import SpeedplanInputError
from speedplan.outputs import PROFILE, check_replaceable, probe_writable, target, write_whole

# What each command writes, as the `origin` (and for an import, `source`) of a profile's meta.json:
# a folder holding another kind of profile is the user's data, never replaced by this one.
_KINDS = {"bench": "a measured profile of `speedplan bench`", "roofline": "a datasheet-roofline profile",
          "derive": "a derived profile", "import-aic": "a profile imported from AIConfigurator"}


def _kind_of(meta: dict) -> str:
    origin = meta.get("origin")
    if origin == "measured":
        return "import-aic" if isinstance(meta.get("source"), dict) else "bench"
    return {"datasheet-roofline": "roofline", "derived": "derive"}.get(origin, str(origin))


def check_same_kind(out: str, command: str, also=()) -> None:
    """Refuse to replace (or add to) a profile folder of another kind: `profile roofline --out`
    a measured profile replaced its points with datasheet values (an audit of 2026-12-04)."""
    meta_path = target(out) / "meta.json"
    if not meta_path.is_file():
        return
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return  # check_replaceable has said what is wrong with it
    kind = _kind_of(meta) if isinstance(meta, dict) else ""
    if kind != command and kind not in also:
        held = _KINDS.get(kind, f"a profile of origin {kind!r}")
        name = "speedplan bench" if command == "bench" else f"speedplan profile {command}"
        raise SpeedplanInputError(f"--out {out}: holds {held}, which `{name}` "
                                  "would replace; give a new folder")


def check_not_shipped(out: str) -> None:
    """Refuse a profile folder shipped inside the package as --out: `speedplan bench --out
    .../speedplan/data/profiles/cpu-local` resumed the shipped profile with this machine's points
    (a fuzzing run of 2026-12-05). Shipped profiles are measured elsewhere and copied in."""
    from speedplan.cost.ops import PROFILE_DIR

    here, shipped = target(out).absolute().resolve(), PROFILE_DIR.resolve()
    if here == shipped or shipped in here.parents:
        raise SpeedplanInputError(f"--out {out}: is inside the profiles shipped with speedplan ({shipped}); write a "
                                  "new folder and copy it there")


def shipped_or_path(path: str) -> str:
    """A shipped profile by name (cpu-local, h200-sxm), as --hardware takes it, else `path`."""
    from speedplan.cost.ops import PROFILE_DIR

    if not path.strip():  # "" is the current folder to pathlib: "meta.json: missing" named no option
        raise SpeedplanInputError("profile folder: empty name; give a folder or a shipped profile's name")
    shipped = PROFILE_DIR / path
    if not Path(path).exists() and "/" not in path and (shipped / "meta.json").is_file():
        return str(shipped)
    return path


def check_out(out: str, command: str, also=(), inputs=()) -> None:
    """Everything --out of a profile command must pass before any work: a writable place (a real
    file made and removed: `bench --out /proc/x` ended in a traceback after the grid was built),
    not a shipped profile, not a folder of the user's own, not a profile of another kind."""
    check_output(out)
    check_replaceable(out, PROFILE, inputs=inputs)  # resumed or replaced: a folder of one's own, or the current one, is refused
    check_same_kind(out, command, also=also)
    check_not_shipped(out)
    probe_writable(target(out), "--out")


app = typer.Typer(help="Check, generate, import or derive profile folders.", no_args_is_help=True,
                          rich_markup_mode=None)


def bench(
    out: str = typer.Option(..., "--out", help="profile folder to write (resumed if it exists: on the same CPU, with "
                            "the same --threads, --min-time-ms, --visits and --interleave/--one-by-one)"),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda"),
    grid: list[str] = typer.Option([], "--grid", help="repeatable: quick (the CPU default: SmolLM2's GEMM, attention and elementwise shapes plus a generic GEMM and attention sweep; about 1-2 min on 2 idle cores, several times that while other processes run), generic (a model-free sweep of M, N, K and attention shapes), gpu (the GPU default: model:llama-3.1-8b, model:llama-3.1-70b@8 and generic), tiny (a handful of points: a smoke test), model:NAME[@TP] (one model preset's shapes at TP)"),
    tp: int = typer.Option(1, "--tp", help="tensor-parallel degree for model: grids"),
    dtype: list[str] = typer.Option([], "--dtype", help="fp32 (cpu default), bf16, fp16 (cuda default), fp8"),
    hardware_preset: Optional[str] = typer.Option(None, "--hardware-preset", help="preset this device is (default: detected)"),
    min_time_ms: Optional[float] = typer.Option(None, "--min-time-ms", help="timing budget per point, ms (cpu 30, cuda 20)"),
    threads: int = typer.Option(2, "--threads", help="torch CPU threads"),
    cupy: bool = typer.Option(False, "--cupy", help="also time GEMMs with cupy (cuda cross-check)"),
    stop_after: Optional[int] = typer.Option(None, "--stop-after", help="stop after N new points (resume later)"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    quiet_tries: int = typer.Option(3, "--quiet-tries", help="CPU: tries of a block of points timed while other processes ran (more than 0.25 cores): 3 or more (default 3) tries such a block twice at once, then retries it at the end of the run, up to that many times, and keeps the quietest try; 1 or 2 retry at once, at most that many times, and keep the quietest; either way the folder's busy points are counted and reported"),
    visits: Optional[int] = typer.Option(None, "--visits", help="visits per block of points (fresh buffers each), median of their medians (default 1)"),
    interleave: bool = typer.Option(True, "--interleave/--one-by-one", help="CPU: time the points that share weights / KV cache together, repeats taking turns (default; see speedplan/data/profiles/cpu-local/README.md), or each point on its own"),
) -> None:
    """Measure GEMM, attention and small-op latencies into a profile folder.

    Each point is appended as it completes; rerunning the same command resumes.

    Example: speedplan bench --device cpu --grid quick --out profiles/cpu-local
    """
    from speedplan.profile.grid import run_bench

    check_out(out, "bench", also=("roofline",))  # a datasheet placeholder gives way to measurements
    from speedplan.cli.app import keep_on_stop

    keep_on_stop(out)
    result = run_bench(grid, device, out, tp, hardware_preset, dtype, min_time_ms, threads, cupy,
                       stop_after, progress, quiet_tries, visits, interleave)
    state = "complete" if result.remaining == 0 else f"{result.remaining} points missing: rerun to resume"
    typer.echo(f"{result.out}: measured {result.measured} points in {result.wall_s:.1f} s "
               f"(total wall {result.meta['wall_s']:.1f} s); {state}")
    from microbench.store import MAX_OTHER_CPU

    busy, total = result.meta.get("busy_points", 0), sum(result.meta.get("points", {}).values())
    if busy:
        typer.echo(f"warning: {busy} of {total} points were timed while other processes used more than "
                   f"{MAX_OTHER_CPU:g} cores (column other_cpu; meta.json busy_points): with every core busy such "
                   "timings run up to several times slow. Measure on an idle machine, into a new --out folder, "
                   "before pricing with this profile", err=True)


@app.command("check")
def check(
    path: str = typer.Argument(..., help="profile folder, or the name of a shipped one (speedplan hardware lists them)"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
    json_out: Optional[Path] = typer.Option(None, "--json-out",
                                            help="also write the result as JSON to this file (the text is printed)"),
) -> None:
    """Leave-one-out error of the profile lookup: each measured point predicted without it.

    Example: speedplan profile check cpu-local --json-out check.json
    """
    from speedplan.profile.tools import leave_one_out

    path = shipped_or_path(path)
    if json_out is not None:  # refused before the leave-one-out, not after it
        folder = Path(path)  # every file of the profile is an input: the check reads its tables
        tables = [f for f in folder.iterdir() if f.is_file()] if folder.is_dir() else [folder / "meta.json"]
        check_output(json_out, "--json-out", folder=False, inputs=tables, kind="profile check result")
        probe_writable(target(json_out), "--json-out")  # a read-only place, a broken link on the way

    result = leave_one_out(path)
    if json_out is not None:
        write_whole(json_out, json.dumps(result, indent=1) + "\n", "--json-out")
    if as_json:
        typer.echo(json.dumps(result, indent=1))
        return
    from speedplan.cost.ops import shipped_profile_name

    shipped = shipped_profile_name(path)
    typer.echo(f"{shipped or path} ({'shipped, ' if shipped else ''}{result['origin']}): leave-one-out median {result['median_error']:.1%}, "
               f"p90 {result['p90_error']:.1%} over {result['points']} points")
    for family, r in result["families"].items():
        answers = ", ".join(f"{k} {v}" for k, v in r["answers"].items())
        typer.echo(f"  {family:<12} median {r['median_error']:6.1%}  p90 {r['p90_error']:6.1%}  "
                   f"max {r['max_error']:7.1%}  points {r['points']:5d}  ({answers})")
    if "note" in result:
        typer.echo(f"  note: {result['note']}")
    if "cupy_cross_check" in result:
        c = result["cupy_cross_check"]
        typer.echo(f"  cupy/torch GEMM latency ratio: median {c['median_ratio']:.3f}, p90 {c['p90_ratio']:.3f}")


@app.command("roofline")
def roofline(
    hardware: str = typer.Option(..., "--hardware", help="hardware preset, e.g. h200-sxm"),
    out: str = typer.Option(..., "--out", help="profile folder to write (a roofline profile there is replaced; "
                                               "a profile of another kind, or a folder of other files, is refused)"),
    grid: list[str] = typer.Option(["gpu"], "--grid", help="grid names as for `speedplan bench`"),
    device: str = typer.Option("cuda", "--device", help="whose grid shapes to use: cpu or cuda"),
) -> None:
    """Write a datasheet-roofline profile (marked as such) at a bench grid's points.

    Example: speedplan profile roofline --hardware h200-sxm --out profiles/h200-sxm
    """
    from speedplan.profile.grid import build_grid
    from speedplan.profile.tools import write_roofline_profile
    from speedplan.specs.hardware import get_hardware

    if get_hardware(hardware, folders=False).is_cpu and device == "cuda":  # was "cpu-local has no bf16 peak"
        raise SpeedplanInputError(f"--hardware {hardware} is a CPU preset: add --device cpu (the CPU grid's fp32 shapes)")
    check_out(out, "roofline")  # before the work, not after it
    path = write_roofline_profile(hardware, build_grid(grid, device, 1, None, fp8=True), out)
    typer.echo(f"{path}: datasheet roofline of {hardware} (not measured)")


@app.command("derive")
def derive(
    source: str = typer.Argument(..., help="measured profile folder, or the name of a shipped one (h200-sxm)"),
    hardware: str = typer.Option(..., "--hardware", help="target preset, e.g. h100-sxm"),
    out: str = typer.Option(..., "--out", help="profile folder to write (a derived profile there is replaced; "
                                               "a profile of another kind, or a folder of other files, is refused)"),
) -> None:
    """Derive a profile for a sibling chip from a measured one by the two chips' roofline
    ratios (bandwidth where memory-bound, compute where compute-bound); marked derived.

    Example: speedplan profile derive profiles/h200-sxm --hardware h100-sxm --out profiles/h100-sxm
    """
    from speedplan.profile.tools import derive_profile, shown_name

    source = shipped_or_path(source)  # `profile check h200-sxm` took the name, derive said "no such profile folder"
    check_out(out, "derive", inputs=[source])  # before the work, not after it
    typer.echo(f"{derive_profile(source, hardware, out)}: derived from {shown_name(source)} for {hardware}")


@app.command("import-aic")
def import_aic(
    system: str = typer.Option(..., "--system", help="AIConfigurator system, e.g. h100_sxm, h200_sxm, b200_sxm"),
    backend: str = typer.Option("vllm", "--backend", help="vllm, sglang or trtllm"),
    version: Optional[str] = typer.Option(None, "--version", help="backend version (default: AIConfigurator's current)"),
    out: str = typer.Option(..., "--out", help="profile folder to write (an import there is replaced; a profile of another kind, or a folder of other files, is refused)"),
    all_heads: bool = typer.Option(False, "--all-heads", help="every measured attention head shape and MoE shape, "
                                   "not only those the model presets need"),
    moe_routing: str = typer.Option("balanced", "--moe-routing", help="the fused-MoE rows' routing: balanced "
                                    "(converted to random routing when priced) or a skewed one AIConfigurator "
                                    "measured, used as measured: power_law_1.01 (its default for DeepSeek), "
                                    "power_law_1.2 (Qwen3-MoE, Mixtral)"),
) -> None:
    """Convert AIConfigurator's measured kernel tables (aiconfigurator-core, Apache-2.0) into a
    profile folder with their provenance and licence notice. Needs `pip install 'speedplan[aic]'`.

    Example: speedplan profile import-aic --system h100_sxm --backend vllm --out profiles/h100-sxm
    """
    from speedplan.profile.import_aic import import_aic as convert

    check_out(out, "import-aic")  # before the work, not after it
    path = convert(system, backend, version, out, all_heads, moe_routing=moe_routing)
    typer.echo(f"{path}: imported {system} {backend} tables")
