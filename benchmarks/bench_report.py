"""Time the sweep report: matplotlib import, each figure, the HTML, in a fresh process.

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_report.py            # the default sweep
    flock /tmp/speedplan-cpu.lock python benchmarks/bench_report.py --rows 10000
    flock /tmp/speedplan-cpu.lock python benchmarks/bench_report.py --processes 5 --repeats 3

Sweeps with the real planner (`speedplan.plan.sweep.sweep`), then prints one line per stage in
milliseconds (wall clock unless marked CPU time).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_result(rows: int):
    """The default sweep (`speedplan sweep` with no arguments, ~400 rows), repeated over more
    context lengths when `rows` asks for a bigger one."""
    from speedplan.plan.sweep import sweep

    base = sweep()
    n_contexts = max(1, round(rows / len(base.frame)))
    if n_contexts == 1:
        return base
    return sweep(contexts=[1024 * (i + 1) for i in range(n_contexts)])


def _ms(fn, clock=time.perf_counter) -> float:
    t0 = clock()
    fn()
    return (clock() - t0) * 1e3


def run(rows: int, repeats: int) -> None:
    result = make_result(rows)
    t_import = _ms(lambda: (__import__("matplotlib.figure"), __import__("matplotlib.backends.backend_agg")))
    from speedplan.report import figures as rf
    from speedplan.report import html
    from speedplan.report import summary as report

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        context = report.report_context(result.frame)
        caption = report.short_provenance(result)
        frame = result.frame
        from speedplan.report.data import figure_set

        figs = figure_set(result, context)

        def one(name: str, path: Path):
            return lambda: getattr(rf, f"{name}_figure")(**getattr(figs, name), path=path, caption=caption, title="t")

        stages = {
            "figure_set (pandas side)": lambda: figure_set(result, context),
            **{name: one(name, out / f"{name}.png") for name in ("pareto", "heatmap", "best_d", "breakdown", "roofline")},
            "render_summary": lambda: report.render_summary(result),
        }
        first_cpu = time.process_time()
        first = _ms(lambda: html.write_report(result, out, ["sweep.csv"]))
        first_cpu = (time.process_time() - first_cpu) * 1e3
        totals = [_ms(lambda: html.write_report(result, out, ["sweep.csv"])) for _ in range(repeats)]
        cpu = [_ms(lambda: html.write_report(result, out, ["sweep.csv"]), time.process_time)
               for _ in range(repeats)]
        times = {name: sorted(_ms(fn) for _ in range(repeats)) for name, fn in stages.items()}
    med = lambda v: sorted(v)[len(v) // 2]
    print(f"sweep: {len(frame)} rows, {int(frame['feasible'].sum())} feasible; milliseconds, "
          f"min / median of {repeats} calls after the first")
    print(f"{'import matplotlib (Figure + Agg)':36s} {t_import:7.1f}")
    print(f"{'write_report, first call':36s} {first:7.1f}   (CPU time {first_cpu:.1f})")
    print(f"{'write_report, later calls':36s} {min(totals):7.1f} / {med(totals):7.1f}")
    print(f"{'write_report, later calls, CPU time':36s} {min(cpu):7.1f} / {med(cpu):7.1f}")
    for name, values in times.items():
        print(f"{'  ' + name:36s} {min(values):7.1f} / {med(values):7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300, help="approximate grid points in the sweep")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls after the first")
    parser.add_argument("--processes", type=int, default=1, help="fresh processes to run (each prints its table)")
    parser.add_argument("--inline", action="store_true", help="run in this process (default: fresh ones)")
    args = parser.parse_args()
    if args.inline:
        run(args.rows, args.repeats)
        return
    for _ in range(args.processes):
        subprocess.run([sys.executable, __file__, "--rows", str(args.rows), "--repeats", str(args.repeats),
                        "--inline"], check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
