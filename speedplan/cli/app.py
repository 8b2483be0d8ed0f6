"""The `speedplan` Typer app: one sub-module per command group, mounted here, and the one place
where an input error becomes one line on stderr and exit code 2.

Commands are thin: typed options, a docstring with an example, one library call, one render
call. None of the command modules imports torch, pandas or matplotlib at import time.
"""

from __future__ import annotations

import errno
import signal
import threading
from pathlib import Path

import typer

from speedplan.cli import calibrate, catalog, predict, profile, run as run_cmd, sweep, validate
from speedplan.errors import SpeedplanInputError, clipped, did_you_mean, too_many_digits

app = typer.Typer(
    name="speedplan",
    help="Plan speculative decoding: which mechanism and draft length per batch size, and what it buys.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from speedplan import __version__

        typer.echo(f"speedplan {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Plan speculative decoding: which mechanism and draft length per batch size, and what it buys."""


app.command("sweep")(sweep.sweep)
app.command("calibrate")(calibrate.calibrate)
app.add_typer(predict.app, name="predict")
app.command("models")(catalog.models)
app.command("hardware")(catalog.hardware)
app.command("engines")(catalog.engines)
app.command("mechanisms")(catalog.mechanisms)
app.command("bench")(profile.bench)
app.add_typer(profile.app, name="profile")
app.command("run")(run_cmd.run)
app.command("validate")(validate.validate)

try:  # typer >= 0.28 bundles its own click: its usage errors derive from typer.TyperException
    from typer import TyperException as _UsageError
except ImportError:  # older typer depends on click and raises click's exceptions
    from click import ClickException as _UsageError  # type: ignore[no-redef]


# A disk that fills up, a read-only file system or a refused permission while a command writes:
# the user's environment, told in one line like bad input (outputs are written all or nothing).
# A path the file system cannot take (a name over 255 bytes, a loop of symbolic links) is the
# user's input, told the same way.
_FULL_OR_FORBIDDEN = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG,
                      errno.ELOOP}


# An optional dependency a command imports when it runs, and the extra that installs it. Without
# one, `speedplan run`, `validate` and `bench` on a base install (the README's first command)
# ended in a ModuleNotFoundError traceback (2026-12-05).
_EXTRAS = {"torch": "runtime", "gguf": "runtime", "tqdm": "runtime", "regex": "runtime", "jinja2": "runtime",
           "pyarrow": "aic", "aiconfigurator": "aic", "cupy": "gpu"}


class Terminated(BaseException):
    """SIGTERM while a command ran (`kill`, `timeout`, a cancelled CI job): raised where the
    command was, so that the `except BaseException` around each staging folder discards it as on
    any failure. Until 2026-12-05 the process died where it stood and left a hidden
    `.<out>.xxxx` folder beside --out (a killed hour-long `speedplan validate`)."""


_kept: list[Path] = []  # the folder a command that writes as it goes (bench) keeps when stopped


def keep_on_stop(folder: str | Path) -> None:
    """Say, when the running command is stopped (Ctrl-C, SIGTERM), that `folder` is kept, not
    removed: `speedplan bench` appends each point as it completes and resumes from them."""
    _kept[:] = [Path(folder)]


def _stopped(how: str) -> str:
    if not _kept:
        return f"speedplan: {how}; unfinished outputs removed"
    folder = _kept[0]
    if folder.is_dir() and any(folder.glob("*.csv")):  # the tables bench appends each point to
        return f"speedplan: {how}; what was measured so far is kept in {folder}: the same command resumes"
    return f"speedplan: {how}; nothing was measured yet" + (f" ({folder} holds its settings)" if folder.is_dir() else "")


def _terminate(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up short
    raise Terminated


def run(argv: list[str] | None = None) -> int:
    """Run the command line (sys.argv by default); return the exit status. Bad input (ours or
    Typer's usage errors) is one line on stderr and status 2, never a traceback. SIGTERM ends
    the command as Ctrl-C does, its unfinished outputs removed: status 143 (128 + SIGTERM)."""
    main_thread = threading.current_thread() is threading.main_thread()  # signal() works there only
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    _kept.clear()
    try:
        return _run(argv)
    except Terminated:
        typer.echo(_stopped("terminated (SIGTERM)"), err=True)
        return 128 + signal.SIGTERM
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _run(argv: list[str] | None) -> int:
    try:
        rv = app(args=argv, standalone_mode=False)
    except SpeedplanInputError as e:
        typer.echo(f"speedplan: error: {e}", err=True)
        return 2
    except ModuleNotFoundError as e:
        extra = _EXTRAS.get((e.name or "").split(".")[0])
        if extra is None:
            raise  # a module of speedplan's own, or one no extra provides: a bug to see whole
        typer.echo(f"speedplan: error: this command needs {e.name}, which is not installed: pip install "
                   f"'speedplan[{extra}]' (in a checkout: pip install -e '.[{extra}]')", err=True)
        return 2
    except OSError as e:
        if e.errno not in _FULL_OR_FORBIDDEN:
            raise  # anything else is a bug to see whole
        typer.echo(f"speedplan: error: {clipped(e.filename) if e.filename else 'writing output'}: {e.strerror}", err=True)
        return 2
    except ValueError as e:
        if (what := too_many_digits(e)) is None:  # int() of more digits than Python converts (4,300)
            raise
        typer.echo(f"speedplan: error: the input holds {what}", err=True)
        return 2
    except RuntimeError as e:
        if not str(e).startswith("Symlink loop"):  # pathlib's resolve(strict=False) on a loop of links
            raise
        typer.echo(f"speedplan: error: {e}", err=True)
        return 2
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        typer.echo(_stopped("aborted"), err=True)
        return 130
    except _UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # `speedplan` alone, or a group alone: help
            e.show()
            return 0
        msg = _no_such_option(e) or e.format_message().replace("\n", " ")
        typer.echo(f"speedplan: error: {msg}", err=True)
        return 2
    if rv == 130:  # Ctrl-C: Typer returns its Exit(130) in silence (no command of ours returns a number)
        typer.echo(_stopped("interrupted (Ctrl-C)"), err=True)
    return rv if isinstance(rv, int) else 0


def _no_such_option(e) -> str | None:
    """Click's "No such option: --nope (Possible options: --model, --tp)" compares whole names, whose shared
    "--" made unrelated options look close; this compares the names without dashes (`did_you_mean`) and
    names the command's help. None for other usage errors."""
    ctx, name = getattr(e, "ctx", None), getattr(e, "option_name", None)
    if type(e).__name__ != "NoSuchOption" or ctx is None or not name:
        return None
    opts = [o for p in ctx.command.params for o in getattr(p, "opts", []) if o.startswith("--")]
    guess = did_you_mean(name.lstrip("-"), [o[2:] for o in opts]).replace(" '", " '--")
    names, c = [], ctx
    while c is not None and c.parent is not None:  # the subcommands under the root, whatever argv[0] was
        names.insert(0, c.info_name)
        c = c.parent
    return f"no such option: {name!r:.60}{guess}; {' '.join(['speedplan', *names, '--help'])} lists them"


def main() -> None:
    """`python -m speedplan.cli`: the command line without the console script's speed tricks."""
    raise SystemExit(run())
