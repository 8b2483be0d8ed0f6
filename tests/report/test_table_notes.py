"""Notes under the first table that explain a shape users would not expect (report.table_notes)."""

from __future__ import annotations

import pandas as pd

from speedplan.plan.sweep import sweep
from speedplan.report.summary import render_summary
from speedplan.report.table_notes import moe_rise_line

BATCHES = [1, 4, 16, 64]


def test_a_moe_models_rising_speedup_is_explained():
    """gpt-oss-120b on B200: 1.47x at B = 1, 1.74x at B = 64, with nothing saying why (a user
    walkthrough read it as a bug: dense models' speedups fall with B)."""
    r = sweep("gpt-oss-120b", "b200", ["eagle3"], BATCHES, range(0, 6))
    best = r.best.sort_values("batch")
    assert best["speedup"].iloc[1:].max() > 1.05 * best["speedup"].iloc[0]
    line = moe_rise_line(r.meta, r.best)
    assert line.startswith(f"note: the speedup rises from {best['speedup'].iloc[0]:.2f}x at B=1 to ")
    assert "a mixture of experts (4 of 128 per token)" in line and "from B ≈ 32 a plain step" in line
    assert line in render_summary(r).splitlines()


def test_dense_models_and_no_rise_say_nothing():
    dense = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], BATCHES, range(0, 6))
    assert moe_rise_line(dense.meta, dense.best) is None
    moe = sweep("gpt-oss-120b", "b200", ["eagle3"], BATCHES, range(0, 6))
    flat = moe.best.assign(speedup=lambda f: f["speedup"].where(f["batch"] == 1, 1.0))
    assert moe_rise_line(moe.meta, flat) is None
    assert moe_rise_line(moe.meta, pd.concat([moe.best, moe.best.assign(context=1)])) is None  # two contexts


def test_a_gpu_engines_profile_on_a_cpu_points_to_the_runtimes():
    """smollm2-135m on cpu-local under the default vllm profile priced plain decoding at 20 tok/s
    with CUDA-graph and launch terms, where the runtime measures about 30 (a walkthrough); the
    engine line now says those terms describe a GPU and names --engine speedplan-runtime."""
    from speedplan.report.summary import engine_source

    cpu = sweep("smollm2-135m", "cpu-local", ["ngram"], [1], [0, 2])
    assert cpu.meta["platform"] == "cpu"
    assert engine_source(cpu).endswith("is --engine speedplan-runtime")
    own = sweep("smollm2-135m", "cpu-local", ["ngram"], [1], [0, 2], engine="speedplan-runtime")
    gpu = sweep("llama-3.1-8b", "h100-sxm", ["ngram"], [1], [0, 2])
    assert gpu.meta["platform"] == "cuda"
    assert "on a CPU" not in engine_source(own) and "on a CPU" not in engine_source(gpu)
