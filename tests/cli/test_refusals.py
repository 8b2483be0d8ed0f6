"""Input the commands other than sweep and calibrate refuse in one line (exit 2) before any
work, each found by an audit on 2026-12-03 where it was accepted, overwrote a file or ended in
a traceback. Each call here is quick: the refusals come before any model is loaded or timed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from speedplan.cli.app import run

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "speedplan" / "data" / "profiles" / "h200-sxm"


def _refused(args: list[str], capsys, word: str) -> None:
    assert run(args) == 2
    err = capsys.readouterr().err
    assert word in err and err.count("\n") == 1, err


def test_a_profile_is_not_derived_into_its_source_and_keeps_its_licence(tmp_path, capsys):
    src = tmp_path / "h200"
    shutil.copytree(H200, src)
    _refused(["profile", "derive", str(src), "--hardware", "h100-sxm", "--out", str(src)], capsys,
             "is one of the command's inputs")
    assert (src / "moe.csv").exists() and (src / "NOTICE.md").exists()  # untouched
    out = tmp_path / "h100"
    assert run(["profile", "derive", str(src), "--hardware", "h100-sxm", "--out", str(out)]) == 0
    assert (out / "LICENSE.aiconfigurator-core.txt").read_text() == (src / "LICENSE.aiconfigurator-core.txt").read_text()
    assert "Changed by `speedplan profile derive`" in (out / "NOTICE.md").read_text()  # Apache-2.0 §4 (b)


def test_a_profile_folder_with_a_file_of_ones_own_is_not_replaced(tmp_path, capsys):
    """A profile folder written before `.speedplan-files` existed: the names speedplan writes
    there are its own, anything else (notes.txt) is the user's and keeps the folder."""
    mine = tmp_path / "cpu"
    shutil.copytree(ROOT / "speedplan" / "data" / "profiles" / "cpu-local", mine)
    (mine / "notes.txt").write_text("keep me")
    _refused(["profile", "roofline", "--hardware", "h100-sxm", "--out", str(mine)], capsys, "it holds notes.txt")
    assert (mine / "notes.txt").read_text() == "keep me" and (mine / "gemm.csv").exists()


def test_bench_refuses_before_measuring(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    for out, word in ((".", "is the current folder"), ("mine", "is not a profile folder")):
        _refused(["bench", "--device", "cpu", "--grid", "tiny", "--out", out], capsys, word)
    _refused(["bench", "--device", "cpu", "--grid", "tiny", "--dtype", "fp8", "--out", "b"], capsys, "no fp8 matmul")
    _refused(["bench", "--device", "cpu", "--grid", "tiny", "--min-time-ms", "nan", "--out", "b"], capsys,
             "--min-time-ms must be > 0")
    _refused(["profile", "roofline", "--hardware", "h200-sxm", "--grid", "model:llama-3.1-8b@3", "--out", "r"],
             capsys, "do not split evenly over 3 GPUs")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"] and (tmp_path / "mine" / "notes.txt").exists()


def test_run_refuses_bad_prompts_and_a_trace_over_its_prompts(tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hi"}\n')
    _refused(["run", "--prompts", str(prompts), "--trace", str(prompts)], capsys, "is one of the input files")
    assert prompts.read_text() == '{"prompt": "hi"}\n'
    _refused(["run", "--raw", "--prompt", ""], capsys, "an empty prompt")
    _refused(["run", "--prompt", "hi", "--max-new-tokens", "1000000000"], capsys, "--max-new-tokens must be in 1..")
    _refused(["run", "--prompt", "hi", "--temperature", "inf"], capsys, "--temperature must be a finite number")
    # a tree deeper than its nodes: 50 head forwards a step for 16 nodes (it ran, at a tenth of plain decoding's speed)
    _refused(["run", "--prompt", "hi", "--mechanism", "eagle-tree", "--tree-nodes", "8", "--tree-depth", "12"], capsys,
             "--tree-depth 12 is more than --tree-nodes 8")
    _refused(["run", "--prompt", "hi", "--mechanism", "eagle-tree", "--tree-nodes", "2", "--tree-depth", "3"], capsys,
             "--tree-depth 3 is more than --tree-nodes 2")  # without --tree-depth its default fits: min(4, nodes)
    prompts.write_text(json.dumps({"messages": [{"role": "user"}]}) + "\n")
    _refused(["run", "--prompts", str(prompts)], capsys, "each message needs a \"role\" and a \"content\"")


@pytest.mark.parametrize("text, word", [
    ("op,m,n,k,dtype\ngemm,inf,4096,4096,bf16\n", "row 2: column 'm' must be a positive integer below 1e9"),
    ("op,m,m,n,k,dtype\ngemm,16,4096,4096,4096,bf16\n", "column 'm' appears twice"),
    ("op,m,n,k,dtype,latency_us\ngemm,16,4096,4096,bf16,5\n", "column 'latency_us' is one predict writes"),
    ("op,m,n,k,dtype\ngemm,16,4096,4096,bf16,extra\n", "row 2: more cells than the header"),
])
def test_predict_ops_refuses_what_it_would_misread(tmp_path, capsys, text, word):
    ops = tmp_path / "ops.csv"
    ops.write_text(text)
    _refused(["predict", "ops", "--hardware", "h100-sxm", "--in", str(ops), "--out", str(tmp_path / "pred.csv")],
             capsys, word)
    assert not (tmp_path / "pred.csv").exists()


def test_predict_ops_reads_excels_byte_order_mark(tmp_path):
    ops = tmp_path / "ops.csv"
    ops.write_text("\ufeffop,m,n,k,dtype\ngemm,16,4096,4096,bf16\n", encoding="utf-8")
    assert run(["predict", "ops", "--hardware", "h100-sxm", "--in", str(ops), "--out", str(tmp_path / "p.csv")]) == 0
    assert (tmp_path / "p.csv").read_text().startswith("op,m,n,k,dtype,latency_us")


def test_reprice_refuses_an_empty_run_and_options_it_does_not_use(tmp_path, capsys):
    stored = ROOT / "reports" / "validation-cpu"
    _refused(["validate", "--reprice", str(stored), "--out", str(tmp_path / "x")], capsys, "--reprice runs nothing")
    empty = tmp_path / "run"
    empty.mkdir()
    (empty / "validation.csv").write_text((stored / "validation.csv").read_text().splitlines()[0] + "\n")
    shutil.copy(stored / "summary.json", empty / "summary.json")
    _refused(["validate", "--reprice", str(empty)], capsys, "validation.csv: no rows")
    assert run(["validate", "--reprice", str(stored)]) == 0  # priced with the run's own profile by default
    assert "repriced (cpu-local-xeon)" in capsys.readouterr().out


def test_a_partial_bench_folder_is_resumable_with_every_table_bench_writes(tmp_path):
    from speedplan.outputs import PROFILE, check_replaceable

    part = tmp_path / "part"
    part.mkdir()
    (part / "meta.json").write_text(json.dumps({"origin": "measured", "complete": False}))
    for name in ("gemm.csv", "gemm_cupy.csv", "floors.csv", "meta.json.tmp"):  # bench --cupy writes gemm_cupy.csv
        (part / name).write_text("x\n")
    check_replaceable(part, PROFILE)  # no error: bench resumes it


def test_a_path_the_file_system_cannot_take_is_one_line(tmp_path, capsys, monkeypatch):
    """A name over 255 bytes and a loop of symbolic links ended in tracebacks (audit of 2026-12-04)."""
    monkeypatch.chdir(tmp_path)
    _refused(["sweep", "--batch", "1", "--out", str(tmp_path / ("x" * 300))], capsys, "File name too long")
    (tmp_path / "loopa").symlink_to(tmp_path / "loopb")
    (tmp_path / "loopb").symlink_to(tmp_path / "loopa")
    _refused(["sweep", "--batch", "1", "--out", str(tmp_path / "loopa")], capsys, "a loop of symbolic links")
    _refused(["run", "--prompt", "hi", "--trace", str(tmp_path / "loopa")], capsys, "a loop of symbolic links")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loopa", "loopb"]  # nothing half-written


def test_a_profile_command_never_replaces_another_kind_of_profile(tmp_path, capsys):
    """`profile roofline`, `derive` and `import-aic` each replaced a measured profile with their own
    (an audit of 2026-12-04: ~1,060 measured CPU points became datasheet values); the same
    command may still replace its own earlier output."""
    measured = tmp_path / "measured"
    shutil.copytree(ROOT / "speedplan" / "data" / "profiles" / "cpu-local", measured)
    before = sorted(p.name for p in measured.iterdir())
    _refused(["profile", "roofline", "--hardware", "h200-sxm", "--out", str(measured)], capsys,
             "holds a measured profile of `speedplan bench`, which `speedplan profile roofline` would replace")
    _refused(["profile", "derive", str(H200), "--hardware", "h100-sxm", "--out", str(measured)], capsys,
             "which `speedplan profile derive` would replace")
    _refused(["profile", "import-aic", "--system", "h100_sxm", "--out", str(measured)], capsys,
             "which `speedplan profile import-aic` would replace")
    assert sorted(p.name for p in measured.iterdir()) == before
    imported = tmp_path / "imported"
    shutil.copytree(H200, imported)
    _refused(["profile", "roofline", "--hardware", "h200-sxm", "--out", str(imported)], capsys,
             "holds a profile imported from AIConfigurator")
    roof = tmp_path / "roof"
    assert run(["profile", "roofline", "--hardware", "h200-sxm", "--grid", "tiny", "--out", str(roof)]) == 0
    assert run(["profile", "roofline", "--hardware", "h100-sxm", "--grid", "tiny", "--out", str(roof)]) == 0
    _refused(["bench", "--device", "cpu", "--hardware-preset", "h100-sxm", "--out", str(tmp_path / "b")], capsys,
             "--hardware-preset h100-sxm: describes a GPU")


def test_a_single_file_output_replaces_only_what_speedplan_wrote(tmp_path, capsys, monkeypatch):
    """calibrate --out, predict ops --out and run --trace overwrote any file, a shell script too,
    and calibrate --engine base.json --out base.json its own base (audit of 2026-12-04)."""
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "r.sh"
    script.write_text("#!/bin/sh\necho mine\n")
    runs = tmp_path / "runs.csv"
    runs.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\nnone,1,0,1024,7.0,\n"
                    "eagle3,1,3,1024,4.0,2.8\n")
    base = ["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", str(runs)]
    _refused([*base, "--engine", "vllm", "--out", str(script)], capsys, "exists and is not an engine profile")
    ops = tmp_path / "ops.csv"
    ops.write_text("op,m,n,k,batch,q_len,kv_len,num_heads,num_kv_heads,head_dim,mask,dtype\ngemm,1,64,64,,,,,,,,bf16\n")
    _refused(["predict", "ops", "--hardware", "h100-sxm", "--in", str(ops), "--out", str(script)], capsys,
             "exists and is not a predictions CSV")
    _refused(["run", "--weights", "random:smollm2-135m", "--prompt", "hi", "--trace", str(script)], capsys,
             "exists and is not a runtime trace")
    assert script.read_text() == "#!/bin/sh\necho mine\n"
    mine = tmp_path / "base.json"
    shutil.copy(ROOT / "speedplan" / "specs" / "presets" / "engines" / "vllm.json", mine)
    _refused([*base, "--engine", str(mine), "--out", str(mine)], capsys, "is one of the input files")
    out = tmp_path / "mine.json"
    assert run([*base, "--engine", str(mine), "--out", str(out)]) == 0
    assert run([*base, "--engine", str(mine), "--out", str(out)]) == 0  # its own output: replaced
    capsys.readouterr()


def test_sweep_options_that_would_be_ignored_or_are_empty_are_refused(tmp_path, capsys):
    """--plan-for "" and --batch-weights "" meant the default, --tree-nodes beside no tree was
    dropped, and the same measurements file twice counted its rows twice (audit of 2026-12-04)."""
    out = ["--out", str(tmp_path / "r")]
    _refused(["sweep", "--plan-for", "", *out], capsys, "--plan-for is empty")
    _refused(["sweep", "--batch-weights", " ", *out], capsys, "--batch-weights is empty")
    _refused(["sweep", "--mechanism", "eagle3", "--tree-nodes", "8", *out], capsys,
             "--tree-nodes 8: no swept mechanism is a tree")
    runs = tmp_path / "runs.csv"
    runs.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\nnone,1,0,1024,7.0,\n")
    _refused(["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", str(runs),
              str(tmp_path / "." / "runs.csv"), "--out", str(tmp_path / "e.json")], capsys, "is given twice")
    assert not (tmp_path / "r").exists() and not (tmp_path / "e.json").exists()


def test_run_names_the_option_and_the_memory_random_weights_need(capsys):
    _refused(["run", "--prompt", "x", "--ngram-max", "0"], capsys, "--ngram-max must be >= 1, got 0")
    _refused(["run", "--prompt", "x", "--tree-topk", "0", "--mechanism", "eagle-tree"], capsys,
             "--tree-topk must be in 1..64, got 0")
    # a top-k above the drafter's vocabulary: torch's "selected index k out of range" traceback (stop 52)
    _refused(["run", "--prompt", "x", "--tree-topk", "9000", "--mechanism", "eagle-tree"], capsys,
             "--tree-topk must be in 1..64, got 9000")
    _refused(["run", "--prompt", "x", "--weights", "random:llama-3.1-405b"], capsys, "405.9B parameters need")


def test_version_and_shipped_profiles_by_name(capsys):
    assert run(["--version"]) == 0
    assert capsys.readouterr().out.startswith("speedplan ")
    assert run(["profile", "check", "cpu-local", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["points"] > 100


def test_the_hardware_list_names_every_shipped_profile(capsys):
    """docs/profiles.md's table, which names `speedplan hardware` as its source, lists
    cpu-local-xeon; the command did not (an audit of 2026-12-04)."""
    assert run(["hardware"]) == 0
    out = capsys.readouterr().out
    assert "cpu-local-xeon" in out
    # and says who measured each bench profile (it said "measured profile")
    assert "measured (speedplan bench, AMD EPYC, 2026-12-02)" in out and "measured (speedplan bench, Intel" in out


def test_validate_refuses_a_folder_of_ones_own_before_the_run(tmp_path, capsys, monkeypatch):
    """validate wrote report.html, summary.json and the rest straight into --out at the end of
    its run, whatever the folder held (an audit of 2026-12-04): `--out .` or a sweep report's
    folder would have been written over. Now refused in one line before anything runs, and a
    previous validation folder (the shipped reports/validation-cpu) is still replaceable."""
    from speedplan.outputs import VALIDATION, check_replaceable

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    _refused(["validate", "--quick", "--out", str(mine)], capsys, "is not a validation folder")
    report = tmp_path / "report"
    assert run(["sweep", "--batch", "1", "--draft-len", "0-1", "--mechanism", "ngram", "--out", str(report)]) == 0
    capsys.readouterr()
    _refused(["validate", "--quick", "--out", str(report)], capsys, "is not a validation folder")
    monkeypatch.chdir(mine)
    _refused(["validate", "--quick", "--out", "."], capsys, "is the current folder")
    assert (mine / "notes.txt").read_text() == "mine" and (report / "report.html").exists()
    previous = tmp_path / "previous"
    shutil.copytree(ROOT / "reports" / "validation-cpu", previous)
    check_replaceable(previous, VALIDATION)  # no error: a folder validate wrote


def test_a_previous_folder_whose_meta_json_an_editor_gave_a_bom_is_still_ours(tmp_path, capsys):
    """A report folder whose meta.json was saved with a byte-order mark was refused as 'its
    meta.json is not one speedplan wrote' (safe, but wrong): it is read as UTF-8 with a BOM."""
    from speedplan.outputs import REPORT, check_replaceable

    report = tmp_path / "r"
    assert run(["sweep", "--batch", "1", "--draft-len", "0-1", "--mechanism", "ngram", "--out", str(report)]) == 0
    meta = report / "meta.json"
    meta.write_bytes(b"\xef\xbb\xbf" + meta.read_bytes())
    check_replaceable(report, REPORT)  # no error
