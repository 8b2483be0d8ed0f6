"""Hardware specs: datasheet numbers with their sources, and the shipped presets.

A `Hardware` is what the roofline needs (peak FLOP/s per dtype, memory bandwidth, capacity,
scale-up link bandwidth) plus the few small-kernel facts a roofline alone gets wrong (tile
width along M, per-kernel floor, per-step framework overhead). A measured profile
(`speedplan.profile`) replaces the roofline where it has points; a profile folder can be given
wherever a hardware name is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from speedplan.errors import SpeedplanInputError

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}

# Fractions of datasheet peak that large kernels reach. These are the roofline's only
# correction factors; a measured profile supersedes them. Source: assumption from commonly
# reported cuBLAS/hipBLASLt large-GEMM efficiency (~70-80% of dense peak) and STREAM-like copy
# bandwidth (~85-92% of HBM peak) on Hopper/Ampere; not measured by speedplan.
DEFAULT_COMPUTE_EFFICIENCY = 0.75
DEFAULT_BANDWIDTH_EFFICIENCY = 0.88


@dataclass(frozen=True)
class Hardware:
    """One accelerator (or CPU socket) as the cost model sees it.

    Units are in the names: FLOP/s, bytes/s, bytes, microseconds.
    `link_bytes_per_s` is the per-device, one-direction scale-up bandwidth that a ring
    all-reduce sees (NVLink: half the marketing bidirectional figure).
    """

    name: str
    description: str
    peak_flops_per_s: dict[str, float]
    hbm_bytes_per_s: float
    memory_bytes: float
    link_bytes_per_s: float
    link_latency_us: float = 8.0
    kernel_floor_us: float = 3.0
    gemm_tile_m: int = 64
    attention_tile_m: int = 128
    step_overhead_us: float = 150.0
    tree_mask_penalty: float = 1.25
    # Host time per decoder layer that no kernel accounts for (Python and dispatch in an eager
    # framework). 0 for serving engines that replay CUDA graphs; `speedplan validate` measures
    # it for the reference runtime on the calibration prompts.
    layer_overhead_us: float = 0.0
    compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY
    bandwidth_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY
    default_dtype: str = "bf16"
    source: str = ""
    notes: str = ""
    origin: str = "datasheet"  # "datasheet", "profile" (measured) or "derived"
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for label, value in (
            ("hbm_bytes_per_s", self.hbm_bytes_per_s),
            ("memory_bytes", self.memory_bytes),
            ("link_bytes_per_s", self.link_bytes_per_s),
        ):
            if not value > 0:
                raise SpeedplanInputError(f"hardware {self.name}: {label} must be > 0, got {value}")
        if not self.peak_flops_per_s or any(not v > 0 for v in self.peak_flops_per_s.values()):
            raise SpeedplanInputError(f"hardware {self.name}: peak_flops_per_s must be positive")
        if self.default_dtype not in self.peak_flops_per_s:
            raise SpeedplanInputError(
                f"hardware {self.name}: default dtype {self.default_dtype} has no peak FLOP/s"
            )

    def flops_per_s(self, dtype: str) -> float:
        """Achievable dense FLOP/s for `dtype` (datasheet peak × compute_efficiency)."""
        if dtype not in DTYPE_BYTES:
            raise SpeedplanInputError(f"unknown dtype {dtype!r}; use one of {sorted(DTYPE_BYTES)}")
        if dtype not in self.peak_flops_per_s:
            raise SpeedplanInputError(f"hardware {self.name} has no {dtype} peak (not supported)")
        return self.peak_flops_per_s[dtype] * self.compute_efficiency

    @property
    def bytes_per_s(self) -> float:
        """Achievable memory bandwidth in bytes/s (datasheet × bandwidth_efficiency)."""
        return self.hbm_bytes_per_s * self.bandwidth_efficiency

    def ridge_flops_per_byte(self, dtype: str) -> float:
        """Arithmetic intensity (FLOP/byte) where compute time equals memory time."""
        return self.flops_per_s(dtype) / self.bytes_per_s

    def with_overrides(self, **changes) -> "Hardware":
        return replace(self, **changes)


T = 1e12
GB = 1e9
GiB = 2**30

PRESETS: dict[str, Hardware] = {
    h.name: h
    for h in [
        Hardware(
            name="h100-sxm",
            description="NVIDIA H100 SXM5 80GB",
            peak_flops_per_s={"bf16": 989.4 * T, "fp16": 989.4 * T, "fp8": 1978.9 * T, "fp32": 66.9 * T},
            hbm_bytes_per_s=3.35e12,
            memory_bytes=80 * GB,
            link_bytes_per_s=450 * GB,
            source="NVIDIA H100 Tensor Core GPU datasheet (SXM5: dense BF16 989.4 TFLOPS, FP8 1,978.9 TFLOPS, "
            "HBM3 3.35 TB/s, 80 GB, NVLink 900 GB/s bidirectional)",
        ),
        Hardware(
            name="h200-sxm",
            description="NVIDIA H200 SXM 141GB",
            peak_flops_per_s={"bf16": 989.4 * T, "fp16": 989.4 * T, "fp8": 1978.9 * T, "fp32": 66.9 * T},
            hbm_bytes_per_s=4.8e12,
            memory_bytes=141 * GB,
            link_bytes_per_s=450 * GB,
            source="NVIDIA H200 Tensor Core GPU datasheet (SXM: dense BF16 989 TFLOPS, FP8 1,979 TFLOPS, "
            "HBM3e 4.8 TB/s, 141 GB, NVLink 900 GB/s bidirectional)",
        ),
        Hardware(
            name="a100-80gb",
            description="NVIDIA A100 SXM4 80GB",
            peak_flops_per_s={"bf16": 312 * T, "fp16": 312 * T, "fp32": 19.5 * T},
            hbm_bytes_per_s=2.039e12,
            memory_bytes=80 * GB,
            link_bytes_per_s=300 * GB,
            notes="no FP8 tensor cores",
            source="NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB: dense BF16 312 TFLOPS, HBM2e 2,039 GB/s, "
            "NVLink 600 GB/s bidirectional)",
        ),
        Hardware(
            name="b200",
            description="NVIDIA B200 (HGX/DGX B200) 180GB",
            peak_flops_per_s={"bf16": 2250 * T, "fp16": 2250 * T, "fp8": 4500 * T, "fp32": 75 * T},
            hbm_bytes_per_s=8.0e12,
            memory_bytes=180 * GB,
            link_bytes_per_s=900 * GB,
            source="NVIDIA DGX B200 datasheet (per GPU: dense FP8 4.5 PFLOPS, BF16 2.25 PFLOPS, HBM3e 8 TB/s, "
            "180 GB; NVLink 5 1.8 TB/s bidirectional)",
        ),
        Hardware(
            name="mi300x",
            description="AMD Instinct MI300X 192GB",
            peak_flops_per_s={"bf16": 1307.4 * T, "fp16": 1307.4 * T, "fp8": 2614.9 * T, "fp32": 163.4 * T},
            hbm_bytes_per_s=5.3e12,
            memory_bytes=192 * GB,
            link_bytes_per_s=448 * GB,
            kernel_floor_us=4.0,
            source="AMD Instinct MI300X datasheet (dense BF16 1,307.4 TFLOPS, FP8 2,614.9 TFLOPS, HBM3 5.3 TB/s, "
            "192 GB; 7 Infinity Fabric links x 64 GB/s one direction)",
        ),
        Hardware(
            name="l40s",
            description="NVIDIA L40S 48GB (PCIe)",
            peak_flops_per_s={"bf16": 362.05 * T, "fp16": 362.05 * T, "fp8": 733 * T, "fp32": 91.6 * T},
            hbm_bytes_per_s=864 * GB,
            memory_bytes=48 * GB,
            link_bytes_per_s=32 * GB,
            link_latency_us=15.0,
            source="NVIDIA L40S datasheet (dense BF16 362.05 TFLOPS, FP8 733 TFLOPS, GDDR6 864 GB/s, 48 GB; "
            "no NVLink: PCIe Gen4 x16 64 GB/s bidirectional)",
        ),
        Hardware(
            name="cpu-local",
            description="2-core x86 CPU (the CI/development machine class), fp32",
            peak_flops_per_s={"fp32": 170e9},
            hbm_bytes_per_s=25 * GB,
            memory_bytes=24 * GiB,
            link_bytes_per_s=10 * GB,
            kernel_floor_us=6.0,
            gemm_tile_m=1,
            attention_tile_m=1,
            step_overhead_us=400.0,
            tree_mask_penalty=1.0,
            compute_efficiency=1.0,
            bandwidth_efficiency=1.0,
            default_dtype="fp32",
            source="measured by hand on the development machine: fp32 GEMM ~170 GFLOP/s, memory copy ~25 GB/s, "
            "24 GiB RAM (speedplan DEVELOPERS notes); replace with `speedplan bench --device cpu`",
        ),
    ]
}

DEFAULT_HARDWARE = "h100-sxm"


def get_hardware(name: str) -> Hardware:
    """A preset by name (case-insensitive). Profile folders are resolved by `speedplan.cost`."""
    key = name.strip().lower()
    if key not in PRESETS:
        raise SpeedplanInputError(
            f"unknown hardware {name!r}; presets: {', '.join(sorted(PRESETS))} (or a profile folder)"
        )
    return PRESETS[key]
