"""Findings of stop 61's reviews, each pinned: launch files of a plan over several contexts show every context's
rows; the vLLM async note says which way D moves; calibrate keeps SGLang's runs out of a vLLM profile and says
which drafter it took for bench_speculative.py rows."""

from __future__ import annotations

import json

from speedplan.cli.app import run


def test_a_launch_file_over_several_contexts_shows_each_contexts_rows(tmp_path):
    """--context 2000,32768: the vLLM plan (one D per batch size for both) is slower than plain decoding at 32768,
    which the terminal said and the launch file's table, at 2000 only, hid."""
    assert run(["sweep", "--context", "2000,32768", "--batch", "1,4", "--plan-for", "vllm",
                "--out", str(tmp_path / "o")]) == 0
    text = (tmp_path / "o" / "vllm_serve.sh").read_text()
    table = text[text.index("# Planned for this engine"):text.index("# Per-batch draft length")]
    assert "the table is at context 2000, then at each other" in table
    at = table.index("#   at context 32768:")
    assert table.count("(slower than plain decoding)") == table[at:].count("(slower than plain decoding)") >= 1
    assert "priced this plan at context 2000, 32768)" in text


def test_the_vllm_async_note_says_the_best_d_may_be_shorter(tmp_path):
    """vllm-async plans shorter drafts at large batch sizes than vllm (context 1024: D 8 8 8 8 7 7 4 3 2 against
    8 8 8 8 7 7 5 4 4); the note had said the planned D may fall earlier than it needs to."""
    assert run(["sweep", "--context", "1024", "--plan-for", "vllm", "--out", str(tmp_path / "o")]) == 0
    text = (tmp_path / "o" / "vllm_serve.sh").read_text()
    assert "the best D there may be shorter" in text and "fall or switch off earlier" not in text


def test_sglang_runs_are_not_fitted_into_a_vllm_profile(tmp_path, capsys):
    """bench_speculative.py launches SGLang servers; calibrated from the default --engine vllm, its runs became a
    profile that said vLLM, with vLLM's launch files (a review, stop 61). The drafter, which the file does not
    record, is named in a note."""
    f = tmp_path / "spec.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"batch_size": 1, "steps": 0, "topk": 0, "num_draft_tokens": 0, "step_time": 0.0080},
        {"batch_size": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.8, "step_time": 0.0110},
        {"batch_size": 8, "steps": 0, "topk": 0, "num_draft_tokens": 0, "step_time": 0.0095},
        {"batch_size": 8, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.8, "step_time": 0.0140}]) + "\n")
    base = ["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", str(f)]
    assert run(base + ["--out", str(tmp_path / "v.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "spec.jsonl:1: a run of sglang" in err[0] and "--engine sglang" in err[0]
    assert not (tmp_path / "v.json").exists()
    assert run(base + ["--engine", "sglang", "--out", str(tmp_path / "s.json")]) == 0
    assert "the file does not record which drafter ran: priced as eagle3" in capsys.readouterr().out


def test_the_sweep_command_calibrate_prints_keeps_every_measured_draft_length():
    """Runs of eagle3 at D = 3 (AL 3.0) and D = 5 (AL 3.6): the command passed al=3@3 alone, whose i.i.d. rate
    priced D = 5 at AL 3.8, above what was measured (a review, stop 61)."""
    from speedplan.engine.run_calibration import calibrate_rows, sweep_arguments
    from speedplan.plan.acceptance_sources import parse_acceptance

    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1024, "tpot_ms": t} for b, t in ((1, 7.9), (8, 8.6))]
    rows += [{"mechanism": "eagle3", "batch": b, "draft_len": d, "context": 1024, "tpot_ms": t, "acceptance_length": al}
             for b, d, t, al in ((1, 3, 3.1, 3.0), (8, 3, 3.6, 3.0), (1, 5, 2.8, 3.6), (8, 5, 3.4, 3.6))]
    args = sweep_arguments(calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows), "llama-3.1-8b")
    given = args[args.index("--acceptance") + 1]
    assert given.startswith("eagle3:positions=")
    acceptance = parse_acceptance(given.split(":", 1)[1])
    assert abs(acceptance.chain_al(3) - 3.0) < 0.03 and abs(acceptance.chain_al(5) - 3.6) < 0.03


def test_a_calibration_whose_report_cannot_be_printed_leaves_no_profile(tmp_path):
    """stdout on a full disk: exit 2 with 'writing output', and the profile it had already written stayed."""
    import os
    import subprocess
    import sys

    import pytest

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    runs = tmp_path / "runs.csv"
    runs.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\n"
                    "none,1,0,1024,7.9,\nnone,8,0,1024,8.6,\neagle3,1,3,1024,3.1,3.0\neagle3,8,3,1024,3.6,3.0\n")
    out = tmp_path / "p.json"
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "speedplan.entry", "calibrate", "--model", "llama-3.1-8b",
                               "--hardware", "h100-sxm", "--measurements", str(runs), "--out", str(out)],
                              stdout=full, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 2 and "No space left on device" in proc.stderr and not out.exists()


def test_rows_of_another_board_of_the_same_gpu_are_refused(tmp_path, capsys):
    """gpu 'H100 PCIe' was accepted for --hardware h100-sxm (SXM5): 2.0 against 3.35 TB/s, absorbed by the host terms
    (a review, stop 61). An H100 of no stated board, or an SXM5, is still taken."""
    head = "mechanism,batch,draft_len,context,tpot_ms,acceptance_length,gpu\n"
    body = "none,1,0,1024,7.9,,{g}\nnone,8,0,1024,8.6,,{g}\neagle3,1,3,1024,3.1,3.0,{g}\neagle3,8,3,1024,3.6,3.0,{g}\n"
    argv = ["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements"]
    for gpu, code in (("H100 PCIe", 2), ("NVIDIA H100 80GB HBM3", 0), ("H100 SXM5", 0)):
        runs = tmp_path / f"{gpu.replace(' ', '_')}.csv"
        runs.write_text(head + body.format(g=gpu))
        assert run(argv + [str(runs), "--out", str(tmp_path / f"{runs.stem}.json")]) == code, gpu
    err = capsys.readouterr().err
    assert "field 'gpu' 'H100 PCIe' names a PCIe board, and --hardware h100-sxm is SXM" in err


def test_tensorrt_llm_runs_ngram_steps_without_overlap():
    """TensorRT-LLM disables its overlap scheduler for NGram (support_overlap_scheduler() excludes it); its profile's
    overlap_spec 1 had hidden an n-gram step's host work as for EAGLE-3 (a review, stop 61). host_draft_overlap 0
    exposes it there; EAGLE-3 steps, and n-gram steps on vllm-async, keep theirs hidden."""
    from speedplan.plan.sweep import sweep

    def host_exposed(engine, mech):
        f = sweep(mechanisms=[mech], batches=[1, 64], draft_lens=[0, 3], contexts=[1024], engine=engine).frame
        rows = f[f["mechanism"] == mech]
        return rows["t_host_exposed_s"].to_numpy(), rows["t_host_s"].to_numpy()

    exposed, host = host_exposed("trtllm", "ngram")
    assert (host > 0).all() and (exposed == host).all()
    for engine, mech in (("trtllm", "eagle3"), ("vllm-async", "ngram")):
        exposed, host = host_exposed(engine, mech)
        assert (exposed < host).all(), (engine, mech)


def test_rows_past_the_drafters_positions_are_marked_and_kept_out_of_the_al_sensitivity():
    """The AL ±10% table gave the heads past their 2,048 positions three equal speedups and a wandering 'fastest D':
    priced at AL 1, their acceptance moves nothing (a review, stop 61). sweep.csv marks those rows; the figures'
    caption says so."""
    from speedplan.plan.pick import sensitivity
    from speedplan.plan.sweep import sweep
    from speedplan.report.summary import short_provenance

    r = sweep(mechanisms=["eagle3", "ngram"], batches=[1, 8], draft_lens=[0, 2, 4], contexts=[2000, 4096])
    f = r.frame
    past = f[f["past_positions"]]
    assert set(past["mechanism"]) == {"eagle3"} and set(past["context"]) == {4096}
    assert (past["acceptance_length"] == 1).all() and not f[f["mechanism"] == "none"]["past_positions"].any()
    table = sensitivity(f, ["eagle3", "ngram"])
    assert set(zip(table["mechanism"], table["context"])) == {("eagle3", 2000), ("ngram", 2000), ("ngram", 4096)}
    caption = short_provenance(r)
    assert "eagle3: published" in caption and "(AL 1 past its drafter's positions)" in caption
    assert "ngram: published" in caption and caption.count("AL 1 past") == 1


def test_plan_lines_weigh_and_place_their_losses(tmp_path, capsys):
    """--batch-weights 1=4,8=2: the worst loss was B = 64's, which counts for nothing; with two contexts the line
    said 'at B = 1, ... it is slower than plain decoding' where that held at one context only (a review, stop 61)."""
    assert run(["sweep", "--batch-weights", "1=4,8=2", "--plan-for", "trtllm", "--out", str(tmp_path / "w")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  trtllm"))
    assert "over the batch sizes --batch-weights counts (B=1" in line or "worst loss 0.0%" in line
    assert "(B=64" not in line
    assert run(["sweep", "--context", "1024,8192", "--plan-for", "vllm", "--out", str(tmp_path / "c")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  vllm"))
    assert "at context 8192 it is slower than plain decoding" in line and ", context 8192):" in line


def test_a_config_in_the_hugging_face_cache_is_named_by_its_repo_and_null_means_not_given(tmp_path):
    """models--Qwen--Qwen3-30B-A3B/snapshots/COMMIT/config.json was named COMMIT, and a folder of the model's own
    name got other defaults than the cache's; "num_key_value_heads": null was refused as missing, where Hugging Face
    reads it as not given (a review, stop 61)."""
    import shutil
    from pathlib import Path

    from speedplan.specs.model import get_model

    config = Path(__file__).parent / "specs" / "configs" / "qwen3-30b-a3b.json"
    cached = tmp_path / "models--Qwen--Qwen3-30B-A3B" / "snapshots" / "0123abc"
    cached.mkdir(parents=True)
    shutil.copy(config, cached / "config.json")
    named = tmp_path / "Qwen3-30B-A3B"
    named.mkdir()
    shutil.copy(config, named / "config.json")
    assert get_model(str(cached)).name == get_model(str(named)).name == "Qwen3-30B-A3B"
    raw = json.loads(config.read_text())
    given = get_model(str(config))
    raw["num_key_value_heads"] = None
    (tmp_path / "null.json").write_text(json.dumps(raw))
    assert get_model(str(tmp_path / "null.json")).kv_heads == raw["num_attention_heads"] != given.kv_heads


def test_calibrate_rows_takes_fit_acceptance_as_a_bool_and_bounds_read_with_their_unit():
    """calibrate_rows(fit_acceptance="no") turned the acceptance fit on; a setting out of range read "outside 0..1 0
    or 1" (a review, stop 61)."""
    import pytest

    from speedplan.engine.profile import get_engine
    from speedplan.engine.run_calibration import calibrate_rows
    from speedplan.errors import SpeedplanInputError

    rows = [{"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1024, "tpot_ms": 7.9}]
    with pytest.raises(SpeedplanInputError, match="fit_acceptance must be True or False, got 'no'"):
        calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, fit_acceptance="no")
    with pytest.raises(SpeedplanInputError, match=r"host_draft_overlap = 7.0 outside 0..1 \(0 or 1\)$"):
        get_engine("vllm").with_terms({"host_draft_overlap": 7}, "a test")


def test_the_hardware_table_names_a_files_latency_as_the_sweep_does_and_bars_keep_their_names_apart(tmp_path):
    """`speedplan hardware FILE` said "datasheet" where a sweep on it says the roofline and what it was fitted to; the
    step breakdown's bars were labelled "draft-model:llama-3.2-1b" in one line each, running into each other (a
    review, stop 61)."""
    from speedplan.report.catalog import hardware_rows
    from speedplan.report.figures import _bar_name
    from speedplan.specs.hardware import PRESET_DIR

    mine = tmp_path / "myh.json"
    mine.write_text((PRESET_DIR / "h100-sxm.json").read_text().replace('"name": "h100-sxm"', '"name": "myh"'))
    assert hardware_rows([str(mine)])[0]["latency"].startswith("datasheet roofline (roofline efficiencies fitted to ")
    assert _bar_name("draft-model:llama-3.2-1b") == "draft-model:\nllama-3.2-1b" and _bar_name("eagle3") == "eagle3"
    assert _bar_name("draft-model:/a/very/long/path/to/a/draft") == "draft-model:\n/a/very/long…"
