"""Provenance for meta.json: device name, clocks, threads, library versions."""

from __future__ import annotations

import datetime
import platform
import subprocess
import sys


def _cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_mhz() -> list[float]:
    try:
        return sorted({round(float(line.split(":")[1])) for line in open("/proc/cpuinfo") if line.startswith("cpu MHz")})
    except (OSError, ValueError):
        return []


def _nvidia_smi() -> dict:
    query = "name,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,driver_version"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return {}
    if not out:
        return {}
    return dict(zip(query.split(","), (v.strip() for v in out[0].split(","))))


def provenance(device: str, threads: int | None) -> dict:
    """What produced the numbers: device, clocks, library versions, threads, date (UTC)."""
    import numpy
    import torch

    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "numpy": numpy.__version__}
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": {"platform": platform.platform(), "machine": platform.machine()}}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        versions.update(cuda=torch.version.cuda, cudnn=str(torch.backends.cudnn.version()))
        try:
            import cupy

            versions["cupy"] = cupy.__version__
        except ImportError:
            pass
        info.update(device_name=props.name, compute_capability=f"{props.major}.{props.minor}",
                    memory_bytes=props.total_memory, clocks=_nvidia_smi())
    else:
        info.update(device_name=_cpu_name(), clocks={"cpu_mhz": _cpu_mhz()},
                    threads=threads or torch.get_num_threads(),
                    torch_parallel_info=torch.__config__.parallel_info().splitlines()[:6])
    info["versions"] = versions
    return info
