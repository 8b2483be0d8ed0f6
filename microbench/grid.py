"""What to measure: plain, hashable points per op family, and the generic grids.

A model's own shapes are built on the speedplan side (`speedplan.bench_grid`, from the model
preset and TP degree) and handed here as plain points; this module knows no models.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True, order=True)
class GemmPoint:
    """y[m, n] = x[m, k] @ W[k, n] (torch: F.linear(x, W[n, k]))."""

    n: int
    k: int
    dtype: str
    m: int


@dataclass(frozen=True, order=True)
class AttentionPoint:
    """Decode/verify attention: `batch` sequences × `q_len` new tokens against `kv_len` cached
    ones (new tokens included); mask "causal" (lower-right aligned chain) or "tree"."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    dtype: str
    batch: int
    kv_len: int  # before q_len and mask: points sharing a KV cache are measured together
    q_len: int
    mask: str


@dataclass(frozen=True, order=True)
class ElementwisePoint:
    """A small memory-bound op ("rmsnorm", "silu_mul", "rotary", "scale") over `numel`
    elements of its main [tokens, hidden] operand."""

    op: str
    dtype: str
    numel: int
    hidden: int


@dataclass(frozen=True, order=True)
class FloorPoint:
    """The per-launch floor: one tiny op, launched eagerly (graph=0) or replayed from a CUDA
    graph (graph=1)."""

    op: str
    dtype: str
    graph: int


FAMILIES = {"gemm": GemmPoint, "attention": AttentionPoint, "elementwise": ElementwisePoint, "floors": FloorPoint}

# CSV key columns per family, in the order they are written (the table's identity).
KEY_COLUMNS = {
    "gemm": ["m", "n", "k", "dtype"],
    "attention": ["batch", "q_len", "kv_len", "num_heads", "num_kv_heads", "head_dim", "mask", "dtype"],
    "elementwise": ["op", "numel", "hidden", "dtype"],
    "floors": ["op", "graph", "dtype"],
}


def point_key(point) -> tuple[str, ...]:
    """The point's identity as the strings its CSV row holds (used to resume)."""
    family = family_of(point)
    return tuple(str(getattr(point, c)) for c in KEY_COLUMNS[family])


def family_of(point) -> str:
    for name, cls in FAMILIES.items():
        if isinstance(point, cls):
            return name
    raise TypeError(f"not a microbench point: {point!r}")


def elementwise_nbytes(point: ElementwisePoint) -> int:
    """Bytes an elementwise op reads + writes (the memory-bound roofline's numerator)."""
    b = DTYPE_BYTES[point.dtype]
    tensors = {"scale": 2, "rmsnorm": 2, "rotary": 2, "silu_mul": 3}[point.op]
    return tensors * point.numel * b


@dataclass
class Grid:
    """Points per op family plus a description for meta.json. Order is measurement order."""

    gemm: list[GemmPoint] = field(default_factory=list)
    attention: list[AttentionPoint] = field(default_factory=list)
    elementwise: list[ElementwisePoint] = field(default_factory=list)
    floors: list[FloorPoint] = field(default_factory=list)
    description: list[str] = field(default_factory=list)

    def extend(self, other: "Grid") -> "Grid":
        for name in FAMILIES:
            getattr(self, name).extend(getattr(other, name))
        self.description.extend(other.description)
        return self

    def finalize(self) -> "Grid":
        """Deduplicate and sort so points sharing a weight / KV shape are measured together."""
        for name in FAMILIES:
            setattr(self, name, sorted(set(getattr(self, name))))
        # A profile looks elementwise ops up by bytes moved, so one (op, dtype, numel) measured at
        # two hidden sizes (two models' grids meeting) would be one point with two latencies:
        # the first, the smaller hidden, is kept.
        seen: set = set()
        self.elementwise = [p for p in self.elementwise
                            if (key := (p.op, p.dtype, p.numel)) not in seen and not seen.add(key)]
        return self

    def points(self) -> list:
        return [p for name in FAMILIES for p in getattr(self, name)]

    def __len__(self) -> int:
        return sum(len(getattr(self, name)) for name in FAMILIES)

    def to_json(self) -> str:
        return json.dumps({name: [asdict(p) for p in getattr(self, name)] for name in FAMILIES}
                          | {"description": self.description})

    @classmethod
    def from_json(cls, text: str) -> "Grid":
        data = json.loads(text)
        grid = cls(description=list(data.get("description", [])))
        for name, point_cls in FAMILIES.items():
            names = {f.name for f in fields(point_cls)}
            for row in data.get(name, []):
                if set(row) != names:
                    raise ValueError(f"grid {name} point needs exactly {sorted(names)}, got {sorted(row)}")
                getattr(grid, name).append(point_cls(**row))
        return grid.finalize()


def tile_probes(boundaries: list[int]) -> list[int]:
    """M values on both sides of each tile boundary (b − 1, b, b + 1)."""
    return sorted({v for b in boundaries for v in (b - 1, b, b + 1) if v >= 1})


def verify_m_values(batches: list[int], draft_lens: list[int]) -> list[int]:
    """GEMM-M of a verify pass: B · (1 + D) over the batches and draft lengths a sweep uses."""
    return sorted({b * (1 + d) for b in batches for d in draft_lens})


def gemm_points(shapes: list[tuple[int, int]], m_values: list[int], dtypes: list[str]) -> list[GemmPoint]:
    return [GemmPoint(n=n, k=k, dtype=dt, m=m) for n, k in shapes for dt in dtypes for m in m_values]


def attention_points(
    heads: tuple[int, int, int], batches: list[int], q_lens: list[int], kv_lens: list[int],
    dtypes: list[str], tree: bool = True, max_tokens: int | None = None,
) -> list[AttentionPoint]:
    """Causal points for every q_len (q_len 1 is plain decode, the baseline) and tree points for
    q_len ≥ 2. `max_tokens` caps batch · kv_len (KV memory) on large grids."""
    h, kvh, hd = heads
    out = []
    for dt in dtypes:
        for b in batches:
            for kv in kv_lens:
                if max_tokens is not None and b * kv > max_tokens:
                    continue
                for q in q_lens:
                    if q > kv:
                        continue
                    masks = ["causal", "tree"] if (tree and q >= 2) else ["causal"]
                    out += [AttentionPoint(h, kvh, hd, dt, b, kv, q, mk) for mk in masks]
    return out


def elementwise_points(hidden: int, tokens: list[int], dtypes: list[str]) -> list[ElementwisePoint]:
    ops = ["rmsnorm", "silu_mul", "rotary", "scale"]
    return [ElementwisePoint(op, dt, t * hidden, hidden) for op in ops for dt in dtypes for t in tokens]


def floor_points(device: str, dtype: str) -> list[FloorPoint]:
    graphs = [0, 1] if device == "cuda" else [0]
    return [FloorPoint("launch", dtype, g) for g in graphs]


def generic_grid(device: str, dtypes: list[str]) -> Grid:
    """Shapes for models that are not named: square and rectangular (N, K), a log grid of M,
    a 32-head / 8-KV-head / head_dim-128 attention, a range of elementwise sizes."""
    if device == "cpu":
        sizes = [(1024, 1024), (4096, 1024), (1024, 4096), (2048, 2048)]
        ms = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]
        attn = attention_points((32, 8, 128), [1, 2, 4], [1, 2, 4, 8], [256, 512, 1024, 2048], dtypes)
        ew = elementwise_points(1024, [4**i for i in range(7)], dtypes)
    else:
        dims = [1024, 4096, 8192, 16384]
        sizes = [(n, k) for n in dims for k in dims]
        ms = sorted({1, 2, 4, 8, 16, 32, 48, 96, 192, 384, 768, 1536, 3072, 6144}
                    | set(tile_probes([64, 128, 256, 512, 1024, 2048, 4096])))
        attn = attention_points((32, 8, 128), [1, 8, 64], [1, 2, 4, 8, 16], [1024, 8192], dtypes)
        ew = elementwise_points(4096, [1, 16, 256, 4096, 32768], dtypes)
    grid = Grid(gemm_points(sizes, ms, dtypes), attn, ew, floor_points(device, dtypes[0]),
                [f"generic ({device})"])
    return grid


def tiny_grid(dtype: str = "fp32") -> Grid:
    """A grid of a few seconds on CPU, for tests and dry runs."""
    return Grid(
        gemm_points([(64, 64), (256, 128)], [1, 2, 3, 4, 8], [dtype]),
        attention_points((4, 2, 16), [1, 2], [1, 2, 4], [16, 64], [dtype]),
        elementwise_points(64, [1, 8], [dtype]),
        floor_points("cpu", dtype),
        ["tiny"],
    ).finalize()
