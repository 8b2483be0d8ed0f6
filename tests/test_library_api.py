"""What a notebook user calls: the names in `speedplan`, and library calls that take what the
CLI takes (one value for a list, the CLI's text) with the CLI's checks and one-line errors."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import speedplan
from speedplan.engine.profile import get_engine
from speedplan.engine.readers.measurements import Measurement
from speedplan.errors import SpeedplanInputError

ROWS = [
    {"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1024, "tpot_ms": 7.0},
    {"mechanism": "eagle3", "batch": 8, "draft_len": 3, "context": 1024, "speedup": 1.8, "acceptance_length": 2.8},
    {"mechanism": "eagle3", "batch": 32, "draft_len": 3, "context": 1024, "speedup": 1.4, "acceptance_length": 2.8},
]


def test_import_speedplan_loads_nothing_heavy_until_a_name_is_used():
    code = ("import sys, speedplan; heavy = [m for m in ('pandas', 'numpy', 'speedplan.plan.sweep') if m in sys.modules]; "
            "print(heavy); speedplan.sweep; print('speedplan.plan.sweep' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "True"
    assert set(speedplan.__all__) >= {"sweep", "plan_engines", "calibrate_rows", "render_serving_configs", "SpeedplanInputError"}
    assert "calibrate_rows" in dir(speedplan)  # tab completion sees the lazy names
    with pytest.raises(AttributeError):
        speedplan.no_such_name


def test_reprice_prices_a_changed_profile_of_the_same_name():
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 64], draft_lens=[0, 3])
    assert speedplan.reprice(r, "vllm") is r  # the profile that priced it: nothing to do
    guess = get_engine("vllm").with_terms({"host_seq_us": 500.0}, "my guess")
    again = speedplan.reprice(r, guess)
    direct = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 64], draft_lens=[0, 3], engine=guess)
    assert again is not r
    assert list(again.frame.t_step_s) == pytest.approx(list(direct.frame.t_step_s))
    assert (again.frame.t_step_s.to_numpy() > r.frame.t_step_s.to_numpy()).any()
    assert "host_seq_us = 500 set by hand (my guess)" in again.meta["engine_fit"]
    assert guess.origin == ""  # no longer the shipped file


def test_calibrate_rows_takes_dicts_or_a_dataframe_and_checks_like_the_command():
    cal = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", ROWS, name="my-vllm")
    assert cal.profile.name == "my-vllm" and cal.profile.origin == ""
    same = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", pd.DataFrame(ROWS))  # NaN cells: empty
    assert same.profile.name == "vllm-calibrated"
    assert same.profile.values() == pytest.approx(cal.profile.values())
    records = [Measurement("none", 1, 0, 1024, "tpot_ms", 7.0, None)]  # `where` may be left out
    assert "measurement none batch 1" in records[0].where
    m = Measurement("eagle3", np.int64(8), 3.0, np.int64(1024), "speedup", np.float32(1.5), np.float64(2.8))
    assert (m.batch, m.draft_len, m.value) == (8, 3, 1.5) and type(m.batch) is int and type(m.value) is float
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[8], engine=cal)  # a Calibration is taken too
    assert r.meta["engine"] == "my-vllm"
    with pytest.raises(SpeedplanInputError, match="--tp 3"):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 3, "vllm", ROWS)
    with pytest.raises(SpeedplanInputError, match="contradicts"):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", ROWS + [{**ROWS[1], "speedup": 3.0}])
    with pytest.raises(SpeedplanInputError, match="'batch' must be an integer, got 8.5"):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", [{**ROWS[1], "batch": 8.5}])
    with pytest.raises(SpeedplanInputError, match="exactly one of the fields"):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", [{**ROWS[1], "tpot_ms": 9.0}])
    with pytest.raises(SpeedplanInputError, match="got int"):
        get_engine(3)
    with pytest.raises(SpeedplanInputError, match="got one dict"):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", ROWS[0])
    with pytest.raises(SpeedplanInputError, match="row 'second': field 'batch' must be a number"):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm",
                                 pd.DataFrame([ROWS[0], {**ROWS[1], "batch": "x"}], index=["first", "second"]))
    nullable = pd.DataFrame(ROWS).convert_dtypes()  # pandas' NA in the empty cells
    assert speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, same.profile, nullable).profile.name == "vllm-calibrated"


def test_sweep_takes_one_value_for_a_list_and_the_clis_acceptance_text():
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", "eagle3", batches=8, contexts="4096", acceptance="alpha=0.8")
    assert set(r.frame.mechanism) == {"none", "eagle3"} and set(r.frame.batch) == {8} and set(r.frame.context) == {4096}
    assert r.meta["acceptance"]["eagle3"] == "user: alpha=0.8"
    per_mech = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[8], acceptance={"eagle3": "alpha=0.7"})
    assert per_mech.meta["acceptance"]["eagle3"] == "user: alpha=0.7"
    ranges = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches="1-4,8", draft_lens=np.arange(0, 3))
    assert sorted(set(ranges.frame.batch)) == [1, 2, 3, 4, 8] and sorted(set(ranges.frame.draft_len)) == [0, 1, 2]
    for bad, match in ((dict(acceptance=0.8), "got float"), (dict(contexts="4k"), r"contexts \(--context\) '4k': expected whole numbers like 4096"),
                       (dict(batches=[1.5]), "1.5 is not a whole number"), (dict(batches=[float("nan")]), "nan is not"),
                       (dict(batches=[True, 8]), "True is not"), (dict(batches="8-1"), "runs backwards")):
        with pytest.raises(SpeedplanInputError, match=match):
            speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], **bad)


def test_plan_engines_takes_one_engine_and_checks_batch_weights_like_the_cli():
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 8, 64])
    assert list(speedplan.plan_engines(r, engines="vllm")) == ["vllm"]
    assert list(speedplan.plan_engines(r, engines="vllm,sglang")) == ["vllm", "sglang"]
    as_json = speedplan.plan_engines(r, {"1": 2, "8": 1}, engines="vllm")["vllm"]  # keys as json.load gives them
    as_text = speedplan.plan_engines(r, "1=2,8=1", engines="vllm")["vllm"]
    assert as_json.schedule == as_text.schedule
    for bad in ({1: float("nan"), 8: 1}, {1: -5, 8: 1}, [1, 8]):
        with pytest.raises(SpeedplanInputError, match="batch_weights"):
            speedplan.plan_engines(r, bad, engines="vllm")


def test_render_serving_configs_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 8])
    files = speedplan.render_serving_configs(speedplan.serving_plans(r, speedplan.plan_engines(r)))
    assert "vllm_serve.sh" in files and "--speculative-config" in files["vllm_serve.sh"]
    assert list(tmp_path.iterdir()) == []
    assert repr(r).startswith("SweepResult(llama-3.1-8b on h100-sxm, TP 1, engine profile vllm:") and len(repr(r)) < 300


def test_a_report_made_from_python_says_so(tmp_path):
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 8])
    speedplan.write_outputs(r, tmp_path / "rep")
    assert "none: made from Python (speedplan.sweep)" in (tmp_path / "rep" / "report.html").read_text()


def test_terms_a_profile_file_left_out_are_not_called_hand_set(tmp_path):
    """A profile written before host_spec_seq_us, kernel_scale and spec_max_running existed gets
    their defaults ("default: ..."), which are not a user's hand-set values."""
    import json

    from speedplan.engine.run_calibration import write_profile

    path = write_profile(speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", ROWS).profile, tmp_path / "p.json")
    data = json.loads(path.read_text())
    for term in ("host_spec_seq_us", "kernel_scale", "spec_max_running"):
        data["terms"].pop(term)
    path.write_text(json.dumps(data))
    assert "set by hand" not in get_engine(str(path)).provenance()


def test_library_entry_points_refuse_wrong_arguments_in_one_line(tmp_path):
    """An audit on 2026-12-03 found about 25 calls that raised AttributeError or TypeError deep
    inside, and a report of Llama-3.1-8B written with the plan of a 70B sweep."""
    r = speedplan.sweep(batches=[1, 8], mechanisms=["eagle3"], contexts=[2000])  # within the head's 2,048 positions
    other = speedplan.plan_engines(speedplan.sweep("llama-3.1-70b", batches=[1, 8], mechanisms=["eagle3"], tp=4))
    plans = speedplan.plan_engines(r)
    calls = [
        (lambda: speedplan.sweep(mechanisms=[None]), "mechanisms: expected names"),
        (lambda: speedplan.sweep(mechanisms=[]), "an empty list"),
        (lambda: speedplan.sweep(hardware=None), "hardware: expected"),
        (lambda: speedplan.sweep(acceptance=[]), "acceptance: empty"),
        (lambda: speedplan.sweep(min_tokens_per_user="100"), "finite number"),
        (lambda: speedplan.plan_engines(r.frame), "plan_engines: expected the SweepResult"),
        (lambda: speedplan.memory_shortfall(None), "memory_shortfall: expected the SweepResult"),
        (lambda: speedplan.render_summary(r, plans=[1]), "render_summary: plans must be"),
        (lambda: speedplan.render_summary(r, max_rows="3"), "max_rows must be a positive integer"),
        (lambda: speedplan.serving_plans(r, None), "serving_plans: plans must be"),
        (lambda: speedplan.render_serving_configs(plans), "serving_plans(result, plans) makes them"),
        (lambda: speedplan.render_serving_configs(None), "got NoneType"),
        (lambda: speedplan.write_outputs(r, tmp_path / "a", plans=other), "planned on another sweep"),
        (lambda: speedplan.write_outputs(r, tmp_path / "b", plans=plans, batch_weights={1: 1}), "not both"),
        (lambda: speedplan.write_outputs(r, None), "out_dir must be a folder path"),
        (lambda: speedplan.get_engine("vllm").with_terms({"host_step_us": "abc"}, "x"), "must be a number"),
        (lambda: speedplan.get_engine("vllm").with_terms({"spec_max_running": 2.5}, "x"), "whole number"),
        (lambda: speedplan.get_engine("vllm").with_terms([1], "x"), "takes {term: value}"),
        (lambda: speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", rows=None), "rows must be a list"),
    ]
    for call, word in calls:
        with pytest.raises(speedplan.SpeedplanInputError, match=re.escape(word)):
            call()
    assert not list(tmp_path.iterdir())  # nothing written
    huge = speedplan.plan_engines(r, batch_weights={1: 1e308, 8: 1e308})  # overflowed to weights of 0: every plan off
    assert huge["vllm"].schedule == plans["vllm"].schedule and huge["vllm"].mechanism == "eagle3"


def test_plans_of_a_sweep_run_in_the_same_second_are_told_apart_and_a_path_names_a_model(tmp_path):
    a = speedplan.sweep(batches=[1, 8], mechanisms=["eagle3"], contexts=[1024])
    b = speedplan.sweep(batches=[1, 8], mechanisms=["eagle3"], contexts=[32768])
    with pytest.raises(speedplan.SpeedplanInputError, match="planned on another sweep"):
        speedplan.write_outputs(b, tmp_path / "r", plans=speedplan.plan_engines(a))
    from pathlib import Path

    config = Path(__file__).resolve().parents[1] / "speedplan" / "specs" / "presets" / "models" / "llama-3.2-1b.json"
    assert speedplan.sweep(config, batches=[1], mechanisms=["ngram"]).meta["model"]["model"] == "llama-3.2-1b"


def test_library_calls_with_the_wrong_things_say_so_in_one_line(tmp_path):
    """Each raised a bare TypeError, AttributeError, ValueError or FileExistsError, or (a plan under
    another engine's name) rendered that engine's file with the other's speedups (audit of 2026-12-04)."""
    import speedplan
    from speedplan.plan.acceptance import Acceptance
    from speedplan.plan.sweep import SweepResult, reprice

    r = speedplan.sweep(batches=(1, 8))
    plans = speedplan.plan_engines(r)
    calls = {
        "alpha must be a number": lambda: Acceptance.iid(None),
        "positions must be a list of numbers": lambda: Acceptance.positional(0.9),
        "mechanisms: expected a list": lambda: speedplan.sweep(mechanisms=5),
        "plans['sglang'] is the vllm plan": lambda: speedplan.serving_plans(r, {"sglang": plans["vllm"]}),
        "out_dir must be a folder path": lambda: speedplan.write_serving_configs(speedplan.serving_plans(r, plans), None),
        "exists and is not a folder": lambda: speedplan.write_serving_configs(speedplan.serving_plans(r, plans),
                                                                            "/dev/null"),
        "reprice: expected the SweepResult": lambda: reprice(None, "sglang"),
        "has no pricing to reuse": lambda: reprice(SweepResult(r.frame, r.pareto, r.best, None, r.meta), "sglang"),
        "files must be a list": lambda: speedplan.calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", "runs.csv"),
        "without its tables": lambda: speedplan.render_summary(SweepResult(None, None, None, None)),
    }
    for words, call in calls.items():
        with pytest.raises(speedplan.SpeedplanInputError, match=re.escape(words)):
            call()


def test_a_sweep_result_pickles_for_a_notebooks_cache():
    import pickle

    import speedplan

    r = pickle.loads(pickle.dumps(speedplan.sweep(batches=(1, 8))))
    assert set(speedplan.plan_engines(r)) == {"vllm", "sglang", "trtllm"}


def test_numpy_numbers_from_a_notebook_work_as_plain_ones(tmp_path):
    """np.int64 TP, a numpy array of mechanism names or files and np.int64 max_rows were refused
    ("--tp must be a positive integer, got np.int64(1)"); an np.int64 SLO was written to meta.json as
    the text "50" (audit of 2026-12-04, second round)."""
    import json

    r = speedplan.sweep("llama-3.1-70b", "h100-sxm", np.array(["eagle3"]), batches=np.array([1, 8]),
                        draft_lens=np.arange(0, 4), tp=np.int64(4), min_tokens_per_user=np.int64(20))
    assert r.meta["tp"] == 4 and type(r.meta["tp"]) is int and r.meta["mechanisms"] == ["eagle3"]
    assert sorted(set(r.frame.batch)) == [1, 8] and sorted(set(r.frame.draft_len)) == [0, 1, 2, 3]
    assert speedplan.render_summary(r, max_rows=np.int64(1)).count("eagle3") >= 1
    speedplan.write_outputs(r, tmp_path / "rep")
    assert json.loads((tmp_path / "rep" / "meta.json").read_text())["min_tokens_per_user"] == 20.0
    cal = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", np.int64(1), "vllm", ROWS)
    assert cal.profile.name == "vllm-calibrated"
    csv = tmp_path / "runs.csv"
    csv.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,7.0\nnone,8,0,1024,8.0\n")
    assert speedplan.calibrate_files("llama-3.1-8b", "h100-sxm", np.int64(1), "vllm", np.array([str(csv)])).profile
    assert speedplan.calibrate_rows(speedplan.get_model("llama-3.1-8b"), "h100-sxm", 1, "vllm", ROWS).profile  # a ModelSpec
    from speedplan.cost.ops import load_cost_model
    from speedplan.cost.predict import predict_ops

    cells = {"op": "gemm", "m": np.int64(16), "n": 4096, "k": 4096.0, "dtype": "bf16"}  # numbers, not the CSV's text
    text = {k: str(int(v)) if k in "mnk" else v for k, v in cells.items()}
    cost = load_cost_model("h100-sxm")
    assert predict_ops(cost, [cells])[0]["latency_us"] == predict_ops(cost, [text])[0]["latency_us"]
    assert predict_ops(cost, pd.DataFrame([text]))[0]["latency_us"] == predict_ops(cost, [text])[0]["latency_us"]


def test_more_wrong_arguments_are_one_line_and_leave_nothing_behind(tmp_path):
    """Each raised a TypeError, AttributeError, OSError or OverflowError from inside, read bytes as
    their character codes (b"8" swept batch 56), let one acceptance key silently replace another,
    or (write_outputs with a bad worker) left a hidden half-written folder beside out_dir (audit of
    2026-12-04, second round)."""
    from speedplan.cost.ops import load_cost_model
    from speedplan.cost.predict import predict_ops
    from speedplan.plan.acceptance import Acceptance
    from speedplan.plan.pick import recommendations
    from speedplan.specs.hardware import get_hardware

    r = speedplan.sweep(batches=[1, 8], mechanisms=["eagle3"])
    plans = speedplan.plan_engines(r)
    other = speedplan.plan_engines(speedplan.sweep(batches=[1, 8], mechanisms=["eagle3"]))
    vllm = speedplan.get_engine("vllm")
    calls = {
        "batches (--batch): values must be in 1..65536": lambda: speedplan.sweep(batches=[10 ** 400]),
        "batches (--batch): expected whole numbers (a list, a range or text like '1,8'), got bytes":
            lambda: speedplan.sweep(batches=b"8"),
        "batches (--batch): expected whole numbers (a list, a range or text like '1,8'), got dict":
            lambda: speedplan.sweep(batches={1: 2, 8: 1}),
        "min_tokens_per_user (--min-tokens-per-user) must be a finite number > 0, got True": lambda: speedplan.sweep(min_tokens_per_user=True),
        "keys 'EAGLE3' and 'eagle3' name one mechanism":
            lambda: speedplan.sweep(mechanisms=["eagle3"], acceptance={"EAGLE3": "alpha=0.6", "eagle3": "alpha=0.7"}),
        "acceptance source must be text": lambda: speedplan.sweep(mechanisms=["eagle3"], acceptance=Acceptance.iid(0.7, 5)),
        "acceptance match must be a number": lambda: Acceptance((0.5,), (0.5,), "x", "iid", None),
        "engines: expected names like 'vllm'": lambda: speedplan.plan_engines(r, engines=5),
        "recommendations: plans must be": lambda: recommendations(r, plans=[1]),
        "recommendations: the sglang plan was planned on another sweep": lambda: recommendations(r, plans=other),
        "recommendations: give batch_weights or plans, not both": lambda: recommendations(r, plans, {1: 1}),
        "write_outputs: plans must be": lambda: speedplan.write_outputs(r, tmp_path / "a", plans=lambda: [1]),
        "write_outputs: plans is an empty dict": lambda: speedplan.write_outputs(r, tmp_path / "b", plans={}),
        "write_outputs: worker must be": lambda: speedplan.write_outputs(r, tmp_path / "c", worker=5),
        "frame has no column 'feasible'": lambda: speedplan.plan_engines(replace(r, frame=r.frame.drop(columns="feasible"))),
        "meta lacks 'model' or 'tp'": lambda: speedplan.write_outputs(replace(r, meta={}), tmp_path / "d"),
        "batch_weights['1_0']: batch must be an integer": lambda: speedplan.plan_engines(r, {"1_0": 1}),
        "calibrate: rows must be a list": lambda: speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", 5),
        "calibrate: free must list the terms": lambda: speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm",
                                                                                ROWS, free=5),
        "files must be a list of measurement file paths, got None": lambda: speedplan.calibrate_files(
            "llama-3.1-8b", "h100-sxm", 1, "vllm", [None]),
        "model: expected a preset name": lambda: speedplan.get_model(None),
        "hardware: expected a preset name": lambda: get_hardware(None),
        "hardware: expected a preset name, a profile folder": lambda: load_cost_model(None),
        "engine profile name 5": lambda: vllm.with_terms({}, "x", name=5),
        "fit must be a dict": lambda: vllm.with_terms({}, "x", fit=5),
        "fit_order must list terms": lambda: vllm.with_terms({}, "x", fit_order=("nope",)),
        "predict_ops: cost must be a CostModel": lambda: predict_ops("h100-sxm", []),
        "row 2: expected a dict of ops.csv columns": lambda: predict_ops(load_cost_model("h100-sxm"), [5]),
        "column 'op' must be gemm or attention, got '5'": lambda: predict_ops(load_cost_model("h100-sxm"),
                                                                               [{"op": 5, "dtype": "bf16"}]),
    }
    for words, call in calls.items():
        with pytest.raises(speedplan.SpeedplanInputError, match=re.escape(words)):
            call()
    assert list(tmp_path.iterdir()) == []  # no report, and no hidden staging folder


def test_a_profile_file_with_a_nested_or_repeated_fit_order_is_one_line(tmp_path):
    import json

    data = speedplan.get_engine("vllm").to_json()
    for order in ([["host_step_us"]], ["host_step_us", "host_step_us"]):
        (tmp_path / "p.json").write_text(json.dumps({**data, "fit_order": order}))
        with pytest.raises(speedplan.SpeedplanInputError, match="'fit_order' must list terms"):
            speedplan.get_engine(str(tmp_path / "p.json"))


def test_calibrate_refuses_an_empty_name():
    """calibrate_rows(name="") fell back to "vllm-calibrated" in silence, where the command refuses
    `--name ''` (audit of 2026-12-04)."""
    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1024, "step_ms": 8.0 + 0.05 * b} for b in (1, 4)]
    for name in ("", "  ", 5):
        with pytest.raises(SpeedplanInputError, match="calibrate: name must be"):
            speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, free=["host_step_us"], name=name)
    assert speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, free=["host_step_us"]).profile.name \
        == "vllm-calibrated"
