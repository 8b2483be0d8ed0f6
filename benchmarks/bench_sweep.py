"""Planner speed: `speedplan sweep` on the default as a whole process, and a library sweep
of at least 10,000 configurations.

    python benchmarks/bench_sweep.py            # prints both figures (median of 5 runs)

Where PYTHONDONTWRITEBYTECODE is set (the development VM sets it), the whole-process figure is
also given with bytecode cached, interleaved with the first: what a user's install runs.

Targets (issue 2): whole process < 1 s, 10k-configuration library sweep < 0.3 s, on the
2-core development machine.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def sweep_command() -> list[str]:
    """`speedplan` as pip installed it next to this interpreter (what a user runs in a venv;
    a pyenv shim in front of it adds ~0.1 s of its own), else the same entry point via -m."""
    script = Path(sys.executable).parent / "speedplan"
    return [str(script)] if script.exists() else [sys.executable, "-m", "speedplan.entry"]


def whole_process_s(repeats: int = 5, bytecode: tuple[bool, ...] = (False,)) -> dict[bool, float]:
    """Median wall time of `speedplan sweep` on the default, in seconds, for each `bytecode`
    setting, the settings' runs interleaved, their order alternating (the VM's pace drifts over
    minutes). False: this environment as it is (where PYTHONDONTWRITEBYTECODE is set, as on the
    development VM, speedplan's own modules are compiled from source on every run; pip compiled
    site-packages). True: .pyc files written and read under a private prefix (PYTHONPYCACHEPREFIX,
    which also sets aside site-packages' own __pycache__: the first run compiles everything there),
    as after `pip install .` or an editable install's first run elsewhere. With True among the
    settings, each setting's first run is untimed (True's writes the bytecode; False's is dropped
    alike, so that both medians are of warm runs)."""
    times: dict[bool, list[float]] = {flag: [] for flag in bytecode}
    with tempfile.TemporaryDirectory() as tmp:
        envs = {flag: dict(os.environ) for flag in bytecode}
        if True in envs:
            envs[True].pop("PYTHONDONTWRITEBYTECODE", None)
            envs[True]["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        warm = int(True in envs)  # untimed first runs: True's writes the bytecode
        for i in range(repeats + warm):
            for flag, env in (list(envs.items())[::-1] if i % 2 else envs.items()):
                t0 = time.perf_counter()
                subprocess.run([*sweep_command(), "sweep", "--out", str(Path(tmp) / f"r{i}-{flag}")],
                               check=True, capture_output=True, env=env)
                times[flag].append(time.perf_counter() - t0)
    return {flag: statistics.median(t[warm:]) for flag, t in times.items()}


def library_sweep_s(repeats: int = 5) -> tuple[float, int]:
    from speedplan.plan.sweep import sweep

    kwargs = dict(model="llama-3.1-70b", hardware="h100-sxm", tp=4,
                  mechanisms=["draft-model:llama-3.2-1b", "eagle", "ngram", "eagle-tree", "medusa"],
                  batches=range(1, 257), draft_lens=range(0, 9), contexts=[4096])
    sweep(**kwargs)  # warm: imports and the Sequoia table cache
    times, rows = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        rows = len(sweep(**kwargs).frame)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rows


if __name__ == "__main__":
    lib_s, rows = library_sweep_s()
    print(f"library sweep: {rows} configurations in {lib_s * 1e3:.0f} ms (median of 5)")
    no_pyc = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    whole = whole_process_s(bytecode=(False, True) if no_pyc else (False,))
    print(f"{' '.join(sweep_command())} sweep (default, whole process): {whole[False]:.2f} s (median of 5)")
    if no_pyc:
        print(f"  the same with bytecode cached (PYTHONDONTWRITEBYTECODE unset, a private pycache prefix; "
              f"runs interleaved): {whole[True]:.2f} s (median of 5)")
