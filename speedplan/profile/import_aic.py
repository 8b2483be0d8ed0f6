"""`speedplan profile import-aic`: AIConfigurator's measured kernel tables as a speedplan
profile folder.

    import_aic("h100_sxm", "vllm", None, "profiles/h100-sxm")

writes, latency in µs (one kernel call; attention and MoE: one layer's call on one GPU):

    gemm.csv       m, n, k, dtype (bf16, fp8 per-tensor), latency_us
    attention.csv  decode rows: batch, q_len = 1, kv_len (keys attended, new token included),
                   num_heads, num_kv_heads, head_dim, mask = causal, dtype (KV-cache dtype), latency_us
    prefill.csv    causal prefill without cached prefix: batch, seq_len, num_heads, num_kv_heads,
                   head_dim, dtype (KV-cache dtype), latency_us
    allreduce.csv  num_gpus, nbytes, dtype, latency_us (the engine's custom all-reduce, CUDA graph)
    moe.csv        tokens, hidden, inter, experts, topk, tp, ep, dtype, distribution, latency_us
    floors.csv     op = launch: the smallest bf16 GEMM call (graph = 1)
    meta.json      provenance: package and version, system, backend and version, per table the
                   source file with sha256, rows and kernel sources; the licence notice
    LICENSE.aiconfigurator-core.txt, NOTICE.md   (Apache-2.0 §4 (a)-(c): licence, changes, copyright)

Attention and MoE keep the shapes the shipped model presets need on one GPU at TP 1, 2, 4
and 8 (all head shapes with all_heads=True). The folder is written next to `out` and moved
into place when complete: an error leaves nothing half-written.
"""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.outputs import PROFILE, check_replaceable, discard, move_into_place, staging_folder
from speedplan.profile.moe import BALANCED
from speedplan.profile.aic import BACKENDS, DISTRIBUTION, DTYPES, SYSTEM_PRESETS, AicSource, sha256

LICENSE_FILE = "LICENSE.aiconfigurator-core.txt"
LICENSE_TEXT = Path(__file__).resolve().parent.parent / "data" / "licenses" / LICENSE_FILE
COPYRIGHT = "Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved."
MODIFICATIONS = ("rows filtered to a subset (GEMM bf16 and per-tensor fp8; attention with window 0, beam 1 and "
                 "bf16 compute for the model presets' head shapes; custom all-reduce CUDA-graph rows; {routing} "
                 "MoE for the model presets' expert shapes), duplicate keys reduced to the first row, columns "
                 "renamed, dtype names mapped (bfloat16 -> bf16), latency converted from ms to us and rounded to "
                 "5 significant digits, decode kv_len = isl + step, all-reduce size converted from elements to bytes")
TP_DEGREES = (1, 2, 4, 8)


def modifications(moe_routing: str = BALANCED) -> str:
    """What import-aic changes in the tables (Apache-2.0 section 4(b)), naming the MoE routing kept."""
    return MODIFICATIONS.format(routing=moe_routing)


def notice(version: str, moe_routing: str = BALANCED) -> str:
    return (f"Derived from the measured performance tables of {DISTRIBUTION} {version} (NVIDIA, "
            f"https://github.com/ai-dynamo/aiconfigurator), {COPYRIGHT} Licensed under the Apache License, "
            f"Version 2.0 (SPDX-License-Identifier: Apache-2.0); a copy is in {LICENSE_FILE}. "
            f"Modified by speedplan's import-aic: {modifications(moe_routing)}.")


def origin_label(package_version: str, backend: str, backend_version: str) -> str:
    """E.g. "measured (AIConfigurator 0.12, vLLM 0.24 kernels)": what reports print."""
    short = lambda v: ".".join(v.split(".")[:2])
    return f"measured (AIConfigurator {short(package_version)}, {BACKENDS[backend]} {short(backend_version)} kernels)"


def model_heads() -> set[tuple[int, int, int]]:
    """(num_heads, num_kv_heads, head_dim) on one GPU of every model preset at TP 1, 2, 4, 8."""
    from speedplan.cost.attention_shape import attention_shape
    from speedplan.specs.model import get_model, preset_names

    heads = set()
    for name in preset_names():
        model = get_model(name)
        heads.update(attention_shape(model, tp) for tp in TP_DEGREES if model.heads % tp == 0)
    return heads


def model_experts() -> set[tuple[int, int, int, int]]:
    """(hidden, expert intermediate, experts, top-k) of every MoE model preset."""
    from speedplan.specs.model import get_model, preset_names

    return {(m.hidden, m.moe.expert_intermediate, m.moe.num_experts, m.moe.top_k)
            for m in map(get_model, preset_names()) if m.moe is not None}


class _Reader:
    """Reads tables of one (system, backend, version), recording each source file."""

    def __init__(self, src: AicSource, system: str, backend: str, version: str):
        self.src, self.system, self.backend, self.version = src, system, backend, version
        self.files: dict[str, dict] = {}

    def read(self, family: str, table: str, backend: str | None = None, older: bool = False):
        path = self.src.find(self.system, family, backend or self.backend, self.version, table, older)
        if path is None:
            return None
        frame = self.src.read(path)
        self.files[table] = {"path": str(path.relative_to(self.src.root)), "sha256": sha256(path), "rows": len(frame),
                             "version": path.parent.name}
        return frame

    def note(self, table: str, frame) -> None:
        if table in self.files and "kernel_source" in frame:
            self.files[table]["kernel_sources"] = sorted(map(str, frame["kernel_source"].unique()))


def _require(frame, columns, table: str):
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise SpeedplanInputError(f"{table}: column {missing[0]!r} missing: not the table layout of {DISTRIBUTION} 0.12")


def _gemm(r: _Reader):
    g = r.read("gemm", "gemm_perf")
    if g is None:
        raise SpeedplanInputError(f"{DISTRIBUTION}: no gemm_perf table for {r.system}/{r.backend}/{r.version}")
    _require(g, ("gemm_dtype", "m", "n", "k", "latency"), "gemm_perf")
    g = g[g["gemm_dtype"].isin(["bfloat16", "fp8"])].drop_duplicates(["gemm_dtype", "m", "n", "k"])
    r.note("gemm_perf", g)
    return g.assign(dtype=g["gemm_dtype"].map(DTYPES), latency_us=g["latency"] * 1e3)[
        ["m", "n", "k", "dtype", "latency_us"]].sort_values(["dtype", "n", "k", "m"])


def _attention_rows(r: _Reader, table: str, heads):
    t = r.read("attention", table)
    if t is None:
        return None
    _require(t, ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype", "latency"), table)
    keep = t["kv_cache_dtype"].isin(["bfloat16", "fp8"])
    for col, value in (("window_size", 0), ("beam_width", 1), ("attn_dtype", "bfloat16")):
        if col in t:
            keep &= t[col] == value
    t = t[keep]
    if heads is not None:
        key = zip(t["num_heads"], t["num_key_value_heads"], t["head_dim"])
        t = t[np.array([k in heads for k in key], dtype=bool)]  # (a list would select columns when empty)
    lane = r.src.preferred_lane(r.system, r.backend, r.version)
    if lane and "kernel_source" in t:  # several lanes measured one key: the framework's default wins
        t = t.assign(_other=(t["kernel_source"] != lane).astype(int)).sort_values("_other", kind="stable")
    r.note(table, t)
    return t.assign(batch=t["batch_size"], num_kv_heads=t["num_key_value_heads"], dtype=t["kv_cache_dtype"].map(DTYPES),
                    latency_us=t["latency"] * 1e3)


def _attention(r: _Reader, heads):
    t = _attention_rows(r, "generation_attention_perf", heads)
    if t is None or t.empty:
        raise SpeedplanInputError(f"{DISTRIBUTION}: no decode attention rows for {r.system}/{r.backend}/{r.version}")
    _require(t, ("step",), "generation_attention_perf")
    t = t.assign(q_len=1, kv_len=t["isl"] + t["step"], mask="causal")
    cols = ["batch", "q_len", "kv_len", "num_heads", "num_kv_heads", "head_dim", "mask", "dtype"]
    return t.drop_duplicates(cols)[cols + ["latency_us"]].sort_values(["dtype", "num_heads", "num_kv_heads", "head_dim",
                                                                       "batch", "kv_len"])


def _prefill(r: _Reader, heads):
    t = _attention_rows(r, "context_attention_perf", heads)
    if t is None or t.empty:
        return None
    cols = ["batch", "seq_len", "num_heads", "num_kv_heads", "head_dim", "dtype"]
    t = t.assign(seq_len=t["isl"]).drop_duplicates(cols)
    return t[cols + ["latency_us"]].sort_values(["dtype", "num_heads", "num_kv_heads", "head_dim", "batch", "seq_len"])


def _allreduce(r: _Reader):
    c = r.read("comm", "custom_allreduce_perf", older=True)
    if c is None:
        return None
    _require(c, ("allreduce_dtype", "num_gpus", "message_size", "latency", "kernel_source"), "custom_allreduce_perf")
    graph = ~c["kernel_source"].astype(str).str.endswith("_eager")
    if "backend" in c:
        graph &= ~c["backend"].astype(str).str.endswith("_eager")
    c = c[graph & c["allreduce_dtype"].isin(["bfloat16", "float16"])].drop_duplicates(["num_gpus", "message_size"])
    r.note("custom_allreduce_perf", c)
    return c.assign(dtype=c["allreduce_dtype"].map(DTYPES), nbytes=c["message_size"] * 2,  # elements -> bytes (2-byte)
                    latency_us=c["latency"] * 1e3)[["num_gpus", "nbytes", "dtype", "latency_us"]].sort_values(
        ["num_gpus", "nbytes"])


def _moe(r: _Reader, experts, routing: str = BALANCED):
    """The fused-MoE rows of one routing (`distribution`): "balanced" by default, or a skewed
    one such as "power_law_1.2" (`speedplan.profile.moe` uses it as measured)."""
    m = r.read("moe", "moe_perf")
    if m is None:
        return None
    _require(m, ("moe_dtype", "num_tokens", "hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size",
                 "moe_ep_size", "distribution", "latency"), "moe_perf")
    have = sorted(str(d) for d in m["distribution"].unique())
    if routing != BALANCED and routing not in have:
        raise SpeedplanInputError(f"--moe-routing {routing!r}: the moe_perf table has {', '.join(have)}")
    m = m[m["moe_dtype"].isin(["bfloat16", "fp8"]) & (m["distribution"] == routing)]
    if experts is not None:
        key = zip(m["hidden_size"], m["inter_size"], m["num_experts"], m["topk"])
        m = m[np.array([k in experts for k in key], dtype=bool)]
    r.note("moe_perf", m)
    if m.empty:  # e.g. a100_sxm measured power-law routing only
        return None
    m = m.assign(tokens=m["num_tokens"], hidden=m["hidden_size"], inter=m["inter_size"], experts=m["num_experts"],
                 tp=m["moe_tp_size"], ep=m["moe_ep_size"], dtype=m["moe_dtype"].map(DTYPES),
                 latency_us=m["latency"] * 1e3)
    cols = ["tokens", "hidden", "inter", "experts", "topk", "tp", "ep", "dtype", "distribution"]
    return m.drop_duplicates(cols)[cols + ["latency_us"]].sort_values(cols) if len(m) else None


def convert(src: AicSource, system: str, backend: str, version: str | None, all_heads: bool = False,
            moe_routing: str = BALANCED):
    """The speedplan tables (pandas DataFrames by family) and meta.json of one system."""
    import pandas as pd

    src.check(system, backend)
    have = src.versions(system, "gemm", backend)
    version = version or src.default_version(system, backend)
    if version not in have:
        raise SpeedplanInputError(f"--version {version!r}: {DISTRIBUTION} {src.version} has {backend} "
                                  f"{', '.join(have)} for {system}")
    r = _Reader(src, system, backend, version)
    heads = None if all_heads else model_heads()
    tables = {"gemm": _gemm(r), "attention": _attention(r, heads), "prefill": _prefill(r, heads),
              "allreduce": _allreduce(r), "moe": _moe(r, None if all_heads else model_experts(), moe_routing)}
    tables = {k: v for k, v in tables.items() if v is not None and len(v)}
    bf16 = tables["gemm"][tables["gemm"]["dtype"] == "bf16"]["latency_us"]
    if len(bf16):
        tables["floors"] = pd.DataFrame([{"op": "launch", "graph": 1, "dtype": "bf16", "latency_us": float(bf16.min())}])
    found = tables["attention"][["num_heads", "num_kv_heads", "head_dim"]].drop_duplicates()
    found = {tuple(int(v) for v in row) for row in found.itertuples(index=False)}
    meta = {
        "origin": "measured",
        "origin_label": origin_label(src.version, backend, version),
        "hardware_preset": SYSTEM_PRESETS[system],
        "device_name": "",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "microbench_version": f"none: imported from {DISTRIBUTION} {src.version} (`speedplan profile import-aic`)",
        "grid": [f"{DISTRIBUTION} {src.version} {system}/{backend}/{version}: {name} {len(t)} rows"
                 for name, t in tables.items()],
        "versions": {DISTRIBUTION: src.version, backend: version},
        "complete": True,
        "source": {"package": DISTRIBUTION, "package_version": src.version, "system": system, "backend": backend,
                   "backend_version": version, "files": r.files},
        "units": "latency_us: microseconds per call (AIConfigurator: mean of CUDA-graph replays, ms); "
                 "attention and MoE rows are one layer on one GPU",
        "moe_routing": moe_routing if "moe" in tables else None,
        "heads": "all measured" if heads is None else sorted(found),
        "heads_not_measured": [] if heads is None else sorted(heads - found),
        "license": "Apache-2.0",
        "copyright": COPYRIGHT,
        "notice": notice(src.version, moe_routing),
        "modifications": modifications(moe_routing),
    }
    return tables, meta


def _device_names(src: AicSource, meta: dict) -> str:
    import pyarrow.parquet as pq

    names = set()
    for info in meta["source"]["files"].values():
        path = src.root / info["path"]
        if "device" in pq.read_schema(path).names:
            names.update(str(d) for d in pq.read_table(path, columns=["device"]).column("device").unique().to_pylist())
    return "; ".join(sorted(names)) or "?"


def write_profile(tables: dict, meta: dict, out: str | Path) -> Path:
    """Write the folder beside `out`, then move it into place (replacing a profile folder
    there, refusing anything else)."""
    out = Path(out).expanduser()
    check_replaceable(out, PROFILE)
    tmp = staging_folder(out)
    try:
        for name, frame in tables.items():
            frame.to_csv(tmp / f"{name}.csv", index=False, float_format="%.5g", lineterminator="\n")
        meta["tables"] = {name: len(frame) for name, frame in tables.items()}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        shutil.copyfile(LICENSE_TEXT, tmp / LICENSE_FILE)
        (tmp / "NOTICE.md").write_text(f"# Notice\n\n{meta['notice']}\n")
        move_into_place(tmp, out)
    except BaseException:
        discard(tmp)
        raise
    return out


def import_aic(system: str, backend: str = "vllm", version: str | None = None, out: str | Path = "",
               all_heads: bool = False, root: str | Path | None = None, package_version: str | None = None,
               moe_routing: str = BALANCED) -> Path:
    """Convert one system's tables into the profile folder `out` (see the module docstring).
    `root`/`package_version` point at a tree laid out like the package (tests)."""
    if not str(out):
        raise SpeedplanInputError("--out is required")
    src = AicSource(root, package_version)
    tables, meta = convert(src, system, backend, version, all_heads, moe_routing)
    meta["device_name"] = _device_names(src, meta)
    return write_profile(tables, meta, out)
