"""Stop 55: the report says what the terminal says about plans and profiles."""

from __future__ import annotations

from speedplan import plan_engines, render_summary, sweep
from speedplan.report.html import render_html


def test_a_profile_of_no_planned_engine_is_named_in_the_report_as_in_the_terminal():
    """`--engine speedplan-runtime` prices the first table only; the terminal said so and
    report.html did not."""
    r = sweep("smollm2-135m", "cpu-local", ["eagle3"], [1, 8], [0, 3], engine="speedplan-runtime")
    plans = plan_engines(r, engines=["vllm"])
    note = "engine profile speedplan-runtime describes 'speedplan.runtime', none of the planned engines"
    assert note in render_summary(r, plans=plans)
    assert note in render_html(r, 4096, [], [], "", "", plans=plans).replace("&#x27;", "'")


def test_a_profile_of_a_planned_engine_gets_no_such_note():
    r = sweep("smollm2-135m", "cpu-local", ["eagle3"], [1, 8], [0, 3], engine="vllm")
    plans = plan_engines(r, engines=["vllm"])
    assert "none of the planned engines" not in render_summary(r, plans=plans)
    assert "none of the planned engines" not in render_html(r, 4096, [], [], "", "", plans=plans)


def test_pareto_labels_on_a_flat_frontier_do_not_overlap():
    """smollm2 on cpu-local: B = 64, 32 and 16 sit on a flat stretch of the frontier, and their
    labels, all drawn above-right of their points, overlapped. Measured with the renderer's own
    text extents, not the placer's estimate."""
    from matplotlib.figure import Figure

    from speedplan.report.axes import place_labels

    fig = Figure(figsize=(7.5, 5.0), dpi=90)
    ax = fig.add_axes((0.1, 0.1, 0.6, 0.8))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.1, 100)
    ax.set_ylim(5, 200)
    xs, ys = [40, 25, 15, 9, 5.2, 2.6, 1.35], [40, 51, 62, 70, 82, 85, 86]
    texts = [f"B={b} eagle3 D=7" for b in (1, 2, 4, 8, 16, 32, 64)]
    left_out = place_labels(ax, xs, ys, texts, keep=(0, len(xs) - 1))
    renderer = fig.canvas.get_renderer() if hasattr(fig.canvas, "get_renderer") else None
    if renderer is None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        renderer = FigureCanvasAgg(fig).get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) == len(xs) - left_out >= 2
    assert {t.get_text() for t in ax.texts} >= {texts[0], texts[-1]}
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)


def test_sglang_reserve_in_words_is_what_the_usable_memory_leaves():
    """The words said "85.5 GB less SGLang's 14.6 GB reserve" (the reserve before mem_fraction_static
    is rounded to 0.830) where the usable figure, 0.830 of 85.5 GB, leaves 14.5 GB."""
    import re

    import pytest

    from speedplan.engine.memory_rule import usable_bytes
    from tests.plan._engine_memory_helpers import SGLANG

    for gb, tp, platform in ((85.5, 1, "cuda"), (150.8, 4, "cuda"), (206.1, 8, "rocm"), (192.3, 2, "cuda")):
        device = gb * 1e9
        words = SGLANG.describe(device, 16e9, tp=tp, platform=platform)
        reserve = float(re.search(r"less SGLang's ([0-9.]+) GB reserve", words).group(1))
        usable = float(usable_bytes(SGLANG, device, 16e9, tp=tp, platform=platform))
        assert reserve == pytest.approx((device - usable) / 1e9, abs=0.051), words


def test_host_terms_hidden_at_the_base_are_still_fitted_from_rows_that_show_them():
    """From the trtllm base (overlap_plain = overlap_spec = 1: host work hidden behind the GPU's),
    host_step_us and host_seq_us move no row where the base stands, so both had zero local
    slopes and host_seq_us read as "confounded" with host_step_us: kept, even named in --fit, and
    unseen batch sizes came out 12-18% off. Rows at three batch sizes tell them apart."""
    import numpy as np

    from speedplan.engine.calibrate import calibrate, predict, price
    from speedplan.engine.profile import get_engine
    from tests.engine._calibrate_helpers import _grid, _measured, _setting

    truth = {**get_engine("vllm").values(), "host_step_us": 600.0, "host_seq_us": 120.0, "host_spec_seq_us": 30.0,
             "draft_step_launches": 40.0}
    train = _measured(_grid(batches=(1, 8, 64)), truth)
    test = _measured(_grid(batches=(2, 16, 32)), truth)
    base = get_engine("trtllm")
    result = calibrate(base, [(m, _setting()) for m in train],
                       ["host_step_us", "host_seq_us", "host_spec_seq_us", "draft_step_launches", "overlap_plain",
                        "overlap_spec", "layer_launches"])
    assert "host_seq_us" not in result.kept or "cannot tell" not in result.kept["host_seq_us"]
    pred = predict(result.profile.values(), price([(m, _setting()) for m in test]))
    err = np.abs(pred / np.array([m.value for m in test]) - 1)
    assert np.median(err) < 0.03 and err.max() < 0.06, err


def test_a_term_printed_at_its_limit_is_written_at_it():
    """The printout said "overlap_spec 9.864e-07 (at 0, its physical limit)" (bound_side, within
    1e-6 of the range) while the profile kept 9.864e-07 (written as the bound only within 1e-9)."""
    from speedplan.engine.calibrate import TERMS, bound_side, calibrate
    from speedplan.engine.profile import get_engine
    from tests.engine._calibrate_helpers import _grid, _measured, _setting

    base = get_engine("vllm")
    truth = {**base.values(), "host_step_us": 600.0, "host_seq_us": 120.0, "host_spec_seq_us": 30.0,
             "draft_step_launches": 40.0, "overlap_spec": 0.0}
    result = calibrate(base, [(m, _setting()) for m in _measured(_grid(batches=(1, 8, 64)), truth)])
    at_limit = [t for t in result.fitted if bound_side(t, result.profile.terms[t].value) is not None]
    assert at_limit  # overlap_spec, at least, fits to its bound of 0
    for t in at_limit:
        assert result.profile.terms[t].value in (TERMS[t].low, TERMS[t].high), (t, result.profile.terms[t].value)


def test_sglang_launch_comment_gives_the_ranges_its_buckets_run():
    """Llama-3.1-70B on four A100s: D = 6 planned at B = 32 and 4 at B = 64. SGLang's buckets are
    keyed by the requests a step runs, at most 48, so B = 48-63 run the bucket keyed 48 (D = 4), as
    sglang_adaptive_config.json and recommendations.json say; the launch script's comment said
    32-63 -> 6."""
    from speedplan.serving.plan import ServingPlan
    from speedplan.serving.sglang import launch_ranges, render

    p = ServingPlan(model="llama-3.1-70b", mechanism="eagle3", draft_len=8, tp=4, mode="adaptive", engine="sglang",
                    schedule=((1, 8), (16, 7), (32, 6), (64, 4)),
                    per_batch=((1, 8, 3.0, 0.2), (16, 7, 2.5, 0.0), (32, 6, 2.2, 0.0), (64, 4, 1.6, 0.0)))
    text = render(p)["sglang_launch.sh"].splitlines()
    start = next(i for i, x in enumerate(text) if x.startswith("# Per-batch draft length planned")) + 2
    shown = [tuple(int(v) for v in x[1:].replace("-", " ").split()) for x in
             text[start:next(i for i, x in enumerate(text) if x.startswith("# How this engine gets it"))]]
    assert shown == [(1, 15, 8), (16, 31, 7), (32, 47, 6), (48, 65536, 4)]
    assert shown == launch_ranges(list(p.schedule), p.mode, p.spec_max_running)


def test_a_users_mtp_acceptance_length_is_extended_with_mtps_decay():
    """--acceptance mtp:al=2.6@3 on a one-MTP-layer model was one i.i.d. rate (0.717) at every
    depth: AL 3.29 at D = 7, where the published MTP rule (each reuse of the layer x 0.886)
    gives 2.89 from the same measurement, and the plan chose D = 7 on it."""
    import pytest

    from speedplan.plan.acceptance_sources import parse_acceptance

    r = sweep("glm-4.7-flash", "h100-sxm", ["mtp"], [1, 8], range(0, 9), acceptance={"mtp": parse_acceptance("al=2.6@3")})
    al = r.frame[(r.frame.mechanism == "mtp") & (r.frame.batch == 8)].set_index("draft_len")["acceptance_length"]
    assert al[3] == pytest.approx(2.6, abs=1e-6)  # the measurement itself is kept
    assert al[7] == pytest.approx(2.891, abs=0.002)
    assert al[7] < 3.0 < 3.287  # the i.i.d. rate's AL at D = 7
    assert "as MTP rates: p_1 0.766" in r.meta["acceptance"]["mtp"]
    # out of the decay's reach: one rate, said so
    r = sweep("deepseek-v3", "h200-sxm", ["mtp"], [1], [0, 3], tp=8, acceptance={"mtp": parse_acceptance("al=3.9@3")})
    assert r.frame[(r.frame.mechanism == "mtp") & (r.frame.draft_len == 3)]["acceptance_length"].iloc[0] == \
        pytest.approx(3.9, abs=1e-6)
    assert "so one rate at every depth" in r.meta["acceptance"]["mtp"]
    # other mechanisms keep the i.i.d. rate
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1], [3, 7], contexts=[2000],  # within the head's positions
              acceptance={"eagle3": parse_acceptance("al=2.6@3")})
    assert r.frame[r.frame.draft_len == 7]["acceptance_length"].iloc[0] == pytest.approx(3.287, abs=0.002)


def test_sglang_launch_loads_the_qwen3_30b_head_sglang_ran():
    """SpecForge issue #339 served zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead on SGLang (its rows price
    the acceptance); the launch file held a placeholder path."""
    from speedplan.serving.plan import ServingPlan
    from speedplan.serving.sglang import render

    p = ServingPlan(model="qwen3-30b-a3b", mechanism="eagle3", draft_len=3, schedule=((1, 3),), tp=2, engine="sglang")
    text = render(p)["sglang_launch.sh"]
    assert "--speculative-draft-model-path zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead" in text
    assert "<path-to-eagle3-head" not in text


def test_a_plain_step_priced_slower_at_a_smaller_batch_is_named():
    """DeepSeek-V3 on 8 B200s: the shipped profile's fp8 GEMMs are slower at M = 1 than at M = 2
    for most shapes, so plain decoding at B = 1 was priced slower than at B = 2 without a word
    (`speedplan sweep --model deepseek-v3 --hardware b200 --tp 8 --engine sglang --context 16384`:
    17.47 ms against 13.10 ms, and MTP at 2.00x against 1.25x; here, at context 4096, 16.90 and
    12.32 ms)."""
    from speedplan.report.table_notes import plain_dip_line

    r = sweep("deepseek-v3", "b200", ["mtp"], [1, 2, 4], [0, 1], tp=8, engine="sglang")
    plain = r.frame.groupby("batch")["t_plain_s"].first()
    assert plain[1] > 1.05 * plain[2]  # the profile's dip itself, which the note reports
    line = plain_dip_line(r.frame)
    assert line.startswith(f"note: plain decoding is priced slower a step at B = 1 ({1e3 * plain[1]:.2f} ms) than at B = 2")
    assert line in render_summary(r)
    assert plain_dip_line(sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 2, 4, 8], [0, 1]).frame) is None


def test_plain_rows_leaning_together_are_not_called_outliers():
    """Four plain TPOTs 15-22% slower than priced beside six EAGLE-3 rows within 3%: the median over
    all rows (2.4%) hid the lean, and the note called the plain rows possible outliers, where the
    base's layer launches (never tried) held them away."""
    import numpy as np

    import speedplan
    from speedplan.engine.run_calibration import render_calibration

    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1500, "tpot_ms": t}
            for b, t in ((1, 6.62), (4, 6.95), (16, 7.84), (64, 10.6))]
    rows += [{"mechanism": "eagle3", "batch": b, "draft_len": d, "context": 1500, "tpot_ms": t, "acceptance_length": al}
             for b, d, t, al in ((1, 3, 3.02, 2.98), (4, 3, 3.25, 2.95), (16, 3, 3.74, 2.97), (64, 3, 5.61, 2.96),
                                 (1, 2, 3.45, 2.47), (1, 4, 2.86, 3.41))]
    default = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows)
    text = render_calibration(default)
    assert "may be outliers" not in text and "may be an outlier" not in text
    note = next(line for line in text.splitlines() if "the plain rows are priced slower" in line)
    terms = note.split("(--fit ")[1].split(" ")[0]
    assert "layer_launches" in terms
    wider = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, fit=terms)
    assert np.median(np.abs(wider.residual)) < 0.01 < np.max(np.abs(default.residual[:4])) - 0.14
    # a disturbed plain run among them (5.2 ms at B = 16, +80%) is still named, against its kind's lean
    disturbed = [dict(r, tpot_ms=5.2) if r["mechanism"] == "none" and r["batch"] == 16 else r for r in rows]
    text = render_calibration(speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", disturbed))
    assert "the plain rows are priced slower" in text
    assert "this row stands far from the others: row 2 (none B=16 D=0" in text
    # plain rows leaning one way while the speculative ones lean the other: no kind "fits", no group note
    from speedplan.engine.calibration_notes import _leaning_group

    class Opposite:  # residuals only, as _leaning_group reads them
        rows = [{"mechanism": "none", "quantity": "tpot_ms"}] * 3 + [{"mechanism": "eagle3", "quantity": "tpot_ms"}] * 3
        residual = np.array([0.11, 0.12, 0.10, -0.11, -0.12, -0.10])

    assert _leaning_group(Opposite, 0.05) is None


def test_a_bad_scrape_after_a_csv_is_named_not_the_csv(tmp_path):
    """A CSV whose speculative rows take their acceptance from a /metrics scrape, listed before a
    scrape that is UTF-16 or has no spec_decode counters: the CSV was blamed ("acceptance_length
    is needed"). And a UTF-16 CSV without a byte-order mark said "missing column 'mechanism'"."""
    import pytest

    from speedplan.engine.run_calibration import calibrate_files
    from speedplan.errors import SpeedplanInputError

    csv = tmp_path / "runs.csv"
    csv.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,6.6\neagle3,1,3,1024,3.0\n")
    plain = tmp_path / "metrics.txt"
    plain.write_text('# HELP vllm:num_requests_running Requests.\n# TYPE vllm:num_requests_running gauge\n'
                     'vllm:num_requests_running{engine="0"} 0.0\n')
    wide = tmp_path / "metrics16.txt"
    wide.write_bytes('vllm:spec_decode_num_drafts_total{engine="0"} 10.0\n'.encode("utf-16"))
    for scrape, words in ((plain, "no vllm:spec_decode_num_drafts_total sample"), (wide, "UTF-16 text")):
        with pytest.raises(SpeedplanInputError, match=f"^{scrape}: .*{words}"):
            calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [csv, scrape])
    nobom = tmp_path / "nobom.csv"
    nobom.write_bytes(csv.read_text().encode("utf-16-le"))
    with pytest.raises(SpeedplanInputError, match="nobom.csv: cannot read \\(NUL bytes"):
        calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [nobom])


def test_engines_says_which_terms_a_calibration_kept_and_why(tmp_path):
    """`speedplan engines FILE` showed a kept term's base source ("the four vLLM rows ... are all at
    B = 1") for a profile fitted to rows at B = 1-64; why the calibration kept it was only in fit.kept."""
    import json

    import speedplan
    from speedplan.cli.catalog import _engine_detail
    from speedplan.engine.profile import get_engine

    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1500, "tpot_ms": t}
            for b, t in ((1, 6.62), (4, 6.95), (16, 7.84), (64, 10.6))]
    rows += [{"mechanism": "eagle3", "batch": b, "draft_len": 3, "context": 1500, "tpot_ms": t, "acceptance_length": 2.96}
             for b, t in ((1, 3.02), (4, 3.25), (16, 3.74), (64, 5.61))]
    result = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(result.profile.to_json()))
    kept = {t: why for t, why in result.kept.items() if isinstance(why, str)}
    assert kept
    text = _engine_detail(get_engine(str(path)))
    for term, why in kept.items():
        line = next(x for x in text.splitlines() if x.strip().startswith(term + " "))
        assert f"kept at the base's value by its calibration ({why}); the base's source: " in line
    term = next(iter(kept))  # edited since (with_terms, or by hand): no longer "kept"
    edited = get_engine(str(path)).with_terms({term: get_engine(str(path)).terms[term].value + 1.0}, "measured by me")
    line = next(x for x in _engine_detail(edited).splitlines() if x.strip().startswith(term + " "))
    assert "kept at the base's value" not in line and line.endswith("measured by me")


def test_calibrate_rows_from_several_files_say_which_file_and_line():
    """Two files' identical configurations printed as identical lines; only notes named files."""
    from speedplan.engine.calibration_rows import row_table

    base = {"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1024, "quantity": "tpot_ms",
            "field": "tpot_ms", "measured": 6.6, "predicted": 7.0, "residual": 0.06, "loo_error": None,
            "acceptance_length": 1.0}
    rows = [{**base, "where": "/a/runs.csv:2"}, {**base, "where": "/b/other.csv:5", "loo_error": 0.153}]
    lines = row_table(rows, "leave-one-out")
    assert sorted(x[-4:] for x in lines if x.startswith("  none B=1 D=0")) == [" [1]", " [2]"]
    assert len({len(x) for x in lines if x.startswith("  none B=1 D=0")}) == 1  # the numbers line up
    assert lines[-1] == "  files: [1] /a/runs.csv; [2] /b/other.csv"
    one = row_table([rows[0]], "leave-one-out")
    assert not any("runs.csv" in x for x in one)  # one file: the rows need no name


def test_the_terminal_table_names_a_trees_size():
    """eagle3-tree rows read "D=4, AL 2.93" at B = 8 and "D=4, AL 2.65" at B = 16 with nothing
    to say why: the tree shrank from 32 to 16 nodes (the HTML's verified column said so)."""
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3-tree"], [1, 64], [0, 4, 8], contexts=[2000])  # within its positions
    text = render_summary(r)
    trees = [row for row in r.best.itertuples() if row.verify_tokens > row.draft_len + 1]  # not a chain-shaped one
    assert trees
    for row in trees:
        assert any(x.split()[0] == str(row.batch) and f"eagle3-tree ({row.verify_tokens - 1} nodes)" in x
                   for x in text.splitlines())


def test_the_moe_rise_note_says_where_the_speedup_dipped():
    """DeepSeek-V3 on 8 H200s: "rises from 1.65x at B=1 to 1.86x at B=128" hid 1.19x at B = 8."""
    import pandas as pd

    from speedplan.report.table_notes import moe_rise_line

    meta = {"model": {"experts": "8/256 per token"}}
    best = pd.DataFrame({"batch": [1, 2, 8, 32, 128], "context": 4096, "mechanism": "mtp",
                         "speedup": [1.65, 1.41, 1.19, 1.54, 1.86]})
    assert "rises from 1.65x at B=1 to 1.86x at B=128 (through 1.19x at B=8):" in moe_rise_line(meta, best)
    steady = best.assign(speedup=[1.65, 1.66, 1.70, 1.80, 1.86])
    assert "(through" not in moe_rise_line(meta, steady)


def test_calibrate_on_a_pipe_says_so_at_once(tmp_path):
    """The UTF-16 check opened every file before the regular-file check: a FIFO hung calibrate."""
    import os
    import threading

    import pytest

    from speedplan.engine.run_calibration import calibrate_files
    from speedplan.errors import SpeedplanInputError

    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    raised = []

    def run():
        try:
            calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [fifo])
        except SpeedplanInputError as e:
            raised.append(str(e))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():  # unblock the reader so the daemon thread ends, then fail
        with open(fifo, "w"):
            pass
        pytest.fail("calibrate waited on the pipe")
    assert raised and raised[0].endswith("not a regular file (a device or a pipe); give a measurements file")


def test_the_pareto_figure_places_its_labels_inside_the_axes(tmp_path, monkeypatch):
    """pareto_figure draws its frontier labels with place_labels (the flat frontier's labels had
    overlapped), and "B=1 eagle3-tree D=8" no longer runs past the axes' right edge."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    import speedplan.report.figures as figures

    seen = []
    real = figures.place_labels

    def spy(ax, xs, ys, texts, **kw):
        out = real(ax, xs, ys, texts, **kw)
        FigureCanvasAgg(ax.figure)
        renderer = ax.figure.canvas.get_renderer()
        seen.append([(t.get_text(), t.get_window_extent(renderer), ax.get_window_extent(renderer)) for t in ax.texts
                     if t.get_text().startswith("B=")])  # the frontier's labels, not the tick labels
        return out

    monkeypatch.setattr(figures, "place_labels", spy)
    front = {"tokens_per_s_per_user": [125.0, 193.0, 246.0, 317.0, 378.0, 436.0, 475.0],
             "tokens_per_s_per_gpu": [8015.0, 6168.0, 3940.0, 2534.0, 1511.0, 872.0, 475.0],
             "batch": [64, 32, 16, 8, 4, 2, 1], "mechanism": ["eagle3"] * 3 + ["eagle3-tree"] * 4,
             "draft_len": [6, 7, 6, 7, 7, 8, 8]}
    clouds = [("eagle3", front["tokens_per_s_per_user"], front["tokens_per_s_per_gpu"])]
    figures.pareto_figure(clouds, ((20.0, 500.0), (100.0, 9000.0)), front, tmp_path / "p.png", "caption", "title")
    assert seen and seen[0]
    for text, box, axes in seen[0]:
        assert axes.x0 - 1 <= box.x0 and box.x1 <= axes.x1 + 1, text


def test_names_offered_for_a_mistyped_gpu_or_draft():
    import pytest

    from speedplan.errors import SpeedplanInputError, did_you_mean
    from speedplan.serving.sglang import _planned_cap

    assert did_you_mean("h200", ["b200", "h100-sxm", "h200-sxm"]) == " (did you mean 'h200-sxm'?)"  # not b200
    assert did_you_mean("vlm", ["vllm", "sglang"]) == " (did you mean 'vllm'?)"
    with pytest.raises(SpeedplanInputError, match="shipped profiles: cpu-local-epyc-zen3, .*cpu-local-xeon"):
        sweep("llama-3.1-8b", "cpu-local-xeo", ["eagle3"], [1], [0, 1])
    with pytest.raises(SpeedplanInputError, match="did you mean 'cpu-local-xeon'"):
        sweep("llama-3.1-8b", "cpu-local-xeo", ["eagle3"], [1], [0, 1])
    with pytest.raises(SpeedplanInputError, match="^mechanism draft-model:llama-9000: the draft model: unknown model"):
        sweep("llama-3.1-8b", "h100-sxm", ["draft-model:llama-9000"], [1], [0, 1])
    assert _planned_cap(None, [1, 64]) == 48 and _planned_cap(0, [1, 64]) == 64 and _planned_cap(16, [1, 64]) == 16


def test_recommendations_schedules_end_where_the_launch_files_do():
    """recommendations.json ended vLLM's and TensorRT-LLM's last range at the largest planned batch
    ([64, 64, 5]) where vllm_serve.sh and the TensorRT-LLM schedule run it open-ended ([64, 65536, 5])."""
    from speedplan import plan_engines
    from speedplan.plan.engine_outputs import engine_records
    from speedplan.serving.plan import OPEN_END_BATCH

    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 16, 64], range(0, 9))
    records = engine_records(r, plan_engines(r))
    for name, rec in records.items():
        if rec.get("schedule"):
            assert rec["schedule"][-1][1] == OPEN_END_BATCH, (name, rec["schedule"])
            assert rec["schedule"][0][0] == 1


def test_a_shipped_cpu_profile_of_another_name_is_named_in_the_title():
    """--hardware cpu-local-xeon read "smollm2-135m on cpu-local" in the title and the page's
    hardware line; only the latency line named the profile that priced it."""
    r = sweep("smollm2-135m", "cpu-local-xeon", ["eagle3"], [1], [0, 1])
    assert render_summary(r).splitlines()[0].startswith("speedplan: smollm2-135m on cpu-local (profile cpu-local-xeon)")
    assert "(profile cpu-local-xeon)" in render_html(r, 4096, [], [], "", "")
    assert "(profile" not in render_summary(sweep("smollm2-135m", "cpu-local", ["eagle3"], [1], [0, 1])).splitlines()[0]
