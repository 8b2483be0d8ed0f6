"""How `speedplan validate` times the runtime on a VM whose speed drifts: rounds in rotated
order (`timed_rounds`), a speedup from the round whose plain + speculative pair ran fastest
(`paired_ratio`), and each batch's pick and measured best timed again before regret is read
(`points_to_confirm`). Times are seconds."""

from __future__ import annotations

import numpy as np


def paired_ratio(plain_s: list[float], spec_s: list[float]) -> tuple[float, int]:
    """Plain step time over speculative step time (the speedup per accepted token) from the
    round whose pair (plain run + speculative run, seconds) took least, and that round.

    The VM only ever slows down, for seconds to minutes: a pair slowed in either half shows a
    larger sum, and its ratio is off by the slow-down. Averaging the rounds' ratios let one
    slowed plain run inflate a speedup (2026-12-02: plain runs 72 ms a step at B = 8, one of them about 110 ms,
    put n-gram at D = 2 at a measured 1.31x, the planner's pick 11.6% behind it; its step time
    and a 72 ms plain run give 1.04x)."""
    r = int(np.argmin([p + s for p, s in zip(plain_s, spec_s)]))
    return float(plain_s[r] / spec_s[r]), r


def measured_ratio(plain_s: list[float] | None, spec_s: list[float], plain_base_s: float) -> tuple[float, int | None]:
    """A speculative point's plain step time over its own (its speedup per accepted token) and the
    round it came from: `paired_ratio` where plain runs were paired with it, else the batch's one
    plain step time (`plain_base_s`) over the point's fastest round (round None)."""
    return paired_ratio(plain_s, spec_s) if plain_s else (plain_base_s / min(spec_s), None)


def timed_rounds(plan: list, measure, rounds: int, say=lambda msg: None, describe=str) -> list[tuple]:
    """Run `measure(item) -> (result, seconds)` for every item of `plan` in `rounds` rounds, round
    r in the plan's order rotated by r/rounds of its length. Per item: (first round's result,
    fastest round's result, every round's seconds in plan order of rounds)."""
    n = len(plan)
    first: dict[int, object] = {}
    fastest: dict[int, tuple] = {}
    seconds: dict[int, list] = {i: [] for i in range(n)}
    for r in range(rounds):
        shift = (r * n) // rounds
        for k, i in enumerate([*range(shift, n), *range(shift)], 1):
            say(f"[{k + r * n}/{n * rounds}] {describe(plan[i])}" + (f" (round {r + 1} of {rounds})" if rounds > 1 else ""))
            res, t = measure(plan[i], r)
            first.setdefault(i, res)
            seconds[i].append(t)
            if i not in fastest or t < fastest[i][1]:
                fastest[i] = (res, t)
    return [(first[i], fastest[i][0], seconds[i]) for i in range(n)]


def points_to_confirm(speedup: dict, picks: dict, confirmed: set) -> list:
    """The speculative points to time again, two more paired rounds each, before regret is read:
    per batch, the planner's pick and the point with the highest measured speedup, unless they
    were timed again already. Keys are (mechanism, batch, draft_len); `speedup` holds every
    point's measured speedup (plain decoding: 1), `picks` the planner's pick per batch.

    The highest of some 29 speedups each timed twice on a VM whose rounds differ by a median of
    9% is biased up (the winner's curse): on 2026-12-02 (AMD EPYC) n-gram at B = 2, D = 7
    measured 1.40x from a 51 ms step, below its own D = 6 (64 ms) and D = 5 (57 ms), and the
    planner's pick, measured 1.01x, showed a 27.7% regret against it. Timing the winner again
    until the best is a point timed four times (or `confirm_passes` run out) and the pick as
    often, lets drift that favoured one point wash out; the pick gets no other advantage."""
    out = []
    for batch, pick in picks.items():
        points = [k for k in speedup if k[1] == batch]
        best = max(points, key=lambda k: speedup[k])
        for k in (pick, best):
            if k[2] > 0 and k not in confirmed and k not in out:
                out.append(k)
    return out
