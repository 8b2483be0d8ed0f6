"""Opt-in Q4_1 matmul for CPU decode: build `q4_1_matmul.c` with the system C compiler, load it
with ctypes, and hook it into the model's linear layers (`speedplan run --matmul q4_1`).

Why: at B=1 a decode step reads every weight once, so fp32 weights (4 bytes each) cap the step
at the machine's memory bandwidth; the GGUF's own Q4_1 blocks are 0.625 bytes per weight. The
kernel dequantizes to exactly the fp32 values the fp32 path uses (see the .c file) and
accumulates in fp32, so only the summation order differs from the fp32 GEMM.

The build goes to a per-user cache directory, one file per hash of (source, compiler, flags,
CPU flags), written to a temporary name and renamed into place (atomic, so concurrent builds
do not clash). No compiler or a failed build: a one-line warning and the fp32 path.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

SOURCE = Path(__file__).with_name("q4_1_matmul.c")
BLOCK_WEIGHTS = 32  # weights per Q4_1 block
BLOCK_BYTES = 20  # fp16 d, fp16 m, 16 bytes of 4-bit q
FLAGS = ("-O3", "-march=native", "-fopenmp", "-std=c11", "-shared", "-fPIC")
# Row counts (tokens in one forward) up to this use the kernel; more (prefill) stay on oneDNN's
# fp32 GEMM, which re-uses each weight across rows far better (crossover measured in
# benchmarks/bench_q4_1_matmul.py, see benchmarks/README.md).
MAX_ROWS = 24


class KernelBuildError(RuntimeError):
    """The C compiler is missing or failed."""


def cache_dir() -> Path:
    """Where built kernels live: $SPEEDPLAN_CACHE_DIR, else $XDG_CACHE_HOME/speedplan, else ~/.cache/speedplan."""
    root = os.environ.get("SPEEDPLAN_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "speedplan"
    return Path(root) / "kernels"


def find_compiler() -> str | None:
    """$CC if set, else gcc, else cc (None if none is on PATH)."""
    for name in (os.environ.get("CC"), "gcc", "cc"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cpu_flags() -> str:
    """The CPU's feature flags (part of the cache key, since -march=native depends on them)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor()


def build_kernel(compiler: str | None = None, flags: tuple[str, ...] = FLAGS, directory: Path | None = None) -> Path:
    """Compile the kernel (or reuse the cached build); returns the shared library's path."""
    compiler = compiler or find_compiler()
    if compiler is None:
        raise KernelBuildError("no C compiler found (set CC or install gcc)")
    source = SOURCE.read_bytes()
    key = hashlib.sha256(b"\0".join([source, compiler.encode(), " ".join(flags).encode(),
                                     platform.machine().encode(), _cpu_flags().encode()])).hexdigest()[:16]
    directory = directory or cache_dir()
    target = directory / f"q4_1_matmul-{key}.so"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.stem + ".", suffix=".tmp.so", dir=directory)
    os.close(fd)
    try:
        cmd = [compiler, *flags, str(SOURCE), "-o", tmp, "-lm"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise KernelBuildError(f"{compiler} failed to run: {e}") from None
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["(no output)"])[0]
            raise KernelBuildError(f"{Path(compiler).name} exited {proc.returncode}: {first}")
        os.replace(tmp, target)  # atomic: a concurrent build of the same key writes the same bytes
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


class Q41Kernel:
    """The loaded library: `matmul` and `dequantize` on torch tensors (CPU, contiguous)."""

    def __init__(self, path: Path):
        lib = ctypes.CDLL(str(path))
        self.path = path
        self._matmul = lib.q4_1_matmul
        self._matmul.restype = ctypes.c_int
        self._matmul.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                 ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
        self._dequantize = lib.q4_1_dequantize
        self._dequantize.restype = None
        self._dequantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        lib.q4_1_isa.restype = ctypes.c_char_p
        self.isa = lib.q4_1_isa().decode()  # "avx512", "avx2" or "scalar"

    def matmul(self, x: Tensor, blocks: Tensor, out_features: int, threads: int | None = None) -> Tensor:
        """x [M, K] fp32 @ W.T -> [M, N] fp32, W = `blocks` [N, K/32*20] uint8 (Q4_1 rows)."""
        m, k = x.shape
        if x.dtype != torch.float32 or blocks.dtype != torch.uint8 or k % BLOCK_WEIGHTS:
            raise ValueError("q4_1 matmul needs fp32 x, uint8 blocks and K a multiple of 32")
        if blocks.shape != (out_features, k // BLOCK_WEIGHTS * BLOCK_BYTES):
            raise ValueError(f"blocks shape {tuple(blocks.shape)} does not match N={out_features}, K={k}")
        x = x.contiguous()
        y = torch.empty(m, out_features, dtype=torch.float32)
        self._matmul(x.data_ptr(), blocks.data_ptr(), y.data_ptr(), m, out_features, k,
                     threads or torch.get_num_threads())
        return y

    def dequantize(self, blocks: Tensor) -> Tensor:
        """[..., nb*20] uint8 Q4_1 blocks -> [..., nb*32] fp32 weights."""
        blocks = blocks.contiguous()
        nb = blocks.numel() // BLOCK_BYTES
        out = torch.empty(*blocks.shape[:-1], blocks.shape[-1] // BLOCK_BYTES * BLOCK_WEIGHTS, dtype=torch.float32)
        self._dequantize(blocks.data_ptr(), out.data_ptr(), nb)
        return out


_loaded: dict[tuple, Q41Kernel | None] = {}


def load_kernel(compiler: str | None = None, flags: tuple[str, ...] = FLAGS) -> Q41Kernel | None:
    """The kernel built with the given compiler and flags, or None after a one-line warning
    on stderr if it cannot be built or loaded (callers then keep the fp32 path)."""
    key = (compiler or find_compiler(), flags)
    if key not in _loaded:
        try:
            _loaded[key] = Q41Kernel(build_kernel(key[0], flags))
        except (KernelBuildError, OSError) as e:
            print(f"speedplan: warning: q4_1 matmul kernel unavailable ({e}); using the fp32 matmul", file=sys.stderr)
            _loaded[key] = None
    return _loaded[key]


class Q41Linear:
    """A linear layer's weight as Q4_1 blocks: `__call__(x [..., K])` -> [..., N] via the kernel,
    or None when x has more than `max_rows` rows (the caller's fp32 path handles those)."""

    def __init__(self, kernel: Q41Kernel, blocks: Tensor, out_features: int, max_rows: int = MAX_ROWS):
        self.kernel, self.blocks, self.out_features, self.max_rows = kernel, blocks.contiguous(), out_features, max_rows

    def __call__(self, x: Tensor) -> Tensor | None:
        rows = x.numel() // x.shape[-1]
        if rows > self.max_rows or x.dtype != torch.float32 or x.device.type != "cpu":
            return None
        out = self.kernel.matmul(x.reshape(rows, x.shape[-1]), self.blocks, self.out_features)
        return out.view(*x.shape[:-1], self.out_features)


def enable_q4_1_matmul(model, blocks: dict[tuple[int, str], np.ndarray], kernel: Q41Kernel | None = None,
                       max_rows: int = MAX_ROWS) -> int:
    """Route the model's matmuls that have Q4_1 `blocks` (keyed (layer, weight name), e.g.
    (0, "wqkv"), from `weights.gguf_q4_1_blocks`) through the kernel for up to `max_rows` rows.
    Returns the number of matrices switched: 0 if the kernel is unavailable (fp32 path kept)."""
    kernel = kernel or load_kernel()
    if kernel is None:
        return 0
    switched = 0
    for layer, block in enumerate(model.blocks):
        for mod in (block.attn, block.mlp):
            for name in mod.quantized:
                q = blocks.get((layer, name))
                if q is not None:
                    mod.quantized[name] = Q41Linear(kernel, torch.from_numpy(np.ascontiguousarray(q)),
                                                    getattr(mod, name).shape[0], max_rows)
                    switched += 1
    return switched


def disable_quantized_matmul(model) -> None:
    """Back to the fp32 path for every matmul."""
    for block in model.blocks:
        for mod in (block.attn, block.mlp):
            for name in mod.quantized:
                mod.quantized[name] = None
