"""The schedule programs of `speedplan.plan.pick` against brute force on small grids."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from speedplan.plan.pick import few_rises, non_increasing


def _objective(rel, picks, cost) -> float:
    cost = np.broadcast_to(np.asarray(cost, dtype=float), (len(picks),))
    rises = sum(cost[t] for t in range(1, len(picks)) if picks[t] > picks[t - 1])
    return float(sum(rel[t][j] for t, j in enumerate(picks))) - rises


@pytest.mark.parametrize("cost", [0.0, 0.03, 0.2])
def test_few_rises_finds_the_best_schedule(cost):
    rng = np.random.default_rng(7)
    for _ in range(300):
        n, m = rng.integers(1, 6), rng.integers(1, 4)
        rel = np.round(rng.uniform(0.8, 1.0, (n, m)), 2)  # rounded: many exact ties
        rel = np.minimum(rel, 0.99)
        best = max(_objective(rel, p, cost) for p in itertools.product(range(m), repeat=n))
        assert _objective(rel, few_rises(rel, cost), cost) == pytest.approx(best, abs=1e-9)


def test_an_infinite_rise_cost_is_a_best_non_increasing_schedule():
    """The same total as `non_increasing` (ties may be broken apart: few_rises counts exactly)."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        rel = np.minimum(np.round(rng.uniform(0.8, 1.0, (5, 3)), 2), 0.99)
        picks = few_rises(rel, float("inf"))
        assert all(b <= a for a, b in zip(picks, picks[1:]))
        assert _objective(rel, picks, 0.0) == pytest.approx(_objective(rel, non_increasing(rel), 0.0), abs=1e-9)


def test_a_rise_into_a_row_costs_that_rows_cost():
    """Per-row costs: a rise into a row that counts for nothing is free, so a heavy row keeps its
    own best even where the next row would need a rise back."""
    rel = np.array([[0.90, 0.99], [0.99, 0.95], [0.90, 0.99]])
    assert few_rises(rel, 0.05) == [1, 1, 1]  # dropping at row 1 (gain 0.04) does not pay the rise back
    assert few_rises(rel, [0.05, 0.05, 0.0]) == [1, 0, 1]  # the rise back into row 2 is free
    assert few_rises(np.zeros((0, 3)), 0.03) == []


def test_sensitivity_mid_is_the_sweeps_own_best_speedup_under_a_speculative_cap():
    """At unchanged AL the middle column is the sweep's best speedup per mechanism and batch,
    also where SGLang runs 48 of B > 48 requests in a speculative step (it priced all B, and
    showed speedups above AL there)."""
    from speedplan.plan.pick import sensitivity
    from speedplan.plan.sweep import sweep

    from tests._heads import long_heads

    r = sweep("llama-3.1-8b", "h100-sxm", [*long_heads("eagle3"), "ngram"], [1, 64, 256], [0, 2, 5], engine="sglang")
    table = sensitivity(r.frame, ["eagle3", "ngram"]).set_index(["mechanism", "batch"])
    f = r.frame[r.frame.feasible & (r.frame.mechanism != "none")]
    best = f.groupby(["mechanism", "batch"])["speedup"].max()
    assert (r.frame.running < r.frame.batch).any()
    assert np.allclose(table.loc[best.index, "speedup_mid"], best)
    al = f.groupby(["mechanism", "batch"])["acceptance_length"].max()
    assert (table.loc[best.index, "speedup_mid"] <= al + 1e-9).all()
