"""The keys an engine profile file may hold, checked when it is read: a misspelt top-level key
("memmory") or a term whose unit was edited ("ms per step") had been ignored without a word, the
default memory rule applied and the value still read in µs, where hardware files refuse both."""

from __future__ import annotations

from speedplan.errors import SpeedplanInputError

# what calibrate writes (EngineProfile.to_json) and what the shipped profiles add (their fit's notes);
# keys starting with "_" are comments
TOP_KEYS = ("name", "engine", "version", "description", "terms", "fit", "fit_order", "memory", "fit_left_out",
            "fit_held_out")
TERM_KEYS = ("value", "source", "unit", "meaning")


def check_profile_keys(data: dict, where: str, terms: dict) -> None:
    """Refuse an unknown top-level key, an unknown key of a term, or a term's `unit` other than
    the one speedplan reads its value in (`terms`: TERMS, name -> TermSpec)."""
    odd = [k for k in data if k not in TOP_KEYS and not str(k).startswith("_")]
    if odd:
        raise SpeedplanInputError(f"{where}: unknown field {odd[0]!r}; an engine profile holds {', '.join(TOP_KEYS)} "
                                  "(keys starting with _ are comments)")
    for name, entry in (data.get("terms") or {}).items() if isinstance(data.get("terms"), dict) else ():
        if not isinstance(entry, dict) or name not in terms:
            continue  # the reader names these
        extra = [k for k in entry if k not in TERM_KEYS]
        if extra:
            raise SpeedplanInputError(f"{where}: terms.{name}: unknown field {extra[0]!r}; a term holds "
                                      f"{', '.join(TERM_KEYS)}")
        unit = entry.get("unit")
        if unit is not None and str(unit).strip() != terms[name].unit:
            raise SpeedplanInputError(f"{where}: terms.{name}.unit is {unit!r}, but speedplan reads this term in "
                                      f"{terms[name].unit!r}: give the value in that unit (the unit is not converted)")
