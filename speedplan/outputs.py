"""Output folders and files, all or nothing, and never over a user's other files.

A command writes a folder into a hidden sibling first and moves it into place once every file is
there. A folder already at `--out` is replaced only when it is empty or holds nothing but what the
command itself writes (a previous report or profile: its marker files, a meta.json of the kind
the command writes, and only files of the kinds it writes); anything else, and the current folder
or one that holds it, is refused in one line before any work is done. A symbolic link at `--out`
is followed: the folder it points to is the one replaced. A path that cannot be written (a
read-only or virtual file system, a missing device) is one line too. A staging folder is named
for the process that made it (`.NAME.speedplan-PID-HOST-xxxx`): one that a killed run left behind
(SIGKILL: no clean-up ran) is removed by the next run that writes the same folder.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from speedplan.errors import SpeedplanInputError


@dataclass(frozen=True)
class FolderKind:
    """What a command's output folder holds, so that a previous one can be told from a user's."""

    name: str  # "speedplan report", "profile folder"
    markers: tuple[str, ...]  # files every such folder holds
    meta_keys: tuple[str, ...]  # keys its meta.json always has
    names: tuple[str, ...]  # the files the command writes there (fnmatch patterns; no subfolders)
    meta_file: str = "meta.json"  # the JSON file whose meta_keys say speedplan wrote it
    folders: tuple[str, ...] = ()  # subfolders the command writes (validate's own measured profile/)


MANIFEST = ".speedplan-files"  # in every output folder: the names of the files speedplan wrote there
REPORT = FolderKind("speedplan report", ("meta.json", "sweep.csv"), ("command", "version"),
                    ("meta.json", "report.html", "*.png", "sweep.csv", "pareto.csv", "recommendations.json",
                     "schedule.csv", "sensitivity.csv", "vllm_*", "sglang_*", "trtllm_*"))
PROFILE = FolderKind("profile folder", ("meta.json",), ("origin",),
                     ("meta.json", "meta.json.tmp", "README.md", "NOTICE.md", "LICENSE*", "gemm.csv", "gemm_cupy.csv", "attention.csv",
                      "prefill.csv", "elementwise.csv", "allreduce.csv", "moe.csv", "floors.csv"))
VALIDATION = FolderKind("validation folder", ("summary.json", "validation.csv"), ("points", "grid"),
                        ("summary.json", "validation.csv", "report.html", "*.png"), meta_file="summary.json",
                        folders=("profile",))


@contextlib.contextmanager
def writing(path: str | Path, option: str = "--out"):
    """Turn an OSError raised while writing `path` into one line naming it."""
    try:
        yield
    except SpeedplanInputError:
        raise
    except OSError as e:
        raise SpeedplanInputError(f"{option} {path}: cannot write ({e.strerror or e})") from None


def target(out: str | Path) -> Path:
    """Where writing `out` lands: the folder a symbolic link points to, else `out`; a leading
    `~` is the home folder, as the shell and pandas read it (not a folder named '~')."""
    out = Path(out).expanduser()
    return out.resolve() if out.is_symlink() else out


def _ours(out: Path, kind: FolderKind) -> str | None:
    """Why `out` (an existing, non-empty folder) is not a previous `kind` folder, or None."""
    entries = sorted(out.iterdir())
    missing = [m for m in kind.markers if not (out / m).is_file()]
    if missing:
        return f"it has no {missing[0]}"
    try:
        meta = json.loads((out / kind.meta_file).read_text(encoding="utf-8-sig"))  # a BOM an editor added
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        meta = None
    if not isinstance(meta, dict) or any(k not in meta for k in kind.meta_keys):
        return f"its {kind.meta_file} is not one speedplan wrote"
    manifest = out / MANIFEST
    if manifest.is_file():  # the names it wrote, listed when it was moved into place
        try:
            written = set(manifest.read_text().splitlines()) | {MANIFEST}
        except (OSError, UnicodeDecodeError):
            return f"its {MANIFEST} cannot be read"
        foreign = [p.name for p in entries if not _its_kind(p, kind) or p.name not in written]
    else:  # a folder written before the manifest existed (or one bench adds to): the names it writes
        foreign = [p.name for p in entries if not _its_kind(p, kind) or not (
            p.is_dir() or any(fnmatch.fnmatch(p.name, n) for n in kind.names))]
    if foreign:
        return f"it holds {', '.join(foreign[:3])}{' and more' if len(foreign) > 3 else ''}, which speedplan does not write"
    return None


def _its_kind(entry: Path, kind: FolderKind) -> bool:
    """Whether `entry` is a file, or a folder `kind` writes (by name; a link to one is not)."""
    return entry.is_file() or (entry.is_dir() and not entry.is_symlink() and entry.name in kind.folders)


def is_one_of(path: Path, inputs) -> bool:
    """Whether `path` is (resolves to) one of `inputs` that exist: writing it would destroy one."""
    return path.exists() and any(Path(f).exists() and Path(f).resolve() == path.resolve() for f in inputs)


def check_replaceable(out: str | Path, kind: FolderKind, option: str = "--out", inputs=()) -> None:
    """Refuse `out` unless it is missing, an empty folder, or a previous `kind` folder holding
    nothing else (`_ours`). The current folder and its parents are refused too: replacing them
    would pull the floor from under the shell; so is one of the command's `inputs` (a profile
    derived into the folder it is derived from). A command that adds to `out` (a resumed
    `speedplan bench`) calls it too, so that it never writes into a folder of the user's own."""
    out = target(out)
    if is_one_of(out, inputs):
        raise SpeedplanInputError(f"{option} {out}: is one of the command's inputs; give another folder")
    with writing(out, option):
        if out.exists() and not out.is_dir():
            raise SpeedplanInputError(f"{option} {out}: exists and is not a folder")
        here = Path.cwd().resolve()
        if out.resolve() == here or out.resolve() in here.parents:
            raise SpeedplanInputError(f"{option} {out}: is the current folder or holds it; give a new folder name")
        if not out.is_dir() or not any(out.iterdir()):
            return
        why = _ours(out, kind)
    if why:
        raise SpeedplanInputError(f"{option} {out}: folder exists and is not a {kind.name} ({why}); "
                                  "give a new or empty folder")


def _host_tag() -> str:
    """8 hex digits of this machine's name: a staging folder on a shared file system is judged
    only by the machine whose process made it."""
    return f"{zlib.crc32(socket.gethostname().encode()):08x}"


def _staged_name(out: Path) -> str:
    """`out`'s name as its staging folders carry it: whole, or for a name too long to take the
    staging suffix within the file system's 255 bytes, its first 100 characters and a hash of it."""
    name = out.name
    if len(name.encode()) <= 150:
        return name
    import hashlib

    return f"{name[:100]}~{hashlib.sha1(name.encode()).hexdigest()[:10]}"


def _prefix(out: Path) -> str:
    """A staging folder's name up to mkdtemp's random part: `.NAME.speedplan-PID-HOST-`."""
    return f".{_staged_name(out)}.speedplan-{os.getpid()}-{_host_tag()}-"


def _alive(pid: int) -> bool:
    """Whether process `pid` exists on this machine (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: someone else's process
        return True
    return True


def remove_stale(out: Path) -> list[Path]:
    """Remove the staging folders beside `out` that a killed speedplan left (SIGKILL, a power
    cut: nothing ran its clean-up): those named for `out` by a process of this machine that no
    longer runs. A killed run's aside copy of the previous folder (`-old-`) goes only while
    `out` itself exists; between its two renames it is the only copy. Returns what was removed.
    Not on Windows, where os.kill(pid, 0) would end the process."""
    if sys.platform == "win32" or not out.parent.is_dir():
        return []
    pattern = re.compile(rf"\.{re.escape(_staged_name(out))}\.speedplan-(\d{{1,10}})-{_host_tag()}-(old-)?[a-z0-9_]+")
    removed = []
    with contextlib.suppress(OSError):
        for entry in out.parent.iterdir():
            m = pattern.fullmatch(entry.name)
            if (m is None or not entry.is_dir() or entry.is_symlink() or int(m[1]) == os.getpid()
                    or _alive(int(m[1])) or (m[2] and not out.exists())):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


_MADE: dict[Path, Path] = {}  # staging folder -> the topmost missing parent made for it (`discard` removes it)


def staging_folder(out: Path, option: str = "--out") -> Path:
    """A new hidden folder beside `out`, with the permissions a plain mkdir would give. Give it
    to `move_into_place` when it is complete, or to `discard` on failure."""
    out = target(out)
    with writing(out, option):
        missing = [p for p in [out.parent, *out.parent.parents] if not p.exists()]
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(out)
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(out), dir=out.parent))
        if missing:
            _MADE[tmp] = missing[-1]
        mask = os.umask(0)
        os.umask(mask)
        tmp.chmod(0o777 & ~mask)  # mkdtemp makes 0700
    return tmp


def discard(tmp: Path) -> None:
    """Remove an unfinished staging folder, and the parent folders made for it, so that a
    command that fails leaves nothing behind."""
    shutil.rmtree(tmp, ignore_errors=True)
    made = _MADE.pop(tmp, None)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)  # held nothing but the way to tmp when it was made


def move_into_place(tmp: Path, out: Path) -> None:
    """Rename the finished `tmp` to `out` (a link's target). An old `out` is moved aside first
    and removed only once the new one is in place (put back if the move fails). The folder gets
    a MANIFEST of the files in it, so that a later run replaces it only while it holds nothing
    else (a user's file saved into a report folder keeps that folder from being replaced)."""
    out = target(out)
    _MADE.pop(tmp, None)
    (tmp / MANIFEST).write_text("".join(f"{p.name}\n" for p in sorted(tmp.iterdir()) if p.name != MANIFEST))
    if not out.exists():
        tmp.rename(out)
        return
    old = Path(tempfile.mkdtemp(prefix=_prefix(out) + "old-", dir=out.parent))
    old.rmdir()
    out.rename(old)
    try:
        tmp.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def probe_writable(path: str | Path, option: str) -> None:
    """Fail now, in one line, if a file cannot be created where `path` will be written: a
    uniquely named file is made and removed in the nearest existing folder above it (nothing
    of the user's is touched, no folder is made). A broken symbolic link on the way, where the
    writer's mkdir would fail, is refused by name."""
    above = Path(path).absolute().parent
    while not above.exists() and above != above.parent:
        if above.is_symlink():
            raise SpeedplanInputError(f"{option} {path}: {above} is a broken symbolic link")
        above = above.parent
    with writing(path, option):
        with tempfile.NamedTemporaryFile(dir=above, prefix=".speedplan-probe-"):
            pass


def write_whole(path: str | Path, text: str, option: str = "--out") -> Path:
    """Write `text` to the file `path` (through a symbolic link, the file it points to) whole or
    not at all: a uniquely named temporary file beside it, renamed over it. Folders missing above
    it are made, and removed again if the write fails; an OSError is one line naming `path`.
    Returns where the file landed."""
    out = target(path)
    missing = [p for p in [out.parent, *out.parent.parents] if not p.exists()]
    tmp: Path | None = None
    done = False
    try:
        with writing(out, option):
            out.parent.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(prefix=f".{out.name[:64]}.", suffix=".tmp", dir=out.parent)
            tmp = Path(name)
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            mask = os.umask(0)
            os.umask(mask)
            tmp.chmod(0o666 & ~mask)  # mkstemp makes 0600; the file gets what a plain open would give
            os.replace(tmp, out)
            done = True
    finally:
        if not done:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            if missing and missing[-1].is_dir():
                shutil.rmtree(missing[-1], ignore_errors=True)  # made here: it held nothing but the way to tmp
    return out


def shipped_default(path: str | Path) -> str | None:
    """`path`, a file the speedplan package ships, as a developer tool's default --out where the
    package runs from a source checkout (a pyproject.toml beside it: the tool refits or retrains
    what the repository ships); None where it is installed (a wheel in site-packages), so that
    the tool asks for --out rather than change an installed package's files."""
    import speedplan

    return str(path) if (Path(speedplan.__file__).resolve().parent.parent / "pyproject.toml").is_file() else None
