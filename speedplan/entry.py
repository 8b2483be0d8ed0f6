"""The `speedplan` console script. For `speedplan sweep` it forks the figure worker before
anything heavy is imported (Typer, pandas), so matplotlib's import starts ~50 ms sooner on the
other core; then it hands over to `speedplan.cli.main`."""

from __future__ import annotations

import gc
import sys


def main() -> None:
    from . import figure_worker

    if sys.argv[1:2] == ["sweep"]:
        # a sweep is a short process whose garbage is arrays, not cycles; the collector's
        # passes over every imported object cost ~10% of the pandas import
        gc.disable()
    figure_worker.start_early(sys.argv[1:])
    from .cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
