"""Which profile `speedplan validate` prices the runtime with (DESIGN.md, "Validation protocol",
step 1: profile the device the runtime runs on, or reuse its profile).

Kernel times do not carry from one CPU to another, not even within one family: one Zen 3 run's
verify steps (reports/validation-cpu-epyc-zen3-2026-12-05) priced with its own profile were
4.4% off (median), with the Zen 4's 20.3%, the family-26 EPYC's 32.5% and the Xeon's 33.2%
(`speedplan validate --reprice`). So a full run on a CPU no shipped profile was measured on
measures one first (`speedplan bench --device cpu --grid quick`: 74 s on that Zen 3, against a
run of 55-80 minutes) and keeps it in the validation folder, under `profile/`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from speedplan.errors import SpeedplanInputError

PROFILE_FOLDER = "profile"  # a validation folder's own profile, when its run measured one
MEASURE_GRIDS = ("quick",)  # what a run measures: SmolLM2's shapes plus a small generic sweep


def _meta_of(folder: Path) -> dict:
    """A shipped folder's meta.json as a dict, {} where it has none (only the CPU fields are read:
    `profile.tables.read_meta` would also demand every field a profile must have)."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def shipped_profile_of_this_cpu() -> str | None:
    """The shipped profile of the cpu-local preset measured on this machine's CPU: cpu-local
    itself when it was, else another (cpu-local-xeon, ...), else None."""
    from microbench.env import same_cpu, this_cpu
    from speedplan.cost.ops import PROFILE_DIR

    here = this_cpu()
    if same_cpu(_meta_of(PROFILE_DIR / "cpu-local"), here):
        return "cpu-local"
    for folder in sorted(PROFILE_DIR.iterdir()):
        meta = _meta_of(folder)
        if meta.get("hardware_preset") == "cpu-local" and same_cpu(meta, here):
            return folder.name
    return None


def profile_for_this_cpu(hardware: str) -> tuple[str, str | None]:
    """The profile validation prices with: `hardware`, except that the shipped `cpu-local`,
    when it was measured on another CPU, gives way to a shipped profile of the cpu-local preset
    measured on this one (cpu-local-xeon, ...), with a line saying so. Returns (name, line)."""
    from microbench.env import describe_cpu, this_cpu

    if hardware != "cpu-local":
        return hardware, None
    name = shipped_profile_of_this_cpu()
    if name is None or name == hardware:
        return hardware, None
    return name, (f"pricing with profile {name}: measured on this CPU ({describe_cpu(this_cpu())}; "
                  f"the shipped cpu-local was measured on another)")


def machine_check(cost) -> dict:
    """This machine's CPU and the one the profile was measured on (its meta.json), and a
    warning when they differ: kernel times do not carry from one CPU to another (the cpu-local
    profile of 2026-11-29, measured on an AMD EPYC, priced an Intel Xeon's GEMMs at M = 128
    1.3-1.5x their time on 2026-12-02 and 0.9-1.1x at M = 1, and an AMD EPYC of family 26's at
    1.4-1.7x and 1.06x; engine terms absorb part of it)."""
    from microbench.env import describe_cpu, same_cpu, this_cpu

    here = this_cpu()
    meta = getattr(getattr(cost, "profile", None), "meta", None) or {}
    there = describe_cpu(meta) if meta.get("device_name") else None
    warning = None
    if there and not same_cpu(meta, here):
        warning = (f"warning: the profile was measured on {there!r}, this machine is {describe_cpu(here)!r}; add "
                   f"--measure-cpu to measure this CPU's first (1-2 minutes), or run `speedplan bench --device cpu "
                   f"--grid quick --out profiles/this-cpu` and pass --hardware profiles/this-cpu")
    return {"cpu": describe_cpu(here), "profile_cpu": there, "warning": warning}


def should_measure(choice: bool | None, quick: bool, hardware: str | None) -> bool:
    """Whether a validate run measures this CPU's profile first: --measure-cpu / --no-measure-cpu
    (`choice`), else a full run with --hardware left out on a CPU no shipped profile was measured
    on (--quick, the minute-long smoke test CI runs, warns instead)."""
    if choice is not None:
        if choice and hardware is not None:
            raise SpeedplanInputError(f"--measure-cpu prices with the profile it measures; --hardware {hardware} "
                                      "names another: give one of the two")
        return choice
    return hardware is None and not quick and shipped_profile_of_this_cpu() is None


def _threads() -> int:
    """The threads the runtime's matmuls use (torch's default), within what `speedplan bench` takes."""
    import torch

    from speedplan.profile.grid import max_threads

    return max(1, min(torch.get_num_threads(), max_threads()))


def measure_this_cpu(folder: Path, say=None, grids: tuple[str, ...] | None = None, progress: bool = True,
                     shown_as: str | None = None) -> Path:
    """Measure the cpu-local preset's profile of this CPU into `folder` (`speedplan bench --device
    cpu --grid quick`, at the threads the runtime will use), with a README saying where it came
    from and how to reuse it from where it will be (`shown_as`, default `folder`); returns `folder`."""
    from microbench.env import describe_cpu, this_cpu
    from speedplan.profile.grid import run_bench

    say = say or (lambda msg: None)
    grids = grids or MEASURE_GRIDS
    cpu = describe_cpu(this_cpu())
    threads = _threads()
    shipped = shipped_profile_of_this_cpu()
    why = (f"asked for with --measure-cpu (the shipped {shipped} was measured on this CPU too)" if shipped
           else "no shipped profile was measured on this CPU")
    say(f"measuring a profile of this CPU ({cpu}) first: {why} (speedplan bench --device cpu --grid "
        f"{' --grid '.join(grids)} --threads {threads}; 1-2 minutes on 2 cores)")
    result = run_bench(list(grids), "cpu", str(folder), hardware_preset="cpu-local", threads=threads,
                       progress=progress)
    if result.remaining:
        raise SpeedplanInputError(f"measuring this CPU's profile left {result.remaining} points unmeasured")
    say(f"measured {result.measured} points in {result.wall_s:.0f} s")
    where = shown_as or str(folder)
    (Path(folder) / "README.md").write_text(
        f"# Profile of {cpu}\n\nMeasured by `speedplan validate` on {time.strftime('%Y-%m-%d', time.gmtime())} "
        f"before its run ({why}): `speedplan bench --device cpu "
        f"--grid {' --grid '.join(grids)} --threads {threads}`, {result.measured} points in "
        f"{result.wall_s:.0f} s. The run priced the runtime with it. Another run on this machine can reuse it "
        f"(`speedplan validate --hardware {where}`), and so can `speedplan sweep --hardware {where}`; "
        f"`speedplan profile check {where}` gives its leave-one-out error.\n")
    return Path(folder)


def stored_hardware(folder: Path, summary: dict) -> str:
    """The profile a stored validation run priced with, as `load_cost_model` takes it: the
    folder's own `profile/` when the run measured one, else the name it recorded."""
    name = str(summary.get("hardware") or "cpu-local")
    own = Path(folder) / name
    return str(own) if summary.get("profile_measured") and own.is_dir() else name
