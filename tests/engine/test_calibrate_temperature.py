"""`speedplan calibrate` honours the temperature a run sampled at: rows at T > 0 are priced with
the sampler's `sample_passes_random` passes over the target's logits (`speedplan.engine.step`),
that term is fitted where such rows stand beside greedy ones, and rows without a temperature
are taken as greedy, as before (and the output says so)."""

import json
from dataclasses import replace

import numpy as np
import pytest

from speedplan.cli.app import run as cli
from speedplan.engine.calibrate import calibrate, predict, price
from speedplan.engine.profile import get_engine
from speedplan.engine.readers.measurements import Measurement, check_consistent, read_measurements
from speedplan.engine.run_calibration import calibrate_files, calibrate_rows, render_calibration, sweep_arguments
from speedplan.errors import SpeedplanInputError
from tests.engine._calibrate_helpers import TRUE, _grid, _setting
from tests.engine._readers_helpers import SGLANG, VLLM_RUN
from tests.engine.test_sglang_bench_serving import sglang_line

HEADER = "mechanism,batch,draft_len,context,step_ms,acceptance_length,temperature\n"
ROWS = ("none,1,0,2048,7.7,,\n"  # an empty cell: greedy
        "none,1,0,2048,7.8,,0.7\n"
        "eagle,16,3,2048,21.0,3.1,0\n"
        "eagle,16,3,2048,21.6,3.0,1\n")


def _measured_at(rows, truth):
    """The rows (each at its own temperature) with the values an engine of terms `truth` would
    have measured: `_calibrate_helpers._measured`, keeping the rows' temperatures."""
    values = predict(truth, price([(m, _setting()) for m in rows]))
    return [replace(m, value=float(v)) for m, v in zip(rows, values)]


def test_a_csv_temperature_column_is_read_empty_cells_greedy(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text(HEADER + ROWS)
    rows = read_measurements(f)
    assert [m.temperature for m in rows] == [0.0, 0.7, 0.0, 1.0]
    assert [m.where for m in rows] == [f"{f}:{i}" for i in range(2, 6)]
    # a column a letter from it is a typo, not the user's own column
    f.write_text(HEADER.replace("temperature", "temprature") + ROWS)
    with pytest.raises(SpeedplanInputError, match="unknown column 'temprature' .did you mean 'temperature'"):
        read_measurements(f)


def test_vllm_metadata_and_sglang_tags_state_the_temperature(tmp_path):
    """vllm bench serve records no temperature (vllm/benchmarks/serve.py, commit 009e6d4a1cd6):
    --metadata temperature=T writes it, as a string; SGLang's bench_serving neither (its --tag
    does); bench_speculative.py's requests are greedy."""
    v = tmp_path / "bench.json"
    v.write_text(json.dumps({**VLLM_RUN, "temperature": "0.8"}))
    assert [m.temperature for m in read_measurements(v)] == [0.8]
    v.write_text(json.dumps(VLLM_RUN))
    assert [m.temperature for m in read_measurements(v)] == [0.0]
    s = tmp_path / "out.jsonl"
    s.write_text(json.dumps(sglang_line(tag="llama8b temperature=0.6")) + "\n" + json.dumps(sglang_line(batch=4)) + "\n")
    assert [m.temperature for m in read_measurements(s)] == [0.6, 0.0]
    s.write_text(json.dumps(sglang_line(tag="temperature=9")) + "\n")
    with pytest.raises(SpeedplanInputError, match=rf"^{s}:1: field 'tag temperature' must be a number in 0..2"):
        read_measurements(s)
    b = tmp_path / "spec.jsonl"
    b.write_text(json.dumps(SGLANG) + "\n")
    assert [m.temperature for m in read_measurements(b)] == [0.0]


def test_rows_at_a_temperature_cost_the_base_sample_passes_random_passes_more(tmp_path):
    """Each T > 0 row's step is its greedy twin's plus kernel_scale x sample_passes_random passes
    over T x vocab fp32 logits (a read and a write of 4 bytes each), T = B for a plain step and
    B(1 + D) for a chain; a speedup is over the plain step at its own temperature."""
    f = tmp_path / "runs.csv"
    f.write_text(HEADER + "".join(f"{mech},{b},{d},2048,10.0,{al},{t}\n" for mech, d, al in (("none", 0, ""),
                                                                                            ("eagle", 3, 3.0))
                                  for b in (1, 16, 64) for t in (0, 0.7, 2)))
    rows = read_measurements(f)
    base = get_engine("vllm").values()
    priced = price([(m, _setting()) for m in rows])
    step = predict(base, priced)  # step_ms
    setting = _setting()
    vocab = setting.target.vocab
    for i, m in enumerate(rows):
        if m.temperature == 0:
            continue
        greedy = next(j for j, g in enumerate(rows) if g.temperature == 0 and (g.mechanism, g.batch) == (m.mechanism, m.batch))
        tokens = m.batch * (1 + m.draft_len)
        one_pass_s = setting.cost.elementwise(2.0 * 4 * tokens * vocab, "fp32").latency_us * 1e-6
        expected_ms = base["kernel_scale"] * base["sample_passes_random"] * one_pass_s * 1e3
        assert base["sample_passes_random"] == 3 and expected_ms > 0
        assert step[i] - step[greedy] == pytest.approx(expected_ms, rel=1e-9)
    # a speedup row at T over the plain step at T: both steps take the extra passes
    hot = [Measurement("eagle", 16, 3, 2048, "speedup", 1.5, 3.0, "hot", temperature=1.0),
           Measurement("eagle", 16, 3, 2048, "speedup", 1.5, 3.0, "cold")]
    sp = predict(base, price([(m, _setting()) for m in hot]))
    plain_16 = [step[j] for j, g in enumerate(rows) if (g.mechanism, g.batch) == ("none", 16)]
    spec_16 = [step[j] for j, g in enumerate(rows) if (g.mechanism, g.batch) == ("eagle", 16)]
    assert sp[0] == pytest.approx(3.0 * plain_16[2] / spec_16[2], rel=1e-9)  # T = 2 and T = 1: the same passes
    assert sp[1] == pytest.approx(3.0 * plain_16[0] / spec_16[0], rel=1e-9)


def test_sample_passes_random_is_recovered_from_rows_at_mixed_temperatures():
    """An engine whose sampler makes 5 extra passes at T > 0 (the base says 3): its plain and
    EAGLE steps at B = 1, 16, 64, greedy and at T = 0.7 or 1. The term joins the fitted terms by
    default and comes back within 10%; greedy rows alone keep the base's 3 and say so."""
    base = get_engine("vllm")
    truth = {**base.values(), **TRUE, "sample_passes_random": 5.0}
    rows = [replace(m, temperature=t, where=f"{m.where} T={t}") for m in _grid(batches=(1, 16, 64))
            for t in ((0.0, 0.7) if m.batch < 64 else (0.0, 1.0))]
    result = calibrate(base, [(m, _setting()) for m in _measured_at(rows, truth)])
    assert "sample_passes_random" in result.fitted
    assert result.profile.terms["sample_passes_random"].value == pytest.approx(5.0, rel=0.10)
    assert result.profile.terms["sample_passes_random"].source.startswith("fitted")
    assert [r.get("temperature", 0.0) for r in result.rows] == [m.temperature for m in rows]
    greedy = [m for m in rows if m.temperature == 0]
    cold = calibrate_rows("llama-3.1-8b", "h100-sxm", 1, base, _measured_at(greedy, truth))
    assert "sample_passes_random" not in cold.fitted and "sample_passes_random" in cold.not_tried
    assert cold.profile.terms["sample_passes_random"].value == 3.0
    assert any(n.startswith("no row states a temperature above 0: every row is taken as greedy") for n in cold.notes)
    named = calibrate(base, [(m, _setting()) for m in _measured_at(greedy, truth)],
                      free=["host_step_us", "sample_passes_random"])
    assert named.kept["sample_passes_random"] == "the rows do not depend on it"  # as any term no row moves


# A CSV without the column (plain and EAGLE TPOTs of an engine with known terms, a few percent of
# noise): it fits exactly as the same rows stating temperature 0 (the values once pinned here, from
# the fit on HEAD before temperatures were read, moved with the drafter's first-pass pricing).
NO_COLUMN = """mechanism,batch,draft_len,context,tpot_ms,acceptance_length
none,1,0,2048,7.3855,
eagle,1,2,2048,4.4841,2.6
eagle,1,4,2048,3.5505,4.2
none,4,0,2048,7.8879,
eagle,4,2,2048,4.7409,2.6
eagle,4,4,2048,3.3620,4.2
none,16,0,2048,9.7111,
eagle,16,2,2048,5.5245,2.6
eagle,16,4,2048,3.9546,4.2
none,64,0,2048,14.3467,
eagle,64,2,2048,8.1074,2.6
eagle,64,4,2048,6.2761,4.2
"""
ON_HEAD = ("host_step_us", "draft_step_launches", "host_seq_us", "overlap_spec", "overlap_plain")


def test_a_file_without_the_column_fits_as_before_and_says_its_rows_were_taken_as_greedy(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text(NO_COLUMN)
    result = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [str(f)])
    greedy = tmp_path / "greedy.csv"
    lines = NO_COLUMN.strip().splitlines()
    greedy.write_text("\n".join([lines[0] + ",temperature", *(line + ",0" for line in lines[1:])]) + "\n")
    stated = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [str(greedy)])
    assert result.fitted == stated.fitted == list(ON_HEAD)
    for term in ON_HEAD:
        assert result.profile.terms[term].value == pytest.approx(stated.profile.terms[term].value, rel=1e-9, abs=1e-9)
    assert np.allclose(result.loo_error, stated.loo_error, rtol=1e-9, atol=1e-12)
    assert set(result.kept) == {"host_spec_seq_us", "host_token_us"}
    args = sweep_arguments(result)  # AL measured at D = 2 and 4: the chain that fits both
    assert args[:5] == ["--mechanism", "eagle", "--context", "2048", "--acceptance"] and args[5].startswith("eagle:")
    assert sweep_arguments(stated) == args
    assert all("temperature" not in r for r in result.profile.fit["rows"])
    text = render_calibration(result)
    assert "note: no row states a temperature above 0: every row is taken as greedy" in text
    assert "--metadata temperature=T" in text and " T=" not in text


def test_rows_differing_only_in_temperature_do_not_contradict_each_other():
    """1.6x apart at one configuration is a contradiction (REPEAT_SPREAD 1.5) at one temperature;
    at two, the rows are two configurations."""
    a = Measurement("none", 8, 0, 1024, "step_ms", 10.0, None, "a")
    check_consistent([a, replace(a, value=16.0, where="b", temperature=1.0)])
    with pytest.raises(SpeedplanInputError, match="b: field 'step_ms' 16 contradicts a"):
        check_consistent([a, replace(a, value=16.0, where="b")])
    # a speedup is compared through the plain row at its own temperature
    hot_plain = replace(a, value=16.0, where="hot plain", temperature=1.0)
    spec = Measurement("eagle", 8, 3, 1024, "speedup", 1.5, 3.0, "spec", temperature=1.0)
    check_consistent([a, hot_plain, spec, replace(spec, where="spec again", value=1.45)])


def test_sweep_line_plans_at_the_temperature_the_runs_sampled_at(tmp_path):
    f = tmp_path / "runs.csv"
    base = get_engine("vllm")
    truth = {**base.values(), **TRUE, "sample_passes_random": 5.0}
    rows = _measured_at([replace(m, temperature=0.7) for m in _grid(batches=(1, 16))], truth)
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length,temperature\n" + "".join(
        f"{m.mechanism},{m.batch},{m.draft_len},{m.context},{m.value},{m.acceptance_length or ''},0.7\n" for m in rows))
    result = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [str(f)])
    assert sweep_arguments(result)[-2:] == ["--temperature", "0.7"]
    text = render_calibration(result)
    assert "eagle B=16 D=4 T=0.7" in text and "6 of 6 rows sampled at a temperature above 0 (T = 0.7: 6 rows)" in text


@pytest.mark.parametrize("value, said", [("-0.5", "must be a number in 0..2"), ("hot", "must be a number"),
                                         ("5", "must be a number in 0..2")])
def test_a_bad_temperature_is_exit_2_naming_file_row_and_field(tmp_path, capsys, value, said):
    f = tmp_path / "runs.csv"
    f.write_text(HEADER + ROWS.replace(",1\n", f",{value}\n"))
    code = cli(["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "vllm",
                "--measurements", str(f), "--out", str(tmp_path / "mine.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"{f}:5: field 'temperature' {said}" in err, err
    assert not (tmp_path / "mine.json").exists()
