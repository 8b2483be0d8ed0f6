"""What each speed trick of the console script buys (speedplan/entry.py): `speedplan sweep` on
the default as a whole process with all tricks, with each turned off alone
(SPEEDPLAN_SERIAL=worker|split|gc|exit|arrow), and with all off. Runs are interleaved, so the
machine's drift spreads over every variant alike.

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_speed_tricks.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench_sweep import sweep_command

VARIANTS = {"all tricks": "", "no figure worker": "worker", "figures not split": "split",
            "garbage collector on": "gc", "normal exit": "exit", "pandas imports pyarrow": "arrow",
            "no tricks": "1"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    times: dict[str, list[float]] = {k: [] for k in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for name, off in VARIANTS.items():
                env = {**os.environ, "SPEEDPLAN_SERIAL": off}
                t0 = time.perf_counter()
                subprocess.run([*sweep_command(), "sweep", "--out", str(Path(tmp) / f"r{i}")], env=env, check=True,
                               capture_output=True)
                times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["all tricks"])
    for name, ts in times.items():
        med = statistics.median(ts)
        extra = "" if name == "all tricks" else f"  ({(med - base) * 1e3:+.0f} ms)"
        print(f"{name:<22} {med:.3f} s median of {len(ts)}{extra}")


if __name__ == "__main__":
    main()
