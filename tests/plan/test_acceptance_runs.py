"""n-gram lookup's acceptance as runs of copied text (`fit_runs`): a step of D that stops short of
a run leaves the rest of it to the next step, so a small D accepts more per step than a chain fitted
at a larger D says (SmolLM2, 2026-12-05: 6-7% more at D = 1, benchmarks/bench_ngram_runs.py)."""

from __future__ import annotations

import numpy as np
import pytest

from speedplan.plan.acceptance import Acceptance, fit_positions, fit_runs


def _al(positions, draft_lens):
    return Acceptance.positional(tuple(np.maximum(positions, 1e-6)), "test").chain_al(np.asarray(draft_lens))


def test_the_worked_number():
    """[6, 2, 2, 0] at D = 3: runs of 0, 1 and 2 agreeing tokens; at D = 1 the run of 2 takes two steps."""
    assert _al(fit_runs(np.array([6, 2, 2, 0]), 3), [1, 3]) == pytest.approx([1.6 / 1.2, 1.6], abs=1e-5)
    assert _al(fit_positions(np.array([6, 2, 2, 0]), 3), [1]) == pytest.approx([1.4], abs=1e-5)


def test_full_steps_continue_their_run():
    """[8, 0, 2] at D = 2: a fifth of the steps accepted both drafts; their run goes on into the next
    step (k full steps, geometric, then one that stops at 0): AL(1) = 1.75 / E[⌊3k/2⌋ + 1]."""
    k = np.arange(200)
    steps = (0.2 ** k * 0.8 * ((3 * k) // 2 + 1)).sum()
    assert _al(fit_runs(np.array([8, 0, 2]), 2), [1, 2]) == pytest.approx([1.75 / steps, 1.4], abs=1e-5)


@pytest.mark.parametrize("histogram", [[411, 20, 18, 9, 9, 3, 3, 13], [303, 17, 9, 5, 6, 6, 2, 4], [1, 0, 0, 5],
                                       [0, 0, 0, 4], [7], [3, 3, 3, 3, 3]])
def test_the_measured_al_is_kept_and_every_probability_is_one(histogram):
    h = np.array(histogram)
    d0 = len(h) - 1 if len(h) > 1 else 3
    p = fit_runs(h, d0)
    assert len(p) == 2 * d0 and ((p >= 0) & (p < 1)).all()
    measured = 1 + (h * np.arange(len(h))).sum() / h.sum()
    assert _al(p, [d0])[0] == pytest.approx(measured, rel=2e-3)  # p clipped at 0.999, as fit_positions
    al = _al(p, range(1, 2 * d0 + 1))
    assert (np.diff(al) >= -1e-12).all()  # a longer draft never accepts less


def test_the_smollm2_runs_that_showed_it():
    """The calibration prompts' D = 7 histogram (24 prompts, B = 1) and the ALs the same prompts gave
    at D = 1..6 (benchmarks/bench_ngram_runs.py, 2026-12-05): runs within 2.1%, the chain 6.7% low."""
    h = np.array([411, 20, 18, 9, 9, 3, 3, 13])
    measured = np.array([1.236, 1.355, 1.405, 1.45, 1.474, 1.499])
    runs = np.abs(_al(fit_runs(h, 7), range(1, 7)) / measured - 1)
    chain = np.abs(_al(fit_positions(h, 7), range(1, 7)) / measured - 1)
    assert runs.max() < 0.021 and chain.max() > 0.06 and np.median(runs) < np.median(chain) / 2
