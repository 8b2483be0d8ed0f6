"""Input a fuzzing run of 2026-12-05 over the less-used commands (models, bench, run, validate,
predict, profile ...) found crashing, hanging, overwriting a file or accepted silently. Each is
now exit 2 with one line naming the option, file or field, and nothing written. Each test is
quick: the refusals come before any model is loaded or timed (a test that would run a whole
validation before the fix fails at once instead)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from speedplan.cli.app import run

ROOT = Path(__file__).resolve().parent.parent
FAST_BENCH = ["bench", "--device", "cpu", "--grid", "tiny", "--no-progress", "--quiet-tries", "1", "--stop-after", "1"]


def _refused(capsys, argv, words, untouched=None):
    code = run(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and words in err, (code, err)
    if untouched is not None:
        assert not untouched.exists()


def test_profile_check_json_out_keeps_a_file_it_did_not_write(tmp_path, capsys):
    """`profile check --json-out pred.csv` replaced a predictions CSV (or a trace, or another
    profile's gemm.csv) with the check's JSON; a previous check result is still replaced."""
    mine = tmp_path / "pred.csv"
    mine.write_text("op,m,n,k,dtype,latency_us\n")
    code = run(["profile", "check", "cpu-local", "--json-out", str(mine)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--json-out" in err and "profile check result" in err, err
    assert mine.read_text() == "op,m,n,k,dtype,latency_us\n"
    prof, result = tmp_path / "roof", tmp_path / "check.json"
    assert run(["profile", "roofline", "--hardware", "h100-sxm", "--grid", "tiny", "--out", str(prof)]) == 0
    for _ in range(2):
        assert run(["profile", "check", str(prof), "--json-out", str(result)]) == 0
    assert "median_error" in json.loads(result.read_text())


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_bench_refuses_an_unwritable_out_before_measuring(capsys):
    """`bench --out /proc/x` ended in a FileNotFoundError traceback (exit 1) once the grid was built."""
    _refused(capsys, [*FAST_BENCH, "--out", "/proc/speedplan-x"], "--out /proc/speedplan-x")


def test_bench_refuses_more_threads_than_cores(tmp_path):
    """`bench --threads 100000` died of a segmentation fault with a meta.json half-written (run in
    a subprocess: a regression must not take the test run with it)."""
    out = tmp_path / "b"
    proc = subprocess.run([sys.executable, "-m", "speedplan.cli", *FAST_BENCH, "--threads", "100000", "--out", str(out)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--threads" in proc.stderr, proc.stderr
    assert not out.exists()


def test_bench_does_not_write_into_the_shipped_profiles(tmp_path, monkeypatch, capsys):
    """`bench --out .../speedplan/data/profiles/cpu-local` resumed the shipped profile with this
    machine's points, at another timing (the real folder is stood in for by a temporary one)."""
    import speedplan.cost.ops

    shipped = tmp_path / "profiles"
    shipped.mkdir()
    monkeypatch.setattr(speedplan.cost.ops, "PROFILE_DIR", shipped)
    _refused(capsys, [*FAST_BENCH, "--out", str(shipped / "cpu-local")], "shipped with speedplan", shipped / "cpu-local")


def _bench_meta(folder: Path, **changes) -> Path:
    """A resumable bench folder's meta.json, measured on this CPU at --min-time-ms 1, one visit, interleaved."""
    from microbench.env import this_cpu

    folder.mkdir()
    meta = {"device": "cpu", "hardware_preset": "cpu-local", "threads": 2, "origin": "measured", "complete": False,
            "timing": "perf_counter_ns; min 1 ms per point in 1 visit(s), latency = median over visits of each "
                      "visit's median; points sharing weights / KV cache (a block) timed together, their repeats "
                      "interleaved round-robin", **this_cpu(), **changes}
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


@pytest.mark.parametrize("options, words", [
    (["--min-time-ms", "5"], "timed with --min-time-ms 1 --visits 1 --interleave"),
    (["--min-time-ms", "1", "--visits", "2"], "timed with --min-time-ms 1 --visits 1"),
    (["--min-time-ms", "1", "--one-by-one"], "resume with the same"),
])
def test_bench_resumes_only_with_the_timing_it_started_with(tmp_path, capsys, options, words):
    """A resumed folder took points at another --min-time-ms / --visits / --interleave and its
    meta.json described only the last run's timing."""
    out = _bench_meta(tmp_path / "b")
    _refused(capsys, [*FAST_BENCH, *options, "--out", str(out)], words, out / "gemm.csv")


def test_bench_does_not_resume_another_cpus_profile(tmp_path, capsys):
    """A profile measured on another CPU of the same name (another family) took this one's points."""
    from microbench.env import this_cpu

    here = this_cpu()
    other = {"cpu_id": {"vendor": "x", "family": 999, "model": 1}} if here.get("cpu_id") else {"device_name": "Other CPU"}
    out = _bench_meta(tmp_path / "b", **other)
    _refused(capsys, [*FAST_BENCH, "--min-time-ms", "1", "--out", str(out)], "holds a profile measured on",
             out / "gemm.csv")


def test_validate_refuses_an_unwritable_out_before_running(monkeypatch, capsys):
    """`validate --quick --out /proc/x` ran for 75 s and only then failed to write."""
    import speedplan.validate.run

    def ran(*a, **k):
        raise AssertionError("validation ran before --out was checked")

    monkeypatch.setattr(speedplan.validate.run, "run_validation", ran)
    if Path("/proc/self").is_dir():
        _refused(capsys, ["validate", "--quick", "--out", "/proc/speedplan-x"], "--out /proc/speedplan-x")


def test_validate_refuses_a_gpu_profile_for_its_cpu_run(tmp_path, monkeypatch, capsys):
    """`validate --hardware h100-sxm` (or a GPU roofline profile) priced this CPU's runtime with an
    H100 and reported its errors as a validation."""
    import speedplan.runtime.api

    def loaded(*a, **k):
        raise AssertionError("the runtime ran with a GPU profile")

    monkeypatch.setattr(speedplan.runtime.api, "load_target", loaded)
    _refused(capsys, ["validate", "--quick", "--hardware", "h100-sxm", "--out", str(tmp_path / "v")],
             "--hardware h100-sxm: describes h100-sxm, a GPU", tmp_path / "v")


def _validation(folder: Path, rows: dict | None = None, summary: dict | None = None) -> Path:
    folder.mkdir()
    table = pd.DataFrame({"mechanism": ["none", "eagle"], "batch": [1, 4], "verify_tokens": [1, 4],
                          "context": [180, 200], "pred_t_verify": [0.1, 0.2], "meas_t_verify": [0.1, 0.2]})
    for col, value in (rows or {}).items():  # a list is the whole column, else the second row's cell
        table[col] = table[col].astype(object)
        if isinstance(value, list):
            table[col] = value
        else:
            table.loc[1, col] = value
    table.to_csv(folder / "validation.csv", index=False)
    base = {"hardware": "cpu-local", "context": 195, "layer_overhead_us_measured": 100.0, "calibration_verify_s": 0.2,
            "calibration_context": 180.0, "engine": {"terms": {"kernel_scale": {"value": 1.0}}}}
    (folder / "summary.json").write_text(json.dumps({**base, **(summary or {})}))
    return folder


@pytest.mark.parametrize("rows, summary, words", [
    ({"mechanism": [5, 5]}, None, "column 'mechanism' line 2"),  # was an AttributeError traceback
    ({"batch": 1.5}, None, "column 'batch' needs positive numbers (whole, up to 1e+06); line 3 has '1.5'"),
    ({"batch": 1e9}, None, "column 'batch' needs positive numbers (whole, up to 1e+06); line 3"),
    ({"context": 1e12}, None, "column 'context' needs positive numbers (up to 1e+08); line 3"),
    ({"meas_t_verify": "inf"}, None, "column 'meas_t_verify' needs positive numbers (up to 1e+06); line 3 has 'inf'"),
    (None, {"engine": {"terms": {"kernel_scale": {"value": 1e308}}}}, "engine.terms.kernel_scale.value"),  # "inf%"
    (None, {"layer_overhead_us_measured": 1e308}, "'layer_overhead_us_measured' must be a number in 0..1e9"),
    (None, {"calibration_verify_s": True}, "'calibration_verify_s' must be a number"),
])
def test_validate_reprice_refuses_a_tampered_folder(tmp_path, capsys, rows, summary, words):
    folder = _validation(tmp_path / "v", rows, summary)
    _refused(capsys, ["validate", "--reprice", str(folder)], words)


def test_validate_reprice_takes_a_sound_folder(tmp_path, capsys):
    assert run(["validate", "--reprice", str(_validation(tmp_path / "v"))]) == 0
    assert "repriced (cpu-local)" in capsys.readouterr().out


def test_run_refuses_random_weights_smaller_than_the_tokenizer(tmp_path, capsys):
    """`run --weights random:config.json` with vocab_size 10 ended in an IndexError traceback."""
    pytest.importorskip("torch")
    from speedplan.runtime.io.weights import smollm2_gguf_path

    if smollm2_gguf_path() is None:
        pytest.skip("needs the SmolLM2 GGUF (its tokenizer)")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 2,
                                  "intermediate_size": 16, "vocab_size": 10, "hidden_size": 8}))
    _refused(capsys, ["run", "--prompt", "hi", "--max-new-tokens", "1", "--no-compare", "--device", "cpu",
                      "--weights", f"random:{config}"], "beyond the model's vocabulary of 10")


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
@pytest.mark.parametrize("argv", [
    ["models", "/dev/null"],
    ["predict", "ops", "--hardware", "h100-sxm", "--in", "/dev/null", "--out", "{tmp}/p.csv"],
    ["run", "--prompts", "/dev/null"],
])
def test_a_device_is_not_read_as_an_input_file(tmp_path, capsys, argv):
    """/dev/zero given as config.json, ops.csv or prompts.jsonl was read without end (9-14 GB of
    memory before a timeout killed it); /dev/null, another device, stands in for it here."""
    _refused(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv], "/dev/null: is a device, not a file",
             tmp_path / "p.csv")


def test_predict_ops_names_the_line_after_blank_lines(tmp_path, capsys):
    """Rows were numbered as records: a bad cell after two blank lines was called row 2, on line 4."""
    ops = tmp_path / "ops.csv"
    ops.write_text("op,dtype,m,n,k\n\n\ngemm,fp32,1,2,x\n")
    _refused(capsys, ["predict", "ops", "--hardware", "h100-sxm", "--in", str(ops), "--out", str(tmp_path / "p.csv")],
             "row 4: column 'k' must be a number", tmp_path / "p.csv")


@pytest.mark.parametrize("options, words", [
    (["--temperature", "1e-300"], "--temperature must be a finite number, 0 (greedy) or at least 1e-06"),
    (["--temperature", "1", "--top-p", "1e-300"], "--top-p must be in [1e-06, 1], got 1e-300"),
])
def test_run_refuses_sampling_values_float32_cannot_hold(capsys, options, words):
    """logits / 1e-300 overflowed, and a top-p of 1e-300 was 0 in float32: both ended, after the
    model loaded, in torch's "probability tensor contains either inf, nan" traceback."""
    _refused(capsys, ["run", "--prompt", "hi", "--max-new-tokens", "1", "--no-compare", *options], words)


def test_profile_roofline_tells_a_cpu_preset_to_use_the_cpu_grid(tmp_path, capsys):
    """`profile roofline --hardware cpu-local` (default --device cuda) said "hardware cpu-local has
    no bf16 peak (not supported)", naming no option to change."""
    _refused(capsys, ["profile", "roofline", "--hardware", "cpu-local", "--grid", "tiny", "--out", str(tmp_path / "r")],
             "--hardware cpu-local is a CPU preset: add --device cpu", tmp_path / "r")


@pytest.mark.parametrize("argv", [
    ["profile", "roofline", "--grid", "tiny", "--hardware", "{folder}", "--out", "{tmp}/r"],
    ["bench", "--hardware-preset", "{folder}", "--out", "{tmp}/r"],
])
def test_preset_only_options_do_not_offer_a_profile_folder(tmp_path, capsys, argv):
    """A profile folder given to --hardware of `profile roofline` was refused with "(or a profile folder)"."""
    folder = tmp_path / "prof"
    folder.mkdir()
    _refused(capsys, [a.replace("{folder}", str(folder)).replace("{tmp}", str(tmp_path)) for a in argv],
             "(a preset name, not a folder or file)", tmp_path / "r")


def test_profile_derive_takes_a_shipped_profile_by_name_and_refuses_an_empty_one(tmp_path, capsys):
    """`profile check h200-sxm` took the shipped name; `profile derive h200-sxm` said "no such
    profile folder". An empty name was read as the current folder ("meta.json: missing")."""
    _refused(capsys, ["profile", "derive", "", "--hardware", "h100-sxm", "--out", str(tmp_path / "e")],
             "profile folder: empty name", tmp_path / "e")
    assert run(["profile", "derive", "h200-sxm", "--hardware", "h100-sxm", "--out", str(tmp_path / "d")]) == 0
    assert json.loads((tmp_path / "d" / "meta.json").read_text())["origin"] == "derived"


def test_predict_ops_names_the_row_whose_dtype_the_hardware_lacks(tmp_path, capsys):
    """`predict ops --hardware cpu-local` with a bf16 row said "hardware cpu-local has no bf16 peak
    (not supported)", naming neither the file nor the row."""
    ops = tmp_path / "ops.csv"
    ops.write_text("op,dtype,m,n,k\ngemm,fp32,1,2,3\ngemm,bf16,1,2,3\n")
    _refused(capsys, ["predict", "ops", "--hardware", "cpu-local", "--in", str(ops), "--out", str(tmp_path / "p.csv")],
             "row 3: column 'dtype' 'bf16': hardware cpu-local has no bf16 peak; it prices fp32", tmp_path / "p.csv")
