"""Measurements taken at a sampling temperature in `speedplan calibrate` (docs/engine.md).

A row's `temperature` (0 = greedy) reaches the step model (`step.StepParts.temperature`): above 0
its steps, and the plain steps a speedup is over, take `sample_passes_random` more passes over
the target's logits. Rows at T > 0 beside greedy rows tell that term apart from every other, so a
fit tries it by default only where some row sampled (`default_terms`); with none it keeps the base
profile's value and `greedy_note` says the rows were taken as greedy.
"""

from __future__ import annotations

from collections import Counter

RANDOM = "sample_passes_random"
# How a run states its temperature in each file calibrate reads (the files record none themselves).
STATED_IN = ("a temperature column in a CSV; --metadata temperature=T for vllm bench serve, whose runs since vLLM "
             "PR #32723 (2026-01) sample at the server's default unless given --temperature; temperature=T in "
             "SGLang bench_serving's --tag")


def sampled(rows) -> list:
    """The rows (Measurement records) whose requests sampled at a temperature above 0."""
    return [m for m in rows if m.temperature > 0]


def default_terms(order, rows) -> list[str]:
    """The terms a fit tries when none are named: `order` (the base's fit order, or FIT_ORDER),
    and sample_passes_random after them where some row sampled at T > 0 (no other row moves it)."""
    terms = list(order)
    if sampled(rows) and RANDOM not in terms:
        terms.append(RANDOM)
    return terms


def temperature_note(rows, profile) -> str:
    """What the fit took of the rows' temperatures: which sampled (T > 0 rows are priced with
    sample_passes_random's passes), or that none did and every row was taken as greedy."""
    hot = sampled(rows)
    value = profile.terms[RANDOM]
    if not hot:
        return (f"no row states a temperature above 0: every row is taken as greedy (temperature 0), and "
                f"{RANDOM} ({value.value:g} passes over the target's logits at T > 0) is not fitted; a run that "
                f"sampled says so ({STATED_IN})")
    counts = Counter(m.temperature for m in hot)
    said = "; ".join(f"T = {t:g}: {n} row{'s' * (n != 1)}" for t, n in sorted(counts.items()))
    return (f"{len(hot)} of {len(rows)} rows sampled at a temperature above 0 ({said}): their steps are priced with "
            f"{RANDOM}'s passes over the target's logits, the others as greedy")


def sweep_temperature(rows: list[dict]) -> float:
    """The temperature `speedplan sweep` plans for after a fit to `rows` (`Calibration.rows`):
    the one most rows ran at (ties: the lower), so that acceptance is taken at one temperature."""
    counts = Counter(float(r.get("temperature") or 0.0) for r in rows)
    return min(counts, key=lambda t: (-counts[t], t))
