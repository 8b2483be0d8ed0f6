"""Reading the JSON files users and presets give: one place that turns a bad file into one line."""

from __future__ import annotations

import errno
import json
import math
import numbers
import stat
from pathlib import Path

from speedplan.errors import SpeedplanInputError, too_many_digits


def refuse_device(path: str | Path) -> None:
    """A device given as an input file is refused by name: /dev/zero read without end and took
    9-14 GB of memory (`speedplan models /dev/zero`, a fuzzing run of 2026-12-05). A pipe, as
    bash's <(...) gives, is read as a file."""
    try:
        mode = Path(path).stat().st_mode
    except (OSError, ValueError):
        return  # missing or unreadable: the reader says so
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise SpeedplanInputError(f"{path}: is a device, not a file")


def read_problem(e: Exception) -> str:
    """Why a file could not be read, for a one-line error: an OSError's reason, or for text that is
    not UTF-8 the encoding it is in where its byte-order mark says (UTF-16 from Windows tools,
    which a "cannot decode byte 0xff" leaves unsaid), else the first bad byte."""
    if isinstance(e, UnicodeDecodeError):
        wide = _wide_text(bytes(e.object[:4]) if isinstance(e.object, (bytes, bytearray)) else b"")
        if wide:
            return wide
        # (no offset: e.start counts in the reader's chunk of the file, not in the file)
        return f"not UTF-8 text: byte 0x{bytes(e.object[e.start:e.start + 1]).hex()}; save it as UTF-8"
    return str(getattr(e, "strerror", None) or str(e).splitlines()[0])


def _wide_text(head: bytes) -> str:
    """What a file's first bytes say of a UTF-16 or UTF-32 byte-order mark ("" where none)."""
    for bom, name in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
                      (b"\xfe\xff", "UTF-16")):
        if head.startswith(bom):
            return f"{name} text, byte-order mark {bom.hex(' ').upper()}: save it as UTF-8"
    return ""


def refuse_wide_text(path: str | Path) -> None:
    """Refuse a UTF-16 or UTF-32 file (its byte-order mark) where text is read leniently (logs,
    whose stray bytes are replaced): it would read as no text at all."""
    if not Path(path).is_file():  # a pipe or a device: reading it here would wait on it (the reader says so)
        return
    try:
        with Path(path).open("rb") as f:
            wide = _wide_text(f.read(4))
    except OSError:
        return  # the reader says so
    if wide:
        raise SpeedplanInputError(f"{path}: cannot read ({wide})")


def read_json(path: str | Path):
    """The parsed contents of a JSON file; a missing, unreadable or malformed file, or a device,
    is a SpeedplanInputError naming the file (and the line of a syntax error)."""
    path = Path(path)
    refuse_device(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read ({read_problem(e)})") from None
    return parse_json(text, str(path))


def parse_json(text: str, where: str):
    """json.loads for text a user gave: a leading byte-order mark (Excel's "UTF-8" files) is
    skipped; a syntax error, or nesting deeper than Python's parser recurses, is a
    SpeedplanInputError "`where`: malformed JSON (...)"."""
    try:
        return json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as e:
        msg = e.msg.removesuffix(" at")  # "Unterminated string starting at" + a position
        raise SpeedplanInputError(f"{where}: malformed JSON ({msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise SpeedplanInputError(f"{where}: malformed JSON (nested too deeply)") from None
    except ValueError as e:  # a number of more digits than int() converts
        if (what := too_many_digits(e)) is None:
            raise
        raise SpeedplanInputError(f"{where}: {what}") from None


def finite(value) -> bool:
    """A JSON number (not true/false) with a finite float value: 10**400, which JSON allows and
    float() refuses, is not."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def is_a(path: Path, kind: str) -> bool:
    """`path.is_file()` (kind "file"), `is_dir()` ("dir") or `exists()` ("any": a device too, which
    `refuse_device` then names), False where the OS cannot even look up a name that long
    (ENAMETOOLONG, which pathlib raises): such text is then "not an existing file"."""
    try:
        return {"file": path.is_file, "dir": path.is_dir, "any": path.exists}[kind]()
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            raise  # a folder one may not read: the CLI names it and the OS's reason
        return False
