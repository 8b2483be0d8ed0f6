"""`speedplan calibrate`'s inputs that contradict each other or the run they claim to be (an audit
of 2026-12-04, second round): each was fitted, or refused with a misleading line, before."""

import json
import shutil

import numpy as np
import pytest

from speedplan.engine import calibrate as calibrate_module
from speedplan.engine import priced as priced_module
from speedplan.engine.profile import get_engine
from speedplan.engine.readers.measurements import Measurement, check_consistent, read_measurements
from speedplan.engine.run_calibration import calibrate_files, calibrate_rows, render_calibration
from speedplan.errors import SpeedplanInputError

SCRAPE = ('vllm:spec_decode_num_drafts_total{engine="0",model_name="MODEL"} 100.0\n'
          'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="MODEL"} 300.0\n'
          'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="MODEL",position="0"} 80.0\n'
          'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="MODEL",position="1"} 60.0\n'
          'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="MODEL",position="2"} 45.0\n')
RUN = {"date": "20261201-101010", "model_id": "meta-llama/Llama-3.1-8B-Instruct", "max_concurrency": 16,
       "num_prompts": 320, "request_rate": "inf", "output_throughput": 2210.5, "spec_decode_acceptance_length": 2.71,
       "mechanism": "eagle3", "draft_len": 3, "context": 1500}
HEADER = "mechanism,batch,draft_len,context,tpot_ms,acceptance_length\n"


def _calibrate(*files):
    return calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", list(files))


def test_a_scrape_gives_its_acceptance_to_one_mechanism_only(tmp_path):
    """One scrape is one server with one drafter: its 2.85 went to EAGLE-3, n-gram and draft-model
    rows alike."""
    scrape, runs = tmp_path / "metrics.txt", tmp_path / "runs.csv"
    scrape.write_text(SCRAPE.replace("MODEL", "meta-llama/Llama-3.1-8B-Instruct"))
    runs.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,6.9\neagle3,1,3,1024,3.4\n"
                    "eagle3,8,3,1024,4.1\n")
    assert [r["acceptance_length"] for r in _calibrate(runs, scrape).rows] == pytest.approx([1.0, 2.85, 2.85])
    runs.write_text(runs.read_text() + "ngram,1,3,1024,5.2\n")
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:5: .*metrics.txt is one server's counters, one "
                                                  r"drafter's acceptance: rows of eagle3 take theirs from it, so rows "
                                                  r"of ngram cannot"):
        _calibrate(runs, scrape)
    runs.write_text(runs.read_text().replace("ngram,1,3,1024,5.2", "ngram,1,3,1024,5.2,1.9")
                    .replace("tpot_ms\n", "tpot_ms,acceptance_length\n"))
    assert len(_calibrate(runs, scrape).rows) == 4  # a row that states its own acceptance takes none


def test_files_that_name_two_models_or_another_size_are_refused(tmp_path):
    a, b, scrape = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "metrics.txt"
    a.write_text(json.dumps(RUN))
    b.write_text(json.dumps({**RUN, "model_id": "Qwen/Qwen3-32B", "max_concurrency": 8}))
    with pytest.raises(SpeedplanInputError, match=r"b.json:run 1: names the model 'Qwen/Qwen3-32B', .*a.json:run 1 "
                                                  r"'meta-llama/Llama-3.1-8B-Instruct': measurements of two models"):
        _calibrate(a, b)
    scrape.write_text(SCRAPE.replace("MODEL", "Qwen/Qwen3-32B"))
    with pytest.raises(SpeedplanInputError, match=r"metrics.txt: names the model 'Qwen/Qwen3-32B'"):
        _calibrate(a, scrape)
    # the same model under another path, an instruct tune of it, or a served alias in the scrape, is not refused
    b.write_text(json.dumps({**RUN, "model_id": "meta-llama/Llama-3.1-8B-Instruct", "max_concurrency": 8}))
    scrape.write_text(SCRAPE.replace("MODEL", "llama8b"))
    assert len(_calibrate(a, b, scrape).rows) == 2
    b.write_text(json.dumps({**RUN, "model_id": "/models/Meta-Llama-3.1-8B-Instruct", "max_concurrency": 8}))
    scrape.write_text(SCRAPE.replace("MODEL", "Llama-3.1-8B"))
    assert len(_calibrate(a, b, scrape).rows) == 2
    # plainly another size of --model's family is refused; any other name is said, not refused
    b.write_text(json.dumps({**RUN, "model_id": "meta-llama/Llama-3.1-70B-Instruct"}))
    with pytest.raises(SpeedplanInputError, match=r"b.json:run 1: names the model 'meta-llama/Llama-3.1-70B-Instruct', "
                                                  r"another size than --model llama-3.1-8b"):
        _calibrate(b)
    b.write_text(json.dumps({**RUN, "model_id": "my-org/support-bot-v2"}))
    text = render_calibration(_calibrate(b))
    assert "note: the files name the model my-org/support-bot-v2; priced as llama-3.1-8b" in text


@pytest.mark.parametrize("rows, word", [
    # a speedup of 3.5 where the TPOTs of the same run say 1.0: steps of 5.6 and 19.6 ms
    ("none,1,0,1024,7.0,,\neagle3,1,3,1024,7.0,,2.8\neagle3,1,3,1024,,3.5,2.8\n",
     r"m.csv:4: field 'speedup' 3.5 contradicts .*m.csv:3 \(tpot_ms 7\).*5.6 ms here, 19.6 ms there; a speedup's "
     r"step is .*m.csv:2's plain step"),
    # the same TPOT at acceptance 2.8 and 1.2: steps of 9.5 and 4.1 ms, and a step does not depend on acceptance
    ("none,1,0,1024,7.0,,\neagle3,1,3,1024,3.4,,2.8\neagle3,1,3,1024,3.4,,1.2\n",
     r"m.csv:4: field 'tpot_ms' 3.4 contradicts .*m.csv:3 \(3.4\).*4.08 ms here, 9.52 ms there; a step's time does "
     r"not depend on acceptance"),
])
def test_rows_whose_steps_disagree_are_refused_whatever_their_acceptance(tmp_path, rows, word):
    f = tmp_path / "m.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,speedup,acceptance_length\n" + rows)
    with pytest.raises(SpeedplanInputError, match=word) as e:
        check_consistent(read_measurements(f))
    assert "\n" not in str(e.value)


def test_speedups_and_times_that_agree_are_kept():
    """A speedup of 2.0 at AL 2.8 over a 7 ms plain step is a 9.8 ms speculative step: TPOT 3.5 at
    AL 2.8 (9.8 ms) agrees, and so does a TPOT of 4.9 at AL 2.0 (9.8 ms, another dataset)."""
    check_consistent([Measurement("none", 1, 0, 1024, "tpot_ms", 7.0, None, "m.csv:2"),
                      Measurement("eagle3", 1, 3, 1024, "speedup", 2.0, 2.8, "m.csv:3"),
                      Measurement("eagle3", 1, 3, 1024, "tpot_ms", 3.5, 2.8, "m.csv:4"),
                      Measurement("eagle3", 1, 3, 1024, "tpot_ms", 4.9, 2.0, "m.csv:5")])


@pytest.mark.parametrize("change, ok", [({"request_rate": "inf"}, True), ({"request_rate": 2.0}, False),
                                        ({"request_rate": "12.5"}, False), ({"ramp_up_strategy": "linear"}, False)])
def test_a_vllm_run_at_a_finite_request_rate_is_refused(tmp_path, change, ok):
    """At --request-rate 2 requests arrive as a Poisson process: the batch was not held at
    max_concurrency, and max_concurrent_requests is the run's peak, not its batch."""
    f = tmp_path / "run.json"
    f.write_text(json.dumps({**RUN, **change}))
    if ok:
        assert read_measurements(f)[0].batch == 16
        return
    with pytest.raises(SpeedplanInputError, match=r"run.json:run 1: field '(request_rate|ramp_up_strategy)' .*batch "
                                                  r"was not held at max_concurrency.*--request-rate inf --max-concurrency"):
        read_measurements(f)


def test_many_rows_are_priced_together_and_held_out_in_folds(monkeypatch):
    """Pricing took 8 ms a row and leave-one-out refitted once a row: 4,000 rows took 67 s. Rows are
    priced as arrays (one pricing per setting and mechanism), above LOO_ROWS rows each row is
    predicted by a fit without its fold of ten, and more than 10,000 rows are refused."""
    from speedplan.engine.run_calibration import _setting

    base, setting = get_engine("vllm"), _setting("llama-3.1-8b", "h100-sxm", 1)
    rows = [Measurement("none", b, 0, 1024, "tpot_ms", 7 + 0.02 * b + 0.1 * (b % 3), None) for b in range(1, 121)]
    rows += [Measurement("eagle3", b, 3, 1024, "tpot_ms", 4 + 0.03 * b, 2.8) for b in range(1, 121)]
    pricings, fits = [], []
    forward, fit_values = priced_module.forward_cost, calibrate_module._fit_values
    monkeypatch.setattr(priced_module, "forward_cost", lambda *a, **k: pricings.append(1) or forward(*a, **k))
    monkeypatch.setattr(calibrate_module, "_fit_values", lambda *a, **k: fits.append(1) or fit_values(*a, **k))
    result = calibrate_module.calibrate(base, [(m, setting) for m in rows])
    assert len(pricings) <= 3 and result.held_out == "10-fold cross-validation"  # was 2 per row
    assert len(fits) <= 1 + 10 and np.isfinite(result.loo_error).all()  # was 1 + one per row
    out = np.arange(len(rows)) % 10 == 3  # row i is predicted by a fit of the rows outside fold i mod 10
    alone = calibrate_module.calibrate(base, [(m, setting) for m, o in zip(rows, out) if not o], result.fitted)
    got = calibrate_module.predict(alone.profile.values(),
                                   calibrate_module.price([(m, setting) for m, o in zip(rows, out) if o]))
    assert result.loo_error[out] == pytest.approx(np.abs(got / result.measured[out] - 1), rel=1e-6, abs=1e-9)
    assert "10-fold cross-validation median" in render_calibration(result)
    with pytest.raises(SpeedplanInputError, match="more than 10,000 rows"):
        calibrate_rows("llama-3.1-8b", "h100-sxm", 1, base, [{"mechanism": "none", "batch": 1, "draft_len": 0,
                                                              "context": 1024, "tpot_ms": 7.0}] * 10_001)


def test_a_file_with_more_rows_than_calibrate_reads_is_refused_before_reading_them(tmp_path):
    f = tmp_path / "big.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms\n" + "none,1,0,1024,7.0\n" * 10_001)
    with pytest.raises(SpeedplanInputError, match=r"big.csv: more than 10,000 rows"):
        read_measurements(f)
    f = tmp_path / "big.jsonl"
    f.write_text("\n".join(json.dumps({"batch_size": 1, "steps": 0, "step_time": 0.007}) for _ in range(10_001)))
    with pytest.raises(SpeedplanInputError, match=r"big.jsonl: more than 10,000 rows"):
        read_measurements(f)


def test_the_same_file_under_another_name_is_refused(tmp_path):
    a = tmp_path / "runs.csv"
    a.write_text(HEADER + "none,1,0,1024,6.9,\neagle3,1,3,1024,3.4,2.9\n")
    shutil.copy(a, tmp_path / "copy.csv")
    with pytest.raises(SpeedplanInputError, match=r"copy.csv has the same content as .*runs.csv"):
        _calibrate(a, tmp_path / "copy.csv")


@pytest.mark.parametrize("name, text, word", [
    # bench_speculative.py writes `accept_length or 1.0`: 1.0 on a speculative row means none was reported
    ("al1.jsonl", json.dumps({"batch_size": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 1.0,
                              "step_time": 0.009}), r"al1.jsonl:1: field 'acc_length' is 1.0 on a speculative row"),
    ("plain_al.csv", HEADER + "none,1,0,1024,7,2.5\n", r"plain_al.csv:2: field 'acceptance_length' 2.5 on a plain row"),
    ("underscore.csv", HEADER + "none,1,0,1024,1_0,\n", r"underscore.csv:2: field 'tpot_ms' must be a number"),
    ("fullwidth.csv", HEADER + "none,1,0,1024,\uff17,\n", r"fullwidth.csv:2: field 'tpot_ms' must be a number"),
    ("arabic.csv", HEADER + "none,\u0661,0,1024,7,\n", r"arabic.csv:2: field 'batch' must be a number"),
    ("empty.csv", "", r"empty.csv: empty file"),
    ("blank.csv", "\n \n", r"blank.csv: empty file"),
    ("sgl_min.jsonl", json.dumps({"batch_size": 1, "steps": 3}), r"sgl_min.jsonl:1: field '(acc_length|step_time)' "
                                                                  r"missing \(an SGLang bench_speculative.py line"),
    ("sgl_plain.jsonl", json.dumps({"batch_size": 1, "steps": 0, "acc_length": 1.0}), r"field 'step_time' missing"),
])
def test_bad_inputs_say_what_is_wrong_with_them(tmp_path, name, text, word):
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    with pytest.raises(SpeedplanInputError, match=word) as e:
        read_measurements(f)
    assert str(e.value).startswith(str(f)) and "\n" not in str(e.value)


def test_plain_rows_with_acceptance_one_and_sglang_plain_rows_are_read(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text(HEADER + "none,1,0,1024,7,1\nnone,2,0,1024,7,1.0\n")
    assert [m.acceptance_length for m in read_measurements(f)] == [None, None]
    f = tmp_path / "out.jsonl"
    f.write_text(json.dumps({"batch_size": 4, "steps": 0, "topk": 0, "num_draft_tokens": 0, "acc_length": 1.0,
                             "step_time": 0.0071}) + "\n")
    assert read_measurements(f)[0].mechanism == "none"


def test_a_long_value_is_cut_in_the_error_line(tmp_path):
    f = tmp_path / "long.csv"
    f.write_text(HEADER + "none,1,0,1024," + "9" * 5000 + ",\n")
    with pytest.raises(SpeedplanInputError, match=r"long.csv:2: field 'tpot_ms' must be finite, got '9{30,}\.\.\.$") as e:
        read_measurements(f)
    assert len(str(e.value)) < len(str(f)) + 120


def test_a_scrape_of_counters_without_total_says_what_it_lacks(tmp_path):
    """prometheus_client exposes every counter with _total: a file without it is not a vLLM 0.8
    scrape (what the line said), but an edited one or another exporter's."""
    from speedplan.engine.readers.vllm_metrics import read_vllm_metrics

    scrape = tmp_path / "metrics.txt"
    scrape.write_text(SCRAPE.replace("MODEL", "m").replace("_total", ""))
    with pytest.raises(SpeedplanInputError, match=r"metrics.txt: has vllm:spec_decode_num_drafts but no "
                                                  r"vllm:spec_decode_num_drafts_total: prometheus_client exposes"):
        read_vllm_metrics(scrape)
    scrape.write_text(SCRAPE.replace("MODEL", "m").replace(" 100.0", " 1_00"))
    with pytest.raises(SpeedplanInputError, match=r"metrics.txt:1: .* value '1_00' is not a number"):
        read_vllm_metrics(scrape)


def test_the_profile_records_each_rows_acceptance_length():
    rows = [{"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1024, "tpot_ms": 7.0},
            {"mechanism": "eagle3", "batch": 1, "draft_len": 3, "context": 1024, "tpot_ms": 3.4, "acceptance_length": 2.8},
            {"mechanism": "eagle3", "batch": 8, "draft_len": 3, "context": 1024, "tpot_ms": 4.1, "acceptance_length": 2.7}]
    fit = calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows).profile.fit
    assert [r["acceptance_length"] for r in fit["rows"]] == [1.0, 2.8, 2.7] and fit["cross_validation"] == "leave-one-out"


def test_the_command_refuses_each_in_one_line_and_writes_nothing(cli, tmp_path):
    """The command line: exit 2, one line naming the file, no --out, for a copy of a file, a
    scrape shared by two mechanisms and a run of another size of the model; --help states the
    row limit."""
    runs, scrape, big = tmp_path / "runs.csv", tmp_path / "metrics.txt", tmp_path / "big.json"
    runs.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,6.9\neagle3,1,3,1024,3.4\n"
                    "ngram,1,3,1024,5.2\n")
    scrape.write_text(SCRAPE.replace("MODEL", "m"))
    shutil.copy(runs, tmp_path / "copy.csv")
    big.write_text(json.dumps({**RUN, "model_id": "meta-llama/Llama-3.1-70B-Instruct"}))
    out = tmp_path / "x.json"
    for files, word in (([runs, tmp_path / "copy.csv"], "same content as"), ([runs, scrape], "rows of ngram cannot"),
                        ([big], "another size than --model llama-3.1-8b")):
        proc = cli("calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements",
                   *map(str, files), "--out", str(out))
        assert proc.returncode == 2 and word in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr and not out.exists()
    assert "10,000 rows" in " ".join(cli("calibrate", "--help").stdout.split())


def test_a_scrape_whose_counters_come_after_300_kb_of_histograms_is_read_as_one(tmp_path):
    """A scrape was told by its first 200,000 characters: a server's histogram buckets filled them,
    and the scrape was read as a CSV ("missing column 'mechanism'")."""
    scrape, runs = tmp_path / "metrics.txt", tmp_path / "runs.csv"
    buckets = "".join(f'vllm:request_prompt_tokens_bucket{{engine="0",le="{i}.0",model_name="m"}} 10.0\n'
                      for i in range(4000))
    scrape.write_text(buckets + SCRAPE.replace("MODEL", "m"))
    runs.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,6.9\neagle3,1,3,1024,3.4\n")
    assert len(buckets) > 300_000
    assert [r["acceptance_length"] for r in _calibrate(runs, scrape).rows] == pytest.approx([1.0, 2.85])


def test_a_large_file_prints_its_worst_rows_not_every_row(tmp_path):
    """calibrate printed one line per row (4,000 lines for 4,000 rows); above PRINTED_ROWS it
    prints the rows with the largest |residual| and says where the rest are."""
    from speedplan.engine.run_calibration import PRINTED_ROWS, calibrate_rows, render_calibration

    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": c, "tpot_ms": 7.0 + 0.05 * b + 0.0001 * c}
            for b in range(1, 31) for c in (512, 1024)]
    result = calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, name="many")
    text = render_calibration(result)
    printed = [line for line in text.splitlines() if line.startswith("  none B=")]
    assert len(printed) == PRINTED_ROWS < len(rows)
    assert f"({len(rows) - PRINTED_ROWS:,} more rows, each |residual| below those above" in text
    shown = {(int(line.split("B=")[1].split()[0]), int(line.split()[3])) for line in printed}  # its context column
    by_size = sorted(result.rows, key=lambda r: -abs(r["residual"]))
    assert shown == {(r["batch"], r["context"]) for r in by_size[:PRINTED_ROWS]}  # the worst rows


def test_ngram_rows_of_two_datasets_are_not_a_contradiction():
    """An n-gram step without a match verifies one token, so the match rate (the dataset) sets
    both its acceptance and its step time: two runs at AL 1.05 and 6.13 imply steps 2x apart,
    which the check of 2026-12-04 refused as 'a step's time does not depend on acceptance'.
    The same rows for an EAGLE-3 head are still refused."""
    from speedplan import calibrate_rows

    rows = [{"mechanism": "none", "batch": 128, "draft_len": 0, "context": 512, "tpot_ms": 14.5},
            {"mechanism": "ngram", "batch": 128, "draft_len": 8, "context": 512, "tpot_ms": 17.95, "acceptance_length": 1.05},
            {"mechanism": "ngram", "batch": 128, "draft_len": 8, "context": 512, "tpot_ms": 6.38, "acceptance_length": 6.13}]
    calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, name="ng")  # no error
    heads = [dict(r, mechanism="eagle3") if r["mechanism"] == "ngram" else r for r in rows]
    with pytest.raises(SpeedplanInputError, match="1.5x apart"):
        calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", heads, name="e3")


@pytest.mark.parametrize("name", ["", "   ", "\t"])
def test_an_empty_name_is_refused_by_the_library_as_by_the_command(tmp_path, name):
    """calibrate_rows and calibrate_files took name="" as the default name in silence, where
    `speedplan calibrate --name ''` refuses it."""
    runs = tmp_path / "runs.csv"
    runs.write_text("mechanism,batch,draft_len,context,step_ms\nnone,1,0,1024,8.05\nnone,4,0,1024,8.2\n")
    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1024, "step_ms": 8.0 + 0.05 * b} for b in (1, 4)]
    for fit in (lambda: calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, free=["host_step_us"], name=name),
                lambda: calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [str(runs)], free=["host_step_us"],
                                        name=name)):
        with pytest.raises(SpeedplanInputError, match="calibrate: name must be printable text") as e:
            fit()
        assert "\n" not in str(e.value)
    assert calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [str(runs)], free=["host_step_us"]).profile.name \
        == "vllm-calibrated"


@pytest.mark.parametrize("draft_len", [0, 3])
def test_an_unknown_mechanism_is_named_whatever_its_draft_length(tmp_path, draft_len):
    """With draft_len 0 the row was refused for its draft length ("is 0 for mechanism 'foo'")."""
    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\nnone,1,0,1024,7.5,\n"
                 f"foo,1,{draft_len},1024,5,{2 if draft_len else ''}\n")
    with pytest.raises(SpeedplanInputError, match=r":3: field 'mechanism': unknown mechanism 'foo'; use none or one of"):
        read_measurements(f)
