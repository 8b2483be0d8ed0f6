"""Measure a grid into a profile folder, resuming where an earlier run of it stopped."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from . import __version__
from .grid import AttentionPoint, ElementwisePoint, GemmPoint, Grid, family_of
from .store import MAX_OTHER_CPU, ProfileStore
from .timing import Timing

# Rotating input sets together exceed this many bytes, so no timing is a cache hit: 3× the
# 32 MiB L3 of the CPU machine class; 4× the 50-60 MB L2 of H100/H200.
ROTATE_BYTES = {"cpu": 96 * 2**20, "cuda": 256 * 2**20}
CUPY_M = {1, 8, 16, 64, 65, 256, 1024, 4096}
MAX_BLOCK = 48  # points measured together (CPU, unless --one-by-one) at most


@dataclass(frozen=True)
class RunResult:
    out: Path
    measured: int  # points measured by this run
    remaining: int  # points of the grid still missing (0 = complete)
    wall_s: float
    meta: dict


class _Progress:
    """tqdm when installed (bench extra), else a line every ~5% with an ETA, on stderr."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.t0, self.bar = total, 0, time.perf_counter(), None
        self.enabled = enabled and total > 0
        if self.enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="pt", desc="microbench", file=sys.stderr, smoothing=0.05)
            except ImportError:
                pass

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)
        elif self.done % max(1, self.total // 20) == 0 or self.done == self.total:
            elapsed = time.perf_counter() - self.t0
            eta = elapsed / self.done * (self.total - self.done)
            print(f"microbench: {self.done}/{self.total} points, {elapsed:.0f}s elapsed, ETA {eta:.0f}s",
                  file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(grid: Grid, device: str, out: str | Path, hardware_preset: str, *, min_time_s: float = 0.05,
        threads: int | None = 2, cupy: bool = False, stop_after: int | None = None,
        progress: bool = True, meta_extra: dict | None = None, quiet_tries: int = 3,
        visit_count: int = 1, interleave: bool = True) -> RunResult:
    """Measure every point of `grid` not yet in `out`, appending each as it completes.

    `stop_after` stops after that many new points (a deterministic stand-in for a kill, used by
    tests); the folder is then left incomplete and a rerun finishes it. On CPU, points are
    measured in blocks (`blocks_of`: the points sharing weights or a KV cache), their repeats
    taking turns, and written when their block completes; with `interleave=False` (and on
    CUDA) one by one, each written as it completes. A block measured while other processes
    were busy is retried up to `quiet_tries` times. With `visit_count` > 1 each block is
    measured that many times in turn (fresh buffers, min_time_s split between the visits) and
    a point's latency is the median of its visits' medians."""
    import torch

    from .env import provenance
    from .torch_backend import ATTENTION_IMPL, GEMM_IMPL, TorchBackend

    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA device")
    if device == "cpu" and threads:
        torch.set_num_threads(threads)
    grid = grid.finalize()
    meta = provenance(device, threads if device == "cpu" else None)
    meta.update(device=device, hardware_preset=hardware_preset, origin="measured",
                microbench_version=__version__, grid=grid.description, backend="torch",
                gemm_impl=GEMM_IMPL, attention_impl=ATTENTION_IMPL,
                timing=("cuda events around CUDA-graph replay" if device == "cuda" else "perf_counter_ns")
                + f"; median of repeats after warm-up; rotating inputs over {ROTATE_BYTES[device] >> 20} MiB; "
                f"random normal data; min {min_time_s * 1e3:.0f} ms per point in {max(1, visit_count)} visit(s), "
                "latency = median over visits of each visit's median"
                + ("; points sharing weights / KV cache (a block) timed together, their repeats interleaved "
                   "round-robin" if interleave and device == "cpu" else ""),
                units="latency_us: microseconds per call (median); min_us, p90_us over repeats")
    meta.update(meta_extra or {})
    store = ProfileStore(Path(out), meta)
    jobs = [(p, family_of(p)) for p in grid.points()]
    if cupy:  # a cross-check, not a second profile: fp16 points at a few M values
        jobs += [(p, "gemm_cupy") for p in grid.gemm if p.dtype == "fp16" and p.m in CUPY_M]
    todo = [(p, table) for p, table in jobs if not store.has(p, table)]
    torch_backend = TorchBackend(device, ROTATE_BYTES[device], min_time_s / max(1, visit_count))
    cupy_backend = None
    if cupy and any(t == "gemm_cupy" for _, t in todo):
        from .cupy_backend import CupyGemmBackend

        cupy_backend = CupyGemmBackend(ROTATE_BYTES[device], min_time_s)
    bar = _Progress(len(todo), progress)
    t0 = time.perf_counter()
    measured = 0
    deferred = []  # CPU blocks measured while the machine was busy: retried at the end

    def backend_of(table):
        return cupy_backend if table == "gemm_cupy" else torch_backend

    def measure(block, tries: int, wait_s: float) -> list[Timing]:
        """One timing per point of `block`, over `visit_count` visits (fresh buffers each)."""
        visits = []
        for _ in range(max(1, visit_count)):
            if visit_count > 1:
                torch_backend.reset()  # each visit gets fresh buffers (placement luck varies)
            visits.append(_measure_quietly(backend_of(block[0][1]), [p for p, _ in block], device, tries, wait_s))
        return [combine(list(ts)) for ts in zip(*visits)]

    def full() -> bool:
        return stop_after is not None and measured >= stop_after

    def keep(block, timings: list[Timing]) -> None:
        nonlocal measured
        for (point, table), timing in zip(block, timings):
            if full():
                return
            store.append(point, timing, table)
            measured += 1
            bar.step(_label(point))

    failed = 0
    try:
        for block in blocks_of(todo, MAX_BLOCK if interleave and device == "cpu" else 1):
            if full():
                break
            try:
                timings = measure(block, min(quiet_tries, 2), wait_s=0.2)
            except (RuntimeError, MemoryError) as e:  # CUDA: an op this GPU / torch lacks (fp8) or memory
                # (cupy's OutOfMemoryError is a MemoryError, torch's a RuntimeError): skip, go on
                if device != "cuda":
                    raise
                failed += 1
                print(f"skipped {_label(block[0][0])} ({block[0][0]}): {str(e).splitlines()[0][:200]}",
                      file=sys.stderr)
                torch.cuda.empty_cache()
                if cupy_backend is not None:
                    cupy_backend.cp.get_default_memory_pool().free_all_blocks()
                continue
            if quiet_tries > 2 and _other_cpu(timings) > MAX_OTHER_CPU:
                deferred.append((block, timings))
            else:
                keep(block, timings)
        while deferred:
            if full():
                break
            block, first = deferred[0]
            again = measure(block, quiet_tries, wait_s=1.0)
            deferred.pop(0)
            keep(block, first if _other_cpu(first) <= _other_cpu(again) else again)
    finally:
        for block, first in deferred if not full() else []:  # stopped (Ctrl-C) before their retry: keep
            keep(block, first)  # what was measured, its other_cpu saying how busy the machine was
        bar.close()
        if failed:
            print(f"{failed} point(s) skipped for errors (left to do: a rerun tries them again)", file=sys.stderr)
        remaining = len(todo) - measured  # skipped points stay to do: a rerun tries them again
        final = store.finish(remaining == 0, time.perf_counter() - t0)
    return RunResult(Path(out), measured, remaining, time.perf_counter() - t0, final)


def block_key(point, table: str) -> tuple:
    """Points with the same key share their weights (GEMM: N, K) or KV cache (attention:
    heads, batch, kv_len), or are one elementwise op: they are measured together."""
    if isinstance(point, GemmPoint):
        return (table, point.n, point.k, point.dtype)
    if isinstance(point, AttentionPoint):
        return (table, point.num_heads, point.num_kv_heads, point.head_dim, point.dtype, point.batch, point.kv_len)
    if isinstance(point, ElementwisePoint):
        return (table, point.op, point.dtype)
    return (table, point)


def blocks_of(todo: list, max_size: int = MAX_BLOCK) -> list[list]:
    """`todo` ((point, table) in grid order) cut into runs of equal `block_key`, at most
    `max_size` points each (their rotating inputs are all allocated at once)."""
    blocks: list[list] = []
    for point, table in todo:
        if blocks and len(blocks[-1]) < max_size and block_key(*blocks[-1][0]) == block_key(point, table):
            blocks[-1].append((point, table))
        else:
            blocks.append([(point, table)])
    return blocks


def combine(timings: list[Timing]) -> Timing:
    """One point from its visits: median of the visit medians; min and p90 across visits."""
    if len(timings) == 1:
        return timings[0]
    others = [t.other_cpu for t in timings if t.other_cpu is not None]
    return Timing(float(np.median([t.latency_us for t in timings])), min(t.min_us for t in timings),
                  float(np.median([t.p90_us for t in timings])), sum(t.repeats for t in timings),
                  timings[0].calls_per_repeat, max(others) if others else None)


def _other_cpu(timings: list[Timing]) -> float:
    """The most CPU (cores) other processes used while a block's points were timed."""
    return max(t.other_cpu or 0.0 for t in timings)


def _cpu_busy_s() -> float:
    """Seconds of CPU time all processes (and the hypervisor's steal) used so far, from
    /proc/stat; NaN where it cannot be read."""
    try:
        fields = open("/proc/stat").readline().split()[1:9]
    except OSError:
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _measure_quietly(backend, points: list, device: str, tries: int, wait_s: float) -> list[Timing]:
    """Measure a block; on CPU, retry it (up to `tries`, waiting `wait_s` between) when other
    processes used more than MAX_OTHER_CPU cores while it ran (with every core busy, a
    BLAS/OpenMP thread waits a scheduler tick at each barrier and timings inflate many-fold),
    keeping the quietest attempt. Other processes' CPU (cores' worth, from /proc/stat) is
    recorded as `other_cpu` of each point."""
    best = None
    for _ in range(max(1, tries) if device == "cpu" else 1):
        busy0, own0, wall0 = _cpu_busy_s(), sum(os.times()[:2]), time.perf_counter()
        timings = (backend.measure_block(points) if hasattr(backend, "measure_block")
                   else [backend.measure(p) for p in points])
        wall = time.perf_counter() - wall0
        other = max(0.0, (_cpu_busy_s() - busy0) - (sum(os.times()[:2]) - own0)) / wall
        if best is None or other < best[1]:
            best = (timings, other)
        if not other > MAX_OTHER_CPU:  # NaN (no /proc/stat) counts as quiet
            break
        time.sleep(wait_s)
    return [replace(t, other_cpu=round(best[1], 3) if best[1] == best[1] else None) for t in best[0]]


def _label(point) -> str:
    if isinstance(point, GemmPoint):
        return f"gemm m={point.m} n={point.n} k={point.k}"
    return family_of(point)
