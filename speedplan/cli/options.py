"""Parsing shared by several commands: integer lists and ranges like `1-256` or `1,2,4`."""

from __future__ import annotations

from speedplan.errors import SpeedplanInputError
from speedplan.plan.sweep_inputs import parse_int_list  # noqa: F401  (the library's; commands import it here)


def _head(path, size: int = 65536) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(size).decode("utf-8", errors="replace")
    except OSError:
        return ""


# What each single-file output looks like, so that an existing file is replaced only when a
# speedplan command wrote it (an audit of 2026-12-04: --out script.sh was overwritten).
FILE_KINDS = {
    "engine profile": lambda head: head.lstrip().startswith("{") and '"terms"' in head,
    "predictions CSV": lambda head: "latency_us" in head.splitlines()[0] if head.strip() else False,
    "runtime trace": lambda head: '"speedplan.trace/' in head.split("\n", 1)[0],
    # `profile check --json-out` replaced a predictions CSV, a trace, another profile's gemm.csv (2026-12-05)
    "profile check result": lambda head: head.lstrip().startswith("{") and '"median_error"' in head,
}


def check_output(path, option: str = "--out", folder: bool = True, inputs=(), kind: str | None = None) -> None:
    """Fail now, in one line, where `path` cannot be written: a folder on its way is a file, the
    nearest existing folder is not writable, or `path` is a file where a folder goes (or the other
    way round), `path` is a device or a pipe, or it is one of the command's `inputs` (which writing
    would destroy). Commands call this before their work, so an hour of `validate` or `bench` is not
    lost to a typo in --out. Nothing is created here (the writers make missing folders)."""
    import os
    from pathlib import Path

    from speedplan.outputs import is_one_of

    path = Path(path)
    if path.is_symlink() and not path.exists():  # run --trace had replaced a loop of links with its file
        import errno

        try:
            path.resolve(strict=True)
        except RuntimeError:  # pathlib's "Symlink loop from ..." (Python 3.10-3.12)
            raise SpeedplanInputError(f"{option} {path}: a loop of symbolic links") from None
        except OSError as e:  # ELOOP from Python 3.13 on; else a link to a place not made yet: the writers make it
            if e.errno == errno.ELOOP:
                raise SpeedplanInputError(f"{option} {path}: a loop of symbolic links") from None
    if path.exists() and path.is_dir() != folder:
        raise SpeedplanInputError(f"{option} {path}: " + ("exists and is not a folder" if folder else
                                                          "is a folder; give a file name"))
    if path.exists() and not (path.is_dir() or path.is_file()):  # a device, a pipe, a socket
        raise SpeedplanInputError(f"{option} {path}: exists and is not a regular file")
    if is_one_of(path, inputs):
        raise SpeedplanInputError(f"{option} {path}: is one of the input files; give another name")
    if kind and path.is_file() and path.stat().st_size and not FILE_KINDS[kind](_head(path)):
        raise SpeedplanInputError(f"{option} {path}: exists and is not {'an' if kind[0] in 'aeiou' else 'a'} {kind} "
                                  "speedplan wrote; give a new file name")
    above = path.absolute().parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise SpeedplanInputError(f"{option} {path}: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise SpeedplanInputError(f"{option} {path}: cannot write in {above} (permission denied)")
