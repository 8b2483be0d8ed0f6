"""A cupy GEMM backend (cuBLAS through cupy.matmul) to cross-check the torch GEMM numbers on
the same shapes. CUDA only; eager launches timed with CUDA events, rotating inputs."""

from __future__ import annotations

import math

import numpy as np

from .grid import DTYPE_BYTES, GemmPoint
from .timing import Timing, _summary


class CupyGemmBackend:
    name = "cupy"

    def __init__(self, rotate_bytes: float, min_time_s: float, seed: int = 0):
        import cupy

        self.cp = cupy
        self.rotate_bytes = rotate_bytes
        self.min_time_s = min_time_s
        self.rng = cupy.random.default_rng(seed)

    def measure(self, p: GemmPoint) -> Timing:
        cp = self.cp
        dtype = {"fp32": np.float32, "fp16": np.float16}.get(p.dtype)
        if dtype is None:
            raise ValueError(f"cupy cross-check supports fp32 and fp16, not {p.dtype}")
        sets = max(1, min(64, math.ceil(self.rotate_bytes / (p.n * p.k * DTYPE_BYTES[p.dtype]))))
        xs = [(self.rng.standard_normal((p.m, p.k), dtype=np.float32) * 0.1).astype(dtype) for _ in range(sets)]
        ws = [(self.rng.standard_normal((p.n, p.k), dtype=np.float32) * 0.1).astype(dtype) for _ in range(sets)]

        def run() -> None:
            for x, w in zip(xs, ws):
                cp.matmul(x, w.T)

        run()
        run()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        run()
        end.record()
        end.synchronize()
        per_run_s = max(cp.cuda.get_elapsed_time(start, end) / 1e3, 1e-6)
        repeats = int(min(200, max(10, self.min_time_s / per_run_s)))
        samples = []
        for _ in range(repeats):
            start.record()
            run()
            end.record()
            end.synchronize()
            samples.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / sets)
        return _summary(samples, sets)
