"""The sweep report: figures are real PNGs, the HTML links everything, provenance is stated."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

from speedplan.plan.sweep import sweep
from speedplan.report.html import write_report
from speedplan.report.summary import provenance, render_summary, short_provenance
from speedplan.report.figures import FIGURES
from tests.report._report_helpers import MEASURED, SMALL, small_sweep  # noqa: F401 (the fixture `result`)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _files(out: Path) -> list[str]:
    names = ["sweep.csv", "pareto.csv", "recommendations.json", "serving/vllm.sh"]
    (out / "serving").mkdir(exist_ok=True)
    for name in names:
        (out / name).write_text("x\n")
    return names


def _check_pngs(paths: list[Path]) -> None:
    pngs = [p for p in paths if p.suffix == ".png"]
    assert sorted(p.name for p in pngs) == sorted(FIGURES.values())
    for p in pngs:
        data = p.read_bytes()
        assert data[:8] == PNG_MAGIC, p
        assert len(data) > 10_000, (p, len(data))


def test_report_writes_pngs_and_html_linking_everything(result, tmp_path):
    files = _files(tmp_path)
    written = write_report(result, tmp_path, files)
    assert all(p.exists() and p.parent == tmp_path for p in written)
    _check_pngs(written)
    assert tmp_path / "report.html" in written
    page = (tmp_path / "report.html").read_text()
    links = set(re.findall(r'href="([^"]+)"', page))
    assert set(files) <= links
    images = set(re.findall(r'<img src="([^"]+)"', page))
    assert images == set(FIGURES.values())
    assert all((tmp_path / name).exists() for name in images | links)
    assert not re.search(r'(src|href)="(https?:)?//', page), "report must open offline"
    assert MEASURED in page
    for mechanism, source in result.meta["acceptance"].items():
        assert html.escape(f"{mechanism}: {source}") in page
    pick = result.slo_pick
    assert f"SLO pick (&gt;= 100 tokens/s/user): {pick['mechanism']} D={pick['draft_len']}" in page
    for row in result.best.itertuples():  # the recommendation table has every batch
        shown = "off (plain decoding)" if row.mechanism == "none" else row.mechanism
        assert f"<td>{row.batch}</td><td>{row.context}</td><td class=\"l\">{shown}</td>" in page


def test_every_figure_says_where_numbers_came_from(result, tmp_path):
    caption = short_provenance(result)
    # each acceptance names the row it came from, whole (until 2026-12-03 the cut fell inside
    # "published_cases.csv: ...", so that no caption named its paper or table)
    assert caption.startswith(f'latency: {MEASURED}; engine profile vllm; acceptance: eagle: published: "EAGLE-3 paper Tab.1"')
    assert 'ngram: published: "' in caption and "…" not in caption
    page = write_report(result, tmp_path, [])[-1].read_text()
    assert page.count(html.escape(caption)) == len(FIGURES)  # under each figure, as inside it
    assert page.count(html.escape(provenance(result))) == 1


def test_nothing_feasible_still_renders(tmp_path):
    result = sweep(**{**SMALL, "model": "llama-3.1-405b", "batches": [1, 8]})
    assert not result.frame["feasible"].any() and result.best.empty and result.pareto.empty
    text = render_summary(result)
    assert "no feasible configuration: llama-3.1-405b on h100-sxm at TP 1 fits in memory at no swept batch" in text
    assert f"latency: {MEASURED}" in text
    written = write_report(result, tmp_path, _files(tmp_path))
    _check_pngs(written)
    assert "the weights alone do not fit: try a larger --tp" in (tmp_path / "report.html").read_text()  # the CLI's line


def test_import_is_cheap():
    code = "import sys, speedplan.report; print(sorted(m for m in ('matplotlib', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_report_shows_each_engines_plan_and_the_sensitivity_of_published_defaults(result, tmp_path):
    from speedplan.plan.engine_plan import plan_engines

    plans = plan_engines(result)
    page = write_report(result, tmp_path, [], plans=plans)[-1].read_text()
    assert "<h2>Plan per engine</h2>" in page
    for name, plan in plans.items():
        assert f"<h3>{name}: {html.escape(plan.mechanism)} ({plan.mode}" in page  # (a tree plan: ", N nodes")
    assert "published acceptance at AL &plusmn;10%" in page  # every default here is a published row
    assert "D at AL -10%" in page


def test_the_roof_and_the_fallback_say_where_they_come_from(result, tmp_path):
    """The report's roofline numbers name their basis (the profile's fastest measured GEMM, an
    assumed copy bandwidth), and the terminal names the op families the roofline fallback prices
    (the H100 profile has no elementwise table); a GPU without a profile names what its fallback
    was fitted to."""
    basis = result.meta["roofline_basis"]
    assert basis.startswith("956 TFLOP/s bf16 (fastest measured GEMM of the profile: 97% of the preset's 989")
    assert "(assumption: 88% of the preset's 3,350 GB/s)" in basis
    page = write_report(result, tmp_path, [])[-1].read_text()
    assert html.escape(basis) in page
    assert "roofline fallback for some ops in" in render_summary(result) and "the profile has no elementwise table" in \
        render_summary(result)
    a100 = sweep("llama-3.1-8b", "a100-80gb", ["eagle"], [1], [0, 2], contexts=[1024])
    assert "datasheet roofline a100-80gb (roofline efficiencies fitted to h100-sxm, h200-sxm, b200)" in render_summary(a100)
    # the roof its fitted fallback reaches: the datasheet peak, not the plain roofline's 75% (GEMMs were drawn above it)
    assert a100.meta["roofline_basis"].startswith("312 TFLOP/s bf16 (datasheet peak: the cap of the fitted fallback")
    assert a100.meta["peak_flops_per_s"] == 312e12 and (a100.frame["gemm_flops_per_s"] <= 312e12).all()


def test_figures_stay_readable_with_hundreds_of_batch_sizes(tmp_path):
    """--batch 1-256 drew one bar per batch size (an 8,208-pixel-wide step_breakdown.png) and
    256 overlapping batch labels: the figures now thin their labels and bars."""
    from PIL import Image

    from speedplan.report.axes import thin

    batches = list(range(1, 257))
    assert [batches[i] for i in thin(batches, 14)] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # log axis
    assert [batches[i] for i in thin(batches, 8, linear=True)] == [1, 50, 100, 150, 200, 250]  # columns
    assert thin([1, 8, 64], 12) == [0, 1, 2]
    assert len(thin(list(range(96, 110)), 8)) <= 8  # no power of two there: evenly spaced
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=tuple(batches), draft_lens=(0, 2, 4))
    written = write_report(r, tmp_path, [])
    with Image.open(tmp_path / "step_breakdown.png") as img:
        assert img.size[0] < 1000
    assert all(p.exists() for p in written)


def test_the_heatmap_stars_the_table_pick():
    """The heatmap starred the fastest D at each batch while the table picks, within
    TIE_TOLERANCE of the fastest, the fewest verified tokens: on llama-3.1-8b / H100 with EAGLE-3
    alone they differed at some batch sizes, and for a tree a longer D with fewer nodes can be the
    pick (a review of 2026-12-04: eagle3-tree starred D = 6 at B = 8 where the table says 7). Now
    the star sits on the table's D wherever the table speculates, and nowhere else."""
    from speedplan.report.data import figure_set
    from tests._heads import long_heads

    # a head that holds these contexts (the published one holds 2,048 positions, past which vLLM's V1 runner drafts nothing)
    for mechs, context in ((["eagle3"], 4096), (["eagle3-tree"], 8192)):  # contexts where the two differ somewhere
        r = sweep("llama-3.1-8b", "h100-sxm", long_heads(*mechs), batches=[1, 2, 4, 8, 16, 32, 64, 128],
                  draft_lens=range(0, 9), contexts=[context])
        heat = figure_set(r, context).heatmap
        batches, drafts, _ = heat["grids"][mechs[0]]
        starred = {b: drafts[k] for b, k in zip(batches, heat["stars"][mechs[0]]) if k >= 0}
        best = r.best.set_index("batch")
        assert starred == {b: int(best.loc[b, "draft_len"]) for b in batches
                           if b in best.index and best.loc[b, "mechanism"] == mechs[0]}  # B = 128 fits nowhere
        rows = r.frame[r.frame.mechanism == mechs[0]]
        fastest = {b: int(g.loc[g.speedup.idxmax(), "draft_len"]) for b, g in rows.groupby("batch")}
        assert any(fastest[b] != d for b, d in starred.items()), mechs  # where the old star (the fastest D) was elsewhere


def test_the_figures_read_the_same_picks_off_their_narrowed_columns_as_off_the_whole_frame():
    """figure_set hands pick.best_per_batch and pick.best_draft_len only the columns they read
    (`data.PICK_COLUMNS`, for speed): the best-D schedules and the stars are those of the sweep's whole
    frame, at each of two contexts."""
    import numpy as np

    from speedplan.plan.pick import best_draft_len, best_per_batch
    from speedplan.report.data import figure_set

    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3", "ngram", "eagle-tree"], batches=[1, 8, 64, 256],
              draft_lens=range(0, 7), contexts=[1024, 16384])
    for context in (1024, 16384):
        figs = figure_set(r, context)
        for mech in ("eagle3", "ngram", "eagle-tree"):
            whole = best_draft_len(r.frame, mech, context)
            got = figs.best_d["schedules"][mech]
            for col in ("batch", "draft_len", "pointwise_draft_len"):
                assert np.array_equal(got[col], whole[col].to_numpy()), (context, mech, col)
            batches, drafts, _ = figs.heatmap["grids"][mech]
            at = r.frame[(r.frame.context == context) & r.frame.mechanism.isin([mech, "none"])]
            pick = best_per_batch(at).set_index("batch")
            assert [drafts[k] if k >= 0 else None for k in figs.heatmap["stars"][mech]] == [
                int(pick.at[b, "draft_len"]) if b in pick.index and pick.at[b, "mechanism"] == mech else None
                for b in batches], (context, mech)


def test_a_model_named_in_emoji_draws_without_a_warning(tmp_path):
    """A config folder named 'ünicode🙂' wrote two matplotlib 'Glyph 128578 missing' warnings to
    stderr on an otherwise clean run (an audit of 2026-12-04): the glyph is a box in the title."""
    import warnings

    folder = tmp_path / "ünicode🙂"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
        "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
        "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}))
    r = sweep(str(folder), "h100-sxm", ["ngram"], [1, 8], [0, 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_report(r, tmp_path, [])
    assert not [w for w in caught if "Glyph" in str(w.message)], [str(w.message) for w in caught]
    assert (tmp_path / "pareto.png").exists()
