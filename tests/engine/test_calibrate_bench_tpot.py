"""A `vllm bench serve --save-result` run is a tpot_ms row where it has `mean_tpot_ms` (decode
alone: each request's (e2e latency - TTFT) / (output tokens - 1), vllm/benchmarks/serve.py
`calculate_metrics`), and a tokens_per_s row from `output_throughput` (which also counts the
run's prefill, queueing and ramp-down) only where it has none; calibrate's table shows each
row's context and the field it was read from."""

import json

import pytest

from speedplan.cli.app import run as cli
from speedplan.engine.readers.measurements import check_consistent, read_measurements
from speedplan.engine.run_calibration import calibrate_files, render_calibration
from speedplan.errors import SpeedplanInputError
from tests.engine.test_readers import VLLM_RUN

TPOT_FIELDS = ("mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms")  # process_one_metric("tpot", ...)


def _run(mechanism="eagle3", batch=16, tpot=6.9, share=0.96, prompt=1024, output=1024, **change):
    """A run as vLLM's serve.py writes it (the result dict of `benchmark`, --metadata keys at its
    top level), its output_throughput `share` of what `batch` requests emit at `tpot` ms a token,
    each request `prompt` tokens in and `output` out."""
    n = 20 * batch
    run = {**{k: v for k, v in VLLM_RUN.items() if k != "context"}, "request_rate": "inf", "burstiness": 1.0,
           "max_concurrency": batch, "num_prompts": n, "completed": n, "failed": 0,
           "total_input_tokens": n * prompt, "total_output_tokens": n * output,
           "output_throughput": round(share * batch * 1000 / tpot, 2) if tpot else 2210.5,
           "mean_ttft_ms": 45.0, "median_ttft_ms": 41.0, "std_ttft_ms": 6.0, "p99_ttft_ms": 80.0,
           "mean_tpot_ms": tpot, "median_tpot_ms": tpot, "std_tpot_ms": 0.2, "p99_tpot_ms": 1.1 * (tpot or 1),
           "mechanism": mechanism}
    if mechanism == "none":
        run = {k: v for k, v in run.items() if not k.startswith("spec_decode") and k != "draft_len"}
    run.update(change)
    return {k: v for k, v in run.items() if v is not None}


def test_a_vllm_run_with_mean_tpot_ms_is_a_tpot_row(tmp_path):
    f = tmp_path / "run.json"
    f.write_text(json.dumps(_run()))
    (m,) = read_measurements(f)
    assert (m.quantity, m.value, m.batch, m.context, m.acceptance_length) == ("tpot_ms", 6.9, 16, 1024 + 512, 2.71)
    assert m._f("tpot_ms") == "'mean_tpot_ms'"  # errors name the field as the file calls it


def test_a_vllm_run_without_mean_tpot_ms_falls_back_to_output_throughput(tmp_path):
    """vLLM writes mean_tpot_ms only with a tokenizer and tpot among --percentile-metrics."""
    f = tmp_path / "run.json"
    f.write_text(json.dumps({k: v for k, v in _run().items() if k not in TPOT_FIELDS}))
    (m,) = read_measurements(f)
    assert (m.quantity, m.value) == ("tokens_per_s", pytest.approx(0.96 * 16 * 1000 / 6.9, abs=0.01))
    assert m._f("tokens_per_s") == "'output_throughput'"


@pytest.mark.parametrize("value, word", [
    (-6.9, "field 'mean_tpot_ms' must be a positive number of milliseconds, got -6.9"),
    ("fast", "field 'mean_tpot_ms' must be a number"),
    ("6.9 ms", "field 'mean_tpot_ms' must be a number"),
    (True, "field 'mean_tpot_ms' must be a number"),
    (1e9, "field 'mean_tpot_ms' 1e+09 is not a plausible measurement"),
    (1e-7, "field 'mean_tpot_ms' 1e-07 is not a plausible measurement"),
    (float("inf"), "field 'mean_tpot_ms' must be finite"),
    (0, "field 'mean_tpot_ms' is 0: vLLM writes 0 where no request produced more than one output token"),
])
def test_a_malformed_mean_tpot_ms_is_exit_2_naming_file_and_field(tmp_path, capsys, value, word):
    f = tmp_path / "run.json"
    f.write_text(json.dumps(_run(share=1.0, output_throughput=2210.5) | {"mean_tpot_ms": value}))
    code = cli(["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", str(f),
                "--out", str(tmp_path / "mine.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"{f}:run 1: " in err and word in err, err
    assert not (tmp_path / "mine.json").exists()


def test_the_printed_table_shows_each_rows_context_and_the_field_it_was_read_from(tmp_path):
    """Runs with mean_tpot_ms, one without (output_throughput), and a CSV row: the table has a
    context column and, where a file names its field otherwise, the field each row was read
    from; fit.rows records it; a derived context is said in a note."""
    runs, old, csv = tmp_path / "bench.jsonl", tmp_path / "old.json", tmp_path / "runs.csv"
    runs.write_text("".join(json.dumps(r) + "\n" for r in (
        _run("none", 1, 7.9), _run("none", 16, 9.6), _run("none", 64, 13.4),
        _run("eagle3", 1, 4.0), _run("eagle3", 16, 5.1), _run("eagle3", 64, 7.9, prompt=2048, output=512))))
    old.write_text(json.dumps({k: v for k, v in _run("eagle3", 32, 6.4, context=3000).items() if k not in TPOT_FIELDS}))
    csv.write_text("mechanism,batch,draft_len,context,step_ms\nnone,8,0,8192,10.5\n")
    result = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [runs, old, csv])
    text = render_calibration(result)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("  row "))
    assert header.split() == ["row", "context", "quantity", "read", "from", "AL", "measured", "predicted", "residual",
                              "leave-one-out"]  # AL: the acceptance length a tpot_ms row's step is priced with
    table = {line.split()[0] + " " + line.split()[1]: line.split()[3:6] for line in lines
             if line.startswith(("  none B=", "  eagle3 B="))}
    assert table["none B=16"] == ["1536", "tpot_ms", "mean_tpot_ms"]
    assert table["eagle3 B=64"] == ["2304", "tpot_ms", "mean_tpot_ms"]  # 2048 + 512 / 2
    assert table["eagle3 B=32"] == ["3000", "tokens_per_s", "output_throughput"]  # --metadata context=3000
    assert table["none B=8"] == ["8192", "step_ms", "step_ms"]  # a CSV's column is its field
    assert max(len(line) for line in lines if line.startswith(("  none B=", "  eagle3 B="))) <= 114  # " [3]": its file
    assert f"  files: [1] {runs}; [2] {old}; [3] {csv}" in lines
    assert [r["field"] for r in result.profile.fit["rows"]] == ["mean_tpot_ms"] * 6 + ["output_throughput", "step_ms"]
    assert (f"note: {runs} runs 1-6: context is the run's mean prompt + half its mean output (total_input_tokens, "
            "total_output_tokens, completed)") in text
    assert str(old) + " run" not in text  # its context was given


def test_a_csv_alone_prints_its_contexts_and_no_field_column(tmp_path):
    csv = tmp_path / "runs.csv"
    csv.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,7.6\nnone,16,0,4096,10.1\n")
    text = render_calibration(calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [csv]))
    assert "read from" not in text and "ctx=" not in text
    rows = [line.split() for line in text.splitlines() if line.startswith("  none B=")]
    assert [r[3:5] for r in rows] == [["1024", "tpot_ms"], ["4096", "tpot_ms"]]


def test_a_run_with_neither_context_nor_token_totals_says_its_default(tmp_path):
    f = tmp_path / "run.json"
    f.write_text(json.dumps({k: v for k, v in _run("none", 1, 7.9).items()
                             if k not in ("total_input_tokens", "total_output_tokens")}))
    text = render_calibration(calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [f], free=["host_step_us"]))
    assert f"note: {f} run 1: no context and no token totals: priced at 1024 tokens of context" in text


@pytest.mark.parametrize("share, word", [
    (0.96, None),  # long fixed outputs: TTFT and the ramp-down cost a few percent
    (0.4, "output_throughput 666.7 tokens/s is 0.40x the 1667 that 16 requests emit at mean_tpot_ms 9.6: much of "
          "the run was prefill, queueing or ramp-down, which the row (mean_tpot_ms) leaves out; if the server's "
          "--max-num-seqs was below 16, give --metadata max_running_requests=N"),
    (2.5, "output_throughput 4167 tokens/s is 2.50x the 1667 that 16 requests emit at mean_tpot_ms 9.6: more than "
          "they can; check that "
          "mean_tpot_ms is this run's, in ms (the row is fitted to it)"),
])
def test_output_throughput_far_from_what_the_batch_emits_at_its_tpot_is_a_note(tmp_path, share, word):
    """Not a refusal: the row is the TPOT either way; the note says why the two disagree."""
    f = tmp_path / "run.json"
    f.write_text(json.dumps(_run("none", 16, 9.6, share=share)))
    result = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [f], free=["host_step_us"])
    notes = [n for n in result.notes if "tokens/s is" in n]
    assert result.rows[0]["quantity"] == "tpot_ms"
    assert notes == ([] if word is None else [f"{f} run 1: {word}"])


def test_a_tpot_row_is_checked_against_other_rows_of_its_configuration_as_a_step(tmp_path):
    """mean_tpot_ms x AL is the run's engine step: 6.9 ms x 2.71 = 18.7 ms, against a CSV's
    step of 18 ms (kept) or 6 ms (refused, naming the field as the file calls it); an old run of
    the same configuration read from output_throughput is compared as R x AL / tokens_per_s."""
    run, csv = tmp_path / "run.json", tmp_path / "steps.csv"
    run.write_text(json.dumps(_run(context=1500)))
    csv.write_text("mechanism,batch,draft_len,context,step_ms,acceptance_length\neagle3,16,3,1500,18,2.71\n")
    check_consistent(read_measurements(run) + read_measurements(csv))
    csv.write_text(csv.read_text().replace(",18,", ",6,"))
    with pytest.raises(SpeedplanInputError, match=r"steps.csv:2: field 'step_ms' 6 contradicts .*run.json:run 1 "
                                                  r"\(tpot_ms 6.9\)"):
        check_consistent(read_measurements(run) + read_measurements(csv))
    with pytest.raises(SpeedplanInputError, match=r"run.json:run 1: field 'mean_tpot_ms' 6.9 contradicts .*steps.csv:2"):
        check_consistent(read_measurements(csv) + read_measurements(run))
    old = tmp_path / "old.json"  # 40% of the batch's rate: a 1.7x longer step than the TPOT's
    old.write_text(json.dumps({k: v for k, v in _run(context=1500, share=0.4).items() if k not in TPOT_FIELDS}))
    with pytest.raises(SpeedplanInputError, match=r"old.json:run 1: field 'output_throughput' .* output throughput "
                                                  r"also counts prefill"):
        check_consistent(read_measurements(run) + read_measurements(old))
