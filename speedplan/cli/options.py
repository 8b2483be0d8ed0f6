"""Parsing shared by several commands: integer lists and ranges like `1-256` or `1,2,4`."""

from __future__ import annotations

from speedplan.errors import SpeedplanInputError
from speedplan.plan.sweep_inputs import parse_int_list  # noqa: F401  (the library's; commands import it here)


def check_output(path, option: str = "--out", folder: bool = True, inputs=()) -> None:
    """Fail now, in one line, where `path` cannot be written: a folder on its way is a file, the
    nearest existing folder is not writable, or `path` is a file where a folder goes (or the other
    way round), `path` is a device or a pipe, or it is one of the command's `inputs` (which writing
    would destroy). Commands call this before their work, so an hour of `validate` or `bench` is not
    lost to a typo in --out. Nothing is created here (the writers make missing folders)."""
    import os
    from pathlib import Path

    from speedplan.outputs import is_one_of

    path = Path(path)
    if path.exists() and path.is_dir() != folder:
        raise SpeedplanInputError(f"{option} {path}: " + ("exists and is not a folder" if folder else
                                                          "is a folder; give a file name"))
    if path.exists() and not (path.is_dir() or path.is_file()):  # a device, a pipe, a socket
        raise SpeedplanInputError(f"{option} {path}: exists and is not a regular file")
    if is_one_of(path, inputs):
        raise SpeedplanInputError(f"{option} {path}: is one of the input files; give another name")
    above = path.absolute().parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise SpeedplanInputError(f"{option} {path}: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise SpeedplanInputError(f"{option} {path}: cannot write in {above} (permission denied)")
