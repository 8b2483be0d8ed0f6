"""Users' walkthroughs of calibrate and sweep (2026-12-05, stop 51): a unit slip fitted and written,
follow-up commands the sweep refuses, columns read twice, plans that said 'off' for the wrong reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import speedplan
from speedplan.errors import SpeedplanInputError

SLIP = """mechanism,batch,draft_len,context,step_ms,acceptance_length
none,1,0,317,6.3,
eagle3,1,3,317,8.6,3.1
none,4,0,317,6.7,
eagle3,4,3,317,9.3,3.08
none,16,0,317,7.8,
eagle3,16,3,317,11.8,3.05
none,64,0,317,11.8,
eagle3,64,3,317,{last},3.02
"""


def test_a_step_given_in_seconds_is_refused_not_fitted(tmp_path, cli):
    """20.5 ms written as 0.0205 among rows of 6-12 ms: every term went to 0, a +48,027% residual,
    exit 0 and a profile that priced B = 64 at 1.94x where the rows said 1.35x."""
    (tmp_path / "slip.csv").write_text(SLIP.format(last=0.0205))
    r = cli("calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "sglang",
            "--measurements", "slip.csv", "--out", "mine.json", cwd=tmp_path)
    assert r.returncode == 2 and not (tmp_path / "mine.json").exists()
    line = r.stderr.strip()
    assert "\n" not in line and "slip.csv:9: field 'step_ms' (0.0205 ms)" in line and "unit slip" in line
    (tmp_path / "slip.csv").write_text(SLIP.format(last=20.5))  # the same rows in ms fit
    r = cli("calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "sglang",
            "--measurements", "slip.csv", "--out", "mine.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "mine.json").exists()


def test_a_tokens_per_s_of_more_requests_than_the_batch_is_refused():
    rows = [{"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1024, "tokens_per_s": 150.0},
            {"mechanism": "none", "batch": 4, "draft_len": 0, "context": 1024, "tokens_per_s": 560.0},
            {"mechanism": "none", "batch": 8, "draft_len": 0, "context": 1024, "tokens_per_s": 90_000.0}]
    with pytest.raises(SpeedplanInputError, match=r"field 'tokens_per_s' \(9e\+04 tokens/s\) is more tokens/s than any engine"):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows)


def test_calibrates_follow_up_command_names_each_mechanism_once():
    """`draft_model` beside `draft-model:llama-3.2-1b` (the default draft) were both named, and the
    sweep refused calibrate's own command: "mechanism 'draft-model:llama-3.2-1b' is listed twice"."""
    from speedplan.engine.run_calibration import calibrate_rows, sweep_arguments

    rows = [{"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1500, "tpot_ms": 6.9},
            {"mechanism": "draft_model", "batch": 1, "draft_len": 3, "context": 1500, "tpot_ms": 3.5,
             "acceptance_length": 2.8},
            {"mechanism": "draft-model:llama-3.2-1b", "batch": 4, "draft_len": 3, "context": 1500, "tpot_ms": 3.8,
             "acceptance_length": 2.8}]
    args = sweep_arguments(calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows), "llama-3.1-8b")
    named = [args[i + 1] for i, a in enumerate(args) if a == "--mechanism"]
    assert len(named) == 1 and sum(a == "--acceptance" for a in args) == 1
    speedplan.sweep("llama-3.1-8b", "h100-sxm", named, batches=[1, 4], contexts=[1500])  # no "listed twice"


@pytest.mark.parametrize("other", ["Batch", "TPOT_ms"])
def test_a_column_named_twice_but_for_its_case_is_refused(tmp_path, other):
    """`Batch` beside `batch`: one was read and the other dropped without a word (exit 0)."""
    path = tmp_path / "runs.csv"
    path.write_text(f"mechanism,batch,draft_len,context,tpot_ms,acceptance_length,{other}\n"
                    "none,64,0,1500,6.9,,1\neagle3,64,3,1500,2.95,3.05,1\n")
    with pytest.raises(SpeedplanInputError, match=f"columns '{other}' and '{other.lower()}' are one column"):
        speedplan.calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [path])


def test_batch_sizes_below_the_fitted_rows_are_named_as_extrapolated_too():
    """A profile fitted at B = 16 only said "B = 32–64 lie beyond its fitted rows"; B = 1–8 were just
    as far from its rows and not named."""
    from speedplan.report.summary import _beyond_fit

    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 8, 16, 32, 64], contexts=[1024])
    r.meta["engine_fitted_batches"] = [16, 16]
    assert _beyond_fit(r).startswith("; B = 1–8 and 32–64 lie beyond its fitted rows")
    r.meta["engine_fitted_batches"] = [1, 16]
    assert _beyond_fit(r).startswith("; B = 32–64 lie beyond")
    r.meta["engine_fitted_batches"] = [8, 64]
    assert _beyond_fit(r).startswith("; B = 1 lies beyond")


def test_a_draft_at_a_tp_no_engine_runs_is_named_and_not_the_slo_pick():
    """`draft-model:llama-3.2-1b,tp=1` beside a TP-4 target: every engine plan said off ("speculation
    loses at every planned batch size"), with no word that the engines cannot run that draft TP, while
    the SLO pick chose it and said the launch files serve it."""
    from speedplan.plan.engine_outputs import serving_plans

    r = speedplan.sweep("llama-3.1-70b", "h100-sxm", ["draft-model:llama-3.2-1b,tp=1"], batches=[1, 16], tp=4,
                        min_tokens_per_user=80)
    assert (r.best["mechanism"] == "draft-model:llama-3.2-1b@tp1").all()  # the table still prices it
    text = speedplan.render_summary(r)
    assert "vLLM cannot run draft-model:llama-3.2-1b@tp1 (its draft at TP 1 beside the target's 4)" in text
    assert "SLO pick (>= 80 tokens/s/user): nothing vLLM runs reaches it" in text
    plans = serving_plans(r, speedplan.plan_engines(r))
    assert all(p.mechanism == "none" and any("@tp1" in u for u in p.unsupported) for p in plans.values())


def test_vllm_is_told_to_run_the_batch_sizes_the_plan_priced():
    """B = 512 on an A100 was priced with 512 requests running, and vllm_serve.sh left vLLM at its
    default of 256 (EngineArgs.get_batch_defaults: 256 below 70 GiB or on an A100, 1024 above)."""
    from speedplan.serving.vllm import default_batch_limits

    assert default_batch_limits("a100-80gb", 1) == (256, 2048) and default_batch_limits("l40s", 1) == (256, 2048)
    assert default_batch_limits("h100-sxm", 1) == (1024, 8192) and default_batch_limits("cpu-local", 2) == (256, 4096)
    files = {}
    for batches, hardware in (([64, 256, 512], "a100-80gb"), ([64, 256], "a100-80gb"), ([64, 256, 512], "h100-sxm")):
        r = speedplan.sweep("llama-3.1-8b", hardware, ["eagle3"], batches=batches, contexts=[512])
        rendered = speedplan.render_serving_configs(speedplan.serving_plans(r, speedplan.plan_engines(r)))
        files[(len(batches), hardware)] = rendered["vllm_serve.sh"]
    assert "--max-num-seqs 512 \\\n" in files[(3, "a100-80gb")]
    assert "--max-num-seqs" not in files[(2, "a100-80gb")] and "--max-num-seqs" not in files[(3, "h100-sxm")]


def test_a_frame_filtered_of_plain_decoding_is_refused_not_planned_as_nothing_fits():
    """Dropping the 'none' rows made every engine plan "nothing fits in memory", which was false."""
    import dataclasses

    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 8])
    cut = dataclasses.replace(r, frame=r.frame[r.frame.mechanism != "none"])
    for call in (speedplan.plan_engines, speedplan.render_summary):
        with pytest.raises(SpeedplanInputError, match="holds no plain-decoding row .* keep them when filtering"):
            call(cut)


def test_a_model_is_served_under_the_repo_its_source_names(tmp_path, monkeypatch):
    """A preset dropped in as one file (no HF_REPOS entry) and a config.json copied from a preset
    (its `_source` a huggingface.co URL) were served as `vllm serve mistral-7b-v0.3` / `vllm serve ok`,
    which an engine fetches as a repo that does not exist."""
    import json
    import shutil

    from speedplan.serving import plan as serving_plan
    from speedplan.specs.hub import hf_repo_of
    from speedplan.specs.model import get_model

    assert hf_repo_of("https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json") == "Qwen/Qwen3-8B"
    assert hf_repo_of("https://huggingface.co/datasets/a/b/raw/main/x.json") is None and hf_repo_of("/x/config.json") is None
    monkeypatch.setattr(serving_plan, "HF_REPOS", {k: v for k, v in serving_plan.HF_REPOS.items() if k != "llama-3.1-8b"})
    assert serving_plan.hf_repo("llama-3.1-8b") == "meta-llama/Llama-3.1-8B"  # from its preset's _source
    folder = tmp_path / "ok"
    folder.mkdir()
    preset = Path(speedplan.__file__).parent / "specs" / "presets" / "models" / "llama-3.1-8b.json"
    shutil.copy(preset, folder / "config.json")
    assert json.loads((folder / "config.json").read_text())["_source"].startswith("https://huggingface.co/")
    assert get_model(str(folder)).serve_as() == "meta-llama/Llama-3.1-8B"


def test_the_engines_table_counts_a_calibrated_copys_own_fit(monkeypatch):
    """A profile calibrated from vllm on 2 terms read "4 of 17 to 3 rows": the base's terms fitted
    earlier were counted as fitted to the copy's rows."""
    from speedplan.engine import profile as engine_profile
    from speedplan.report.catalog import engine_rows

    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1024, "tpot_ms": t}
            for b, t in ((1, 7.0), (8, 7.6), (32, 9.5))]
    mine = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, free=["layer_launches"], name="mine")
    monkeypatch.setattr(engine_profile, "preset_names", lambda: ["mine"])
    monkeypatch.setattr(engine_profile, "get_engine", lambda name: mine.profile)
    (row,) = engine_rows()
    assert row["terms fitted"].startswith("1 of 19 to 3 rows") and row["terms fitted"].endswith("; 2 more fitted earlier")


def test_calibrate_from_python_takes_fit_as_the_cli_names_it(tmp_path):
    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1024, "tpot_ms": t}
            for b, t in ((1, 7.0), (8, 7.6), (32, 9.5))]
    a = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, fit="layer_launches")
    b = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, free=["layer_launches"])
    assert a.fitted == b.fitted == ["layer_launches"]
    path = tmp_path / "runs.csv"
    path.write_text("mechanism,batch,draft_len,context,tpot_ms\n" + "".join(
        f"none,{r['batch']},0,1024,{r['tpot_ms']}\n" for r in rows))
    assert speedplan.calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [path], fit="layer_launches").fitted == a.fitted
    with pytest.raises(SpeedplanInputError, match="once, as free= or fit="):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, free=["layer_launches"], fit="x")


def test_calibrate_says_which_untried_term_holds_one_sided_rows_away():
    """vLLM rows priced 14-16% slow with host_step_us at 0 said nothing of layer_launches, whose base
    value (1.45 ms a step) the default fit never tries; with it the same rows fit to a few percent."""
    from speedplan.engine.run_calibration import render_calibration

    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1280, "tpot_ms": t}
            for b, t in ((1, 6.6), (4, 7.0), (16, 8.1), (64, 12.2))]
    rows += [{"mechanism": "eagle3", "batch": b, "draft_len": 3, "context": 1280, "tpot_ms": t, "acceptance_length": 3.04}
             for b, t in ((1, 2.85), (4, 3.15), (16, 4.0), (64, 7.2))]
    default = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows)
    note = next(line for line in render_calibration(default).splitlines() if "the rows are priced slower" in line)
    assert "layer_launches kept the base's value (--fit " in note
    terms = note.split("(--fit ")[1].split(" ")[0]
    wider = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, fit=terms)
    assert abs(float(np.median(wider.residual))) < 0.03 < float(np.median(default.residual))
    assert "the rows are priced" not in render_calibration(wider)


def test_an_acceptance_file_with_an_unknown_key_is_refused(tmp_path):
    """{"alpha": 0.7, "foo": 1} was read as alpha 0.7, the typo dropped without a word."""
    path = tmp_path / "acc.json"
    path.write_text('{"alpha": 0.7, "mtach": 0.5}')
    with pytest.raises(SpeedplanInputError, match="acc.json: unknown key 'mtach'; expected a JSON object"):
        speedplan.sweep("llama-3.1-8b", "h100-sxm", ["ngram"], batches=[1], acceptance=str(path))
    path.write_text('{"alpha": 0.7, "match": 0.5}')
    assert len(speedplan.sweep("llama-3.1-8b", "h100-sxm", ["ngram"], batches=[1], acceptance=str(path)).frame)


def test_the_slo_pick_at_one_request_reads_as_english():
    from speedplan.report.summary import slo_line

    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 8], contexts=[2000],  # within its 2,048 positions
                        min_tokens_per_user=350)
    assert "it holds while at most 1 request runs at once" in slo_line(r)
