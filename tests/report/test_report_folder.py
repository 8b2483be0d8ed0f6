"""The report folder's files: schedule.csv, recommendations.json and the serving configs."""

from __future__ import annotations

import json

import pandas as pd

from tests.report._report_helpers import MEASURED, small_sweep  # noqa: F401 (the fixture `result`)


def test_report_folder_has_per_engine_schedule_and_configs(result, tmp_path):
    from speedplan.report.folder import write_outputs

    out = tmp_path / "rep"
    write_outputs(result, out)
    recs = json.loads((out / "recommendations.json").read_text())
    schedule = (out / "schedule.csv").read_text().splitlines()
    assert schedule[0].startswith("engine,engine_profile,plan_mechanism,mode,batch,context,weight,draft_len")
    table = pd.read_csv(out / "schedule.csv")
    for name, rec in recs["engines"].items():
        rows = table[table.engine == name]
        assert rows.draft_len.astype(int).tolist() == [x["draft_len"] for x in rec["per_batch"]]
        assert rec["engine_profile"].startswith(rows.engine_profile.iloc[0] + ":")  # the name, then its fit
    assert (out / "sensitivity.csv").exists() and (out / "vllm_serve.sh").exists()
    # each config says where its speedups came from: engine profile, latencies, its mechanism's acceptance
    for name, rec in recs["engines"].items():
        text = next(p for p in out.iterdir() if p.name.startswith(name) and p.suffix in (".sh", ".yaml")).read_text()
        assert f"# Speedups from latency {MEASURED}" in text
        if rec["mechanism"] != "none":  # the whole source: a comment has room for it
            assert f"acceptance {result.meta['acceptance'][rec['mechanism']]}" in text


def test_recommendations_json_carries_the_slo_pick():
    """The SLO pick was in the terminal and report.html only (an audit of 2026-12-04)."""
    import json

    import speedplan
    from speedplan.plan.pick import recommendations

    r = speedplan.sweep(mechanisms=["eagle3"], batches=(1, 8, 64), draft_lens=(0, 2, 4), min_tokens_per_user=50)
    rec = json.loads(json.dumps(recommendations(r)))
    assert rec["slo_pick"]["min_tokens_per_user"] == 50
    assert rec["slo_pick"]["pick"]["tokens_per_s_per_user"] >= 50
    assert rec["slo_pick"]["pick"]["batch"] == int(r.slo_pick.batch)
    assert "slo_pick" not in recommendations(speedplan.sweep(mechanisms=["eagle3"], batches=(1,), draft_lens=(0, 2)))


def test_schedule_csv_says_where_a_plan_does_not_fit():
    """A 70B plan's batch sizes where its launch (drafter loaded) does not hold every sequence:
    fits_memory False and runs_at_batch the sequences it runs (the largest batch that fits),
    priced at that batch's tokens/s/GPU (an audit of 2026-12-04)."""
    import speedplan
    from speedplan.plan.engine_plan import schedule_frame

    # vLLM's 0.9 of the 85.5 GB each of 4 H100s reports holds 124 plain sequences of 4096 tokens (weights
    # 35.3 GB, 0.34 GB a sequence), 120 with EAGLE-3 loaded (B = 109 and 105 of the datasheet's 80 GB)
    r = speedplan.sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], batches=tuple(range(111, 125)),
                        draft_lens=(0, 2, 4), tp=4)
    frame = schedule_frame(speedplan.plan_engines(r))
    assert frame["fits_memory"].dtype == bool and not frame["fits_memory"].all()  # B = 121-124 with EAGLE-3 loaded
    short = frame[~frame["fits_memory"]]
    assert (short["runs_at_batch"] == 120).all() and (short["batch"] >= 121).all() and (short["speedup"] > 1).all()
    assert (frame.loc[frame["fits_memory"], "runs_at_batch"] == frame.loc[frame["fits_memory"], "batch"]).all()


def test_the_sglang_cap_is_named_wherever_a_plan_runs_fewer_requests(tmp_path):
    """SGLang runs at most 48 requests at once with speculative decoding: sweep.csv said running 48 at
    B = 64, but schedule.csv and recommendations.json said runs_at_batch 64 and the terminal and
    report.html said nothing (a new user's walkthrough, 2026-12-04)."""
    import json

    import pandas as pd

    from speedplan.plan.engine_plan import plan_engines
    from speedplan.plan.sweep import sweep
    from speedplan.report.folder import write_outputs
    from speedplan.report.summary import engine_plan_lines

    result = sweep("qwen3-8b", "h200-sxm", ["eagle3"], batches=[32, 64], contexts=[8192])
    plans = plan_engines(result, engines="sglang,vllm")
    write_outputs(result, tmp_path / "r", plans=plans)
    schedule = pd.read_csv(tmp_path / "r" / "schedule.csv").set_index(["engine", "batch"])
    assert schedule.loc[("sglang", 64), "running"] == 48 and schedule.loc[("sglang", 64), "runs_at_batch"] == 64
    assert schedule.loc[("vllm", 64), "running"] == 64 and schedule.loc[("sglang", 32), "running"] == 32
    recs = json.loads((tmp_path / "r" / "recommendations.json").read_text())["engines"]
    assert [r["running"] for r in recs["sglang"]["per_batch"]] == [32, 48]
    line = next(x for x in engine_plan_lines(plans) if x.lstrip().startswith("sglang"))
    assert "from B=64 a step runs 48 requests, the engine's cap with speculative decoding" in line
    assert "48 (the engine&#x27;s cap with speculative decoding" in (tmp_path / "r" / "report.html").read_text()
