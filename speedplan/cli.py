"""The `speedplan` command line: thin Typer commands over the library.

Each command parses options, makes one library call and renders the result. Bad input is a
`SpeedplanInputError` (or a Typer usage error): one line on stderr, exit code 2, no traceback.
Commands of other areas (bench/profile, run, validate) are registered from their own
`cli_*.py` modules so this file stays small; none of them imports torch at import time.
"""

from __future__ import annotations

import os
import sys

import typer

from .errors import SpeedplanInputError

app = typer.Typer(
    name="speedplan",
    help="Plan speculative decoding: which mechanism and draft length per batch size, and what it buys.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def fail(message: str) -> None:
    """Print one line naming the problem and exit 2."""
    typer.echo(f"speedplan: error: {message}", err=True)
    raise typer.Exit(2)


def _register_areas() -> None:
    from . import cli_planner

    cli_planner.register(app)
    for name in ("cli_bench", "cli_runtime", "cli_validate"):
        try:
            module = __import__(f"speedplan.{name}", fromlist=["register"])
        except ModuleNotFoundError as e:
            if e.name != f"speedplan.{name}":
                raise
            continue
        module.register(app)


_register_areas()


def main() -> None:
    """Console entry point: maps input errors to exit 2 with one line. Leaves with `os._exit`
    once the output is flushed: tearing down pandas and numpy takes ~0.1 s, and nothing is
    left to clean up (report folders are complete before the command returns)."""
    from . import figure_worker

    figure_worker.start_early(sys.argv[1:])
    try:
        code = _run()
    finally:
        figure_worker.cancel_unclaimed()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run() -> int:
    """Run the command line; return the exit status."""
    import click

    try:
        rv = app(standalone_mode=False)
    except SpeedplanInputError as e:
        typer.echo(f"speedplan: error: {e}", err=True)
        return 2
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.Abort:
        typer.echo("speedplan: aborted", err=True)
        return 130
    except click.exceptions.NoArgsIsHelpError as e:
        e.show()
        return 0
    except click.ClickException as e:
        msg = e.format_message().replace("\n", " ")
        typer.echo(f"speedplan: error: {msg}", err=True)
        return 2
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    main()
