"""Timing done one way for every op: warm-up, rotating inputs, median of repeats.

`calls` is a list of zero-argument closures, one per rotating input set, so consecutive calls
never find their operands in cache (the sets together exceed the last-level cache / L2).
CPU: wall clock (perf_counter_ns) around `inner` calls per repeat; the points of a block take
turns repeat by repeat (`time_cpu_interleaved`). CUDA: device events around one replay of a
CUDA graph holding every call (graph=True), or around eager launches.
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
    """Median per-call wall time of `calls` (cycled), each repeat >= `repeat_s` long."""
    return time_cpu_interleaved([calls], min_time_s, min_repeats, max_repeats, repeat_s,
                                warmup_s=min(min_time_s / 4, 0.02))[0]


def time_cpu_interleaved(blocks: list[list[Callable[[], object]]], min_time_s: float = 0.05,
                         min_repeats: int = 5, max_repeats: int = 200, repeat_s: float = 2e-3,
                         warmup_s: float | None = None) -> list[Timing]:
    """Median per-call wall time of each point's `calls` (cycled), for several points at once:
    each round times every point's `inner` calls (>= `repeat_s`) in turn, so a point's repeats
    are spread over the whole block's time and a slow spell of the machine (the 2-core VM has
    them, 1.2-1.8x, half a second to tens of seconds long) weighs on all points alike. Each
    point warms up for `warmup_s` (default min(min_time_s / 8, 10 ms)) and every set once."""
    warmup_s = min(min_time_s / 8, 0.01) if warmup_s is None else warmup_s
    inners, per_call = [], []
    for calls in blocks:  # warm-up: every set of every point once, and a per-call estimate
        n, t0, i = len(calls), time.perf_counter(), 0
        while i < max(n, 3) or time.perf_counter() - t0 < warmup_s:
            calls[i % n]()
            i += 1
        per_call.append((time.perf_counter() - t0) / i)
        inners.append(max(1, min(1000, math.ceil(repeat_s / per_call[-1]))))
    round_s = sum(k * c for k, c in zip(inners, per_call))
    repeats = int(min(max_repeats, max(min_repeats, min_time_s * len(blocks) / round_s)))
    samples: list[list[float]] = [[] for _ in blocks]
    j = 0  # one cursor for the whole block: its points share the rotating weight / KV sets
    for _ in range(repeats):  # (call i of every point uses set i), so the next point's calls
        for b, (calls, inner) in enumerate(zip(blocks, inners)):  # go on to sets not just read
            n = len(calls)
            start = time.perf_counter_ns()
            for _ in range(inner):
                calls[j % n]()
                j += 1
            samples[b].append((time.perf_counter_ns() - start) / 1e3 / inner)
    return [_summary(s, inner) for s, inner in zip(samples, inners)]


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
