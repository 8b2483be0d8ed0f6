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
