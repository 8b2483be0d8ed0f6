"""Output folders and files, all or nothing, and never over a user's other files.

A command writes a folder into a hidden sibling first and moves it into place once every file is
there. A folder already at `--out` is replaced only when it is empty or is what the command
itself writes (a previous report or profile, known by its marker files); anything else, and the
current folder or one that holds it, is refused in one line before any work is done. A path that
cannot be written (a read-only or virtual file system, a missing device) is one line too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from speedplan.errors import SpeedplanInputError


@contextlib.contextmanager
def writing(path: str | Path, option: str = "--out"):
    """Turn an OSError raised while writing `path` into one line naming it."""
    try:
        yield
    except SpeedplanInputError:
        raise
    except OSError as e:
        raise SpeedplanInputError(f"{option} {path}: cannot write ({e.strerror or e})") from None


def check_replaceable(out: str | Path, kind: str, markers: tuple[str, ...], option: str = "--out") -> None:
    """Refuse `out` unless it is missing, an empty folder, or a folder holding every one of
    `markers` (the files a `kind` folder always has). The current folder and its parents are
    refused too: replacing them would pull the floor from under the shell."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SpeedplanInputError(f"{option} {out}: exists and is not a folder")
    here = Path.cwd().resolve()
    target = out.resolve()
    if target == here or target in here.parents:
        raise SpeedplanInputError(f"{option} {out}: is the current folder or holds it; give a new folder name")
    if not out.is_dir():
        return
    entries = sorted(p.name for p in out.iterdir())
    if entries and not all((out / m).is_file() for m in markers):
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
        raise SpeedplanInputError(f"{option} {out}: folder exists and is not a {kind} (it holds {shown}); "
                                  "give a new or empty folder")


def staging_folder(out: Path, option: str = "--out") -> Path:
    """A new hidden folder beside `out`, with the permissions a plain mkdir would give."""
    with writing(out, option):
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        mask = os.umask(0)
        os.umask(mask)
        tmp.chmod(0o777 & ~mask)  # mkdtemp makes 0700
    return tmp


def move_into_place(tmp: Path, out: Path) -> None:
    """Rename the finished `tmp` to `out`. An old `out` is moved aside first and removed only
    once the new one is in place (put back if the move fails)."""
    if not out.exists():
        tmp.rename(out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
    old.rmdir()
    out.rename(old)
    try:
        tmp.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)
