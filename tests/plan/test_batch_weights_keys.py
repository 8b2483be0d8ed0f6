"""Batch-weight keys: `sweep(batches=[8.0])` takes 8.0 as batch 8, so batch weights keyed 8.0 or
"8.0" (the CLI's text, a JSON or CSV file, the library's dict) are batch 8 too; 8.5, 0, negative,
nan and a batch given twice (8 and 8.0) are still refused, each with one line."""

import numpy as np
import pytest
from typer.testing import CliRunner

from speedplan.cli.app import app
from speedplan.errors import SpeedplanInputError
from speedplan.plan.batch_weights import batch_weights_arg, parse_batch_weights
from speedplan.plan.engine_plan import plan_engines
from speedplan.plan.sweep import sweep


@pytest.mark.parametrize("spec", ["8.0=1,1=2", "8=1, 1.0=2", "8.=1,1.00=2"])
def test_integral_float_text_is_a_whole_batch(spec):
    weights = parse_batch_weights(spec)
    assert weights == {8: 1.0, 1: 2.0} and all(type(b) is int for b in weights)


@pytest.mark.parametrize("value", [{8.0: 1.0, 1: 2}, {"8.0": 1, "1": 2}, {np.float64(8.0): 1, np.int64(1): 2}])
def test_integral_float_keys_in_the_library_dict(value):
    weights = batch_weights_arg(value)
    assert weights == {8: 1.0, 1: 2.0} and all(type(b) is int for b in weights)


def test_integral_float_keys_in_files(tmp_path):
    (tmp_path / "w.json").write_text('{"8.0": 3, "1": 1}')
    (tmp_path / "w.csv").write_text("batch,weight\n8.0,3\n1,1\n")
    assert parse_batch_weights(str(tmp_path / "w.json")) == {8: 3.0, 1: 1.0}
    assert parse_batch_weights(str(tmp_path / "w.csv")) == {8: 3.0, 1: 1.0}


@pytest.mark.parametrize("value, words", [
    ("8.5=1", "8.5 is not a whole number"),
    ({8.5: 1}, "8.5 is not a whole number"),
    ("8.01=1", "8.01 is not a whole number"),
    ({float("nan"): 1}, "nan is not a whole number"),
    ({"nan": 1}, "batch must be an integer"),
    ({float("inf"): 1}, "inf is not a whole number"),
    ("0=1", "batch 0 is below 1"),
    ("0.0=1", "batch 0 is below 1"),
    ("-8.0=1", "batch -8 is below 1"),
    ({-8: 1}, "batch -8 is below 1"),
    ("8=1,8.0=2", "batch 8 is listed twice"),
    ({8: 1, "8.0": 2}, "batch 8 is listed twice"),
    ({"8": 1, 8.0: 2}, "batch 8 is listed twice"),
    ({True: 1}, "batch must be an integer"),
    ("1_0=1", "batch must be an integer"),  # float() and int() read it as 10
    (".5=1", "batch must be an integer"),
    ("8..0=1", "batch must be an integer"),
    ("1=x", "weight a number"),
    ("1=nan", "weight a finite number"),
])
def test_bad_keys_are_refused_with_one_line(value, words):
    with pytest.raises(SpeedplanInputError, match=words) as e:
        batch_weights_arg(value)
    assert "\n" not in str(e.value)


def test_a_float_keyed_plan_matches_the_int_keyed_one():
    r = sweep(mechanisms=["eagle3"], batches=[1.0, 8.0], draft_lens=[0, 2])
    by_float = plan_engines(r, {8.0: 3.0, 1.0: 1.0}, ["vllm"])["vllm"]
    by_int = plan_engines(r, {8: 3.0, 1: 1.0}, ["vllm"])["vllm"]
    by_text = plan_engines(r, "8.0=3,1=1", ["vllm"])["vllm"]
    assert by_float.schedule == by_int.schedule == by_text.schedule
    assert by_float.rows.equals(by_int.rows)


def test_cli_takes_8_0_and_refuses_8_5(tmp_path):
    runner = CliRunner()
    out = tmp_path / "rep"
    proc = runner.invoke(app, ["sweep", "--out", str(out), "--batch", "1,8", "--batch-weights", "8.0=1,1=1"])
    assert proc.exit_code == 0, proc.output
    assert (out / "recommendations.json").exists()
    bad = tmp_path / "bad"
    proc = runner.invoke(app, ["sweep", "--out", str(bad), "--batch", "1,8", "--batch-weights", "8.5=1"])
    assert isinstance(proc.exception, SpeedplanInputError) and "8.5 is not a whole number" in str(proc.exception)
    assert not bad.exists()
