"""`speedplan calibrate` used as a user with their own measurements would (a walkthrough and
adversarial inputs of 2026-12-05): each test is a file or command that was fitted, written or
misnamed before, and is now read or refused in one line naming the file, the row and the field."""

import json
from pathlib import Path

import pytest

import speedplan
from speedplan.engine.readers.measurement import Measurement
from speedplan.engine.readers.measurements import read_measurements
from speedplan.engine.run_calibration import calibrate_files, calibrate_rows
from speedplan.errors import SpeedplanInputError

HEADER = "mechanism,batch,draft_len,context,tpot_ms,acceptance_length\n"
RUNS = HEADER + "none,1,0,1500,6.9,\nnone,8,0,1500,7.6,\neagle3,1,3,1500,3.3,2.8\neagle3,8,3,1500,4.2,2.75\n"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SCRAPE = "".join(f'vllm:spec_decode_{name}_total{{engine="0",model_name="{MODEL}"{pos}}} {value}\n' for name, pos, value in (
    ("num_drafts", "", 1000.0), ("num_draft_tokens", "", 3000.0), ("num_accepted_tokens", "", 1800.0),
    ("num_accepted_tokens_per_pos", ',position="0"', 800.0), ("num_accepted_tokens_per_pos", ',position="1"', 600.0),
    ("num_accepted_tokens_per_pos", ',position="2"', 400.0)))


def _calibrate(*files, **kw):
    return calibrate_files("llama-3.1-8b", "h100-sxm", kw.pop("tp", 1), kw.pop("engine", "vllm"), [str(f) for f in files],
                           **kw)


def _one_line(proc, *words):
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


def test_out_inside_the_package_is_refused_and_the_shipped_profile_kept(cli, tmp_path):
    """--out speedplan/specs/presets/engines/vllm.json replaced the shipped vLLM profile (and a new
    name there became a "shipped" profile of every later run)."""
    runs = tmp_path / "runs.csv"
    runs.write_text(RUNS)
    presets = Path(speedplan.__file__).resolve().parent / "specs" / "presets" / "engines"
    before = (presets / "vllm.json").read_bytes()
    try:
        for out in (presets / "vllm.json", presets / "mine.json"):
            proc = cli("calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", str(runs),
                       "--out", str(out))
            _one_line(proc, "--out", "inside the speedplan package")
            assert not (presets / "mine.json").exists()
        assert (presets / "vllm.json").read_bytes() == before
    finally:  # where the refusal fails, put the shipped profile back
        (presets / "vllm.json").write_bytes(before)
        (presets / "mine.json").unlink(missing_ok=True)


def test_csv_rows_are_named_by_their_line_after_blank_lines_and_multiline_cells(tmp_path):
    """Rows were numbered as if every record took one line: a row after blank lines or a quoted
    note spanning two lines was named by a line above it."""
    f = tmp_path / "runs.csv"
    f.write_text(HEADER + "none,1,0,1500,6.9,\n\nnone,8,0,1500,7.5,\n\neagle3,1,3,1500,-3.3,2.8\n")
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:6: field 'tpot_ms' must be a positive"):
        read_measurements(f)
    f.write_text(HEADER.replace("\n", ",notes\n") + 'none,1,0,1500,6.9,,"two\nlines"\neagle3,1,3,1500,abc,2.8,x\n')
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:4: field 'tpot_ms' must be a number"):
        read_measurements(f)


@pytest.mark.parametrize("text", [
    "# runs of 2026-12-06 on h100\n" + RUNS,  # a comment above the header
    RUNS.replace("none,8,0", "#none,8,0"),  # a row commented out (the one kept is read)
    RUNS.replace(",", ";"),  # a spreadsheet's export where the decimal mark is a comma
    RUNS.replace(",", "\t"),  # tab-separated
    RUNS.replace("\n", "\r\n"),
    RUNS.replace("mechanism,batch,draft_len,context,tpot_ms,acceptance_length",
                 "Mechanism,Batch,Draft_Len,Context,TPOT_ms,Acceptance Length"),
])
def test_csv_layouts_a_spreadsheet_writes_are_read(tmp_path, text):
    f = tmp_path / "runs.txt"
    f.write_text(text)
    rows = read_measurements(f)
    assert [m.mechanism for m in rows][-2:] == ["eagle3", "eagle3"] and rows[-1].acceptance_length == 2.75
    assert len(rows) == (3 if text.count("#none") else 4)


def test_a_decimal_comma_is_named(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text(RUNS.replace(",", ";").replace("6.9", "6,9"))
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:2: field 'tpot_ms' .*'6,9'.*decimal point"):
        read_measurements(f)


def test_a_speedup_above_its_acceptance_length_is_refused(tmp_path):
    """A speedup of 9.1 at AL 2.8 (the step would be 3x faster than a plain step) was fitted with a
    -74% residual and written."""
    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,speedup,acceptance_length\nnone,1,0,1500,6.9,,\n"
                 "eagle3,1,3,1500,,9.1,2.8\n")
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:3: field 'speedup' 9.1 is above its acceptance length 2.8"):
        _calibrate(f)
    f.write_text(f.read_text().replace("9.1", "2.1"))  # below AL: a real speedup
    assert [r["measured"] for r in _calibrate(f).rows] == [6.9, 2.1]


@pytest.mark.parametrize("column, cells, word", [
    ("tp", ("1", "2"), r"runs.csv:3: field 'tp' 2, but --tp 1"),
    ("tensor_parallel_size", ("2", "2"), r"runs.csv:2: field 'tensor_parallel_size' 2, but --tp 1"),
    ("gpu", ("H100", "A100"), r"runs.csv:3: field 'gpu' 'A100' names another GPU than --hardware h100-sxm"),
    ("hardware", ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"), r"runs.csv:2: field 'hardware' .*another GPU"),
    ("gpu", ("8xH100", "8xH200"), r"runs.csv:3: field 'gpu' '8xH200' names another GPU"),
    ("model", (MODEL, "meta-llama/Llama-3.1-70B-Instruct"), r"runs.csv:3: names the model .*70B"),
])
def test_rows_of_another_gpu_tp_or_model_are_refused(tmp_path, column, cells, word):
    """A CSV's gpu, tp or model column was ignored: rows of an H100 and an A100, or of TP 1 and 2,
    were fitted as one setting."""
    f = tmp_path / "runs.csv"
    f.write_text(f"mechanism,batch,draft_len,context,tpot_ms,acceptance_length,{column}\n"
                 f"none,1,0,1500,6.9,,{cells[0]}\neagle3,1,3,1500,3.3,2.8,{cells[1]}\n")
    with pytest.raises(SpeedplanInputError, match=word):
        _calibrate(f)


def test_rows_that_agree_with_the_setting_are_read_with_their_columns(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length,gpu,tp,model\n"
                 f"none,1,0,1500,6.9,,NVIDIA H100 80GB HBM3,1,{MODEL}\neagle3,1,3,1500,3.3,2.8,H100-SXM,1,{MODEL}\n"
                 f"eagle3,8,3,1500,4.2,2.75,gh-unknown-gpu,,{MODEL}\n")
    result = _calibrate(f)
    assert len(result.rows) == 3 and any("name the model" in n for n in result.notes)
    with pytest.raises(SpeedplanInputError, match=r"row 0: field 'tp' 2, but --tp 1"):
        calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", [{"mechanism": "none", "batch": 1, "draft_len": 0,
                                                               "context": 1024, "tpot_ms": 7.0, "tp": 2}])


@pytest.mark.parametrize("written, read", [
    ("draft_model", "draft-model"), ("draft_model:llama-3.2-1b", "draft-model:llama-3.2-1b"), ("EAGLE-3", "eagle3"),
    ("eagle_3", "eagle3"), ("Eagle3", "eagle3"), ("standalone", "draft-model"), ("baseline", "none"), ("plain", "none"),
])
def test_mechanism_names_users_write_are_read(tmp_path, written, read):
    """vLLM's method draft_model, SGLang's STANDALONE and "EAGLE-3" were unknown mechanisms."""
    f = tmp_path / "runs.csv"
    d, al = ("0", "") if read == "none" else ("3", "2.5")
    f.write_text(HEADER + f"{written},1,{d},1500,5.0,{al}\n")
    assert read_measurements(f)[0].mechanism == read
    run = {"model_id": MODEL, "max_concurrency": 4, "output_throughput": 500.0, "mean_tpot_ms": 5.0, "context": 1500,
           "request_rate": "inf", "mechanism": written, "draft_len": d, "spec_decode_acceptance_length": 2.5}
    g = tmp_path / "run.json"
    g.write_text(json.dumps(run if read != "none" else {k: v for k, v in run.items() if not k.startswith("spec")}))
    assert read_measurements(g)[0].mechanism == read
    assert Measurement(written, 1, int(d), 1500, "tpot_ms", 5.0, float(al) if al else None).mechanism == read


def test_mechanism_aliases_reach_the_scrape_as_one_drafter(tmp_path):
    """Rows of EAGLE-3 and eagle3 are one drafter: the scrape gives both its acceptance."""
    scrape, runs = tmp_path / "metrics.txt", tmp_path / "runs.csv"
    scrape.write_text(SCRAPE)
    runs.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1500,6.9\nEAGLE-3,1,3,1500,3.3\n"
                    "eagle3,8,3,1500,4.2\n")
    assert [r["acceptance_length"] for r in _calibrate(runs, scrape).rows] == pytest.approx([1.0, 2.8, 2.8])


@pytest.mark.parametrize("change, word", [
    # vLLM counts every accepted token once in each (SpecDecodingStats.observe_draft)
    (lambda s: s.replace("} 1800.0", "} 2900.0"), r"num_accepted_tokens_total \(2900\) is not the sum"),
    # a scrape cut after position 1 of a K = 3 server: per position sums to less than accepted
    (lambda s: "".join(line for line in s.splitlines(True) if 'position="2"' not in line), r"is not the sum"),
    (lambda s: s.replace("} 3000.0", "} 1500.0"), r"more tokens accepted .* than drafted"),
])
def test_a_scrape_whose_counters_disagree_is_refused(tmp_path, change, word):
    f, runs = tmp_path / "metrics.txt", tmp_path / "runs.csv"
    f.write_text(change(SCRAPE))
    runs.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1500,6.9\neagle3,1,2,1500,3.3\n")
    with pytest.raises(SpeedplanInputError, match=word) as e:
        _calibrate(runs, f)
    assert str(e.value).startswith(str(f)) and "\n" not in str(e.value)
    f.write_text(SCRAPE)
    assert len(_calibrate(runs, f).rows) == 2


def test_a_row_slower_than_any_engine_term_can_make_it_is_refused(cli, tmp_path):
    """SGLang's step_time written in ms (9.5 for 9.5 ms: a 9.5 s step) was fitted with host_step_us at
    its 20 ms bound, a -99.7% residual, and written."""
    f = tmp_path / "output.jsonl"
    f.write_text(json.dumps({"batch_size": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.8,
                             "step_time": 9.5}) + "\n")
    with pytest.raises(SpeedplanInputError, match=r"output.jsonl:1: field 'step_time' .* slower than any engine"):
        _calibrate(f, engine="sglang")
    runs = tmp_path / "runs.csv"
    runs.write_text(RUNS.replace("4.2", "4200"))  # µs for ms
    out = tmp_path / "x.json"
    proc = cli("calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", str(runs),
               "--out", str(out))
    _one_line(proc, "runs.csv:5", "'tpot_ms'", "slower than any engine")
    assert not out.exists()
    runs.write_text(RUNS)
    assert len(_calibrate(runs).rows) == 4  # real rows are not flagged


def test_an_sglang_server_log_says_what_it_is(tmp_path):
    """A server log given to calibrate read as "malformed JSON (Expecting ',' delimiter ...)": its
    lines start with a [timestamp]."""
    f = tmp_path / "sglang.log"
    f.write_text("[2026-12-01 10:00:05] Decode batch, #running-req: 32, #token: 18234, token usage: 0.07, accept len: "
                 "3.21, accept rate: 0.55, cuda graph: True, gen throughput (token/s): 2450.12, #queue-req: 0\n")
    with pytest.raises(SpeedplanInputError, match=r"sglang.log: an SGLang server log: its accept len is acceptance"):
        read_measurements(f)


def test_the_sglang_drafter_option_takes_the_names_users_write(tmp_path):
    f = tmp_path / "output.jsonl"
    f.write_text(json.dumps({"batch_size": 4, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.6,
                             "step_time": 0.0093}) + "\n")
    assert [r["mechanism"] for r in _calibrate(f, mechanism="EAGLE-3", engine="sglang").rows] == ["eagle3"]


def test_the_all_rows_too_fast_refusal_names_a_file_row_and_field(tmp_path, capsys):
    """It named no file: "--measurements: every row ran faster ..." (TPOT in seconds, a 40-token draft)."""
    from speedplan.cli.app import run

    f = tmp_path / "fast.csv"
    f.write_text(HEADER + "eagle3,1,3,1500,0.0035,2.8\n")
    assert run(["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", str(f),
                "--out", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{f}:2: field 'tpot_ms' (0.0035 ms)" in err[0] and not (tmp_path / "p.json").exists()
