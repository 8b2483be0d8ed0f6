"""The benchmark scripts still run against the library they measure.

They are not imported by anything else, so a renamed function breaks them silently
(bench_report.py called `summary.write_report` for days after it moved to `report.html`).
Only the cheap ones run here; each is asserted to print its figures, not timed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


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


@pytest.mark.skipif(not (BENCHMARKS.parents[1] / "shared" / "cases" / "engine_measurements.csv").exists(),
                    reason="../shared/cases (the fit's rows) is not next to this checkout")
def test_fit_engine_profiles_matches_the_shipped_files():
    done = _run("fit_engine_profiles.py", "--check")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for name in ("vllm.json", "sglang.json"):
        assert f"{name}: matches the fit" in done.stdout
    # GLM-4.7-Flash's SGLang rows are held out and predicted out of sample, with the reason
    assert "held out of the fit (out-of-sample): a later SGLang" in done.stdout
    assert done.stdout.count("eagle-tree:topk=4 B=32 D=3") == 1


@pytest.mark.skipif(not (BENCHMARKS.parents[1] / "shared" / "cases" / "engine_measurements.csv").exists(),
                    reason="../shared/cases (the sweep's rows) is not next to this checkout")
def test_bench_engine_sweeps_checks_the_vllm_sweep_under_each_gpu():
    done = _run("bench_engine_sweeps.py")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for gpu in ("h100-sxm", "h200-sxm", "b200"):
        assert f"vllm profile, GPU assumed {gpu}:" in done.stdout
    assert done.stdout.count("best K per B") == 3
    # 24 rows (B 1, 2, 4, 8 x K 3..8) priced under each GPU; their measured AL is 1 + the per-position rates
    assert done.stdout.count("       1          3               2.61         336.0") == 3


def test_bench_engine_sweeps_helpers():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import numpy as np
        import pandas as pd
        from bench_engine_sweeps import acceptance_length, best_k, per_draft_token_ms, shapes
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert acceptance_length("73%;52%;36%") == pytest.approx(2.61)
    rows = pd.DataFrame({"batch": [1, 1, 2, 2], "draft_len": [3, 4, 3, 4], "acceptance_length": [2.0, 2.5, 2.0, 2.5]})
    measured = np.array([100.0, 90.0, 150.0, 160.0])
    predicted = np.array([80.0, 88.0, 120.0, 180.0])  # picks K = 4 at B = 1 (loses 10%), K = 4 at B = 2 (right)
    assert best_k(rows, measured, predicted) == [(1, 3, 4, pytest.approx(0.1)), (2, 4, 4, 0.0)]
    s = shapes(rows, measured)
    assert list(s["in_b"]) == pytest.approx([1.0, 1.0, 1.5, 160 / 90])
    assert list(s["in_k"]) == pytest.approx([1.0, 0.9, 1.0, 160 / 150])
    # B = 1: step 1000·AL/tokens/s = 20 ms at K = 3, 27.8 ms at K = 4
    assert per_draft_token_ms(rows, measured) == pytest.approx(1000 * 2.5 / 90 - 20.0)


@pytest.mark.parametrize("script", ["bench_profiles_vs_aic.py", "bench_moe_routing.py"])
def test_optional_dependency_missing_is_one_line(script):
    import importlib.util

    if importlib.util.find_spec("aiconfigurator_core") is not None:
        pytest.skip("aiconfigurator-core is installed: the benchmark runs for real")
    done = _run(script, *(["--points", "10"] if script == "bench_profiles_vs_aic.py" else []))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "aiconfigurator-core is not installed" in done.stderr
