"""How `speedplan validate` times the runtime on a VM whose speed drifts: rounds in rotated
order (`timed_rounds`), more rounds for the points whose rounds disagree (`settle_rounds`), a
speedup from one round's plain + speculative pair (`paired_ratio`), plain decoding's step time
from its own rounds and its pairs (`plain_step_s`), and each batch's pick and measured best
timed again before regret is read (`points_to_confirm`). Times are seconds."""

from __future__ import annotations

import numpy as np


def paired_ratio(plain_s: list[float], spec_s: list[float]) -> tuple[float, int]:
    """Plain step time over speculative step time (the speedup per accepted token) from one
    round's pair (plain run + speculative run, seconds), and that round: with one or two rounds
    the round whose pair took least, with three or more the round whose ratio is the median
    (of the two middle ones, the pair that took less).

    The VM slows down for seconds to minutes: a pair slowed in either half shows a larger sum,
    and its ratio is off by the slow-down. Averaging the rounds' ratios let one slowed plain run
    inflate a speedup (2026-12-02: plain runs 72 ms a step at B = 8, one of them about 110 ms,
    put n-gram at D = 2 at a measured 1.31x, the planner's pick 11.6% behind it; its step time
    and a 72 ms plain run give 1.04x). A pair can also straddle a change of pace, its plain run
    fast and its speculative run slow, and still take least: on 2026-12-02 at 17:00 (AMD EPYC)
    the EAGLE tree at B = 1, D = 1 kept a pair whose plain run took 30.8 ms a step, where the
    batch's plain runs took 34-42 ms, and measured 0.93x against a predicted 1.19x. The median
    of three or more rounds' ratios passes over one such pair."""
    if len(plain_s) < 3:
        r = int(np.argmin([p + s for p, s in zip(plain_s, spec_s)]))
        return float(plain_s[r] / spec_s[r]), r
    order = sorted(range(len(plain_s)), key=lambda i: plain_s[i] / spec_s[i])
    middle = order[(len(order) - 1) // 2: len(order) // 2 + 1]
    r = min(middle, key=lambda i: plain_s[i] + spec_s[i])
    return float(plain_s[r] / spec_s[r]), r


def expected_fastest(seconds: list[float], k: int) -> float:
    """The expected fastest of `k` timings drawn without replacement from `seconds`: what the
    fastest of k rounds reads on average, with all of them to average over. Plain decoding at a
    batch size is timed in its own rounds and again as the pair of every speculative point at that
    batch (the same prompts; ~80 runs in a full run), so its step time need not rest on its own two
    or three rounds, which a slow spell can catch whole (2026-12-07 17:50, B = 8: 103.5 and 108.3 ms
    against its pairs' median of 70.2 ms). Taking the pool's fastest would read its luckiest run
    out of ~80 where every other point reads the fastest of its own k timings; validate passes the
    plain point's own k, so this reads that order statistic, averaged over the pool.

    >>> expected_fastest([1.0, 2.0, 3.0], 2)  # pairs (1,2) (1,3) (2,3): fastest 1, 1, 2
    1.3333333333333333
    """
    from math import comb

    if not len(seconds):
        raise ValueError("expected_fastest: no timings")
    x = np.sort(np.asarray(seconds, dtype=float))
    n, k = len(x), max(1, min(int(k), len(x)))
    weight = np.array([comb(n - 1 - i, k - 1) for i in range(n)], dtype=float) / comb(n, k)  # P(x[i] is the fastest)
    return float(weight @ x)


def plain_step_s(own_s: list[float], paired: dict, batch: int) -> float:
    """Plain decoding's step time at `batch` (seconds): the fastest of as many timings as its own
    rounds took (`own_s`), as read on average over them and every plain run paired with a
    speculative point at that batch (`paired`: (mechanism, batch, D) -> the plain run's seconds per
    round; `expected_fastest`); its own fastest where none was paired."""
    pool = [t for (_, b, _), seconds in paired.items() if b == batch for t in seconds]
    return expected_fastest([*own_s, *pool], len(own_s)) if pool else min(own_s)


def measured_ratio(plain_s: list[float] | None, spec_s: list[float], plain_base_s: float) -> tuple[float, int | None]:
    """A speculative point's plain step time over its own (its speedup per accepted token) and the
    round it came from: `paired_ratio` where plain runs were paired with it, else the batch's one
    plain step time (`plain_base_s`) over the point's fastest round (round None)."""
    return paired_ratio(plain_s, spec_s) if plain_s else (plain_base_s / min(spec_s), None)


def timed_rounds(plan: list, measure, rounds: int, say=lambda msg: None, describe=str,
                 first_round: int = 0) -> list[tuple]:
    """Run `measure(item, r) -> (result, seconds)` for every item of `plan` in `rounds` rounds, round
    r in the plan's order rotated by r/rounds of its length (`measure` is told r + `first_round`).
    Per item: (first round's result, fastest round's result, every round's seconds in order)."""
    n = len(plan)
    first: dict[int, object] = {}
    fastest: dict[int, tuple] = {}
    seconds: dict[int, list] = {i: [] for i in range(n)}
    for r in range(rounds):
        shift = (r * n) // rounds
        for k, i in enumerate([*range(shift, n), *range(shift)], 1):
            say(f"[{k + r * n}/{n * rounds}] {describe(plan[i])}" + (f" (round {r + 1} of {rounds})" if rounds > 1 else ""))
            res, t = measure(plan[i], r + first_round)
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


def settle_spread(seconds: list[float]) -> float:
    """How far an item's second-fastest timing lies above its fastest (0.05 = 5%); 0 for one timing."""
    fast = sorted(seconds)[:2]
    return fast[1] / fast[0] - 1.0 if len(fast) == 2 else 0.0


def unsettled(seconds: list[list[float]], tolerance: float) -> list[int]:
    """Indices of the items whose two fastest timings differ by more than `tolerance` (0.05 = 5%)
    of the fastest (`settle_spread`): their fastest may still carry a slowed spell."""
    return [i for i, ts in enumerate(seconds) if settle_spread(ts) > tolerance]


def settle_rounds(plan: list, timed: list[tuple], measure, tolerance: float, max_timings: int,
                  say=lambda msg: None, describe=str) -> list[tuple]:
    """`timed` (as `timed_rounds` returns it) with more rounds for the items not yet settled: a
    round of every `unsettled` item, in plan order, until each item's two fastest timings agree
    within `tolerance` or it has been timed `max_timings` times.

    Why: the VM only ever slows down, so an item's fastest timing is its best estimate, and
    two timings that agree say neither was slowed much. On 2026-12-02 (AMD EPYC) a point's two
    rounds differed by a median of 9-11%: the faster of two still carried part of a slowed
    spell at about half the points, and the step-time error read 5.7-7.7% (median)."""
    timed = list(timed)
    while True:
        todo = [i for i in unsettled([ts for _, _, ts in timed], tolerance) if len(timed[i][2]) < max_timings]
        if not todo:
            return timed
        more = timed_rounds([plan[i] for i in todo], measure, 1, say, lambda it: "settle: " + describe(it),
                            first_round=min(len(timed[i][2]) for i in todo))
        for i, again in zip(todo, more):
            timed[i] = merge_timed(timed[i], again)


def merge_timed(before: tuple, again: tuple) -> tuple:
    """One item's (first result, fastest result, seconds) from `timed_rounds` with more rounds of it
    added: the first result stays, the fastest of all rounds is kept, the seconds are appended."""
    first, kept, seconds = before
    _, fast, more = again
    return first, fast if min(more) < min(seconds) else kept, seconds + more
