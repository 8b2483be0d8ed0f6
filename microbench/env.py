"""Provenance for meta.json: device name, clocks, threads, library versions."""

from __future__ import annotations

import datetime
import platform
import re
import subprocess
import sys


def cpu_name() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (a VM may mask it: "AMD EPYC")."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_id() -> dict:
    """Vendor, family and model numbers of the CPU (/proc/cpuinfo), which tell apart
    generations a masked model name does not (AMD EPYC family 25 is Zen 3/4, 26 is Zen 5);
    {} where they are not known."""
    fields = {"vendor_id": "vendor", "cpu family": "family", "model": "model"}
    out: dict = {}
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            key = key.strip()
            if key in fields and fields[key] not in out:
                value = value.strip()
                out[fields[key]] = int(value) if value.isdigit() else value
            if not line.strip() and out:
                break
    except OSError:
        return {}
    return out if len(out) == 3 else {}


def this_cpu() -> dict:
    """This machine's CPU as a profile's meta.json records it: device_name and cpu_id."""
    ident = cpu_id()
    return {"device_name": cpu_name(), **({"cpu_id": ident} if ident else {})}


def _model_name(name: str | None) -> str:
    """A CPU model name without the nominal clock a hypervisor may append or leave off: the Intel
    Xeon VM of 2026-12-02 said "Intel(R) Xeon(R) Processor", the same model (family 6, model 106,
    2600 MHz) on 2026-12-03 "Intel(R) Xeon(R) Processor @ 2.60GHz"."""
    return re.sub(r"\s*@\s*[\d.]+\s*[GM]Hz\s*$", "", str(name or "")).strip()


def same_described_cpu(a: str, b: str) -> bool:
    """Whether two `describe_cpu` texts name one CPU, the nominal clock aside (`_model_name`): what
    a stored validation summary records of the CPU it ran on."""
    clock = lambda text: re.sub(r"\s*@\s*[\d.]+\s*[GM]Hz", "", str(text)).strip()  # noqa: E731
    return clock(a) == clock(b)


def same_cpu(meta: dict, here: dict) -> bool:
    """Whether a profile's meta.json was measured on the CPU `here` (this_cpu()): the same model
    name (its nominal clock aside), and the same family and model where both record them
    (profiles before 2026-12-02 do not)."""
    if _model_name(meta.get("device_name")) != _model_name(here.get("device_name")):
        return False
    a, b = meta.get("cpu_id"), here.get("cpu_id")
    return not (a and b) or (a.get("family"), a.get("model")) == (b.get("family"), b.get("model"))


def describe_cpu(meta: dict) -> str:
    """ "AMD EPYC (family 26, model 2)", or the bare name where no cpu_id is recorded."""
    ident = meta.get("cpu_id") or {}
    name = str(meta.get("device_name"))
    return f"{name} (family {ident['family']}, model {ident['model']})" if "family" in ident else name


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
                    sm_count=props.multi_processor_count,
                    memory_bytes=props.total_memory, clocks=_nvidia_smi())
    else:
        info.update(**this_cpu(), clocks={"cpu_mhz": _cpu_mhz()},
                    threads=threads or torch.get_num_threads(),
                    torch_parallel_info=torch.__config__.parallel_info().splitlines()[:6])
    info["versions"] = versions
    return info
