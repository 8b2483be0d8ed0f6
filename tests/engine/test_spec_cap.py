"""An engine's cap on the requests a speculative step runs (`spec_max_running`; SGLang: 48 by
default): above it, the step runs the cap and the rest wait, in the sweep, in a repriced sweep
and in calibration alike."""

import json

import numpy as np
import pytest

from speedplan.cost.ops import load_cost_model
from speedplan.engine.calibrate import Setting, predict, price
from speedplan.engine.profile import engine_from_json, get_engine
from speedplan.engine.readers.measurements import Measurement
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.sweep import reprice, sweep
from speedplan.specs.model import get_model

ACC = Acceptance.positional([0.8, 0.7, 0.6], "test")


def _spec(frame):
    return frame[frame.mechanism != "none"].set_index("batch")


def test_sglang_runs_48_requests_in_a_speculative_step_and_the_plain_step_runs_all():
    assert get_engine("sglang").spec_max_running == 48
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [32, 48, 64], [0, 3], acceptance=ACC, engine="sglang")
    spec, plain = _spec(r.frame), r.frame[r.frame.mechanism == "none"].set_index("batch")
    assert spec.running.tolist() == [32, 48, 48] and plain.running.tolist() == [32, 48, 64]
    assert spec.t_step_s[64] == pytest.approx(spec.t_step_s[48])  # the same 48 requests run
    assert spec.tokens_per_s_per_gpu[64] == pytest.approx(spec.tokens_per_s_per_gpu[48])
    # speedup: the capped step's throughput against plain decoding of all 64
    assert spec.speedup[64] == pytest.approx(spec.tokens_per_s_per_gpu[64] / plain.tokens_per_s_per_gpu[64])
    assert plain.t_step_s[64] > plain.t_step_s[48]


def test_an_engine_without_a_cap_runs_every_request():
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [64], [0, 3], acceptance=ACC, engine="vllm")
    assert r.frame.running.tolist() == [64, 64]


def test_repricing_into_a_capped_engine_equals_sweeping_it():
    args = ("llama-3.1-8b", "h100-sxm", ["eagle3"], [16, 64, 128], [0, 2, 4])
    direct = sweep(*args, acceptance=ACC, engine="sglang").frame
    repriced = reprice(sweep(*args, acceptance=ACC, engine="vllm"), "sglang").frame
    cols = ["running", "t_step_s", "tokens_per_s_per_gpu", "speedup", "memory_bytes"]
    assert np.allclose(direct[cols].to_numpy(float), repriced[cols].to_numpy(float))


def test_calibration_prices_a_measurement_above_the_cap_at_the_cap():
    setting = Setting(get_model("llama-3.1-8b"), load_cost_model("h100-sxm"), 1, "8b")
    rows = [Measurement("eagle3", b, 3, 1024, "tokens_per_s", 1.0, 2.5, f"B={b}") for b in (48, 64)]
    values = get_engine("sglang").values()
    capped = predict(values, price([(m, setting) for m in rows], 48))
    assert capped[1] == pytest.approx(capped[0])  # 48 run either way
    free = predict(values, price([(m, setting) for m in rows], 0))
    assert free[1] > capped[1]


def test_a_row_that_states_its_servers_cap_is_priced_at_that_cap_not_the_engines_default():
    """SGLang's bench_speculative.py and SpecForge's bench_eagle3.py launch the server with
    --max-running-requests equal to the batch: B = 64 then runs 64 speculative requests."""
    setting = Setting(get_model("llama-3.1-8b"), load_cost_model("h100-sxm"), 1, "8b")
    values = get_engine("sglang").values()

    def one(max_running, quantity="speedup", mechanism="eagle3"):
        m = Measurement(mechanism, 64, 3 if mechanism != "none" else 0, 1024, quantity, 1.0,
                        2.5 if mechanism != "none" else None, "row", max_running=max_running)
        priced = price([(m, setting)], 48)
        return priced, predict(values, priced)[0]

    default, default_speedup = one(None)
    whole, whole_speedup = one(64)
    assert default.running[0] == 48 and default.plain_running[0] == 64
    assert whole.running[0] == 64 and whole.plain_running[0] == 64
    assert whole_speedup == pytest.approx(predict(values, price([(whole.rows[0], setting)], 0))[0])
    assert whole_speedup > default_speedup
    # a cap below the batch holds plain steps too: both run 32, so the speedup is the cap's
    low, low_speedup = one(32)
    assert low.running[0] == 32 and low.plain_running[0] == 32
    at32 = Measurement("eagle3", 32, 3, 1024, "speedup", 1.0, 2.5, "row32", max_running=32)
    assert low_speedup == pytest.approx(predict(values, price([(at32, setting)], 48))[0])
    plain, plain_tps = one(32, "tokens_per_s", "none")
    assert plain.running[0] == 32
    at32_plain = Measurement("none", 32, 0, 1024, "tokens_per_s", 1.0, None, "p32")
    assert plain_tps == pytest.approx(predict(values, price([(at32_plain, setting)], 48))[0])


def test_a_profile_written_before_the_cap_existed_loads_without_one():
    data = json.loads(json.dumps(get_engine("vllm").to_json()))
    del data["terms"]["spec_max_running"]
    profile = engine_from_json(data, "old.json")
    assert profile.spec_max_running == 0 and profile.terms["spec_max_running"].source.startswith("default")


def test_the_summary_names_the_cap_that_priced_the_sweep():
    from speedplan.report.summary import render_summary

    capped = render_summary(sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [64], [0, 3], acceptance=ACC, engine="sglang"))
    assert "at most 48 requests (spec_max_running)" in capped
    free = render_summary(sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [64], [0, 3], acceptance=ACC, engine="vllm"))
    assert "spec_max_running" not in free
