"""Planner speed: `speedplan sweep` on the default as a whole process, and a library sweep
of at least 10,000 configurations.

    python benchmarks/bench_sweep.py            # prints both figures (median of 5 runs)

Targets (issue 2): whole process < 1 s, 10k-configuration library sweep < 0.3 s, on the
2-core development machine.
"""

from __future__ import annotations

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


def whole_process_s(repeats: int = 5) -> float:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            t0 = time.perf_counter()
            subprocess.run([*sweep_command(), "sweep", "--out", str(Path(tmp) / f"r{i}")],
                           check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


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
    print(f"{' '.join(sweep_command())} sweep (default, whole process): {whole_process_s():.2f} s (median of 5)")
