"""How speedplan writes a quantity in words for a person (messages, summaries): one place, so
every message prints the same number the same way."""

from __future__ import annotations

import math

_PLAIN_GB_BELOW = 1e5  # GB: every real device and model prints as "1,234.5 GB"; past this, powers of ten


def gigabytes(nbytes: float, digits: int = 1) -> str:
    """`nbytes` bytes as decimal gigabytes (1 GB = 1e9 bytes) with `digits` decimals, e.g.
    "85.5 GB". Past 100,000 GB, which no GPU or host holds, the figure is a power of ten with
    three significant digits ("3.20e9 GB", where `.1f` printed "3201639328.0 GB" and an absurd
    config 21 digits); thousands are grouped ("4,414 GB"); not a finite number prints as Python
    does ("nan GB", "inf GB")."""
    return _scaled(nbytes / 1e9, digits) + " GB"


def billions(count: float, digits: int = 1) -> str:
    """`count` (parameters) in billions with `digits` decimals, e.g. "8.0B"; past 100,000 billion,
    which no model holds, a power of ten ("3.20e9B") as `gigabytes` does."""
    return _scaled(count / 1e9, digits) + "B"


def _scaled(value: float, digits: int) -> str:
    """`value` with `digits` decimals and thousands grouped, or past 100,000 a power of ten."""
    if not math.isfinite(value) or abs(round(value, digits)) < _PLAIN_GB_BELOW:
        return f"{value:,.{digits}f}"
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"
