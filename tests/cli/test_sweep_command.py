"""The planner CLI: argument handling in-process (Typer's CliRunner), and the contract a user
meets by subprocess (exit code 2, one line, no traceback, no partial folder)."""

import json
import os

import pytest
from typer.testing import CliRunner

from speedplan.cli.app import app
from speedplan.errors import SpeedplanInputError

runner = CliRunner()


def _one_line_error(proc, word):
    assert proc.returncode == 2, proc.stderr + proc.stdout
    lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and word.lower() in lines[0].lower()


def test_sweep_default_writes_the_report_folder(tmp_path):
    out = tmp_path / "rep"
    proc = runner.invoke(app, ["sweep", "--out", str(out)])
    assert proc.exit_code == 0, proc.output
    for name in ("report.html", "pareto.png", "sweep.csv", "pareto.csv", "recommendations.json"):
        assert (out / name).exists(), name
    recs = json.loads((out / "recommendations.json").read_text())
    assert set(recs) == {"per_batch", "engines"}
    assert {"batch", "mechanism", "draft_len", "speedup"} <= set(recs["per_batch"][0])
    assert set(recs["engines"]) == {"vllm", "sglang", "trtllm"}
    assert "plan per engine" in proc.stdout
    assert "latency:" in proc.stdout  # the summary says where latencies came from
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".rep")]  # no temp folder left


@pytest.mark.parametrize("args, word", [
    (["--model", "gpt-17"], "unknown model"),
    (["--hardware", "tpu-v9"], "unknown hardware"),
    (["--batch", "0"], "--batch"),
    (["--batch", "1-x"], "--batch"),
    (["--draft-len", "-1"], "--draft-len"),
    (["--batch", "1_000"], "--batch '1_000': expected whole numbers"),  # int() reads it as 1000
    (["--draft-len", "0"], "no draft length of 1 or more"),  # said 'speculation loses' with nothing speculative priced
    (["--batch", "\u0663"], "expected whole numbers"),  # an Arabic-Indic 3, which int() takes
    (["--context", "1-2000", "--batch", "1-2048"], "speedplan sweeps at most 500,000"),  # was killed for memory at 10.9 GB
    (["--acceptance", "/no/such/trace.jsonl"], "acceptance"),
    (["--acceptance", "alpha=2"], "acceptance"),
    (["--mechanism", "warp"], "unknown mechanism"),
    (["--mechanism", "eagle3,ngram"], "one mechanism per --mechanism"),
    (["--tp", "0"], "--tp"),
    (["--tp", "3"], "do not split evenly"),
    (["--tp", "64"], "above"),
    (["--context", "-5"], "--context"),
    (["--plan-for", "vllm,tgi"], "unknown serving engine"),
    (["--batch-weights", "1=2,x"], "--batch-weights"),
    (["--batch-weights", "1=1,,2=1"], "an empty pair between commas"),  # was read as 1=1,2=1
    (["--batch-weights", "1=-1"], "--batch-weights"),
    (["--batch-weights", "1=inf"], "weight a finite number"),  # was a StopIteration traceback
    (["--mechanism", "ngram", "--acceptance", "eagle3:alpha=0.8"], "no swept mechanism uses it (swept: ngram)"),
    (["--acceptance", "mtp:alpha=0.8"], "mtp: the model has no MTP layers"),  # was silently unused
    (["--batch-weights", "3=1"], "batch 3 was not swept"),
    (["--batch-weights", "256=1"], "does not fit"),
    (["--model", "llama-3.1-405b", "--batch", "1,8"], "the weights alone do not fit: try a larger --tp"),
    (["--context", "10000000", "--batch", "1"], "above llama-3.1-8b's 131,072-token context"),
    (["--model", "llama-3.1-70b", "--tp", "2", "--context", "131072", "--batch", "1"],
     "fits in memory at no swept batch and context"),
    # found by an audit on 2026-12-03: each was accepted (or a traceback) before
    (["--model", ""], "model: empty name"),
    (["--hardware", ""], "hardware: empty name"),
    (["--mechanism", "draft-model:llama-3.1-70b"], "is not smaller than the target"),
    (["--mechanism", "draft-model:llama-3.2-1b,foo=1"], "its one option is tp"),
    (["--mechanism", "eagle3:config="], "config= needs the path"),
    (["--mechanism", "eagle-tree:topk=4", "--mechanism", "eagle-tree:topk=8"], "'eagle-tree' is listed twice"),
    (["--acceptance", "positions=0.9,,0.8"], "an empty item between commas"),
    (["--min-tokens-per-user", "inf"], "finite number"),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, args, word):
    out = tmp_path / "rep"
    proc = runner.invoke(app, ["sweep", "--out", str(out), *args])
    assert isinstance(proc.exception, SpeedplanInputError), proc.output
    assert word.lower() in str(proc.exception).lower() and "\n" not in str(proc.exception)
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, word", [(["--plan-for", ","], "name one or more"),
                                        (["--plan-for", "vllm,bogus"], "unknown serving engine"),
                                        (["--batch-weights", "3=1"], "batch 3 was not swept")])
def test_a_plan_that_fails_while_writing_leaves_no_folder_behind(tmp_path, args, word):
    """These fail once writing has begun (planning overlaps drawing the figures): the staging
    folder and the parent folders made for it go too (they left an empty reports/ behind)."""
    out = tmp_path / "new" / "rep"
    proc = runner.invoke(app, ["sweep", "--out", str(out), *args])
    assert isinstance(proc.exception, SpeedplanInputError) and word in str(proc.exception)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, word", [(["--tp", "3"], "query heads"), (["--batch", "1-x"], "--batch"),
                                        (["--tp", "abc"], "--tp"), (["--plan-for", "tgi"], "unknown serving engine"),
                                        (["--batch-weights", "1=x"], "--batch-weights")])
def test_bad_input_exits_2_with_one_line_and_no_report(cli, tmp_path, args, word):
    out = tmp_path / "rep"
    proc = cli("sweep", "--out", str(out), *args)
    _one_line_error(proc, word)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_malformed_config_json(cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"hidden_size": 4096, ')
    proc = cli("sweep", "--model", str(cfg), "--out", str(tmp_path / "rep"))
    _one_line_error(proc, "config.json")
    cfg.write_text('{"hidden_size": 4096}')
    proc = cli("sweep", "--model", str(cfg), "--out", str(tmp_path / "rep"))
    _one_line_error(proc, "num_attention_heads")
    assert not (tmp_path / "rep").exists()


def test_unreadable_acceptance_file(cli, tmp_path):
    f = tmp_path / "acc.json"
    f.write_text("not json at all")
    _one_line_error(cli("sweep", "--acceptance", str(f), "--out", str(tmp_path / "rep")), "malformed")


def test_predict_ops_contract(cli, tmp_path):
    ops = tmp_path / "ops.csv"
    ops.write_text("op,m,n,k,batch,q_len,kv_len,num_heads,num_kv_heads,head_dim,mask,dtype\n"
                   "gemm,8,4096,4096,,,,,,,,bf16\n"
                   "gemm,4096,4096,4096,,,,,,,,fp8\n"
                   "attention,,,,4,8,4096,32,8,128,causal,bf16\n"
                   "attention,,,,4,8,4096,32,8,128,tree,bf16\n")
    pred = tmp_path / "pred.csv"
    proc = cli("predict", "ops", "--hardware", "h100-sxm", "--in", str(ops), "--out", str(pred))
    assert proc.returncode == 0, proc.stderr
    import csv
    rows = list(csv.DictReader(pred.open()))
    assert [r["bound"] for r in rows] == ["memory", "compute", "memory", "memory"]
    # h100-sxm ships a measured profile (AIConfigurator's vLLM tables): every op answered from it, in range
    assert all(r["source"] == "profile" and r["out_of_range"] == "0" and float(r["latency_us"]) > 0 for r in rows)
    assert float(rows[3]["latency_us"]) > float(rows[2]["latency_us"])  # tree mask costs more
    # the terminal says what each source value stands for: whose profile, which roofline fit
    assert "source 'profile': measured (AIConfigurator 0.12, vLLM 0.24 kernels) h100-sxm" in proc.stdout
    assert "source 'roofline': the h100-sxm preset's peaks with roofline efficiencies fitted to" in proc.stdout
    ops.write_text("op,m,n,k,dtype\ngemm,8,-3,4096,bf16\n")
    _one_line_error(cli("predict", "ops", "--hardware", "h100-sxm", "--in", str(ops), "--out", str(pred)), "'n'")


def test_models_and_hardware_lists(cli):
    proc = cli("models")
    assert proc.returncode == 0 and "deepseek-v3" in proc.stdout and "smollm2-135m" in proc.stdout
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert "attention" in proc.stdout.splitlines()[0] and "experts_active/total" in proc.stdout.splitlines()[0]
    assert rows["llama-3.1-8b"].split()[-3:] == ["full", "bf16", "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"]
    assert "sparse top-2048, indexer on 61 of 61 layers" in rows["deepseek-v3.2"]
    assert "linear on 36 of 48 layers, 37.7 MiB/seq" in rows["qwen3-next-80b-a3b"]
    assert "128-token window on 18 of 36 layers" in rows["gpt-oss-120b"] and "4/128 mxfp4" in rows["gpt-oss-120b"]
    proc = cli("hardware")
    assert proc.returncode == 0 and all(h in proc.stdout for h in ("h100-sxm", "h200-sxm", "a100-80gb", "b200", "mi300x", "l40s"))
    lines = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    for name in ("h100-sxm", "h200-sxm", "b200"):
        assert "measured (AIConfigurator 0.12, vLLM 0.24 kernels)" in lines[name]
    assert "datasheet roofline" in lines["mi300x"] and "datasheet roofline" in lines["l40s"]
    assert "efficiencies fitted to h100-sxm, h200-sxm, b200" in lines["a100-80gb"]  # not the bare datasheet
    assert lines["a100-80gb"].split()[1:3] == ["312", "-"]  # no FP8 peak: "-", not 0
    proc = cli("engines")
    engines = {l.split()[0]: l for l in proc.stdout.splitlines()[1:]}
    assert "20 rows at B = 1–64 (engine_measurements.csv" in engines["sglang"]
    # each engine's memory rule in words
    assert "the device less SGLang 0.5.23's reserve; sliding-window layers at 0.8 of the tokens" in engines["sglang"]
    assert "0.9 of the memory free after the weights" in engines["trtllm"] and "0.9 of the device" in engines["vllm"]


def test_planner_cli_does_not_import_torch():
    import subprocess, sys
    code = "import sys, speedplan.cli; print(sorted(m for m in ('torch','cupy','gguf','transformers') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


def test_model_that_fits_nowhere_names_its_memory(cli, tmp_path):
    """A TP the model cannot run in memory is bad input: the line says what one GPU would need."""
    proc = cli("sweep", "--model", "llama-3.1-405b", "--tp", "8", "--batch", "1,8", "--out", str(tmp_path / "rep"))
    _one_line_error(proc, "llama-3.1-405b on h100-sxm at TP 8 fits in memory at no swept batch")
    # an H100 reports 81,559 MiB = 85.52 GB; 0.9 of it is 76.97 GB
    assert "needs 101.7 GB per GPU (weights 101.5 GB) and 77.0 GB are usable (90% of 85.5 GB, engine profile vllm's memory rule)" in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [
    ["sweep", "--batch", "1", "--draft-len", "0-1", "--out", "{file}/rep"],
    ["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", "{csv}", "--out", "{file}/x.json"],
    ["predict", "ops", "--hardware", "h100-sxm", "--in", "{csv}", "--out", "{file}/pred.csv"],
    ["profile", "roofline", "--hardware", "h100-sxm", "--out", "{file}/prof"],
    ["bench", "--device", "cpu", "--grid", "quick", "--out", "{file}/prof"],
    ["validate", "--quick", "--out", "{file}/val"],
])
def test_an_output_path_under_a_file_is_refused_first(tmp_path, command):
    """--out below a file: one line before any work (validate and bench would run for minutes)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    csv = tmp_path / "m.csv"
    csv.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,5\n")
    args = [a.format(file=blocker, csv=csv) for a in command]
    proc = runner.invoke(app, args)
    assert isinstance(proc.exception, SpeedplanInputError), proc.output
    assert f"{blocker} is a file, not a folder" in str(proc.exception)


def test_a_full_disk_is_one_line(tmp_path, monkeypatch, capsys):
    """An OSError of the environment (disk full, read-only, permission) while writing: exit 2, one
    line naming the file; other OSErrors stay tracebacks (bugs)."""
    import errno

    from speedplan.cli import app as app_module

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "rep" / "sweep.csv"))

    monkeypatch.setattr("speedplan.report.folder.write_outputs", full)
    assert app_module.run(["sweep", "--batch", "1", "--draft-len", "0-1", "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err
    assert err == f"speedplan: error: {tmp_path / 'rep' / 'sweep.csv'}: No space left on device\n"
    monkeypatch.setattr("speedplan.report.folder.write_outputs",
                        lambda *a, **k: (_ for _ in ()).throw(OSError(errno.EBADF, "Bad file descriptor")))
    with pytest.raises(OSError):
        app_module.run(["sweep", "--batch", "1", "--draft-len", "0-1", "--out", str(tmp_path / "rep")])


def test_a_big_sweep_says_it_is_writing(tmp_path, monkeypatch):
    """Past SAY_WRITING_FROM rows the report takes seconds to write: one line on stderr says so."""
    from speedplan.cli import sweep as sweep_cmd

    monkeypatch.setattr(sweep_cmd, "SAY_WRITING_FROM", 10)
    proc = CliRunner().invoke(app, ["sweep", "--batch", "1,2", "--draft-len", "0-1", "--out", str(tmp_path / "rep")])
    assert proc.exit_code == 0, proc.output
    assert "configurations priced; writing" in proc.stderr


def test_models_reads_a_users_config_as_the_sweep_would(tmp_path):
    """`speedplan models CONFIG`: how speedplan reads a config before sweeping it (its sliding
    window and dtype included); a config it cannot price is the sweep's one-line error."""
    cfg = tmp_path / "gemma" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps({"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
                               "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
                               "num_hidden_layers": 42, "vocab_size": 256000, "tie_word_embeddings": True,
                               "sliding_window": 4096, "torch_dtype": "bfloat16"}))
    proc = runner.invoke(app, ["models", str(cfg.parent)])
    assert proc.exit_code == 0, proc.output
    row = proc.stdout.splitlines()[1].split()
    assert row[:3] == ["gemma", "9.241", "9.241"] and "bf16" in row and "4096-token window on 21 of 42 layers" in proc.stdout
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "quantization_config": {"quant_method": "mxfp4"}}))
    proc = runner.invoke(app, ["models", str(cfg)])
    assert isinstance(proc.exception, SpeedplanInputError) and "quantization 'mxfp4' is not modelled" in str(proc.exception)


def test_an_unwritable_output_folder_is_refused_first(tmp_path, monkeypatch):
    """Where the nearest existing folder of --out is not writable (os.access says so; this test
    machine runs as root, which may write anywhere): one line naming that folder."""
    import os

    from speedplan.cli.options import check_output

    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(SpeedplanInputError, match=f"cannot write in {tmp_path} \\(permission denied\\)"):
        check_output(tmp_path / "new" / "rep")
    assert not (tmp_path / "new").exists()  # nothing made on the way


def test_a_folder_that_is_not_a_report_is_never_replaced(tmp_path, monkeypatch):
    """--out naming a user's folder (or the current one) is refused in one line and its files
    stay (until 2026-12-03 `--out .` deleted the current folder's files and `--out DIR` replaced
    any folder); a previous report is replaced whole, with plain folder permissions."""
    import os
    import stat

    from speedplan.cli.app import run

    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "notes.txt").write_text("keep me")
    (mine / "sub" / "more.txt").write_text("and me")
    monkeypatch.chdir(mine / "sub")
    for out in (str(mine), ".", "..", ""):
        with pytest.raises(SpeedplanInputError, match="not a speedplan report|current folder"):
            runner.invoke(app, ["sweep", "--batch", "1", "--draft-len", "0-1", "--out", out], catch_exceptions=False)
    assert run(["profile", "roofline", "--hardware", "h100-sxm", "--out", str(mine)]) == 2  # profiles: the same rule
    assert (mine / "notes.txt").read_text() == "keep me" and (mine / "sub" / "more.txt").read_text() == "and me"
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt", "sub"]

    rep = tmp_path / "rep"
    assert run(["sweep", "--batch", "1", "--draft-len", "0-1", "--out", str(rep)]) == 0
    # a user's file saved into the report, even of a kind speedplan writes, keeps it from being replaced
    (rep / "my_tuned_vllm_serve.sh").write_text("mine")
    assert run(["sweep", "--batch", "1,2", "--draft-len", "0-1", "--out", str(rep)]) == 2
    assert (rep / "my_tuned_vllm_serve.sh").read_text() == "mine"
    (rep / "my_tuned_vllm_serve.sh").unlink()
    (rep / "old-figure.png").write_text("a figure an older run wrote, and listed")
    with (rep / ".speedplan-files").open("a") as f:
        f.write("old-figure.png\n")
    assert run(["sweep", "--batch", "1,2", "--draft-len", "0-1", "--out", str(rep)]) == 0
    assert not (rep / "old-figure.png").exists() and "2" in (rep / "schedule.csv").read_text()
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(rep.stat().st_mode) == 0o777 & ~mask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "rep"]  # nothing left beside them


def test_a_path_that_cannot_be_written_is_one_line(tmp_path, capsys):
    """A folder inside a file, or a file system that takes no files: exit 2, one line."""
    from speedplan.cli.app import run

    (tmp_path / "f").write_text("")
    for args in (["sweep", "--batch", "1", "--out", str(tmp_path / "f" / "rep")],
                 ["profile", "roofline", "--hardware", "h100-sxm", "--out", str(tmp_path / "f" / "prof")]):
        assert run(args) == 2
        err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
        assert len(err) == 1 and "is a file" in err[0], err
    if os.path.isdir("/proc/self"):  # Linux: /proc takes no new files, whoever runs the test
        assert run(["sweep", "--batch", "1", "--out", "/proc/speedplan-report"]) == 2
        assert "cannot write" in capsys.readouterr().err


def test_a_report_or_profile_holding_a_users_files_is_not_replaced(tmp_path, monkeypatch):
    """A meta.json is not enough to make a folder ours: a folder with a user's meta.json and a
    thesis, or a previous report a user added notes to, is refused whole; a link to a previous
    report replaces the report it points to and stays a link."""
    from speedplan.cli.app import run

    monkeypatch.chdir(tmp_path)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "meta.json").write_text("{}")
    (proj / "thesis.tex").write_text("chapter 1")
    assert run(["profile", "roofline", "--hardware", "h100-sxm", "--grid", "tiny", "--out", str(proj)]) == 2
    assert (proj / "thesis.tex").read_text() == "chapter 1"
    rep = tmp_path / "rep"
    assert run(["sweep", "--batch", "1", "--draft-len", "0-1", "--out", str(rep)]) == 0
    (rep / "notes.txt").write_text("mine")
    assert run(["sweep", "--batch", "1", "--draft-len", "0-1", "--out", str(rep)]) == 2
    assert (rep / "notes.txt").read_text() == "mine"
    (rep / "notes.txt").unlink()
    link = tmp_path / "latest"
    link.symlink_to(rep)
    assert run(["sweep", "--batch", "1,2", "--draft-len", "0-1", "--out", str(link)]) == 0
    assert link.is_symlink() and "2" in (rep / "schedule.csv").read_text().split("\n", 2)[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "proj", "rep"]  # nothing hidden left behind


def test_an_empty_item_in_a_list_option_is_refused(tmp_path, capsys):
    """`--plan-for vllm,,sglang` planned two engines and `calibrate --fit ''` / `--name ''` fell
    back to their defaults in silence, where `--batch 1,,2` is refused (an audit of 2026-12-04)."""
    from speedplan.cli.app import run

    assert run(["sweep", "--plan-for", "vllm,,sglang", "--out", str(tmp_path / "r")]) == 2
    assert "--plan-for 'vllm,,sglang': an empty name" in capsys.readouterr().err  # the option, not the library's name
    for option in ("--fit", "--name"):
        assert run(["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements",
                    str(tmp_path / "x.csv"), "--out", str(tmp_path / "c.json"), option, ""]) == 2
        assert f"{option} is empty" in capsys.readouterr().err
    assert not (tmp_path / "r").exists() and not (tmp_path / "c.json").exists()


def test_meta_command_names_a_relative_model_folder_by_its_absolute_path(tmp_path, monkeypatch):
    """meta.json's command reproduces the sweep from any folder: `--model ./cfg` is written as the
    folder's absolute path (an output consistency check of 2026-12-05 found it kept './cfg');
    preset names stay as given."""
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "intermediate_size": 8192,
        "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 8, "vocab_size": 32000,
        "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "rep"
    proc = runner.invoke(app, ["sweep", "--model", "./cfg", "--hardware", "h100-sxm", "--batch", "1,8",
                               "--mechanism", "ngram", "--out", str(out)])
    assert proc.exit_code == 0, proc.output
    command = json.loads((out / "meta.json").read_text())["command"]
    assert f"--model {cfg.resolve()}" in command and "./cfg" not in command
    assert "--mechanism ngram" in command
