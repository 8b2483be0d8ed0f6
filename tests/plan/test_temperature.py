"""`--temperature`: published (greedy) acceptance defaults moved to the sampling temperature
served, from sources that measured the same drafter at T = 0 and T = 1."""

from __future__ import annotations

import json

import numpy as np
import pytest

from speedplan.cli.app import run
from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.defaults import EAGLE3_LOWER_RANK_SHARE, head_default
from speedplan.plan.sweep import sweep
from speedplan.plan.temperature import PAIRS, ratio_at

# the rows each pair's alphas were fitted to: (shape, lower-rank share, AL at T=0, AL at T=1)
ROWS = {("eagle3", "llama-3.1-8b"): ((7, 60, 10), EAGLE3_LOWER_RANK_SHARE, 6.13, 4.24),
        ("eagle3", "llama-3.1-70b"): ((7, 60, 10), EAGLE3_LOWER_RANK_SHARE, 5.63, 5.45),
        ("eagle", "llama-3.1-8b"): ((6, 60, 10), 1.0, 4.05, 3.16),
        ("eagle3", None): ((7, 60, 10), EAGLE3_LOWER_RANK_SHARE, 6.13, 4.24),
        ("eagle", None): ((6, 60, 10), 1.0, 4.05, 3.16)}


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p.family}-{p.target}")
def test_each_pair_reproduces_its_two_rows(pair):
    shape, share, al0, al1 = ROWS[(pair.family, pair.target)]
    for alpha, al in ((pair.alpha_greedy, al0), (pair.alpha_t1, al1)):
        assert float(Acceptance.head_ranks(alpha, share, "x").tree_al(*shape)) == pytest.approx(al, rel=0.005)


def _acceptance(result, label):
    return next(p.mech for p in result.pricing[0] if getattr(p, "mech", None) is not None and p.mech.label == label)


def test_at_t1_the_eagle3_default_reproduces_the_papers_t1_row():
    """Llama-3.1-8B's EAGLE-3 default is its T=0 row (AL 6.13); at T = 1 it is the same source's
    T=1 row (AL 4.24) on the same tree, and at T = 0.5 half-way in alpha (assumption)."""
    for temperature, al in ((0.0, 6.13), (1.0, 4.24)):
        r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3-tree"], [1], [0, 4], temperature=temperature)
        acc = _acceptance(r, "eagle3-tree").acceptance
        assert float(acc.tree_al(7, 60, 10)) == pytest.approx(al, rel=0.01)
    half = _acceptance(sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1], [0, 4], temperature=0.5), "eagle3")
    assert half.acceptance.ranks[0] == pytest.approx(0.8297 * ratio_at(0.6469 / 0.8297, 0.5), rel=1e-3)
    assert "at temperature 0.5: x 0.890 (linear in T between the rows (assumption)" in half.acceptance_source


def test_greedy_is_unchanged_and_higher_temperatures_accept_less():
    base = sweep("llama-3.1-8b", "h100-sxm", ["eagle", "draft-model"], [1, 16], range(0, 6))
    zero = sweep("llama-3.1-8b", "h100-sxm", ["eagle", "draft-model"], [1, 16], range(0, 6), temperature=0)
    assert base.frame.drop(columns=[]).equals(zero.frame) and zero.meta["temperature"] == 0.0
    als = [sweep("llama-3.1-8b", "h100-sxm", ["eagle", "draft-model"], [1], [0, 4], temperature=t).frame
           .query("draft_len == 4").set_index("mechanism").acceptance_length for t in (0, 0.3, 0.7, 1.0, 2.0)]
    for lower, higher in zip(als, als[1:]):
        assert (higher <= lower + 1e-12).all()
    assert (als[-1] == als[-2]).all()  # no row above T = 1: the T = 1 row's


def test_a_draft_model_moves_to_leviathans_t1_rows():
    r = sweep("llama-3.1-8b", "h100-sxm", ["draft-model"], [1], [0, 3], temperature=1.0)
    mech = _acceptance(r, "draft-model:llama-3.2-1b")
    assert mech.acceptance.kind == "iid" and mech.acceptance.positions[0] == pytest.approx(0.743, abs=0.002)
    assert "T5-small 0.75 and 0.62, T5-base 0.8 and 0.68, T5-large 0.82 and 0.71" in mech.acceptance_source


@pytest.mark.parametrize("mechanism", ["ngram", "mtp"])
def test_drafters_without_a_t1_row_keep_the_greedy_row_and_say_so(mechanism):
    model = "deepseek-v3" if mechanism == "mtp" else "llama-3.1-8b"
    hw, tp = ("h200-sxm", 8) if mechanism == "mtp" else ("h100-sxm", 1)
    greedy = sweep(model, hw, [mechanism], [1], [0, 2], tp=tp)
    hot = sweep(model, hw, [mechanism], [1], [0, 2], tp=tp, temperature=0.8)
    assert np.allclose(greedy.frame.acceptance_length, hot.frame.acceptance_length)
    assert "published at T=0 only: at temperature 0.8 it accepts less" in hot.meta["acceptance"][mechanism]


def test_an_acceptance_the_user_gives_is_not_moved():
    acc = Acceptance.iid(0.7, "user")
    greedy = sweep("llama-3.1-8b", "h100-sxm", ["eagle"], [1], [0, 3], acceptance=acc)
    hot = sweep("llama-3.1-8b", "h100-sxm", ["eagle"], [1], [0, 3], acceptance=acc, temperature=1.0)
    assert np.allclose(greedy.frame.acceptance_length, hot.frame.acceptance_length)
    assert "temperature" not in hot.meta["acceptance"]["eagle"]


@pytest.mark.parametrize("value", [-0.1, 2.5, float("nan"), float("inf"), True, "0.7"])
def test_a_bad_temperature_is_refused(value):
    with pytest.raises(SpeedplanInputError, match=r"temperature \(--temperature\) must be a number in 0..2"):
        sweep("llama-3.1-8b", "h100-sxm", ["ngram"], [1], [0, 1], temperature=value)


def test_the_cli_names_the_temperature_and_refuses_a_bad_one(tmp_path, capsys):
    out = tmp_path / "r"
    argv = ["sweep", "--mechanism", "eagle3", "--batch", "1,8", "--draft-len", "0-4"]
    assert run(argv + ["--temperature", "0.7", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].startswith("speedplan: llama-3.1-8b on h100-sxm, TP=1, bf16, engine profile vllm, "
                                              "temperature 0.7")
    meta = json.loads((out / "meta.json").read_text())
    assert meta["temperature"] == 0.7 and "--temperature 0.7" in meta["command"]
    assert "at temperature 0.7: x 0.846" in meta["acceptance"]["eagle3"]
    bad = tmp_path / "bad"
    assert run(argv + ["--temperature", "-1", "--out", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be a number in 0..2" in err and not bad.exists()


def test_head_default_itself_stays_greedy():
    """The greedy rows stay what defaults.HEADS fits (tests/plan/test_defaults.py); the move to a
    temperature happens in the sweep, once, where the temperature is known."""
    acc, source = head_default("eagle3", "llama-3.1-8b")
    assert acc.ranks[0] == pytest.approx(0.8298, abs=1e-4) and "temperature" not in source


def test_sampling_at_a_temperature_takes_the_engines_extra_passes_over_the_logits():
    """DESIGN's t_sample(T, vocab, temperature): at T > 0 the target's sampler makes
    sample_passes_random more passes over its logits (3 in the shipped profiles, an assumption);
    the drafter's own sampler stays greedy. Plain and speculative rows both pay it."""
    from speedplan.engine.profile import get_engine

    # context 2000: within the published head's 2,048 positions, where vLLM drafts (plan/drafter_positions.py)
    greedy = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 64], [0, 3], contexts=[2000], temperature=0)
    hot = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 64], [0, 3], contexts=[2000], temperature=0.7)
    terms = get_engine("vllm").values()
    assert terms["sample_passes_random"] == 3.0
    for (_, g), (_, h) in zip(greedy.frame.iterrows(), hot.frame.iterrows()):
        passes = terms["sample_passes_spec"] if g["mechanism"] != "none" else terms["sample_passes_plain"]
        # the drafter's pass (eagle3's draft logits) is the same at both temperatures
        assert h["t_sample_s"] - g["t_sample_s"] == pytest.approx(
            (g["t_sample_s"] - _draft_part(greedy, g)) * terms["sample_passes_random"] / passes, rel=1e-9)
        assert h["t_step_s"] > g["t_step_s"]
    # another engine's plan reprices with the same temperature (its own sample_passes_random)
    assert hot.meta["temperature"] == 0.7


def _draft_part(result, row) -> float:
    """The drafter sampler's seconds in a greedy row: t_sample less the target's passes."""
    from speedplan.engine.profile import get_engine

    p = next(p for p in result.pricing[0] if (p.mech.label if p.mech is not None else "none") == row["mechanism"])
    i = next(i for i in range(len(p.grid["batch"])) if p.grid["batch"][i] == row["batch"]
             and p.grid["draft_len"][i] == row["draft_len"])
    return get_engine("vllm").values()["sample_passes_plain"] * float(p.parts.draft_pass_s[i])


def test_a_profile_file_without_the_term_prices_sampling_as_greedy(tmp_path):
    from speedplan.engine.profile import get_engine

    data = get_engine("vllm").to_json()
    del data["terms"]["sample_passes_random"]
    f = tmp_path / "old.json"
    f.write_text(json.dumps({**data, "name": "old"}))
    old = get_engine(str(f))
    assert old.terms["sample_passes_random"].value == 0.0
    assert old.terms["sample_passes_random"].source.startswith("default: sampling at a temperature above 0 priced as greedy")
    a = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 64], [0, 3], engine=old, temperature=0)
    b = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 64], [0, 3], engine=old, temperature=1.0)
    assert np.allclose(a.frame.t_sample_s, b.frame.t_sample_s)


def test_a_trace_says_the_temperature_it_ran_at_and_a_sweep_at_another_says_so(tmp_path):
    """A runtime trace records its temperature: its source names it, and a sweep serving another
    temperature says the acceptance was measured elsewhere (it is not moved: it is the user's)."""
    from speedplan.plan.acceptance_sources import parse_acceptance

    meta = {"type": "meta", "schema": "speedplan.trace/1", "mechanism": "ngram", "draft_len": 3, "tree": None,
            "batch": 1, "temperature": 0.0}
    path = tmp_path / "t.jsonl"
    steps = [{"type": "step", "batch": 1, "accepted": [a]} for a in (3, 1, 0, 2)]
    path.write_text("\n".join(json.dumps(x) for x in (meta, *steps)) + "\n")
    acc = parse_acceptance(str(path))
    assert acc.measured_at == 0.0 and "(ngram, T=0, 4 sequence-steps, D=3; few samples" in acc.source
    same = sweep("llama-3.1-8b", "h100-sxm", ["ngram"], [1], [0, 3], acceptance=acc, temperature=0)
    hot = sweep("llama-3.1-8b", "h100-sxm", ["ngram"], [1], [0, 3], acceptance=acc, temperature=0.7)
    assert "measured at temperature" not in same.meta["acceptance"]["ngram"]
    assert hot.meta["acceptance"]["ngram"].endswith(
        "; measured at temperature 0, the sweep serves 0.7: not moved (give acceptance measured at 0.7)")
    assert np.allclose(same.frame.acceptance_length, hot.frame.acceptance_length)
