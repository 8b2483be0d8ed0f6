"""The calibrate command and calibrate_rows: the profile they write, and what they refuse to write."""

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from speedplan.cli.app import app
from speedplan.engine.profile import get_engine
from speedplan.errors import SpeedplanInputError
from tests.engine._calibrate_helpers import TRUE, _grid, _measured


def test_cli_writes_a_profile_sweep_can_use(tmp_path):
    base = get_engine("vllm")
    rows = _measured(_grid(batches=(1, 4, 16, 64)), {**base.values(), **TRUE})
    files = [tmp_path / "runs-a.csv", tmp_path / "runs-b.csv"]  # two files after one --measurements, as a glob gives
    for f, part in zip(files, (rows[::2], rows[1::2])):
        f.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\n" + "".join(
            f"{m.mechanism},{m.batch},{m.draft_len},{m.context},{m.value},{m.acceptance_length or ''}\n" for m in part))
    out = tmp_path / "mine.json"
    runner = CliRunner()
    r = runner.invoke(app, ["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "vllm",
                            "--measurements", *map(str, files), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "fitted" in r.output and "leave-one-out" in r.output
    profile = json.loads(out.read_text())
    assert profile["name"] == "mine" and len(profile["fit"]["rows"]) == len(rows)
    # every term is accounted for: fitted, kept (and why), or not tried (and where its value comes from)
    fit = profile["fit"]
    assert set(fit["fitted"]) | set(fit["kept"]) | set(fit["not_tried"]) == set(profile["terms"])
    assert fit["not_tried"]["launch_us"] == "document" and "launch_us" in r.output
    # the last line says how to plan for these runs: their context and each chain's measured acceptance length
    last = r.output.strip().splitlines()[-1]
    contexts = sorted({m.context for m in rows})
    mechs = " ".join(f"--mechanism {m}" for m in sorted({m.mechanism for m in rows if m.mechanism != "none"}))
    assert (f"speedplan sweep --model llama-3.1-8b --hardware h100-sxm --engine {out} {mechs} "
            f"--context {','.join(map(str, contexts))}") in last
    # measured at D = 2 and 4: the chain whose ALs fit both (least squares), not one D's i.i.d. rate
    from speedplan.plan.acceptance_sources import parse_acceptance

    spec = [m for m in rows if m.mechanism != "none"]
    for mech in sorted({m.mechanism for m in spec}):
        given = last.split(f"--acceptance {mech}:")[1].split()[0].rstrip(";")
        acceptance = parse_acceptance(given)
        for d in sorted({m.draft_len for m in spec if m.mechanism == mech}):
            als = [m.acceptance_length for m in spec if m.mechanism == mech and m.draft_len == d]
            assert acceptance.chain_al(d) == pytest.approx(sum(als) / len(als), rel=0.06)
    rep = tmp_path / "rep"
    s = runner.invoke(app, ["sweep", "--engine", str(out), "--mechanism", "eagle", "--batch", "1,16", "--context", "2000",
                            "--out", str(rep)])  # within the published head's 2,048 positions
    assert s.exit_code == 0, s.output
    assert "engine profile mine" in s.output
    # the terms this fit set are counted as fitted to these rows; those the base had fitted are named apart
    earlier = [t for t, v in profile["terms"].items() if v["source"].startswith("fitted") and t not in fit["fitted"]]
    assert f"{len(fit['fitted'])} of {len(profile['terms'])} terms fitted to {len(rows)} rows" in s.output
    assert earlier and f"{', '.join(earlier)} fitted earlier (base vllm" in s.output
    # every output file names the engine profile that priced it
    assert set(pd.read_csv(rep / "sweep.csv")["engine"]) == {f"mine (file {out})"}  # a file-read profile: its path
    assert set(pd.read_csv(rep / "sensitivity.csv")["engine"]) == {f"mine (file {out})"}
    recs = json.loads((rep / "recommendations.json").read_text())
    assert {r["engine_profile"] for r in recs["per_batch"]} == {f"mine (file {out})"}  # a file-read profile: its path
    assert "mine" in (rep / "report.html").read_text() and "mine" in (rep / "vllm_serve.sh").read_text()


def test_the_command_writes_no_profile_when_every_row_is_faster_than_its_kernels(tmp_path, capsys):
    """`speedplan calibrate` on rows that all ran faster than their kernels alone wrote a profile whose
    residuals were over 1000% and exited 0 (a new user's walkthrough, 2026-12-04): no term fits any row.
    Refused in one line, nothing written; with --fit kernel_scale (kernels faster than profiled) it runs."""
    from speedplan.cli.app import run

    f = tmp_path / "fast.csv"
    # half their kernels' time (6.2, 6.7 and 2.6 ms): within a kernel_scale's reach (rows 10x faster, a unit
    # slip, are refused whatever is fitted: test_review_stop51)
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\nnone,1,0,1024,3.1,\n"
                 "none,8,0,1024,3.3,\neagle3,1,3,1024,1.3,2.8\n")
    args = ["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", str(f),
            "--out", str(tmp_path / "p.json")]
    assert run(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "every row ran faster than its kernels alone" in err[0]
    assert not (tmp_path / "p.json").exists()
    assert run([*args, "--fit", "kernel_scale"]) == 0 and (tmp_path / "p.json").is_file()


def test_calibrate_never_writes_over_its_input_or_a_device(tmp_path, capsys):
    """--out naming the measurements file overwrote it with the profile, and --out naming a pipe
    or a device (/dev/null, as root) replaced it with a file (until 2026-12-03)."""
    import os

    from speedplan.cli.app import run

    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\nnone,1,0,1024,7.0,\n"
                 "eagle3,1,3,1024,4.0,2.8\neagle3,8,3,1024,4.6,2.8\n")
    base = ["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--measurements", str(f)]
    before = f.read_text()
    assert run([*base, "--out", str(f)]) == 2
    assert "is one of the input files" in capsys.readouterr().err and f.read_text() == before
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    assert run([*base, "--out", str(pipe)]) == 2
    assert "exists and is not a regular file" in capsys.readouterr().err and not pipe.is_file()
    assert run([*base, "--fit", "host_step_us,host_step_us", "--out", str(tmp_path / "p.json")]) == 2
    assert "'host_step_us' named twice" in capsys.readouterr().err and not (tmp_path / "p.json").exists()


def test_a_calibrated_profile_does_not_take_a_shipped_profiles_name(tmp_path):
    """--out x/vllm.json wrote an SGLang-based profile named "vllm", which every output then
    labelled as the shipped one: the default name gets -calibrated, an explicit one is refused."""
    from speedplan.engine.run_calibration import calibrate_rows

    rows = [{"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1024, "tpot_ms": 7.0},
            {"mechanism": "eagle3", "batch": 8, "draft_len": 3, "context": 1024, "tpot_ms": 4.6,
             "acceptance_length": 2.8}]
    pd.DataFrame(rows).to_csv(tmp_path / "m.csv", index=False)
    args = ["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "sglang",
            "--measurements", str(tmp_path / "m.csv"), "--out"]
    r = CliRunner().invoke(app, [*args, str(tmp_path / "vllm.json")])
    assert r.exit_code == 0 and json.loads((tmp_path / "vllm.json").read_text())["name"] == "vllm-calibrated"
    r = CliRunner().invoke(app, [*args, str(tmp_path / "a.json"), "--name", "SGLang"])
    assert isinstance(r.exception, SpeedplanInputError) and "is a shipped engine profile's" in str(r.exception)
    assert not (tmp_path / "a.json").exists()  # (the console script turns the error into exit 2, one line)
    with pytest.raises(SpeedplanInputError, match="shipped engine profile"):
        calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows, name="trtllm")
    assert calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", rows).profile.name == "vllm-calibrated"


def test_calibrating_on_a_cpu_prices_a_bf16_checkpoint_at_the_cpus_dtype():
    """calibrate on cpu-local refused every bf16 model ("has no bf16 peak"), where the sweep prices
    it in fp32 (an audit of 2026-12-04)."""
    from speedplan.engine.run_calibration import calibrate_rows

    rows = [{"mechanism": "none", "batch": 1, "draft_len": 0, "context": 100, "tpot_ms": 50},
            {"mechanism": "eagle", "batch": 1, "draft_len": 2, "context": 100, "tpot_ms": 40, "acceptance_length": 2.0}]
    result = calibrate_rows("smollm2-135m", "cpu-local", 1, "speedplan-runtime", rows)
    assert len(result.rows) == 2 and all(r["predicted"] > 0 for r in result.rows)


def test_calibrating_on_a_cpu_skips_the_gpu_memory_check():
    """A CPU profile's memory is its preset's (cpu-local: 26 GB), not the machine's RAM: an 8B
    model in fp32 at B = 1 was refused (a review of 2026-12-04); and a generator of terms is read once."""
    from speedplan.engine.run_calibration import calibrate_rows

    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 100, "tpot_ms": 900 + b} for b in (1, 2, 4)]
    result = calibrate_rows("llama-3.1-8b", "cpu-local", 1, "speedplan-runtime", rows,
                            free=(t for t in ["host_step_us"]))
    assert result.fitted == ["host_step_us"]
