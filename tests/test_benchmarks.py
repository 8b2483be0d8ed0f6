"""The benchmark scripts still run against the library they measure.

They are not imported by anything else, so a renamed function breaks them silently
(bench_report.py called `summary.write_report` for days after it moved to `report.html`).
Only the cheap ones run here; each is asserted to print its figures, not timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SHARED_CASES = BENCHMARKS.parents[1] / "shared" / "cases" / "engine_measurements.csv"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCHMARKS / args[0]), *args[1:]], capture_output=True, text=True,
                          timeout=300, cwd=BENCHMARKS.parent)


def test_bench_report_times_every_stage():
    done = _run("bench_report.py", "--rows", "100", "--repeats", "1", "--inline")
    assert done.returncode == 0, done.stderr[-2000:]
    for stage in ("import matplotlib", "write_report, first call", "pareto", "heatmap", "best_d", "breakdown",
                  "roofline", "render_summary"):
        assert stage in done.stdout


def test_bench_engine_shape_prints_each_engine():
    done = _run("bench_engine_shape.py")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    for engine in ("vllm", "sglang", "trtllm"):
        assert engine in lines
        ratios = [float(x) for x in lines[engine].split()[10:12]]  # B56/B2, B64/B2
        assert all(0.0 < r < 2.0 for r in ratios)


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="../shared/cases (the fit's rows) is not next to this checkout")
def test_fit_engine_profiles_matches_the_shipped_files():
    done = _run("fit_engine_profiles.py", "--check")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for name in ("vllm.json", "sglang.json"):
        assert f"{name}: matches the fit" in done.stdout
    # GLM-4.7-Flash's SGLang rows are held out and predicted out of sample, with the reason
    assert "held out of the fit (out-of-sample): a later SGLang" in done.stdout
    # each held-out row twice: as the shipped profile predicts it, then calibrated on the held rows alone
    assert done.stdout.count("eagle-tree:topk=4 B=32 D=3") == 2
    alone = done.stdout.split("calibrated on these rows alone (--fit host_step_us,host_spec_seq_us): ")[1]
    b1 = next(line for line in alone.splitlines() if line.strip().startswith("eagle-tree:topk=4 B=1 D=3"))
    assert float(b1.split()[-2]) < 1.2  # host terms cannot reach the measured 1.39 (docs/measurements.md, "Held out")
    assert "B=1: verify kernels priced +" in alone


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="../shared/cases (the sweep's rows) is not next to this checkout")
def test_bench_engine_sweeps_checks_and_refits_the_vllm_sweep_under_each_gpu(monkeypatch):
    done = _run("bench_engine_sweeps.py", "--fit")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    gpus = ("h100-sxm", "h200-sxm", "b200", "mi300x", "a100-80gb")
    blocks = {g: done.stdout.split(f"vllm profile, GPU assumed {g}:")[1].split("vllm profile, GPU assumed")[0] for g in gpus}
    for gpu, block in blocks.items():
        assert "best K per B" in block and f"refitted under {gpu}:" in block
    # the README quotes these: the best K (3) right at every batch size under an H100 and an H200
    assert "[4 of 4 right" in blocks["h100-sxm"] and "[4 of 4 right" in blocks["h200-sxm"]
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from bench_engine_sweeps import sweep_rows

    rows = sweep_rows(SHARED_CASES)
    assert len(rows) == 24 and sorted(rows.batch.unique()) == [1, 2, 4, 8] and sorted(rows.draft_len.unique()) == list(range(3, 9))
    # AL = 1 + the per-position rates (73%, 52%, 36% at K = 3)
    assert rows[(rows.batch == 1) & (rows.draft_len == 3)].acceptance_length.iloc[0] == pytest.approx(2.61)


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="../shared/cases (the fit's rows) is not next to this checkout")
def test_fit_engine_profiles_sensitivity_check_writes_nothing():
    shipped = {p.name: p.read_bytes() for p in (BENCHMARKS.parent / "speedplan/specs/presets/engines").glob("*.json")}
    done = _run("fit_engine_profiles.py", "--assume-gpu", "H200")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "vllm.json: not written or compared (--assume-gpu H200 is a sensitivity check)" in done.stdout
    # the assumption took effect: the vLLM rows priced on an H200 fit other terms than the shipped H100 ones
    import json

    vllm = done.stdout.split("calibrated vllm")[1]
    fitted = float(vllm.split("fitted host_step_us")[1].split()[0])
    shipped_value = json.loads(shipped["vllm.json"])["terms"]["host_step_us"]["value"]
    assert abs(fitted / shipped_value - 1) > 0.05
    assert {p.name: p.read_bytes() for p in (BENCHMARKS.parent / "speedplan/specs/presets/engines").glob("*.json")} == shipped


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="../shared/cases (the grid's rows) is not next to this checkout")
def test_bench_calibration_takes_the_grids_gpu():
    done = _run("bench_calibration.py", "--grid-hardware", "h200-sxm")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "(h200-sxm TP8 assumed)" in done.stdout and "all draft lengths, fitted on 3 batch sizes" in done.stdout


def test_bench_engine_sweeps_helpers(monkeypatch):
    import numpy as np
    import pandas as pd

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from bench_engine_sweeps import best_k, per_draft_token_ms, ratio_to_smallest

    rows = pd.DataFrame({"batch": [1, 1, 2, 2], "draft_len": [3, 4, 3, 4], "acceptance_length": [2.0, 2.5, 2.0, 2.5]})
    measured = np.array([100.0, 90.0, 150.0, 160.0])
    predicted = np.array([80.0, 88.0, 120.0, 180.0])  # picks K = 4 at B = 1 (loses 10%), K = 4 at B = 2 (right)
    assert best_k(rows, measured, predicted) == [(1, 3, 4, pytest.approx(0.1)), (2, 4, 4, 0.0)]
    in_b, not_ref = ratio_to_smallest(rows, measured, "draft_len", "batch")
    assert list(in_b) == pytest.approx([1.0, 1.0, 1.5, 160 / 90]) and list(not_ref) == [False, False, True, True]
    in_k, not_ref = ratio_to_smallest(rows, measured, "batch", "draft_len")
    assert list(in_k) == pytest.approx([1.0, 0.9, 1.0, 160 / 150]) and list(not_ref) == [False, True, False, True]
    # rows in another order and with another index: the ratios follow their rows
    shuffled = rows.iloc[[3, 1, 2, 0]].set_index(pd.Index([10, 5, 7, 1]))
    in_b_shuffled, _ = ratio_to_smallest(shuffled, measured[[3, 1, 2, 0]], "draft_len", "batch")
    assert list(in_b_shuffled) == pytest.approx([160 / 90, 1.0, 1.5, 1.0])
    # B = 1: steps of 20 ms at K = 3 and 27.8 ms at K = 4 (B·AL / tokens/s)
    step_s = (rows.batch * rows.acceptance_length).to_numpy() / measured
    assert per_draft_token_ms(rows, step_s) == pytest.approx(1000 * 2.5 / 90 - 20.0)


@pytest.mark.parametrize("script", ["bench_profiles_vs_aic.py", "bench_moe_routing.py"])
def test_optional_dependency_missing_is_one_line(script):
    import importlib.util

    if importlib.util.find_spec("aiconfigurator_core") is not None:
        pytest.skip("aiconfigurator-core is installed: the benchmark runs for real")
    done = _run(script, *(["--points", "10"] if script == "bench_profiles_vs_aic.py" else []))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "aiconfigurator-core is not installed" in done.stderr


def test_the_fit_check_allows_float_order_not_a_changed_term(monkeypatch):
    """--check passes a refit that differs in the sixth significant digit (what another CPU's BLAS
    gives: the Xeon of 2026-12-03 failed the six-decimal comparison on sglang.json) and fails a term
    that moved by 0.01%."""
    import json

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from fit_engine_profiles import differences

    shipped = json.loads((BENCHMARKS.parent / "speedplan/specs/presets/engines/sglang.json").read_text())["terms"]
    nudged = {t: {**v, "value": v["value"] * (1 + 1e-7)} for t, v in shipped.items()}
    assert differences(shipped, nudged) == []
    moved = {**shipped, "host_step_us": {**shipped["host_step_us"], "value": shipped["host_step_us"]["value"] * 1.0001}}
    assert differences(shipped, moved) and differences(shipped, moved)[0].startswith(".host_step_us.value: ")
    assert differences(shipped, {t: v for t, v in shipped.items() if t != "host_step_us"}) == [".host_step_us: only in one"]


def test_the_fit_check_allows_a_held_out_refit_moved_by_another_cpu(monkeypatch):
    """The Zen 4 EPYC of 2026-12-07 refitted sglang.json with every term within 1e-5 but two rows'
    leave-one-out errors up to 1.7e-4 apart (relative): --check passes that, and fails a held-out error
    moved by 1%, or a residual moved by 1e-4."""
    import json

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from fit_engine_profiles import differences

    fit = json.loads((BENCHMARKS.parent / "speedplan/specs/presets/engines/sglang.json").read_text())["fit"]
    moved = lambda key, factor: {**fit, "rows": [{**r, key: r[key] * factor} if i == 7 else r
                                                 for i, r in enumerate(fit["rows"])]}
    assert differences(fit, moved("loo_error", 1 + 1.7e-4)) == []
    assert differences(fit, moved("loo_error", 1.01))[0].startswith(".rows[7].loo_error: ")
    assert differences(fit, moved("residual", 1 + 1e-4))[0].startswith(".rows[7].residual: ")


def test_the_fit_check_compares_every_field_not_the_values_alone(monkeypatch):
    """A term's source citing a file no reader has (/work/research/engines.md) passed --check, which compared the
    values alone (a review, stop 61): every field is compared now, the stamps left out."""
    import json

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from fit_engine_profiles import differences

    shipped = json.loads((BENCHMARKS.parent / "speedplan/specs/presets/engines/trtllm.json").read_text())
    assert differences(shipped, json.loads(json.dumps(shipped))) == []
    assert differences(shipped, {**shipped, "created": "another day"}) == []
    nudged = json.loads(json.dumps(shipped))
    nudged["terms"]["launch_us"]["value"] *= 1 + 1e-7
    assert differences(shipped, nudged) == []
    stale = json.loads(json.dumps(shipped))
    stale["terms"]["overlap_spec"]["source"] += " (an old note)"
    [said] = differences(shipped, stale)
    assert said.startswith(".terms.overlap_spec.source: ...") and "(an old note)" in said


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="../shared/cases (the fit's rows) is not next to this checkout")
def test_fit_engine_profiles_by_source_predicts_each_source_from_the_others():
    shipped = {p.name: p.read_bytes() for p in (BENCHMARKS.parent / "speedplan/specs/presets/engines").glob("*.json")}
    done = _run("fit_engine_profiles.py", "--by-source")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    sglang = done.stdout.split("sglang: each source predicted by a fit to the other")[1].split("\n\n")[0]
    lines = [l for l in sglang.splitlines() if " rows (fit on " in l]
    assert len(lines) >= 3  # SpecForge #339, AngelSlim #163, SGLang #4716
    for line in lines:  # each source's rows and the rest add up to the fitted rows
        n, fit_on = int(line.split(" rows (fit on ")[0].split()[-1]), int(line.split("(fit on ")[1].split(")")[0])
        assert n + fit_on == 20
    assert "all 20 rows out of source: median" in sglang
    assert {p.name: p.read_bytes() for p in (BENCHMARKS.parent / "speedplan/specs/presets/engines").glob("*.json")} == shipped


def test_bench_unseen_functions_builds_its_prompts_from_modules_no_split_holds():
    """The script itself takes minutes (the runtime); its prompt set is checked here."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from bench_unseen_functions import PROMPTS, UNSEEN, unseen_prompts
    finally:
        sys.path.remove(str(BENCHMARKS))
    from speedplan.runtime.io.prompts import MODULES, TRAINING_MODULES, stdlib_prompts

    texts = unseen_prompts()
    assert len(texts) == PROMPTS and not set(UNSEEN) & (set(MODULES) | set(TRAINING_MODULES))
    assert sum(t.startswith("Summarize") for t in texts) == sum(t.startswith("Here is") for t in texts) == PROMPTS // 2
    assert not set(texts) & {p.text for p in stdlib_prompts()}


def test_bench_overhead_rows_refits_a_stored_run_both_ways(tmp_path):
    """The 2026-12-07 09:29 Zen 3 run refitted without overhead_ms rows gives back its own step-time
    errors (5.3% / 11.2%, summary.json); with them, other figures; a folder that is not a run is
    named as skipped, not a traceback."""
    pytest.importorskip("torch")  # the run keeps no drafter shapes: they are read from the shipped weights
    run = BENCHMARKS.parent / "reports" / "validation-cpu-epyc-zen3-2026-12-07-b"
    done = _run("bench_overhead_rows.py", str(run), str(tmp_path))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith(run.name))
    without, with_rows = line.split("|")
    assert without.split()[2:4] == ["5.3%", "11.2%"]
    median, p90 = (float(x.rstrip("%")) for x in with_rows.split()[:2])
    assert 0 < median < p90 < 30 and (median, p90) != (5.3, 11.2)
    assert f"{tmp_path.name}" in done.stdout and "skipped" in done.stdout


@pytest.mark.parametrize("name", ["validation-cpu-epyc-zen4-2026-12-07-b", "validation-cpu-epyc-zen4-2026-12-07-c",
                                  "validation-cpu-epyc-zen4-2026-12-07-d", "validation-cpu-epyc-zen4-2026-12-07-e"])
def test_bench_overhead_rows_gives_back_a_run_priced_with_its_own_overhead_rows(name):
    """The runs whose own calibration had overhead_ms rows (Zen 4, 2026-12-07 15:27, 17:50, 20:34 and 23:29) keep
    their drafters' shapes, so they refit without torch: with their rows, their own step-time errors
    (summary.json); without them, other figures."""
    run = BENCHMARKS.parent / "reports" / name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["drafters"] and any(r["quantity"] == "overhead_ms" for r in summary["calibration"])
    done = _run("bench_overhead_rows.py", str(run))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith(run.name))
    assert "skipped" not in line, line  # a change to the planner's pricing shows here first: rerun validate
    without, with_rows = line.split("|")
    own = [f"{summary['step_time_median_error']:.1%}", f"{summary['step_time_p90_error']:.1%}"]
    assert with_rows.split()[:2] == own
    assert without.split()[2:4] != own


def test_bench_sweep_times_the_sweep_with_and_without_bytecode():
    """One interleaved run each way (after the untimed one that writes the bytecode): a wall
    time per setting, each the time of a sweep that succeeded."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from bench_sweep import whole_process_s
    finally:
        sys.path.remove(str(BENCHMARKS))
    times = whole_process_s(repeats=1, bytecode=(False, True))
    assert set(times) == {False, True} and all(0 < t < 120 for t in times.values())


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="the figure worker needs fork (Linux)")
def test_bench_sweep_timeline_stamps_the_parent_and_the_figure_worker():
    """One run: the parent's stages and the worker's, in the order they happen (the worker draws
    after the parent starts sending the figures, and the parent leaves after waiting for it)."""
    done = _run("bench_sweep_timeline.py", "--runs", "1")
    assert done.returncode == 0, done.stderr
    stages = [line.split("]", 1)[1].strip() for line in done.stdout.splitlines()[1:]]
    for stage in ("> sweep", "< send_figures", "W:< warm_up", "W:> draw_in_two", "> wait", "< wait", "exit"):
        assert stage in stages, (stage, stages)
    assert stages.index("< sweep") < stages.index("> send_figures") < stages.index("W:> draw_in_two")
    assert "W2:exit" in stages  # the worker's drawing child
    assert stages.index("W:< draw_in_two") < stages.index("< wait") < stages.index("exit")


def test_bench_plain_pool_reads_plain_decoding_both_ways_from_a_stored_run():
    """Run 2026-12-07-c: plain decoding read off its own rounds gives the stored run's own errors (its
    validation.csv, whose plain rows predate the pooled reading); read over its pairs, B = 8's -36%
    (its own two rounds caught by one slow spell) comes within 10%. A folder without paired
    timings is named as skipped."""
    import pandas as pd

    run = BENCHMARKS.parent / "reports" / "validation-cpu-epyc-zen4-2026-12-07-c"
    old = BENCHMARKS.parent / "reports" / "validation-cpu-repeat"
    done = _run("bench_plain_pool.py", str(run), str(old))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith(run.name))
    table = pd.read_csv(run / "validation.csv")
    plain = table[table.draft_len == 0]
    for b, e in zip(plain.batch, plain.pred_t_step / plain.meas_t_step - 1):
        own, pooled = line.split(f"B{b} ")[1].split()[0].split("->")
        assert own == f"{e:+.1%}"
    pooled_b8 = float(line.split("B8 ")[1].split()[0].split("->")[1].rstrip("%"))
    assert abs(pooled_b8) < 10 < abs(float(line.split("B8 ")[1].split("->")[0].rstrip("%")))
    assert next(x for x in done.stdout.splitlines() if x.startswith(old.name)).endswith("skipped: no paired plain timings kept")


def test_bench_plain_pool_gives_back_a_run_that_read_plain_decoding_over_its_pairs():
    """Run 2026-12-07-d read plain decoding over its pairs itself: re-read from its stored timings, the
    pooled figure is its validation.csv's error, the own-rounds figure its `meas_t_step_own`'s, and the
    run's step median / p90 read that way its summary's."""
    import pandas as pd

    run = BENCHMARKS.parent / "reports" / "validation-cpu-epyc-zen4-2026-12-07-d"
    done = _run("bench_plain_pool.py", str(run))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith(run.name))
    plain = pd.read_csv(run / "validation.csv").query("draft_len == 0")
    assert len(plain) == 5 and (plain.meas_t_step != plain.meas_t_step_own).any()
    for b, pred, pooled, own in zip(plain.batch, plain.pred_t_step, plain.meas_t_step, plain.meas_t_step_own):
        assert line.split(f"B{b} ")[1].split()[0] == f"{pred / own - 1:+.1%}->{pred / pooled - 1:+.1%}"
    summary = json.loads((run / "summary.json").read_text())
    assert line.split("->")[-1].split() == [f"{summary['step_time_median_error']:.1%}", "/",
                                          f"{summary['step_time_p90_error']:.1%}"]


def test_bench_tree_term_gives_back_the_run_then_frees_the_tree_term():
    """Run 2026-12-07-d, whose calibration could not free tree_level_us (it did not exist): refitted with
    its own terms it gives back its summary's step errors; with the term free, the fit takes some
    (its EAGLE tree's drafting was priced low) and the figures move."""
    run = BENCHMARKS.parent / "reports" / "validation-cpu-epyc-zen4-2026-12-07-d"
    summary = json.loads((run / "summary.json").read_text())
    assert "tree_level_us" not in summary["engine"]["fit_order"]
    done = _run("bench_tree_term.py", str(run))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith(run.name))
    own, more = line[len(run.name):].split("|")
    assert own.split()[:2] == [f"{summary['step_time_median_error']:.1%}", f"{summary['step_time_p90_error']:.1%}"]
    assert more.split()[:2] != own.split()[:2] and float(more.split()[-1]) > 0


def test_bench_tree_term_holds_back_the_term_a_run_freed_itself():
    """Run 2026-12-07-e freed tree_level_us in its own calibration (marked +): its own fit is the right-hand
    side, its summary's step errors and fitted value; refitted without the term, the left-hand figures move."""
    run = BENCHMARKS.parent / "reports" / "validation-cpu-epyc-zen4-2026-12-07-e"
    summary = json.loads((run / "summary.json").read_text())
    assert "tree_level_us" in summary["engine"]["fit_order"]
    done = _run("bench_tree_term.py", str(run))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith(run.name))
    assert line[len(run.name):].split()[0] == "+"
    without, own = line[len(run.name):].lstrip(" +").split("|")
    assert own.split()[:2] == [f"{summary['step_time_median_error']:.1%}", f"{summary['step_time_p90_error']:.1%}"]
    assert own.split()[-1] == f"{summary['engine']['terms']['tree_level_us']['value']:.0f}"
    assert without.split()[:2] == ["5.5%", "12.9%"]  # README and docs/validation.md quote this refit


def test_bench_draft_by_len_reads_each_runs_drafting_error_per_draft_length(tmp_path):
    """Run 2026-12-07-e's EAGLE line is the median over batch sizes of its validation.csv's drafting
    error at each D; a folder whose table has no drafting columns is named as skipped."""
    import pandas as pd

    run = BENCHMARKS.parent / "reports" / "validation-cpu-epyc-zen4-2026-12-07-e"
    bare = tmp_path / "validation-cpu-bare"
    bare.mkdir()
    pd.read_csv(run / "validation.csv").drop(columns=["pred_t_draft"]).to_csv(bare / "validation.csv", index=False)
    (bare / "summary.json").write_text((run / "summary.json").read_text())
    done = _run("bench_draft_by_len.py", str(run), str(bare))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith(run.name) and " eagle " in x)
    table = pd.read_csv(run / "validation.csv").query("mechanism == 'eagle'")
    want = (table.pred_t_draft / table.meas_t_draft - 1).groupby(table.draft_len).median()
    assert line.split()[2:9] == [f"{e:+.1%}" for e in want] and line.endswith("(7)")
    assert next(x for x in done.stdout.splitlines() if x.startswith(bare.name)).endswith("skipped: no pred_t_draft column")


def test_bench_draft_by_len_lines_are_least_squares_of_the_stored_drafting_times():
    """--lines: run 2026-12-07-e's draft model at B = 16 as the least-squares line of its measured and
    predicted drafting per step over D (ms); the measured intercept lies above the predicted one."""
    import numpy as np
    import pandas as pd

    run = BENCHMARKS.parent / "reports" / "validation-cpu-epyc-zen4-2026-12-07-e"
    done = _run("bench_draft_by_len.py", "--lines", str(run))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith(run.name) and "draft-model" in x and " 16 " in x)
    g = pd.read_csv(run / "validation.csv").query("mechanism == 'draft-model:smollm2-student' and batch == 16")
    (mb, ma), (pb, pa) = (np.polyfit(g.draft_len, g[c] * 1e3, 1) for c in ("meas_t_draft", "pred_t_draft"))
    assert line.split(None, 3)[3] == f"{ma:6.2f} + {mb:5.2f}·D | {pa:6.2f} + {pb:5.2f}·D".strip()
    assert ma > pa


def test_bench_planner_pick_gives_back_the_stored_regret_and_the_planners_pick():
    """Read the old way (the most predicted tokens/s), each batch's regret is the run's stored figure;
    read at the planner's pick, 2026-12-07-b's B = 1 moves from n-gram D = 3 to D = 2 (0.8% behind in
    predicted tokens/s, fewer verified tokens), its measured best."""
    run = BENCHMARKS.parent / "reports" / "validation-cpu-epyc-zen4-2026-12-07-b"
    done = _run("bench_planner_pick.py", str(run))
    assert done.returncode == 0, done.stderr
    stored = json.loads((run / "summary.json").read_text())["regret_per_batch"]
    line = next(x for x in done.stdout.splitlines() if x.startswith(run.name))
    for batch, regret in stored.items():
        assert line.split(f"B{batch} ")[1].split("->")[0] == f"{regret:.1%}"
    assert "B1 4.2%->0.0%" in line
    moved = [x for x in done.stdout.splitlines() if x.strip().startswith(f"{run.name} B=1")]
    assert len(moved) == 1 and "ngram D=3" in moved[0].split("->")[0] and "ngram D=2" in moved[0].split("->")[1]
