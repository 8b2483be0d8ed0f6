"""What `speedplan.plan.sweep.sweep` accepts from a Python caller, made into what it prices:
one value where a list is expected, text like the CLI's, and numbers out of range get one
clear error (SpeedplanInputError), not a wrong sweep.

    >>> axis("contexts", "4096", 1, 10_000_000)
    [4096]
    >>> axis("batches", "1-4,8", 1, 65536)
    [1, 2, 3, 4, 8]
    >>> mechanism_specs("eagle3")
    ['eagle3']
"""

from __future__ import annotations

import math
import numbers
import re

from speedplan.errors import SpeedplanInputError, far_too_large


# A sweep holds every configuration's row and its pricing arrays at once: about 2 kB each at its
# peak (209k configurations took 466 MB as one process on the development machine, 2026-12-04).
MAX_CONFIGURATIONS = 500_000
_DIGITS = re.compile(r"-?[0-9]+", re.ASCII)  # int() also takes "1_000" and non-ASCII digits


def parse_int_list(text: str, option: str) -> list[int]:
    """`1-256`, `1,2,4,8` or a mix (`1,2,4-8`) → sorted distinct integers."""
    values: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        ends = (lo.strip(), hi.strip()) if dash and lo else (part, part)
        if not all(_DIGITS.fullmatch(e) for e in ends):
            example = "4096 or 1024,8192" if "context" in option else "1-256 or 1,2,4"  # contexts in tokens: no "8k"
            raise SpeedplanInputError(f"{option} {text!r:.60}: expected whole numbers like {example}")
        if too_large := far_too_large(max(ends, key=len)):  # far beyond every axis's bound
            raise SpeedplanInputError(f"{option} {text if len(text) <= 20 else text[:20] + '...'}: {too_large}")
        a, b = (int(e) for e in ends)
        if a > b:
            raise SpeedplanInputError(f"{option} {text!r:.60}: range {part} runs backwards")
        if b - a + 1 + len(values) > 100_000:
            raise SpeedplanInputError(f"{option} {text!r:.60}: too many values")
        values.update(range(a, b + 1))
    return sorted(values)


def axis(name: str, values, low: int, high: int) -> list[int]:
    """Sorted distinct integers in low..high from a list, a range, one integer, or the CLI's
    text ("1-256", "1,8,64")."""
    if values is None:
        raise SpeedplanInputError(f"{name}: give one or more whole numbers")
    if isinstance(values, (bytes, bytearray, dict)):  # b"8" iterates as [56], a dict as its keys
        raise SpeedplanInputError(f"{name}: expected whole numbers (a list, a range or text like '1,8'), "
                                  f"got {type(values).__name__}")
    if isinstance(values, str):
        values = parse_int_list(values, name)
    elif getattr(values, "ndim", None) == 0:  # a numpy scalar or 0-d array
        values = [values.item()]
    elif isinstance(values, numbers.Number):
        values = [values]
    out = set()
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (numbers.Real, str)) or (
                isinstance(v, str) and not _DIGITS.fullmatch(v.strip())):
            raise SpeedplanInputError(f"{name}: {v!r} is not a whole number")
        try:
            number = float(v)
        except ValueError:
            raise SpeedplanInputError(f"{name}: {v!r} is not a whole number") from None
        except OverflowError:  # an int beyond a float's range: out of range, as any too large a value
            raise SpeedplanInputError(f"{name}: values must be in {low}..{high}, got {v!r:.20}...") from None
        if not math.isfinite(number) or number != int(number):
            raise SpeedplanInputError(f"{name}: {v!r} is not a whole number")
        out.add(int(number))
    values = sorted(out)
    if not values:
        raise SpeedplanInputError(f"{name}: empty")
    if values[0] < low or values[-1] > high:
        bad = [v for v in values if not low <= v <= high]
        raise SpeedplanInputError(f"{name}: values must be in {low}..{high}, got {bad[0]}"
                                  + (f" (and {len(bad) - 1} more outside)" if len(bad) > 1 else ""))
    return values


def integer(value):
    """`value` as a plain int when it is a whole-number type (numpy's included, not bool), else as
    it is, for the caller's own check to refuse: np.int64(4) from a notebook is 4."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


def check_grid_size(settings: list[int], batches: list[int], contexts: list[int]) -> None:
    """Refuse a sweep of more than MAX_CONFIGURATIONS: `settings` holds each mechanism's count
    of (D, tree size) settings (plain decoding's 1 included), priced at every batch and context."""
    n = sum(settings) * len(batches) * len(contexts)
    if n > MAX_CONFIGURATIONS:
        raise SpeedplanInputError(
            f"the sweep has {n:,} configurations ({len(batches):,} batch sizes x {len(contexts):,} contexts x "
            f"{sum(settings)} settings); speedplan sweeps at most {MAX_CONFIGURATIONS:,} at once (about 1 GB of "
            "memory): give fewer batch sizes or contexts, e.g. --batch 1-256 --context 1024,8192")


def mechanism_specs(mechanisms) -> list | None:
    """None (every mechanism that applies), or a list of specs / Mechanism objects; one spec
    given as text is a list of one."""
    from speedplan.plan.mechanisms import Mechanism

    if mechanisms is None:
        return None
    if getattr(mechanisms, "ndim", None) == 1 and hasattr(mechanisms, "tolist"):  # a numpy array or a Series of names
        mechanisms = mechanisms.tolist()
    if not isinstance(mechanisms, (str, Mechanism, list, tuple, set, frozenset)):
        raise SpeedplanInputError(f"mechanisms: expected a list of names like 'eagle3', got {mechanisms!r}")
    specs = [mechanisms] if isinstance(mechanisms, (str, Mechanism)) else list(mechanisms)
    if not specs:
        raise SpeedplanInputError("mechanisms: an empty list (None sweeps every mechanism that applies)")
    wrong = [m for m in specs if not isinstance(m, (str, Mechanism))]
    if wrong:
        raise SpeedplanInputError(f"mechanisms: expected names like 'eagle3' or 'draft-model:llama-3.2-1b', "
                                  f"got {wrong[0]!r}")
    from speedplan.plan.mechanisms import mechanism_class, canonical_spec

    for m in specs:
        if isinstance(m, str):
            mechanism_class(m.partition(":")[0])  # an unknown name or plain decoding, named as given
    return [canonical_spec(m) if isinstance(m, str) else m for m in specs]  # EAGLE-3, draft_model: speedplan's names


def acceptance_arg(acceptance, mechanisms: tuple[str, ...]):
    """None, one Acceptance, or {mechanism or "*": Acceptance}, from those or from the CLI's
    --acceptance text ("alpha=0.8", "eagle3:positions=0.9,0.8", a file), alone or in a list,
    or a dict whose values are such text."""
    from speedplan.plan.acceptance import Acceptance
    from speedplan.plan.acceptance_sources import parse_acceptance, parse_acceptance_options
    from speedplan.plan.mechanism_names import canonical_spec

    if acceptance is None or isinstance(acceptance, Acceptance):
        return acceptance
    if isinstance(acceptance, (list, tuple, dict)) and not acceptance:
        raise SpeedplanInputError("acceptance: empty (None takes each mechanism's published default)")
    if isinstance(acceptance, str):
        return parse_acceptance_options([acceptance], mechanisms)
    if isinstance(acceptance, dict):
        out, given = {}, {}
        for key, value in acceptance.items():
            if isinstance(value, str):
                value = parse_acceptance(value)
            if not isinstance(value, Acceptance):
                raise SpeedplanInputError(f"acceptance[{key!r}]: expected an Acceptance or text like 'alpha=0.8', "
                                          f"got {type(value).__name__}")
            name = canonical_spec(str(key).lower())  # "EAGLE-3" is eagle3, "*" stays
            if name in given:  # "EAGLE3" and "eagle3": one would silently replace the other
                raise SpeedplanInputError(f"acceptance: keys {given[name]!r} and {key!r} name one mechanism; give it once")
            out[name], given[name] = value, key
        return out
    if isinstance(acceptance, (list, tuple)) and all(isinstance(a, str) for a in acceptance):
        return parse_acceptance_options(list(acceptance), mechanisms)
    raise SpeedplanInputError(f"acceptance: expected an Acceptance, a dict of them, or text like 'alpha=0.8', "
                              f"got {type(acceptance).__name__}")
