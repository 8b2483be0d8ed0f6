"""The runtime's Python API refuses bad input up front, in one line, as the CLI does (audit of
2026-12-05: a string prompt ran one prompt per letter, a Path failed in load_target, a float
batch failed inside generate); `speedplan run` reads its speedup from paired rounds and warns
when it cannot be trusted; identical_to_plain is None when sampling; a capped --tree-nodes is
noted. No test here depends on real timings: the timer is stubbed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from speedplan.errors import SpeedplanInputError
from speedplan.runtime.options import DrafterOptions, RunOptions, tree_capacity

GOOD = dict(prompts=("hi",), mechanism="ngram", max_new_tokens=3)

BAD = [
    (dict(prompts="hello"), "wrap it in a list, prompts=['hello']"),
    (dict(prompts={"prompt": "hi"}), "prompts must be a list or tuple of prompts"),
    (dict(prompts=(1, 2)), "prompts[0] must be text or a list of"),
    (dict(prompts=([{"role": "user"}],)), "prompts[0]: each message needs a \"role\" and a \"content\""),
    (dict(prompts=()), "no prompts"),
    (dict(weights=5), "weights (--weights) must be a path"),
    (dict(trace=3), "trace (--trace) must be a path"),
    (dict(draft_len=2.5), "draft_len (--draft-len) must be an integer in 0..16, got 2.5 (float)"),
    (dict(batch=2.5), "batch (--batch) must be an integer in 1..64, got 2.5"),
    (dict(batch=True), "batch (--batch) must be an integer in 1..64, got True (bool)"),
    (dict(max_new_tokens=np.float64(3)), "max_new_tokens (--max-new-tokens) must be an integer"),
    (dict(seed="x"), "seed (--seed) must be an integer"),
    (dict(seed=2 ** 64), "--seed must be in -2**63..2**64-1"),
    (dict(temperature="0.7"), "temperature (--temperature) must be a number"),
    (dict(temperature=float("nan")), "--temperature must be a finite number"),
    (dict(top_p=True), "top_p (--top-p) must be a number"),
    (dict(chat="yes"), "chat (False is --raw) must be True or False"),
    (dict(compare_plain=1), "compare_plain (--compare/--no-compare) must be True or False"),
    (dict(mechanism=None), "unknown mechanism None"),
    (dict(device=["cpu"]), "--device must be auto, cpu or cuda"),
    (dict(rounds=0), "--rounds must be in 1..20"),
    (dict(options={"tree_topk": 2}), "options must be a DrafterOptions, e.g. DrafterOptions(tree_topk=2), got dict"),
    (dict(options=DrafterOptions(tree_nodes=1.5)), "tree_nodes (--tree-nodes) must be an integer in 1..256, got 1.5"),
    (dict(options=DrafterOptions(drafter_weights=3)), "drafter_weights (trained drafter weights) must be a path"),
]


@pytest.fixture
def no_model_load(monkeypatch):
    """run() must refuse before it loads weights: loading fails the test."""
    api = pytest.importorskip("speedplan.runtime.api")

    def load(*args, **kwargs):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(api, "load_target", load)
    return api


@pytest.mark.parametrize("change, words", BAD, ids=[w[:40] for _, w in BAD])
def test_bad_fields_are_refused_in_one_line_before_any_model_load(no_model_load, change, words):
    with pytest.raises(SpeedplanInputError) as e:
        no_model_load.run(RunOptions(**{**GOOD, **change}))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_run_takes_run_options_and_the_other_entry_points_check_too(no_model_load):
    api = no_model_load
    with pytest.raises(SpeedplanInputError, match="run\\(\\) takes a RunOptions, got dict"):
        api.run({"prompts": ["hi"]})
    with pytest.raises(SpeedplanInputError, match="options must be a DrafterOptions"):
        api.make_drafter("ngram", None, {"ngram_max": 2})
    with pytest.raises(SpeedplanInputError, match="ngram_max \\(--ngram-max\\) must be an integer"):
        api.make_drafter("ngram", None, DrafterOptions(ngram_max=2.0))
    tokenizer = SimpleNamespace(encode=list, apply_chat_template=str)
    with pytest.raises(SpeedplanInputError, match="wrap it in a list"):
        api.encode_prompts(tokenizer, "hello", chat=True)


def test_valid_values_of_another_kind_are_normalized():
    spec = RunOptions(prompts=["a", "b"], weights=Path("/x/y.gguf"), batch=np.int64(2), seed=np.int32(7),
                      temperature=np.float32(0.5), trace=Path("t.jsonl"),
                      options=DrafterOptions(tree_topk=np.int64(2), drafter_weights=Path("w")))
    spec.check()
    assert spec.prompts == ("a", "b") and spec.weights == "/x/y.gguf" and spec.trace == "t.jsonl"
    assert type(spec.batch) is int and type(spec.seed) is int and type(spec.temperature) is float
    assert type(spec.options.tree_topk) is int and spec.options.drafter_weights == "w"


def test_load_target_takes_a_path():
    api = pytest.importorskip("speedplan.runtime.api")
    with pytest.raises(SpeedplanInputError, match="GGUF file not found"):  # was AttributeError 'startswith'
        api.load_target(Path("/nonexistent/model.gguf"))
    with pytest.raises(SpeedplanInputError, match="weights \\(--weights\\) must be a path"):
        api.load_target(None)
    with pytest.raises(SpeedplanInputError, match="device \\(--device\\) must be cpu or cuda"):
        api.load_target("smollm2", device="gpu")


# ---- runs on a tiny HF folder, with the timer stubbed ----------------------------------


@pytest.fixture
def tiny_folder(tmp_path):
    pytest.importorskip("torch")
    from tests.runtime.test_trace import tiny_hf_folder

    return tiny_hf_folder(tmp_path)


def stub_timer(monkeypatch, decode_s: list[float]):
    """api.generate with each call's decode_s taken in turn from `decode_s` (plain, spec, plain, ...)."""
    from speedplan.runtime import api

    real, times = api.generate, iter(decode_s)

    def generate(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), decode_s=next(times))

    monkeypatch.setattr(api, "generate", generate)
    monkeypatch.setattr(api, "warm_up", lambda *args: None)  # untimed: not one of the timed runs


def tiny_run(folder, pick=None, **change):
    from speedplan.runtime.api import fastest_pair, run

    return run(RunOptions(**{**dict(prompts=["def add(a, b): return a + b"], weights=Path(folder), mechanism="ngram",
                                    draft_len=2, max_new_tokens=8, chat=False, device="cpu"), **change}), pick or fastest_pair)


@pytest.mark.usefixtures("one_torch_thread")
def test_an_impossible_speedup_is_warned_and_in_the_json(tiny_folder, monkeypatch, tmp_path, capsys):
    stub_timer(monkeypatch, [1.0, 0.1, 1.0, 0.1])  # speculative 10x faster than plain: more than AL can give
    report = tiny_run(tiny_folder, trace=tmp_path / "t.jsonl")  # a Path trace, too
    assert report.speedup == pytest.approx(10.0) and report.round_speedups == pytest.approx([10.0, 10.0])
    assert report.result.acceptance_length <= 3 and "above the acceptance length" in report.speedup_warning
    from speedplan.cli.run import render_run

    render_run(report, as_json=True)
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert data["speedup_warning"] == report.speedup_warning and len(data["speedup_rounds"]) == 2
    assert out.err.startswith("warning: speedup 10.00x is more than 10% above the acceptance length")
    assert (tmp_path / "t.jsonl").exists()


@pytest.mark.usefixtures("one_torch_thread")
def test_the_speedup_comes_from_the_pair_that_ran_fastest(tiny_folder, monkeypatch, capsys):
    stub_timer(monkeypatch, [2.0, 2.0, 1.0, 1.0])  # round 1 slowed throughout: its pair is not the one kept
    report = tiny_run(tiny_folder)
    assert report.speedup == pytest.approx(1.0) and report.speedup_warning is None and report.kept_round == 1
    assert report.result.decode_s == 1.0 and report.plain.decode_s == 1.0
    assert report.identical_to_plain is True
    from speedplan.cli.run import render_run

    render_run(report, as_json=False)
    out = capsys.readouterr()
    assert "speedup 1.00x (rounds: 1.00x, 1.00x; kept round 2)" in out.out and out.err == ""
    assert "greedy check: same tokens as plain greedy decoding" in out.out


@pytest.mark.usefixtures("one_torch_thread")
def test_identical_to_plain_is_none_when_sampling(tiny_folder, monkeypatch):
    stub_timer(monkeypatch, [1.0] * 4)
    report = tiny_run(tiny_folder, temperature=0.7)
    assert report.identical_to_plain is None and report.to_json()["identical_to_plain"] is None


def fake_report(al: float, plain_s: float, spec_s: float, rounds: list[float], temperature: float = 0.0, kept: int = 0):
    """A RunReport of one prompt and 12 tokens whose AL and decode times are given."""
    from speedplan.runtime.api import RunReport
    from speedplan.runtime.generate import RunResult

    steps = [SimpleNamespace(batch=1, accepted=[round(al - 1)])] * 4
    result = RunResult(["x"], [[1] * 12], steps, 0.0, spec_s)
    plain = RunResult(["x"], [[1] * 12], [SimpleNamespace(batch=1, accepted=[0])] * 12, 0.0, plain_s)
    return RunReport(RunOptions(prompts=("x",), temperature=temperature), result, plain, "tiny", 2, rounds, kept)


def test_speedup_warnings():
    assert fake_report(2.0, 1.0, 0.5, [2.0, 2.0]).speedup_warning is None  # 2.00x at AL 2: plausible
    implausible = fake_report(1.0, 1.0, 0.5, [2.0, 1.9]).speedup_warning  # 2.00x at AL 1
    assert implausible.startswith("speedup 2.00x is more than 10% above the acceptance length 1.00 (rounds: 2.00x, 1.90x)")
    disagree = fake_report(2.0, 1.0, 0.8, [1.25, 1.6]).speedup_warning
    assert disagree.startswith("the 2 rounds' speedups differ by more than 10% (1.25x, 1.60x)")
    assert "round 3's speedup, 1.25x, is reported" in fake_report(2.0, 1.0, 0.8, [1.6, 1.0, 1.25], kept=2).speedup_warning
    assert fake_report(2.0, 1.0, 0.8, [1.25]).speedup_warning is None  # --rounds 1: nothing to compare
    assert fake_report(1.0, 1.0, 1.0, [1.0], temperature=0.5).identical_to_plain is None


@pytest.mark.usefixtures("one_torch_thread")
def test_three_rounds_are_read_by_their_median_as_validate_reads_them(tiny_folder, monkeypatch):
    from speedplan.validate.timing import paired_ratio

    stub_timer(monkeypatch, [1.0, 0.5, 1.0, 1.0, 1.0, 0.8])  # speedups 2.0, 1.0, 1.25: the median is round 3
    report = tiny_run(tiny_folder, rounds=3, pick=paired_ratio)
    assert report.kept_round == 2 and report.speedup == pytest.approx(1.25)
    assert report.round_speedups == pytest.approx([2.0, 1.0, 1.25])


def test_the_tree_nodes_note_names_the_nodes_run(monkeypatch, capsys):
    spec = RunOptions(prompts=("hi",), mechanism="eagle-tree", options=DrafterOptions(tree_nodes=64))
    assert spec.tree_note() == ("note: --tree-nodes 64: a tree of --tree-topk 4 and --tree-depth 4 holds at most 52 nodes "
                                "(4 + 3·4²), so each step verifies 52 (raise --tree-depth or --tree-topk for more)")
    assert spec.options.nodes_run == tree_capacity(4, 4) == 52
    assert RunOptions(prompts=("hi",), mechanism="eagle-tree", options=DrafterOptions(tree_nodes=52)).tree_note() is None
    assert RunOptions(prompts=("hi",), mechanism="ngram", options=DrafterOptions(tree_nodes=64)).tree_note() is None
    api = pytest.importorskip("speedplan.runtime.api")
    from speedplan.cli.app import run as cli
    from speedplan.runtime.drafters.tree import TreeDrafter

    assert TreeDrafter(None, 4, 4, 64).nodes == 52  # what the note says is what the drafter verifies

    def stop(spec, pick, progress=None):
        from speedplan.validate.timing import paired_ratio

        assert pick is paired_ratio  # the CLI reads its rounds as `speedplan validate` does
        raise SpeedplanInputError("stopped before loading")

    monkeypatch.setattr(api, "run", stop)
    assert cli(["run", "--prompt", "hi", "--mechanism", "eagle-tree", "--tree-nodes", "64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("note: --tree-nodes 64: a tree of --tree-topk 4 and --tree-depth 4 holds at most 52 nodes")


@pytest.mark.usefixtures("one_torch_thread")
def test_the_batch_reported_is_the_one_that_ran(tiny_folder, monkeypatch):
    """Three prompts at --batch 8 printed B=8 while three sequences decoded (the trace said 3)."""
    stub_timer(monkeypatch, [1.0] * 4)
    report = tiny_run(tiny_folder, prompts=["a b c", "d e f", "g h i"], batch=8)
    assert report.to_json()["batch"] == 3


def test_json_names_the_matmul_that_ran():
    # the model is named by its GGUF file ("SmolLM2-135M-Instruct.Q4_1") while fp32 matmuls ran
    pytest.importorskip("torch")
    report = fake_report(2.0, 1.0, 0.5, [2.0])
    assert report.to_json()["matmul"] == "fp32"
    q4 = dataclasses.replace(report, spec=dataclasses.replace(report.spec, matmul="q4_1"))
    assert q4.to_json()["matmul"] == "q4_1"


def test_run_notes_rounds_it_cannot_pair_and_top_p_at_greedy():
    from speedplan.runtime.options import RunOptions

    assert RunOptions(("hi",), mechanism="none", rounds=3).unused_note() == (
        "note: --rounds 3 times plain and speculative runs in pairs; --mechanism none has no speculative run, "
        "so one round")
    assert RunOptions(("hi",), mechanism="ngram", compare_plain=False, rounds=3).unused_note().endswith(
        "--no-compare runs no plain one, so one round")
    assert RunOptions(("hi",), mechanism="none").unused_note() is None  # the default asked for nothing
    assert RunOptions(("hi",), mechanism="ngram", rounds=3).unused_note() is None  # paired: rounds are used
    assert RunOptions(("hi",), temperature=0.0, top_p=0.9).unused_note() == (
        "note: --top-p 0.9 has no effect at --temperature 0 (greedy decoding takes the most likely token)")
