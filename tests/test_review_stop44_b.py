"""Review of stop 44's sampling-cost term (sample_passes_random) and the ^ notes (helper b).

The term must reach every step priced at --temperature > 0 once, on the target's logits only:
the sweep's rows, a reprice to another engine, the capped cells and D = 0 steps of the
per-engine plans. And an SLO pick whose rate is a running request's under an engine's cap must
say what an offered request gets, and that it falls short of the SLO where it does."""

from __future__ import annotations

import numpy as np
import pytest

from speedplan.engine.profile import get_engine
from speedplan.plan.engine_plan import plan_engines
from speedplan.plan.pricing import price_grid
from speedplan.plan.sweep import reprice, sweep
from speedplan.report.summary import slo_line

GRID = dict(mechanisms=["eagle3", "eagle3-tree", "draft-model:llama-3.2-1b"], batches=[1, 64],
            draft_lens=[0, 3])


@pytest.fixture(scope="module")
def pair():
    return sweep(**GRID, temperature=0), sweep(**GRID, temperature=0.7)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_the_extra_passes_are_paid_once_on_the_targets_logits_row_by_row(pair, engine):
    """t_sample at 0.7 less t_sample at 0 is kernel_scale x sample_passes_random x one pass over the
    target's logits, every row (plain, chain, tree, draft model; SGLang's capped rows repriced)."""
    greedy, hot = (r if engine == "vllm" else reprice(r, engine) for r in pair)
    profile = get_engine(engine)
    terms = profile.values()
    pricings, _, target, tp, cost = hot.pricing
    one_pass = np.concatenate([price_grid(p.mech, p.grid, cost, target, tp, profile, 0.7).parts.logits_pass_s
                               for p in pricings])
    extra = hot.frame["t_sample_s"].to_numpy() - greedy.frame["t_sample_s"].to_numpy()
    assert terms["sample_passes_random"] == 3.0
    assert extra == pytest.approx(terms["kernel_scale"] * terms["sample_passes_random"] * one_pass, rel=1e-9)
    assert (greedy.frame["t_verify_s"] == hot.frame["t_verify_s"]).all()
    assert (greedy.frame["t_draft_s"] == hot.frame["t_draft_s"]).all()  # the drafter's sampler stays greedy


def test_capped_cells_and_d0_steps_of_the_plans_price_the_temperature(monkeypatch):
    """Capacity (a launch that holds fewer sequences than offered) and ZeroDraft (a loaded drafter's
    D = 0 step) price their own steps: both must see the sweep's temperature, each engine's plan."""
    import speedplan.plan.capacity as capacity
    import speedplan.plan.zero_draft as zero_draft

    seen = []

    def watch(module):
        original = module.step_cost

        def step_cost(terms, parts):
            seen.append((module.__name__, float(np.max(parts.temperature))))
            return original(terms, parts)
        monkeypatch.setattr(module, "step_cost", step_cost)

    import speedplan.plan.pricing as pricing

    watch(pricing)
    watch(zero_draft)
    grid = dict(mechanisms=["eagle3"], batches=(1, 32, 48), draft_lens=(0, 2, 3), engine="trtllm")
    for temperature, flag in ((0, 0.0), (0.7, 0.7)):
        r = sweep("qwen3-30b-a3b", "h100-sxm", **grid, temperature=temperature)
        seen.clear()
        grids = []
        original = capacity.price_grid
        monkeypatch.setattr(capacity, "price_grid", lambda *a, **k: grids.append(a[6]) or original(*a, **k))
        plan_engines(r, engines=["vllm", "sglang"])
        monkeypatch.setattr(capacity, "price_grid", original)
        assert grids and set(grids) == {temperature}  # capped cells were priced, at the sweep's temperature
        assert {m for m, _ in seen} == {pricing.__name__, zero_draft.__name__}
        assert {f for _, f in seen} == {flag}


def test_an_slo_pick_under_a_cap_says_what_an_offered_request_gets():
    """--min-tokens-per-user 90 on SGLang picked B = 64 at 113.8 tokens/s/user^, a running request's:
    48 of the 64 run at once, so an offered request gets 113.8 x 48 / 64 = 85.4, below the 90 asked.
    The SLO is now held to the offered request's rate (plan.pick.slo_pick), and the line gives both."""
    r = sweep(batches=[1, 64], contexts=[1024], engine="sglang", min_tokens_per_user=90)
    assert int(r.slo_pick["batch"]) == 1  # B = 64 gives an offered request 85.4: below the SLO
    capped = r.frame[(r.frame["batch"] == 64) & r.frame["feasible"]]
    assert (capped["tokens_per_s_per_user"] >= 90).any()  # a running request's rate would have passed
    met = sweep(batches=[1, 64], contexts=[1024], engine="sglang", min_tokens_per_user=60)
    pick = met.slo_pick
    assert int(pick["batch"]) == 64 and int(pick["running"]) == 48
    offered = pick["tokens_per_s_per_user"] * 48 / 64
    line = slo_line(met)
    assert "tokens/s/user^ (a running request's: a step runs 48 of the 64, the rest wait)" in line
    assert f"{offered:.1f} per offered request" in line and offered >= 60
    plain = slo_line(sweep(batches=[1, 64], contexts=[1024], min_tokens_per_user=60))  # vLLM: no cap, no note
    assert "per offered request" not in plain and "^" not in plain
