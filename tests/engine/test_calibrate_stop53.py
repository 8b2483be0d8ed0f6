"""`speedplan calibrate` as a user walkthrough of 2026-12-06 found it: an SGLang bench_serving
--goodput line refused, the one-sided note backwards for throughput rows, an outlier and repeats
far apart fitted in silence, the written profile describing the base's rows, --engine errors that
did not name the option, a help text without bench_serving, a tree's measured acceptance dropped
from the suggested sweep, and a table in file-name order (docs/engine.md, "`speedplan calibrate`")."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import speedplan
from speedplan.cli.app import app, run as cli
from speedplan.engine.calibration_notes import OUTLIER_FACTOR, OUTLIER_FLOOR
from speedplan.engine.profile import TERMS, get_engine
from speedplan.engine.readers.measurements import read_measurements
from speedplan.engine.run_calibration import calibrate_files, render_calibration
from tests.engine.test_calibrate_bench_tpot import _run
from tests.engine.test_sglang_bench_serving import sglang_line

MODEL = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm"]
# (batch, steps, topk, num_draft_tokens, acc_length, step_time in s): bench_speculative.py lines of
# plain decoding, an EAGLE-3 chain of 3 and a tree of depth 5, topk 4, 7 nodes (8 tokens with the root)
SPEC = [(b, 0, 0, 0, 1.0, t) for b, t in ((1, 0.00615), (4, 0.0064), (16, 0.00745), (32, 0.0088))]
SPEC += [(b, 3, 1, 4, 3.05, t) for b, t in ((1, 0.0087), (4, 0.0092), (16, 0.0113), (32, 0.0142))]
SPEC += [(b, 5, 4, 8, 3.62, t) for b, t in ((1, 0.0101), (4, 0.0108), (16, 0.0142), (32, 0.0195))]


def _spec_lines(path, change=None):
    """The SPEC lines as bench_speculative.py writes them; `change` {line index: step_time}."""
    lines = []
    for i, (b, steps, topk, tokens, al, t) in enumerate(SPEC):
        lines.append(json.dumps({"batch_size": b, "steps": steps, "topk": topk, "num_draft_tokens": tokens,
                                 "acc_length": al, "step_time": (change or {}).get(i, t), "completion_tokens": 512.0}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_sglang_goodput_line_is_read_as_sglangs(tmp_path):
    """SGLang 0.5.23's bench_serving --goodput adds request_goodput (with goodput_slos_ms and
    slo_attainment) to its line; it was refused as a key only vLLM writes. vLLM writes it too
    (null without --goodput), and its runs still read as vLLM's."""
    f = tmp_path / "s.jsonl"
    line = sglang_line(request_goodput=3.1, goodput_slos_ms={"tpot": 50.0}, slo_attainment=0.97,
                       slo_attainment_by_metric={"tpot": 0.97})
    f.write_text(json.dumps(line) + "\n")
    (m,) = read_measurements(f)
    assert m.acceptance_length == line["accept_length"] and dict(m.names)["acceptance_length"] == "accept_length"
    v = tmp_path / "v.json"
    v.write_text(json.dumps(_run(request_goodput=None) | {"request_goodput": None}))
    (run,) = read_measurements(v)
    assert run.value == _run()["mean_tpot_ms"] and dict(run.names)["tpot_ms"] == "mean_tpot_ms"


def test_the_one_sided_note_reads_a_throughput_residual_as_time():
    """Throughput rows priced below their measurement are priced slower; the note said faster,
    reading any negative residual as faster whatever the quantity. The table says the sign."""
    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1280, "tokens_per_s": b * 1000 / (0.9 * t)}
            for b, t in ((1, 6.6), (4, 7.0), (16, 8.1), (64, 12.2))]
    rows += [{"mechanism": "eagle3", "batch": b, "draft_len": 3, "context": 1280, "acceptance_length": 3.04,
              "tokens_per_s": b * 1000 / (0.9 * t)} for b, t in ((1, 2.85), (4, 3.15), (16, 4.0), (64, 7.2))]
    result = speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows)
    assert np.median(result.residual) < -0.05  # predicted throughput below the measured: slower steps
    text = render_calibration(result)
    note = next(line for line in text.splitlines() if "than measured (" in line)
    assert "the rows are priced slower than measured (+" in note and "priced faster" not in note
    assert "residual = predicted / measured − 1 of the row's quantity" in text
    assert "faster for tokens_per_s and speedup" in text


def test_a_row_far_beyond_the_others_is_named(tmp_path):
    """One bench_speculative line 2.5x its neighbours moved host_step_us from 0 to thousands of µs
    and left others 26% off, with no note; the note names it and how to leave it out."""
    clean = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "sglang", [_spec_lines(tmp_path / "clean.jsonl")])
    assert "far from the others" not in render_calibration(clean)
    f = _spec_lines(tmp_path / "odd.jsonl", {5: 2.5 * SPEC[5][5]})  # line 6: eagle3 B=4
    result = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "sglang", [f])
    r, loo = np.abs(result.residual), result.loo_error
    assert loo[5] > max(OUTLIER_FACTOR * np.median(loo), OUTLIER_FLOOR)
    note = next(line for line in render_calibration(result).splitlines() if "far from the others" in line)
    assert f"{f}:6 (eagle3 B=4 D=3, step_ms) residual {result.rows[5]['residual']:+.1%}" in note
    assert "may be an outlier" in note and "leave it out" in note
    assert sum(f"{f}:{i}" in note for i in range(1, 13)) == 1  # that row alone
    without = tmp_path / "without.jsonl"
    without.write_text("".join(line + "\n" for i, line in enumerate(f.read_text().splitlines()) if i != 5))
    refit = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "sglang", [without])
    assert np.abs(refit.residual).max() < r[np.arange(len(r)) != 5].max()  # the others fit better without it


def test_repeats_far_apart_but_kept_are_noted(tmp_path):
    """Two runs of one configuration 1.39x apart were fitted together without a word (1.5x is refused)."""
    f = tmp_path / "rep.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\nnone,1,0,1500,6.5,\n"
                 "none,16,0,1500,7.9,\neagle3,1,3,1500,2.8,3.0\neagle3,1,3,1500,3.9,3.0\neagle3,16,3,1500,3.6,3.0\n")
    text = render_calibration(calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [f]))
    note = next(line for line in text.splitlines() if "one configuration" in line)
    assert f"{f}:4, {f}:5: one configuration (eagle3, batch 1, draft_len 3, context 1500) measured " \
           f"{3.9 / 2.8:.2f}x apart" in note
    close = tmp_path / "close.csv"
    close.write_text(f.read_text().replace("3.9,3.0", "2.9,3.0"))
    assert "one configuration" not in render_calibration(calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [close]))


def test_the_written_profile_describes_this_fit_not_the_bases(tmp_path):
    """The profile kept the base's description ("Terms fitted to the SGLang rows of shared/cases...")
    and version, fit.described named files without their folder, and a term fitted to 0 was
    written as 2.016e-23. Rows 10% faster than the base prices them take host work to its bound."""
    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\n" + "".join(
        f"{m},{b},{d},1280,{0.9 * t:.4f},{al}\n" for m, d, al, ts in (("none", 0, "", (6.6, 7.0, 8.1, 12.2)),
                                                                      ("eagle3", 3, 3.04, (2.85, 3.15, 4.0, 7.2)))
        for b, t in zip((1, 4, 16, 64), ts)))
    out = tmp_path / "mine.json"
    assert cli(["calibrate", *MODEL, "--engine", "vllm", "--measurements", str(f), "--out", str(out)]) == 0
    data, base = json.loads(out.read_text()), get_engine("vllm")
    assert str(f.absolute()) in data["description"] and "from base profile vllm" in data["description"]
    assert base.description not in data["description"] and data["fit"]["base_description"] == base.description
    assert data["version"] != base.version and data["fit"]["base_version"] == base.version
    assert data["engine"] == base.engine and str(f.absolute()) in data["fit"]["described"]
    at_bound = 0
    for term in data["fit"]["fitted"]:
        value, spec = data["terms"][term]["value"], TERMS[term]
        near = min(abs(value - spec.low), abs(spec.high - value)) <= 1e-9 * (spec.high - spec.low)
        assert not near or value in (spec.low, spec.high), (term, value)
        at_bound += value in (spec.low, spec.high)
    assert at_bound  # some term was fitted to its bound, and is written as it
    assert get_engine(str(out)).version == data["version"]  # and reads back


@pytest.mark.parametrize("command", ["calibrate", "sweep"])
def test_an_engine_file_that_is_no_profile_names_the_option(tmp_path, capsys, command):
    bench, csv = tmp_path / "plain-b1.json", tmp_path / "runs.csv"
    bench.write_text(json.dumps(_run("none", 1, 6.6)))
    csv.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,7.0\n")
    for engine, why in ((bench, "missing field 'name'"), (csv, "malformed JSON")):
        args = (["calibrate", *MODEL, "--measurements", str(csv), "--out", str(tmp_path / "p.json")]
                if command == "calibrate" else ["sweep", "--out", str(tmp_path / "rep")])
        assert cli([*args, "--engine", str(engine)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"speedplan: error: engine profile {engine}: ")
        assert why in err


def test_calibrate_help_names_sglang_bench_serving():
    text = " ".join(CliRunner().invoke(app, ["calibrate", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "SGLang bench_serving" in text


def test_a_measured_tree_acceptance_is_said_beside_the_sweep_command(tmp_path):
    """The suggested sweep gave eagle3:al=3.05@3 and nothing of the tree's measured 3.62, so the
    sweep derived the tree's acceptance from the chain's (4.27 at depth 5) without a word."""
    f = _spec_lines(tmp_path / "spec.jsonl")
    r = CliRunner().invoke(app, ["calibrate", *MODEL, "--engine", "sglang", "--measurements", str(f),
                                 "--out", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    tree = [s for s in SPEC if s[2] > 1]
    al = np.mean([s[4] for s in tree])
    assert "speedplan sweep" in lines[-1] and "--mechanism eagle3-tree:topk=4" in lines[-1]
    note = next(line for line in lines if "acceptance length (al=A@D is a chain's)" in line)
    assert (f"eagle3-tree:topk={tree[0][2]} at acceptance length {al:.3g} (depth {tree[0][1]}, "
            f"{tree[0][3] - 1} nodes)") in note
    chain = next(a for a in lines[-1].split() if a.startswith("eagle3:al=")).rstrip(";")
    assert f"derives the tree's from {chain}" in note


def test_the_table_sorts_rows_by_batch_shows_al_and_says_a_note_once(tmp_path):
    """Runs of one file each, given in glob order (b1, b32, b64, b8), printed as B = 1, 32, 64, 8,
    with no AL beside TPOT rows, and the derived-context note once per file."""
    files = []
    for mech, b, tpot in (("none", 1, 6.6), ("none", 32, 9.6), ("none", 64, 12.9), ("none", 8, 7.3),
                          ("eagle3", 1, 2.95), ("eagle3", 32, 5.0), ("eagle3", 64, 7.6), ("eagle3", 8, 3.35)):
        f = tmp_path / f"{'plain' if mech == 'none' else 'eagle3-k3'}-b{b}.json"
        f.write_text(json.dumps(_run(mech, b, tpot, spec_decode_acceptance_length=3.0)))
        files.append(f)
    files.sort()  # as a shell glob gives them
    text = render_calibration(calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", files))
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("  row "))
    assert " AL " in header
    plain = [int(line.split()[1].removeprefix("B=")) for line in lines if line.startswith("  none B=")]
    spec = [line.split() for line in lines if line.startswith("  eagle3 B=")]
    assert plain == sorted(plain) and [int(s[1].removeprefix("B=")) for s in spec] == sorted(plain)
    assert all(s[6] == "3" for s in spec)  # context, quantity, field, AL
    context = [line for line in lines if "context is the run's mean prompt" in line]
    assert len(context) == 1 and all(str(f) in context[0] for f in files) and "run 1 each" in context[0]
