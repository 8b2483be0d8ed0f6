"""Parsing shared by several commands: integer lists and ranges like `1-256` or `1,2,4`."""

from __future__ import annotations

from speedplan.errors import SpeedplanInputError


def parse_int_list(text: str, option: str) -> list[int]:
    """`1-256`, `1,2,4,8` or a mix (`1,2,4-8`) → sorted distinct integers."""
    values: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        try:
            if dash and lo:
                a, b = int(lo), int(hi)
                if a > b:
                    raise SpeedplanInputError(f"{option} {text!r}: range {part} runs backwards")
                values.update(range(a, b + 1))
            else:
                values.add(int(part))
        except ValueError:
            raise SpeedplanInputError(f"{option} {text!r}: expected integers like 1-256 or 1,2,4") from None
    if len(values) > 100_000:
        raise SpeedplanInputError(f"{option} {text!r}: too many values")
    return sorted(values)
