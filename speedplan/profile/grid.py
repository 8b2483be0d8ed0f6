"""Grids for `speedplan bench`, built from model presets: the exact (N, K) of every linear
layer on one TP rank, M = B · (1 + D) over the sweep's batches and draft lengths plus probes
on both sides of tile boundaries, and the model's attention at q_len = 1 + D.

Grid names: `quick` (CPU: SmolLM2-135M shapes + a small generic grid), `generic`, `tiny`
(tests), `gpu` (Llama-3.1-8B, Llama-3.1-70B/TP8 and the generic grid) and `model:NAME` or
`model:NAME@TP`. This module hands microbench plain shape lists; microbench knows no models.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from speedplan.errors import SpeedplanInputError
from speedplan.cost.attention_shape import attention_shape
from speedplan.cost.forward import linear_shapes
from speedplan.specs.model import get_model

CPU_BATCHES = [1, 2, 4, 8, 16]
CPU_DRAFT_LENS = list(range(8))
GPU_BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
GPU_DRAFT_LENS = [0, 1, 2, 3, 4, 5, 7, 15]
GPU_TILE_BOUNDARIES = [64, 128, 256, 512, 1024, 2048, 4096]
CPU_TILE_BOUNDARIES = [16, 32, 64]  # register-blocking steps of the CPU BLAS kernels
# tokens per sequence of a tree verify pass on CPU: 1 + N for the runtime's top-4 trees of N = 4, 8,
# 12, 16 nodes (validate's grid); without them a B = 16 tree verify (M = 272, q_len 17) lay
# outside the measured range and was extrapolated
CPU_TREE_TOKENS = [5, 9, 13, 17]
CPU_KV_LENS = [64, 128, 256, 512, 1024, 2048]  # KV length axis, a factor 2 apart
# tokens of the elementwise ops, a factor ~sqrt(2) apart up to 512 (a verify step has B(1+D) <= 128,
# a tree B*N <= 272; denser than powers of 2 because the ops step where torch goes parallel)
CPU_EW_TOKENS = [1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256, 362, 512]
CPU_VISITS = 1  # visits per block on CPU (`--visits 3` measured no better, at 2-4x the time)
CPU_MIN_TIME_MS = 30.0  # timing per point on CPU, split between the visits
GPU_DEFAULT = ["model:llama-3.1-8b", "model:llama-3.1-70b@8", "generic"]


MAX_VISITS = 50  # visits per block: each times every point of the block again with fresh buffers
MAX_QUIET_TRIES = 20  # tries of a busy block

def default_dtypes(device: str) -> list[str]:
    """fp32 on CPU; bf16 and fp16 on GPU (fp8 GEMMs are added where the GPU has them)."""
    return ["fp32"] if device == "cpu" else ["bf16", "fp16"]


def _m_values(device: str) -> list[int]:
    from microbench.grid import tile_probes, verify_m_values

    if device == "cpu":
        ms = verify_m_values(CPU_BATCHES, CPU_DRAFT_LENS)
        trees = {b * t for b in CPU_BATCHES for t in CPU_TREE_TOKENS}
        return sorted(set(ms) | trees | {m for m in tile_probes(CPU_TILE_BOUNDARIES) if m <= max(ms) + 1})
    ms = [m for m in verify_m_values(GPU_BATCHES, GPU_DRAFT_LENS) if m <= 16 or m % 16 == 0]
    log_grid = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96, 192, 384, 768, 1536, 3072, 6144, 8192}
    return sorted((set(ms) & (log_grid | {m for m in ms if m <= 512})) | log_grid | set(tile_probes(GPU_TILE_BOUNDARIES)))


def model_grid(name: str, tp: int, device: str, dtypes: list[str], fp8: bool = False):
    """The GEMM, attention and elementwise points of one model at tensor parallelism `tp`."""
    from microbench.grid import Grid, attention_points, elementwise_points, gemm_points

    if tp < 1:
        raise SpeedplanInputError(f"--tp must be >= 1, got {tp}")
    model = get_model(name)
    model.check_tp(tp, option=f"grid model:{name}@{tp}: TP")
    shapes = sorted({(s.n, s.k) for s in linear_shapes(model, tp)})
    ms = _m_values(device)
    gemm = gemm_points(shapes, ms, dtypes)
    if fp8:  # fp8 tensor-core GEMMs need M, N, K multiples of 16
        gemm += gemm_points([s for s in shapes if s[0] % 16 == 0 and s[1] % 16 == 0],
                            [m for m in ms if m % 16 == 0], ["fp8"])
    heads = attention_shape(model, tp)
    if device == "cpu":
        q_lens = sorted(set(range(1, 9)) | set(CPU_TREE_TOKENS))
        attn = attention_points(heads, CPU_BATCHES, q_lens, CPU_KV_LENS, dtypes)
        ew = elementwise_points(model.hidden, CPU_EW_TOKENS, dtypes)
    else:
        attn = attention_points(heads, [1, 4, 16, 64, 256], [1, 2, 4, 8, 16],
                                [1024, 2048, 4096, 8192, 16384, 32768], dtypes[:1], max_tokens=2**21)
        ew = elementwise_points(model.hidden, [4**i for i in range(8)], dtypes[:1])
    label = f"model:{model.name}@tp{tp} ({len(shapes)} GEMM shapes, M {min(ms)}..{max(ms)}, {device})"
    return Grid(gemm, attn, ew, [], [label])


def _check_device(device: str) -> None:
    if device not in ("cpu", "cuda"):
        raise SpeedplanInputError(f"--device must be cpu or cuda, got {device!r}")


def grid_names(names: list[str], device: str) -> list[str]:
    """The grids a bench measures: those named, else the device's default."""
    return [n.strip() for n in names] if names else (["quick"] if device == "cpu" else GPU_DEFAULT)


def _check_used(names: list[str], tp: int, cupy: bool, device: str) -> None:
    """Refuse options the run would ignore, as the sweep refuses --tree-nodes without a tree: --tp
    shapes model grids without their own @TP only (the gpu grid holds one), --cupy runs on CUDA only."""
    if tp > 1 and not any(n == "gpu" or (n.startswith("model:") and "@" not in n) for n in grid_names(names, device)):
        raise SpeedplanInputError(f"--tp {tp}: it shapes model: grids without their own @TP only (--grid model:NAME), "
                                  "and none is named; it would be ignored")
    if cupy and device != "cuda":
        raise SpeedplanInputError(f"--cupy cross-checks GEMMs on a CUDA device; --device is {device}: it would be ignored")


def build_grid(names: list[str], device: str, tp: int = 1, dtypes: list[str] | None = None, fp8: bool = False):
    """A microbench Grid from grid names (see module docstring)."""
    from microbench.grid import Grid, floor_points, generic_grid, tiny_grid

    _check_device(device)
    dtypes = dtypes or default_dtypes(device)
    grid = Grid()
    for name in grid_names(names, device):
        if name == "quick":
            grid.extend(model_grid("smollm2-135m", 1, device, dtypes))
            generic = generic_grid(device, dtypes[:1])
            generic.elementwise = []  # the model's elementwise sweep covers these sizes
            grid.extend(generic)
            grid.description.append("quick")
        elif name == "gpu":
            grid.extend(build_grid(GPU_DEFAULT, device, tp, dtypes, fp8))
        elif name == "generic":
            grid.extend(generic_grid(device, dtypes[:1]))
        elif name == "tiny":
            grid.extend(tiny_grid(dtypes[0]))
        elif name.startswith("model:"):
            model, _, tp_text = name[len("model:"):].partition("@")
            try:
                model_tp = int(tp_text.removeprefix("tp")) if tp_text else tp
            except ValueError:
                raise SpeedplanInputError(f"grid {name!r}: TP after '@' must be an integer") from None
            if tp_text and model_tp < 1:  # model_grid's "--tp must be >= 1" named an option not given
                raise SpeedplanInputError(f"grid {name!r}: TP after '@' must be >= 1, got {model_tp}")
            grid.extend(model_grid(model, model_tp, device, dtypes, fp8))
        else:
            raise SpeedplanInputError(f"unknown grid {name!r}; use quick, generic, gpu, tiny or model:NAME[@TP]")
    grid.floors.extend(floor_points(device, dtypes[0]))
    return grid.finalize()


_GPU_PRESETS = {"H200": "h200-sxm", "H100": "h100-sxm", "A100": "a100-80gb", "B200": "b200",
                "L40S": "l40s", "MI300X": "mi300x"}


def _cuda_facts() -> tuple[str, bool]:
    """(device name, has fp8 tensor-core GEMM) of CUDA device 0."""
    import torch

    if not torch.cuda.is_available():
        raise SpeedplanInputError("--device cuda: torch sees no CUDA device")
    major, minor = torch.cuda.get_device_capability(0)
    return torch.cuda.get_device_name(0), (major, minor) >= (8, 9) and hasattr(torch, "_scaled_mm")


def _clear_placeholder(out: Path) -> None:
    """A datasheet-roofline placeholder (nothing measured) gives way to measurements; anything
    else that is not a resumable profile folder is refused by the store."""
    if out.exists() and not out.is_dir():
        raise SpeedplanInputError(f"--out {out}: exists and is not a folder")
    meta = out / "meta.json"
    if meta.exists():
        try:
            origin = json.loads(meta.read_text(encoding="utf-8-sig")).get("origin")
        except (json.JSONDecodeError, AttributeError):
            raise SpeedplanInputError(f"{meta}: malformed JSON; use another --out folder") from None
        if origin == "datasheet-roofline":
            shutil.rmtree(out)


def _check_resume(out: Path, device: str, min_time_ms: float, visits: int, interleave: bool) -> None:
    """A resumed folder's new points are timed as its earlier ones were, on the same CPU model:
    resuming with another --min-time-ms, --visits or --interleave/--one-by-one mixed two timings
    under the last run's description, and a profile of another CPU (the same name, another family)
    took this one's points (a fuzzing run of 2026-12-05). Call after _clear_placeholder."""
    try:
        old = json.loads((out / "meta.json").read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return  # none (a new folder), or the store says what is wrong with it
    if not isinstance(old, dict):
        return
    timing = old.get("timing")
    was = re.search(r"min (\S+) ms per point in (\d+) visit", timing) if isinstance(timing, str) else None
    if was:  # the runner's own words (microbench.runner.run), compared as it writes them
        now = (f"{min_time_ms / 1e3 * 1e3:.0f}", str(max(1, visits)), interleave and device == "cpu")
        before = (was[1], was[2], "interleaved round-robin" in timing)
        if now != before:
            mode = "--interleave" if before[2] else "--one-by-one"
            raise SpeedplanInputError(f"--out {out}: its points were timed with --min-time-ms {before[0]} --visits "
                                      f"{before[1]} {mode}; resume with the same, or use another --out folder")
    if device == "cpu" and old.get("device") == "cpu":
        from microbench.env import describe_cpu, same_cpu, this_cpu

        here = this_cpu()
        if not same_cpu(old, here):
            raise SpeedplanInputError(f"--out {out}: holds a profile measured on {describe_cpu(old)}, this machine is "
                                      f"{describe_cpu(here)}; use another --out folder")


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def max_threads() -> int:
    """The most torch CPU threads `speedplan bench` takes: the cores this process may use, at least 2."""
    return max(usable_cores(), 2)


def run_bench(grids: list[str], device: str, out: str, tp: int = 1, hardware_preset: str | None = None,
              dtypes: list[str] | None = None, min_time_ms: float | None = None, threads: int = 2, cupy: bool = False,
              stop_after: int | None = None, progress: bool = True, quiet_tries: int = 3,
              visits: int | None = None, interleave: bool = True):
    """Build the grid, check every input, then measure into `out` (resuming what is there).
    Returns microbench's RunResult."""
    from speedplan.specs.hardware import get_hardware

    _check_device(device)  # before the preset check, which took any other device for cuda
    for dt in dtypes or []:
        if dt not in ("fp32", "bf16", "fp16", "fp8"):
            raise SpeedplanInputError(f"unknown dtype {dt!r}; use fp32, bf16, fp16 or fp8")
    if device == "cpu" and "fp8" in (dtypes or []):
        raise SpeedplanInputError("--dtype fp8: torch has no fp8 matmul on the CPU; measure fp8 with --device cuda")
    if min_time_ms is None:  # 0 is refused below, as -5 is, not taken for the default
        min_time_ms = CPU_MIN_TIME_MS if device == "cpu" else 20.0
    visits = (CPU_VISITS if device == "cpu" else 1) if visits is None else visits
    if not 1 <= visits <= MAX_VISITS:  # --visits 100000 timed no point in two minutes
        raise SpeedplanInputError(f"--visits must be in 1..{MAX_VISITS}, got {visits}")
    if quiet_tries is not None and quiet_tries > MAX_QUIET_TRIES:
        raise SpeedplanInputError(f"--quiet-tries must be in 1..{MAX_QUIET_TRIES}, got {quiet_tries}")
    if not 0 < min_time_ms < 60_000:  # NaN fails too
        raise SpeedplanInputError(f"--min-time-ms must be > 0 and under a minute, got {min_time_ms}")
    for option, value, low in (("--threads", threads, 1), ("--tp", tp, 1), ("--quiet-tries", quiet_tries, 1),
                               ("--stop-after", stop_after, 1)):
        if value is not None and value < low:
            raise SpeedplanInputError(f"{option} must be >= {low}, got {value}")
    _check_used(grids, tp, cupy, device)
    if device == "cpu" and threads > max_threads():  # --threads 100000 ended in a segmentation fault
        raise SpeedplanInputError(f"--threads must be at most {max_threads()} (this machine has {usable_cores()} "
                                  f"CPU cores), got {threads}")
    try:
        from microbench.runner import run
    except ImportError as e:
        raise SpeedplanInputError(f"speedplan bench needs torch ({e.name} missing): pip install 'speedplan[bench]' "
                                  "(in a checkout: pip install -e '.[bench]')") from None
    fp8 = False
    if device == "cuda":
        name, fp8 = _cuda_facts()
        if hardware_preset is None:
            hardware_preset = next((p for key, p in _GPU_PRESETS.items() if key in name.upper()), None)
            if hardware_preset is None:
                raise SpeedplanInputError(f"no hardware preset for {name!r}; pass --hardware-preset")
    hw = get_hardware(hardware_preset or "cpu-local", folders=False)
    if (device == "cpu") != hw.is_cpu:
        raise SpeedplanInputError(f"--hardware-preset {hw.name}: describes " + (
            "a GPU; --device cpu measures this machine's CPU (a CPU preset such as cpu-local)" if device == "cpu"
            else "a CPU; --device cuda measures a GPU (a GPU preset such as h100-sxm)"))
    hardware_preset = hw.name
    grid = build_grid(grids, device, tp, dtypes, fp8=fp8)
    _clear_placeholder(Path(out))
    _check_resume(Path(out), device, min_time_ms, visits, interleave)
    try:
        return run(grid, device, out, hardware_preset, min_time_s=min_time_ms / 1e3, threads=threads,
                   cupy=cupy, stop_after=stop_after, progress=progress, quiet_tries=quiet_tries,
                   visit_count=visits, interleave=interleave)
    except ValueError as e:
        raise SpeedplanInputError(str(e)) from None
