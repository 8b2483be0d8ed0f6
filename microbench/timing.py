"""Timing done one way for every op: warm-up, rotating inputs, median of repeats.

`calls` is a list of zero-argument closures, one per rotating input set, so consecutive calls
never find their operands in cache (the sets together exceed the last-level cache / L2).
CPU: wall clock (perf_counter_ns) around `inner` calls per repeat. CUDA: device events around
one replay of a CUDA graph holding every call (graph=True), or around eager launches.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Timing:
    """Per-call latency statistics over repeats, in microseconds."""

    latency_us: float  # median
    min_us: float
    p90_us: float
    repeats: int
    calls_per_repeat: int
    other_cpu: float | None = None  # cores' worth of CPU other processes used meanwhile (CPU runs)


def _summary(samples_us: list[float], calls: int) -> Timing:
    a = np.asarray(samples_us, dtype=float)
    return Timing(float(np.median(a)), float(a.min()), float(np.percentile(a, 90)), len(a), calls)


def time_cpu(calls: list[Callable[[], object]], min_time_s: float = 0.05, min_repeats: int = 5,
             max_repeats: int = 200, repeat_s: float = 2e-3) -> Timing:
    """Median per-call wall time of `calls` (cycled), each repeat ≥ `repeat_s` long."""
    n = len(calls)
    t0 = time.perf_counter()
    i = 0
    while i < max(n, 3) or time.perf_counter() - t0 < min(min_time_s / 4, 0.02):  # warm-up: every set once
        calls[i % n]()
        i += 1
    per_call_s = (time.perf_counter() - t0) / i
    inner = max(1, min(1000, math.ceil(repeat_s / per_call_s)))
    repeats = int(min(max_repeats, max(min_repeats, min_time_s / (inner * per_call_s))))
    samples = []
    j = 0
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(inner):
            calls[j % n]()
            j += 1
        samples.append((time.perf_counter_ns() - start) / 1e3 / inner)
    return _summary(samples, inner)


def time_cuda(calls: list[Callable[[], object]], graph: bool = True, min_time_s: float = 0.05,
              min_repeats: int = 10, max_repeats: int = 200) -> Timing:
    """Median per-call device time of all `calls` back to back, measured with CUDA events.

    graph=True captures the calls into one CUDA graph and times its replay (how a decode /
    verify step runs in serving engines); graph=False times eager launches (so launch cost
    shows wherever kernels are shorter than the CPU's launch rate)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up off the default stream, as graph capture needs
        for _ in range(2):
            for c in calls:
                c()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    if graph:
        cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cuda_graph):
            for c in calls:
                c()
        run = cuda_graph.replay
    else:
        def run() -> None:
            for c in calls:
                c()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    end.synchronize()
    per_run_s = max(start.elapsed_time(end) / 1e3, 1e-6)
    repeats = int(min(max_repeats, max(min_repeats, min_time_s / per_run_s)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for s, e in events:
        s.record()
        run()
        e.record()
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) * 1e3 / len(calls) for s, e in events]
    return _summary(samples, len(calls))
