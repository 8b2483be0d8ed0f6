"""Stop 54: a profile file given where its folder is meant, an engine profile read from a file
named as a shipped one, and what a short runtime trace's acceptance cannot tell."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from speedplan.cli.app import run
from speedplan.plan.acceptance_notes import small_sample_note
from speedplan.plan.acceptance_sources import parse_acceptance

ENGINES = Path(__file__).resolve().parents[1] / "speedplan" / "specs" / "presets" / "engines"
META = {"type": "meta", "schema": "speedplan.trace/1", "mechanism": "eagle", "draft_len": 3, "tree": None, "batch": 1}


def _trace(tmp_path, accepted):
    path = tmp_path / "t.jsonl"
    steps = [{"type": "step", "batch": 1, "accepted": [a]} for a in accepted]
    path.write_text("\n".join(json.dumps(x) for x in (META, *steps)) + "\n")
    return path


def test_profile_check_on_a_file_names_the_folder_that_holds_it(tmp_path, capsys):
    folder = tmp_path / "prof"
    folder.mkdir()
    (folder / "meta.json").write_text("{}")
    assert run(["profile", "check", str(folder / "meta.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "a file, not a profile folder" in err and str(folder) in err and "\n" not in err
    assert run(["profile", "check", str(tmp_path / "missing")]) == 2
    assert "no such profile folder" in capsys.readouterr().err


def test_an_engine_file_named_as_a_shipped_profile_is_named_as_a_file_in_the_first_line(tmp_path, capsys):
    data = json.loads((ENGINES / "vllm.json").read_text())
    data["terms"]["host_step_us"]["value"] *= 2
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    assert run(["sweep", "--engine", str(path), "--batch", "1", "--mechanism", "eagle3", "--draft-len", "0,2",
                "--out", str(tmp_path / "rep")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert f"engine profile vllm (file {path})" in first


def test_a_short_trace_says_its_widest_rate_interval():
    """Wilson's 95% interval of k = 7 of n = 10 is 0.40-0.89: wider than 0.2, named; of 700 of
    1,000 it is 0.67-0.73: nothing said."""
    few = small_sample_note(np.array([3, 7]), 1)
    assert few == "few samples: position 1's rate 0.7 rests on 10 sequence-steps (95% interval 0.40-0.89)"
    assert small_sample_note(np.array([300, 700]), 1) == ""


def test_a_trace_that_never_saw_a_rejection_says_its_rates_are_clipped(tmp_path):
    acc = parse_acceptance(str(_trace(tmp_path, [3] * 10)))
    assert "10 sequence-steps, D=3; few samples: position 1's rate 1 rests on 10 sequence-steps" in acc.source
    assert "every draft of its 10 sequence-steps was accepted: the rates are clipped to 0.999" in acc.source
    assert acc.source.count("(") == acc.source.count(")")
    many = parse_acceptance(str(_trace(tmp_path, [0, 1, 2, 3] * 100)))
    assert "few samples" not in many.source and "clipped" not in many.source and many.source.endswith("D=3)")
