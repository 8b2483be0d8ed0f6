"""The installed aiconfigurator-core package (NVIDIA, Apache-2.0) as a data source.

AIConfigurator ships measured kernel tables as parquet files under
`aiconfigurator_core/systems/data/<system>/<family>/<backend>/<version>/`. This module finds
them without importing any of the package's Python (`importlib.util.find_spec` locates the
folder; pyarrow reads the files) and returns them as speedplan columns, latency in µs.

What the tables mean (checked against the upstream collectors and loaders; see
docs/profiles.md):

- `latency` is milliseconds per call (mean of CUDA-graph replays) in every table;
- GEMM rows are C[m, n] = A[m, k] · W[k, n]; `fp8` is per-tensor scaled (vLLM's
  CutlassFP8ScaledMM, dynamic activation quantisation included);
- decode attention rows have `isl` = 1 and `step` = cached tokens, so the keys attended are
  isl + step, the new token included (speedplan's kv_len); prefill rows are full causal
  prefills of `isl` tokens (q_len = kv_len = isl), with no cached prefix;
- all-reduce `message_size` is an element count (bf16), so bytes = 2 · message_size; the
  `_eager` rows (no CUDA graph) are dropped, as AIConfigurator's loader drops them.

pyarrow is an optional dependency: `pip install 'speedplan[aic]'`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import re
from pathlib import Path

from speedplan.errors import SpeedplanInputError

DISTRIBUTION = "aiconfigurator-core"
MODULE = "aiconfigurator_core"
MIN_VERSION = (0, 12, 0)  # the table layout (columns, units, isl/step convention) checked for this converter
# AIConfigurator system name -> speedplan hardware preset
SYSTEM_PRESETS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200", "a100_sxm": "a100-80gb",
                  "l40s": "l40s"}
BACKENDS = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8"}  # fp8_block, nvfp4, int4 are not speedplan dtypes
INSTALL_HINT = "pip install 'speedplan[aic]' (aiconfigurator-core and pyarrow)"


def _version_tuple(text: str) -> tuple[int, ...]:
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g or 0) for g in match.groups()) if match else ()


def version_key(text: str) -> list:
    """Sort key for version folder names like 0.5.6.post2 or 1.3.0rc20."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"\d+|[a-z]+", text)]


class AicSource:
    """The installed package's data folder, its version, and readers for its tables.

    Raises SpeedplanInputError when the package or pyarrow is missing or the package is older
    than MIN_VERSION. `root` overrides discovery (tests point it at a synthetic tree laid out
    like the package)."""

    def __init__(self, root: str | Path | None = None, version: str | None = None):
        if root is None:
            spec = importlib.util.find_spec(MODULE)
            if spec is None or not spec.submodule_search_locations:
                raise SpeedplanInputError(f"{DISTRIBUTION} is not installed: {INSTALL_HINT}")
            root = Path(list(spec.submodule_search_locations)[0])
            try:
                version = importlib.metadata.version(DISTRIBUTION)
            except importlib.metadata.PackageNotFoundError:
                version = None
        self.root = Path(root)
        self.data = self.root / "systems" / "data"
        self.version = version or "unknown"
        if _version_tuple(self.version) < MIN_VERSION:
            raise SpeedplanInputError(
                f"{DISTRIBUTION} {self.version} is older than {'.'.join(map(str, MIN_VERSION))}, the table layout "
                f"this converter reads: {INSTALL_HINT}")
        if not self.data.is_dir():
            raise SpeedplanInputError(f"{self.data}: no data folder in the installed {DISTRIBUTION}")
        try:
            import pyarrow.parquet  # noqa: F401  (optional dependency, checked here once)
        except ImportError:
            raise SpeedplanInputError(f"reading {DISTRIBUTION} tables needs pyarrow: {INSTALL_HINT}") from None

    # ---- where things are -------------------------------------------------------------------
    def systems(self) -> list[str]:
        """Systems that have data and a speedplan preset."""
        return sorted(s for s in SYSTEM_PRESETS if (self.data / s / "gemm").is_dir())

    def versions(self, system: str, family: str, backend: str) -> list[str]:
        folder = self.data / system / family / backend
        return sorted((p.name for p in folder.iterdir() if p.is_dir()), key=version_key) if folder.is_dir() else []

    def check(self, system: str, backend: str) -> None:
        if system not in self.systems():
            raise SpeedplanInputError(f"unknown --system {system!r}; {DISTRIBUTION} {self.version} has: "
                                      f"{', '.join(self.systems()) or 'none'}")
        if backend not in BACKENDS:
            raise SpeedplanInputError(f"unknown --backend {backend!r}; use one of {', '.join(BACKENDS)}")
        if not self.versions(system, "gemm", backend):
            raise SpeedplanInputError(f"{DISTRIBUTION} {self.version} has no {backend} tables for {system}")

    def default_version(self, system: str, backend: str) -> str:
        """The version AIConfigurator queries by default (systems/query_versions.yaml,
        `current`, with per-system overrides); the newest with GEMM tables if that file says
        nothing usable."""
        have = self.versions(system, "gemm", backend)
        slots = _query_versions(self.root / "systems" / "query_versions.yaml")
        current = slots.get((system, backend)) or slots.get(("*", backend))
        return current if current in have else have[-1]

    def table_path(self, system: str, family: str, backend: str, version: str, table: str) -> Path:
        return self.data / system / family / backend / version / f"{table}.parquet"

    def find(self, system: str, family: str, backend: str, version: str, table: str, older: bool = False) -> Path | None:
        """The table at `version`, or (older=True) at the newest older version that has it."""
        path = self.table_path(system, family, backend, version, table)
        if path.exists() or not older:
            return path if path.exists() else None
        for v in reversed(self.versions(system, family, backend)):
            if version_key(v) <= version_key(version) and (p := self.table_path(system, family, backend, v, table)).exists():
                return p
        return None

    def read(self, path: Path):
        """A parquet table as a pandas DataFrame."""
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pandas()
        except Exception as e:  # pyarrow raises its own error types for damaged files
            raise SpeedplanInputError(f"{path}: cannot read parquet ({type(e).__name__}: {e})") from None

    def sm_version(self, system: str) -> int | None:
        path = self.root / "systems" / f"{system}.yaml"
        match = re.search(r"^\s*sm_version:\s*(\d+)", path.read_text(), re.M) if path.exists() else None
        return int(match.group(1)) if match else None

    def preferred_lane(self, system: str, backend: str, version: str) -> str | None:
        """The attention kernel lane the framework uses by default on this SM
        (systems/attention_lane_defaults.yaml), when several lanes measured the same key."""
        lanes = _lane_defaults(self.root / "systems" / "attention_lane_defaults.yaml")
        lane = lanes.get((backend, version, self.sm_version(system)))
        return None if lane in (None, "default") else lane


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _query_versions(path: Path) -> dict:
    """{(system or "*", backend): current version} from query_versions.yaml, read as text:
    only lines `backend: {current: "V", ...}` under `defaults:` or `overrides: system:`."""
    out: dict = {}
    if not path.exists():
        return out
    section, system = None, None
    for line in path.read_text().splitlines():
        text = line.split("#", 1)[0].rstrip()
        if not text.strip():
            continue
        indent = len(text) - len(text.lstrip())
        key = text.strip().split(":", 1)[0]
        if indent == 0:
            section, system = key, None
        elif section == "overrides" and indent == 2 and text.strip().endswith(":"):
            system = key
        match = re.match(r"\s*(\w+):\s*\{\s*current:\s*\"?([\w.\-]+)\"?", text)
        if match and section == "defaults":
            out[("*", match.group(1))] = match.group(2)
        elif match and section == "overrides" and system:
            out[(system, match.group(1))] = match.group(2)
    return out


def _lane_defaults(path: Path) -> dict:
    """{(backend, version, sm): lane} from attention_lane_defaults.yaml, read as text."""
    out: dict = {}
    if not path.exists():
        return out
    backend, version = None, None
    for line in path.read_text().splitlines():
        text = line.split("#", 1)[0].rstrip()
        if not text.strip():
            continue
        indent = len(text) - len(text.lstrip())
        key, _, value = text.strip().partition(":")
        key, value = key.strip().strip("\"'"), value.strip().strip("\"'")
        if indent == 0:
            backend, version = key, None
        elif indent == 2:
            version = key
        elif backend and version and key.isdigit() and value:
            out[(backend, version, int(key))] = value
    return out
