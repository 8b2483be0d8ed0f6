"""`speedplan calibrate`: recovers engine terms from measurements an engine with known terms
would produce, keeps what the rows cannot identify, and refuses bad files with one line."""

from dataclasses import replace

import numpy as np
import pytest

from speedplan.engine.calibrate import calibrate, predict, price
from speedplan.engine.profile import get_engine
from speedplan.engine.readers.measurements import Measurement
from speedplan.errors import SpeedplanInputError
from tests.engine._calibrate_helpers import TRUE, _grid, _measured, _setting


def test_fit_recovers_held_out_rows_of_a_known_engine():
    base = get_engine("vllm")
    truth = {**base.values(), **TRUE}
    train = _measured(_grid(batches=(1, 4, 64)), truth)
    test = _measured(_grid(batches=(16, 32)), truth)
    result = calibrate(base, [(m, _setting()) for m in train])
    pred = predict(result.profile.values(), price([(m, _setting()) for m in test]))
    meas = np.array([m.value for m in test])
    assert np.max(np.abs(pred / meas - 1)) < 0.02  # the base profile was off by much more:
    assert np.max(np.abs(predict(base.values(), price([(m, _setting()) for m in test])) / meas - 1)) > 0.05
    assert np.max(np.abs(result.residual)) < 0.01 and np.nanmax(result.loo_error) < 0.03
    assert all(result.profile.terms[t].source.startswith("fitted") for t in result.fitted)


def test_plain_and_speculative_rows_tell_sync_point_work_from_per_sequence_work():
    """An engine whose speculative steps do 150 µs of host work per sequence that its plain
    steps do not (host_spec_seq_us), next to 20 µs per sequence in both, half of a plain step's
    host work exposed. Plain and EAGLE TPOTs at B = 1, 8, 64 fit it; with one per-sequence term
    for both kinds of step the same rows cannot: held-out batch sizes then miss by more."""
    base = get_engine("vllm").with_terms({"overlap_plain": 0.5, "overlap_spec": 0.0, "host_seq_us": 38.0,
                                          "host_spec_seq_us": 0.0}, "documented starting value")
    truth = {**base.values(), "host_step_us": 1200.0, "host_seq_us": 20.0, "host_spec_seq_us": 150.0}
    train = _measured(_grid(batches=(1, 8, 64), draft_lens=(0, 3)), truth)
    test = _measured(_grid(batches=(16, 32), draft_lens=(0, 3)), truth)
    meas = np.array([m.value for m in test])
    free = ["host_step_us", "host_seq_us", "host_spec_seq_us"]
    result = calibrate(base, [(m, _setting()) for m in train], free=free)
    pred = predict(result.profile.values(), price([(m, _setting()) for m in test]))
    assert np.max(np.abs(pred / meas - 1)) < 0.01
    assert result.profile.terms["host_spec_seq_us"].value == pytest.approx(150.0, rel=0.02)
    shared = calibrate(base, [(m, _setting()) for m in train], free=free[:2])
    pred_shared = predict(shared.profile.values(), price([(m, _setting()) for m in test]))
    assert np.max(np.abs(pred_shared / meas - 1)) > 0.03


def test_terms_the_rows_cannot_move_keep_the_base_value():
    """All rows at B = 1: per-sequence host work cannot be told from per-step host work, and
    no row is an n-gram step, so the n-gram lookup's host cost is not in any row at all."""
    base = get_engine("vllm")
    rows = _measured(_grid(batches=(1,)), {**base.values(), **TRUE})
    result = calibrate(base, [(m, _setting()) for m in rows], free=["host_step_us", "host_seq_us", "sample_passes_spec"])
    assert "host_step_us" in result.fitted
    assert "cannot tell it from host_step_us" in result.kept["host_seq_us"]
    assert result.profile.terms["host_seq_us"].value == base.terms["host_seq_us"].value


def test_few_rows_fit_few_terms():
    base = get_engine("vllm")
    rows = _measured(_grid(batches=(1,), draft_lens=(0, 3)), {**base.values(), **TRUE})
    result = calibrate(base, [(m, _setting()) for m in rows])
    assert len(result.fitted) == 1 and any("rows fit at most" in why for why in result.kept.values())


def test_three_batch_sizes_pick_the_term_that_grows_with_batch():
    """Speedups of one EAGLE-3 chain at B = 1, 8, 64 from an engine with 600 µs of host work
    per step and 120 µs per sequence, exposed at the speculative sync point. Calibrated from
    SGLang's documented starting values (benchmarks/engine_bases.json): 3 rows fit 2 terms, and
    forward selection must take host_seq_us, the one term that makes the speedup fall with B,
    over the fixed order's draft_step_launches; the held-out batch sizes then come out exact."""
    documented = {"host_step_us": 900.0, "host_seq_us": 30.0, "host_token_us": 2.0, "overlap_plain": 1.0,
                  "overlap_spec": 0.0, "draft_step_launches": 10.0, "spec_max_running": 0.0}  # B=64 runs 64
    base = get_engine("sglang").with_terms(documented, "documented starting value")
    truth = {**base.values(), "host_seq_us": 120.0, "host_step_us": 600.0}

    def rows(batches):
        return [Measurement("eagle3", b, 3, 1024, "speedup", 1.0, 2.5, f"synthetic B={b}") for b in batches]

    train = _measured(rows((1, 8, 64)), truth)
    test = _measured(rows((2, 4, 16, 32)), truth)
    result = calibrate(base, [(m, _setting()) for m in train])
    assert "host_seq_us" in result.fitted and len(result.fitted) == 2
    assert "explain them better" in result.kept["draft_step_launches"]
    meas = np.array([m.value for m in test])
    assert meas[-1] < 0.9 * meas[0]  # the shape a fixed-order fit cannot follow
    pred = predict(result.profile.values(), price([(m, _setting()) for m in test]))
    assert np.max(np.abs(pred / meas - 1)) < 0.01
    fixed = calibrate(base, [(m, _setting()) for m in train], free=["host_step_us", "draft_step_launches"])
    pred_fixed = predict(fixed.profile.values(), price([(m, _setting()) for m in test]))
    assert np.max(np.abs(pred_fixed / meas - 1)) > 0.05


def test_contradictory_rows_are_refused():
    with pytest.raises(SpeedplanInputError, match="acceptance_length"):
        Measurement("eagle", 1, 2, 1024, "tpot_ms", 5.0, 3.5, "f.csv:3")  # AL above 1 + D
    with pytest.raises(SpeedplanInputError, match="draft_len"):
        Measurement("none", 1, 2, 1024, "tpot_ms", 5.0, None, "f.csv:4")
    with pytest.raises(SpeedplanInputError, match="speedup"):
        Measurement("none", 1, 0, 1024, "speedup", 1.3, None, "f.csv:5")


@pytest.mark.parametrize("text, word", [
    ("mechanism,batch,draft_len,context,tpot_ms\neagle,1,2,1024,5.0\n", "acceptance_length"),
    ("mechanism,batch,draft_len,context,tpot_ms,step_ms\nnone,1,0,1024,5,5\n", "exactly one"),
    ("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,-5\n", "tpot_ms"),
    ("mechanism,batch,draft_len\nnone,1,0\n", "context"),
    ("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\nwarp,1,2,1024,5,2\n", "mechanism"),
])
def test_cli_bad_measurements_exit_2_with_one_line(cli, tmp_path, text, word):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    out = tmp_path / "x.json"
    proc = cli("calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", str(f),
               "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and word in proc.stderr and "bad.csv" in proc.stderr
    assert not out.exists()


def test_timed_parts_of_a_step_tell_slow_kernels_from_host_work():
    """An eager runtime whose kernels run 1.3x the profile's and which does 800 µs of host work
    per step. With each step's timed forward (verify_ms) beside its step time, the fit finds both
    terms and prices a step far from the rows; fitting host work alone to the step times, as
    validation did with kernels taken as profiled, puts the kernels' excess into host work and
    misses that step by more than 10%."""
    base = get_engine("speedplan-runtime").with_terms({"kernel_scale": 1.0, "host_step_us": 400.0}, "start")
    truth = {**base.values(), "kernel_scale": 1.3, "host_step_us": 800.0}
    steps = [Measurement("none" if d == 0 else "eagle", b, d, 2048, "step_ms", 1.0, None if d == 0 else 1 + 0.8 * d,
                         f"synthetic B={b} D={d}") for b in (1, 4) for d in (0, 3)]
    parts = [Measurement(m.mechanism, m.batch, m.draft_len, m.context, "verify_ms", 1.0, m.acceptance_length,
                         m.where + " verify") for m in steps]
    far = _measured([Measurement("eagle", 192, 7, 2048, "step_ms", 1.0, 4.0, "far")], truth)
    free = ["kernel_scale", "host_step_us"]
    with_parts = calibrate(base, [(m, _setting()) for m in _measured(steps + parts, truth)], free=free)
    assert with_parts.profile.kernel_scale == pytest.approx(1.3, rel=0.01)
    assert with_parts.profile.host_step_us == pytest.approx(800.0, rel=0.02)
    pred = predict(with_parts.profile.values(), price([(far[0], _setting())]))[0]
    assert pred == pytest.approx(far[0].value, rel=0.01)
    # the step times alone, starting from a guess of host work
    steps_only = calibrate(base.with_terms({"host_step_us": 3000.0}, "guess"),
                           [(m, _setting()) for m in _measured(steps, truth)], free=["host_step_us"])
    assert abs(predict(steps_only.profile.values(), price([(far[0], _setting())]))[0] / far[0].value - 1) > 0.1


def test_overhead_ms_is_the_step_beyond_its_forward_and_drafting():
    """overhead_ms rows are priced as the step less the target's forward (verify_ms) and the
    drafting (draft_ms), each with the same terms: the sampler's passes and the exposed host work."""
    values = {**get_engine("speedplan-runtime").values(), "host_step_us": 300.0, "host_seq_us": 40.0}
    for mech, b, d in (("none", 4, 0), ("eagle", 4, 3), ("eagle", 16, 5)):
        al = None if d == 0 else 2.0
        rows = [Measurement(mech, b, d, 1024, q, 1.0, al, q) for q in ("step_ms", "verify_ms", "draft_ms", "overhead_ms")
                if not (d == 0 and q == "draft_ms")]
        pred = dict(zip([m.quantity for m in rows], predict(values, price([(m, _setting()) for m in rows]))))
        assert pred["overhead_ms"] == pytest.approx(pred["step_ms"] - pred["verify_ms"] - pred.get("draft_ms", 0.0))
        assert pred["overhead_ms"] > (300.0 + 40.0 * b) * 1e-3  # the host work, and the sampler on top


def test_overhead_rows_pin_host_work_that_noisy_step_times_leave_loose():
    """An eager runtime whose host work (100 µs a step, 5 µs a sequence) is about 1% of its steps,
    measured with step and forward times 2-4% off as a busy VM gives them. From those alone the
    fit cannot see the host work (it put 127 µs a step and none per sequence); with each run's
    overhead_ms beside them (what the runtime times outside its forwards), it finds both."""
    base = get_engine("speedplan-runtime")
    truth = {**base.values(), "kernel_scale": 1.1, "host_step_us": 100.0, "host_seq_us": 5.0}
    runs = [(b, d) for b in (1, 4, 16) for d in (0, 3)]

    def rows(quantity):
        return [Measurement("none" if d == 0 else "eagle", b, d, 2048, quantity, 1.0, None if d == 0 else 2.5,
                            f"B={b} D={d} {quantity}") for b, d in runs]

    noisy = [replace(m, value=m.value * e) for m, e in zip(_measured(rows("step_ms"), truth), (1.03, 0.98, 0.97, 1.04, 1.02, 0.97))]
    noisy += [replace(m, value=m.value * e) for m, e in zip(_measured(rows("verify_ms"), truth), (0.98, 1.02, 1.03, 0.97, 0.99, 1.03))]
    free = ["kernel_scale", "host_step_us", "host_seq_us"]
    without = calibrate(base, [(m, _setting()) for m in noisy], free=free).profile
    with_rows = calibrate(base, [(m, _setting()) for m in noisy + _measured(rows("overhead_ms"), truth)], free=free).profile
    assert with_rows.host_step_us == pytest.approx(100.0, rel=0.02)
    assert with_rows.host_seq_us == pytest.approx(5.0, rel=0.05)
    assert abs(without.host_seq_us - 5.0) > 2.5 or abs(without.host_step_us - 100.0) > 20.0


def test_a_csv_column_of_overhead_ms_is_read_as_that_quantity(tmp_path):
    from speedplan.engine.readers.measurements import read_measurements

    f = tmp_path / "parts.csv"
    f.write_text("mechanism,batch,draft_len,context,overhead_ms,acceptance_length\nnone,8,0,1024,0.9,\n"
                 "eagle,8,3,1024,1.4,2.6\n")
    rows = read_measurements(f)
    assert [(m.mechanism, m.quantity, m.value) for m in rows] == [("none", "overhead_ms", 0.9), ("eagle", "overhead_ms", 1.4)]


def test_draft_ms_of_plain_decoding_is_refused():
    with pytest.raises(SpeedplanInputError, match="draft_ms"):
        Measurement("none", 1, 0, 512, "draft_ms", 3.0, None, "x.csv:2")


def test_an_unknown_mechanism_for_sglang_rows_is_refused_even_where_unused(tmp_path):
    from speedplan.engine.run_calibration import calibrate_files

    f = tmp_path / "m.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,7.5\n")
    with pytest.raises(SpeedplanInputError, match="--mechanism 'eagle4': names the drafter of SGLang"):
        calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [f], mechanism="eagle4")
    for other in ("ngram", "eagle-tree:topk=4", "draft-model"):  # SGLang's bench rows: an EAGLE head's or MTP's
        with pytest.raises(SpeedplanInputError, match="one of eagle, eagle3, mtp"):
            calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [f], mechanism=other)
    assert calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [f], mechanism="EAGLE3").profile  # any case
    assert calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [f], mechanism="mtp").profile  # NextN drafts


def test_an_engine_setting_is_never_fitted():
    """spec_max_running is a cap the pricing applies, not a term a fit can move: naming it is an
    input error that says how to state a server's cap, and the output calls it a setting."""
    base = get_engine("sglang")
    pairs = [(m, _setting()) for m in _measured(_grid(batches=(1, 4, 16)), base.values())]
    with pytest.raises(SpeedplanInputError, match="spec_max_running is an engine setting"):
        calibrate(base, pairs, free=["host_step_us", "spec_max_running"])
    with pytest.raises(SpeedplanInputError, match="zero_draft_forward is an engine setting.*engine's code"):
        calibrate(base, pairs, free=["zero_draft_forward"])
    result = calibrate(base, pairs)
    assert result.not_tried["spec_max_running"] == "an engine setting, never fitted"
    assert result.not_tried["zero_draft_logits"] == "an engine setting, never fitted"


def test_rows_faster_than_their_kernels_alone_are_named():
    """Measured on a faster GPU than --hardware says: no engine term (each >= 0) can fit rows whose
    step is shorter than the kernels alone, and the output says to check --hardware and --tp."""
    from speedplan.engine.calibration_bounds import kernels_alone, too_fast
    from speedplan.engine.run_calibration import render_calibration

    base = get_engine("vllm")
    rows = _measured(_grid(), {**base.values(), **TRUE})
    pairs = [(m, _setting()) for m in rows]
    assert not too_fast(base.values(), price(pairs)).any()  # an engine on this hardware: nothing flagged
    bound = kernels_alone(base.values(), price(pairs))
    faster = [Measurement(m.mechanism, m.batch, m.draft_len, m.context, m.quantity, 0.7 * float(k), m.acceptance_length,
                          m.where) for m, k in zip(rows, bound)]  # 30% below the kernels' time per token
    result = calibrate(base, [(m, _setting()) for m in faster])
    assert result.too_fast.all()
    note = [line for line in render_calibration(result).splitlines() if "note:" in line]
    assert note and "12 of 12 rows ran faster than their kernels alone can on llama-3.1-8b on h100-sxm" in note[0]
    assert "check --hardware and --tp" in note[0]
    speedups = [Measurement("eagle", 8, 2, 2048, "speedup", 9.0, 2.6, "a ratio")]  # ratios are never flagged
    assert not too_fast(base.values(), price([(m, _setting()) for m in speedups])).any()


def test_tree_nodes_must_fit_the_mechanism(tmp_path):
    from speedplan.engine.run_calibration import calibrate_rows

    row = {"mechanism": "eagle3-tree:topk=4", "batch": 1, "draft_len": 3, "context": 1024, "tpot_ms": 4.0,
           "acceptance_length": 3.0}
    plain = {"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1024, "tpot_ms": 7.0}
    assert calibrate_rows("llama-3.1-8b", "h100-sxm", rows=[plain, {**row, "tree_nodes": 36}]).profile  # 4 + 2·16
    with pytest.raises(SpeedplanInputError, match="37 tree nodes, more than a depth-3 tree keeping the top 4"):
        calibrate_rows("llama-3.1-8b", "h100-sxm", rows=[plain, {**row, "tree_nodes": 37}])
    medusa = {**row, "mechanism": "medusa:topk=2", "draft_len": 4, "acceptance_length": 2.0}
    assert calibrate_rows("llama-3.1-8b", "h100-sxm", rows=[plain, {**medusa, "tree_nodes": 30}]).profile  # 2+4+8+16
    with pytest.raises(SpeedplanInputError, match="31 tree nodes, more than a depth-4 tree of 2 choices per position"):
        calibrate_rows("llama-3.1-8b", "h100-sxm", rows=[plain, {**medusa, "tree_nodes": 31}])
    with pytest.raises(SpeedplanInputError, match="row 1: field 'tree_nodes' 5 on a chain"):
        calibrate_rows("llama-3.1-8b", "h100-sxm", rows=[plain, {**row, "mechanism": "eagle3", "tree_nodes": 5}])


def test_leave_one_out_is_a_fresh_fit_without_the_row():
    """Each row's leave-one-out error is what a fit of the other rows, started where any fit
    starts, predicts for it: not a refit started from the full fit, which has seen the row."""
    base = get_engine("vllm")
    rows = _measured(_grid(batches=(1, 8, 64), draft_lens=(0, 2)), {**base.values(), **TRUE})
    noise = 1 + 0.03 * np.sin(np.arange(len(rows)) * 2.1)  # fixed, uneven: the fit no longer fits exactly
    rows = [Measurement(m.mechanism, m.batch, m.draft_len, m.context, m.quantity, m.value * k, m.acceptance_length,
                        m.where) for m, k in zip(rows, noise)]
    free = ["host_step_us", "host_seq_us", "overlap_spec"]
    full = calibrate(base, [(m, _setting()) for m in rows], free)
    for i in (0, 3, len(rows) - 1):
        alone = calibrate(base, [(m, _setting()) for j, m in enumerate(rows) if j != i], free)
        got = predict(alone.profile.values(), price([(rows[i], _setting())]))[0]
        assert full.loo_error[i] == pytest.approx(abs(got / rows[i].value - 1), rel=1e-6, abs=1e-9)


def test_files_are_checked_against_each_other_under_the_base_profiles_cap(tmp_path):
    """A step time and a tokens/s of one EAGLE-3 configuration at 64 in flight agree when the base
    profile runs 48 of them (SGLang: 48 x 3 / 18000 tokens/s = 8 ms against 6 ms) and contradict
    when it runs all 64 (vLLM: 10.7 ms against 6 ms): calibrate passes the base profile's cap."""
    from speedplan.engine.run_calibration import calibrate_files

    step, tps = tmp_path / "step.csv", tmp_path / "tps.csv"
    step.write_text("mechanism,batch,draft_len,context,step_ms,acceptance_length\neagle3,64,3,2048,6,3.0\n"
                    "none,64,0,2048,4,\neagle3,8,3,2048,3,3.0\n")
    tps.write_text("mechanism,batch,draft_len,context,tokens_per_s,acceptance_length\neagle3,64,3,2048,18000,3.0\n")
    assert calibrate_files("llama-3.1-8b", "h100-sxm", 1, "sglang", [step, tps]).profile
    with pytest.raises(SpeedplanInputError, match="tps.csv:2: field 'tokens_per_s' 18000 contradicts .*step.csv:2"):
        calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [step, tps])


def test_a_row_its_model_and_gpus_cannot_have_run_is_refused():
    """An audit of 2026-12-04: a context of 10M tokens on llama-3.1-8b (131,072 at most) and 256
    requests of 131,072 tokens on one H100 were fitted, residual +8173%."""
    long = Measurement("none", 1, 0, 10_000_000, "tpot_ms", 7.0, None, "runs.csv:2")
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:2: field 'context' 10000000: above llama-3.1-8b's 131,072"):
        price([(long, _setting())])
    full = Measurement("none", 256, 0, 131072, "tpot_ms", 70.0, None, "runs.csv:3")
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:3: 256 requests of 131,072 tokens need 4,414 GB per GPU"):
        price([(full, _setting())])
    capped = Measurement("none", 256, 0, 131072, "tpot_ms", 70.0, None, "runs.csv:4", max_running=2)
    assert price([(capped, _setting())]).batch[0] == 256  # the server ran 2 of them at once: that fits


def test_a_term_fitted_to_its_bound_says_so(tmp_path):
    """host_step_us fitted to 1e-10 us printed as a fitted value (audit of 2026-12-04), and later
    as 2.118e-15 us with a warning that the rows would take it below 0 host work (audit of
    2026-12-04, second round): a value a rounding error from 0 prints as 0, and a bound that is a
    physical limit (no negative host work; a fraction at most 1) is named as one, not warned
    about. A bound that is only the fit's search range (kernel_scale 0.25..4) still warns."""
    from speedplan.engine.run_calibration import calibrate_rows, render_calibration

    base = get_engine("vllm")
    bare = {**base.values(), "host_step_us": 0.0}
    probe = [Measurement("eagle", b, 3, 1024, "step_ms", 1.0, 2.5) for b in (1, 8, 32)]
    floor = predict(bare, price([(m, _setting()) for m in probe]))
    rows = [Measurement("eagle", m.batch, 3, 1024, "step_ms", 0.97 * f, 2.5) for m, f in zip(probe, floor)]
    calibration = calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, free=["host_step_us"])
    recorded = calibration.profile.fit["values"]  # this fit's term, and the base's terms fitted earlier at its values
    assert recorded == {**base.fit["values"], "host_step_us": calibration.profile.terms["host_step_us"].value}
    text = render_calibration(calibration)
    line = next(t for t in text.splitlines() if "fitted host_step_us" in t)
    assert line.split()[2] == "0" and "(at 0, its physical limit)" in line and "would take it further" not in text
    from speedplan.engine.calibration_bounds import kernels_alone

    kernels = kernels_alone(base.values(), price([(m, _setting()) for m in probe]))
    # faster than the kernels at the fit's lowest kernel_scale (0.25) allows with the other terms
    # as they are, yet within what the kernels alone at 0.25 can run (`check_reachable`)
    fast = [Measurement("eagle", m.batch, 3, 1024, "step_ms", 0.24 * k, 2.5) for m, k in zip(probe, kernels)]
    text = render_calibration(calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", fast, free=["kernel_scale"]))
    assert "at its lower bound 0.25: the rows would take it further" in text
    # plain steps whose host work is all hidden: overlap_plain at 1, its physical limit
    plain = [Measurement("none", b, 0, 1024, "step_ms", 1.0, None) for b in (1, 8, 32)]
    hidden = predict({**base.values(), "overlap_plain": 1.0}, price([(m, _setting()) for m in plain]))
    plain = [Measurement("none", m.batch, 0, 1024, "step_ms", 0.97 * f, None) for m, f in zip(plain, hidden)]
    text = render_calibration(calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", plain, free=["overlap_plain"]))
    assert "(at 1, its physical limit)" in text and "would take it further" not in text
