"""Review of the commits after ede858a: bugs found by running the commands as a user would."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from speedplan.cli.app import app
from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.sweep import sweep


def _trtllm_tree_wins(**kw):
    """A sweep priced by TensorRT-LLM's profile where an EAGLE-1/2 tree (which TensorRT-LLM cannot
    run) beats the EAGLE-3 chain it can run."""
    acceptance = {"eagle-tree": Acceptance.iid(0.9, "user: alpha=0.9"), "eagle3": Acceptance.iid(0.5, "user: alpha=0.5")}
    return sweep("llama-3.1-8b", "h100-sxm", ["eagle-tree", "eagle3"], [1, 8, 32], range(0, 9), tree_nodes=[16],
                 acceptance=acceptance, engine="trtllm", **kw)


def test_the_slo_pick_under_trtllm_keeps_to_what_trtllm_runs():
    """`sweep --engine trtllm --min-tokens-per-user 200` picked eagle-tree, which TensorRT-LLM
    cannot run, without a word: the engine family "TensorRT-LLM" was looked up as the serving
    engine "tensorrt-llm" (vLLM's "vLLM" and SGLang's "SGLang" match their names), so neither the
    SLO pick nor the "cannot run" note knew the engine."""
    from speedplan.plan.engine_outputs import runnable_rows
    from speedplan.report.summary import not_servable, slo_line

    r = _trtllm_tree_wins(min_tokens_per_user=200)
    assert r.meta["engine_family"] == "TensorRT-LLM"
    assert "eagle-tree" in set(r.best["mechanism"])  # the best any mechanism reaches: the tree
    assert "eagle-tree" not in set(runnable_rows(r.frame, r.meta)["mechanism"])
    assert r.slo_pick["mechanism"] == "eagle3"
    line = slo_line(r)
    assert "TensorRT-LLM cannot run it" in line and "eagle-tree" in line
    assert not_servable(r.meta, set(r.best["mechanism"])) == [
        "note: TensorRT-LLM cannot run eagle-tree: this table is the best any mechanism reaches under its profile; "
        "the engine plans below keep to what each engine runs"]


def test_the_moe_rise_note_is_in_report_html_too(tmp_path):
    """The note that explains a mixture of experts' rising speedup was printed in the terminal only:
    report.html showed the same rising table (and the terminal's other notes) without it."""
    out = tmp_path / "rep"
    r = CliRunner().invoke(app, ["sweep", "--model", "gpt-oss-120b", "--hardware", "b200", "--mechanism", "eagle3",
                                 "--batch", "1,4,16,64", "--draft-len", "0-5", "--out", str(out)])
    assert r.exit_code == 0, r.output
    note = next(line for line in r.output.splitlines() if line.startswith("note: the speedup rises from"))
    html = (out / "report.html").read_text()
    assert "a mixture of experts (4 of 128 per token)" in note
    assert note.split(":", 1)[1].strip()[:60] in html


def test_calibrate_refuses_a_tp_wider_than_one_node():
    """`speedplan calibrate --tp 16 --hardware h100-sxm` fitted terms with the all-reduce priced at
    NVLink across two 8-GPU nodes, where `speedplan sweep --tp 16` is refused naming the node."""
    from speedplan.engine.run_calibration import calibrate_rows

    rows = [{"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1024, "tpot_ms": 30.0},
            {"mechanism": "eagle3", "batch": 8, "draft_len": 3, "context": 1024, "tpot_ms": 40.0,
             "acceptance_length": 2.5}]
    with pytest.raises(SpeedplanInputError, match=r"--tp 16: one h100-sxm node links 8 GPUs"):
        calibrate_rows("llama-3.1-70b", "h100-sxm", 16, "vllm", rows)
    assert calibrate_rows("llama-3.1-70b", "h100-sxm", 8, "vllm", rows).rows


def test_a_draft_models_acceptance_reaches_it_when_the_mechanism_names_a_tp(tmp_path):
    """`--mechanism draft_model:llama-3.2-1b,tp=1 --acceptance draft_model:llama-3.2-1b:alpha=0.8`
    was refused "no swept mechanism uses it (swept: draft-model:llama-3.2-1b)": the key was matched
    against the spec with its ",tp=1" (acceptance does not depend on the draft's TP)."""
    for mech in ("draft_model:llama-3.2-1b,tp=1", "draft-model:llama-3.2-1b,tp=1"):
        r = CliRunner().invoke(app, ["sweep", "--batch", "1,8", "--mechanism", mech, "--acceptance",
                                     "draft_model:llama-3.2-1b:alpha=0.8", "--out", str(tmp_path / "o")])
        assert r.exit_code == 0, r.output
        assert "acceptance: draft-model:llama-3.2-1b: user: alpha=0.8" in r.output


def test_two_mechanisms_in_one_option_get_the_hint_under_the_engines_names_too():
    """`--mechanism eagle3,ngram` says to repeat --mechanism; `--mechanism EAGLE-3,ngram` (the
    engines' spelling, read everywhere else now) said only "unknown mechanism"."""
    with pytest.raises(SpeedplanInputError, match=r"one mechanism per --mechanism .*: --mechanism eagle3 --mechanism ngram"):
        sweep("llama-3.1-8b", "h100-sxm", ["EAGLE-3,ngram"], [1], [0, 2])
