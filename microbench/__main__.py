"""`python -m microbench`: measure a generic, tiny or JSON-described grid into a profile folder.

    python -m microbench --device cpu --grid generic --out profiles/my-cpu
    python -m microbench --device cuda --spec grid.json --out profiles/h200-sxm --cupy

Model-shaped grids (`--grid model:llama-3.1-8b`) are built by `speedplan bench`, which knows
the models; it calls the same `microbench.runner.run`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .grid import Grid, generic_grid, tiny_grid


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m microbench", description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--grid", choices=["generic", "tiny"], default=None)
    ap.add_argument("--spec", type=Path, help="a Grid as JSON (Grid.to_json)")
    ap.add_argument("--dtype", default=None, help="default: fp32 on cpu, bf16 on cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--hardware-preset", default=None, help="default: cpu-local on cpu")
    ap.add_argument("--min-time-ms", type=float, default=50.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cupy", action="store_true", help="also time GEMMs with cupy (cuda)")
    ap.add_argument("--stop-after", type=int, default=None, help="stop after N new points")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--visits", type=int, default=None, help="visits per block of points, median of their medians (default 1)")
    ap.add_argument("--interleave", dest="interleave", action="store_true", default=True,
                    help="CPU: time a block's points together, repeats taking turns (default, see speedplan/data/profiles/cpu-local/README.md)")
    ap.add_argument("--one-by-one", dest="interleave", action="store_false", help="CPU: time each point on its own")
    ap.add_argument("--quiet-tries", type=int, default=3, help="CPU: retries of a point measured while other processes ran")
    args = ap.parse_args(argv)
    dtype = args.dtype or ("fp32" if args.device == "cpu" else "bf16")
    if args.spec:
        grid = Grid.from_json(args.spec.read_text())
    elif args.grid == "tiny":
        grid = tiny_grid(dtype)
    else:
        grid = generic_grid(args.device, [dtype])
    preset = args.hardware_preset or ("cpu-local" if args.device == "cpu" else None)
    if preset is None:
        ap.error("--hardware-preset is required on cuda (e.g. h200-sxm)")
    from .runner import run

    try:
        result = run(grid, args.device, args.out, preset, min_time_s=args.min_time_ms / 1e3,
                     threads=args.threads, cupy=args.cupy, stop_after=args.stop_after,
                     progress=not args.no_progress, quiet_tries=args.quiet_tries,
                     visit_count=args.visits or 1, interleave=args.interleave)
    except ValueError as e:
        print(f"microbench: error: {e}", file=sys.stderr)
        return 2
    print(f"{result.out}: measured {result.measured} points in {result.wall_s:.1f}s, "
          f"{result.remaining} remaining")
    return 0


if __name__ == "__main__":
    sys.exit(main())
