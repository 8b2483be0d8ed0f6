"""The acceptance length of a `vllm bench serve` result from its per-position acceptance rates.

vLLM `vllm/benchmarks/serve.py` (commit 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1, `benchmark`)
scrapes the server's /metrics before and after the run and writes, from the counters' deltas,
`spec_decode_acceptance_length` = 1 + accepted / drafts and
`spec_decode_per_position_acceptance_rates` = [accepted at position i / drafts for each
position i = 0, 1, ...] (a JSON list; [] where the run drafted nothing). vLLM counts each accepted
token once in the accepted total and once at its position (`vllm/v1/spec_decode/metrics.py`,
`SpecDecodingStats.observe_draft`), so AL = 1 + Σ_i rate_i, the definition
`readers.vllm_metrics` reads a /metrics scrape by. vLLM writes both unrounded from one scrape (they
agree to float precision) and prints them rounded (AL to 2 decimals, each rate as a percentage to
2 decimals): a result copied from that printout differs by at most POSITIONS_ROUNDING.
"""

from __future__ import annotations

from speedplan.engine.readers.measurement import number_field, shown
from speedplan.errors import SpeedplanInputError

POSITIONS = "spec_decode_per_position_acceptance_rates"
AL_FIELD = "spec_decode_acceptance_length"


def positions_rounding(positions: int) -> float:
    """How far apart AL and 1 + Σ rates may be: AL printed to 2 decimals (0.005), each rate as a
    percentage to 2 decimals (0.00005 each), and float error."""
    return 0.005 + 0.00005 * positions + 1e-9


def position_acceptance(run: dict, where: str) -> float | None:
    """1 + Σ `spec_decode_per_position_acceptance_rates` of `run`, or None where it has no such
    field or an empty list (a run that drafted nothing). Each rate is a number in 0..1, none above
    the one before it (a chain's token i+1 is accepted only after token i); where the run also has
    `spec_decode_acceptance_length`, the two agree within `positions_rounding`."""
    rates = run.get(POSITIONS)
    if rates is None:
        return None
    if not isinstance(rates, list):
        raise SpeedplanInputError(f"{where}: field {POSITIONS!r} must be a list of per-position acceptance rates "
                                  f"(as vllm bench serve writes it), got {shown(rates)}")
    if not rates:
        return None
    values = []
    for i, rate in enumerate(rates):
        value = number_field({POSITIONS: rate}, POSITIONS, where)
        if not 0 <= value <= 1:
            raise SpeedplanInputError(f"{where}: field {POSITIONS!r} position {i} must be a rate in 0..1 (accepted at "
                                      f"that position / drafts), got {shown(rate)}")
        if values and value > values[-1] + 1e-9:
            raise SpeedplanInputError(f"{where}: field {POSITIONS!r} position {i} ({value:g}) exceeds position {i - 1} "
                                      f"({values[-1]:g}): a draft token is accepted only after those before it")
        values.append(value)
    al = 1.0 + sum(values)
    stated = number_field(run, AL_FIELD, where, required=False)
    if stated is not None and abs(stated - al) > positions_rounding(len(values)):
        raise SpeedplanInputError(f"{where}: field {AL_FIELD!r} {stated:g} contradicts {POSITIONS!r} (1 + their sum = "
                                  f"{al:.4g}): vLLM writes both from one scrape of the server's counters; the file was "
                                  "edited or pieced together from two runs")
    return al
