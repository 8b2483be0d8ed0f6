"""`speedplan profile import-aic` on a tiny parquet tree laid out like aiconfigurator-core's
package data (systems/data/<system>/<family>/<backend>/<version>/*.parquet): units, filters,
provenance and licence notice, and the exit-2 cases."""

from __future__ import annotations

import importlib.machinery
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import speedplan.profile.aic as aic  # noqa: E402
from speedplan.cli.app import run  # noqa: E402
from speedplan.errors import SpeedplanInputError  # noqa: E402
from speedplan.profile.import_aic import import_aic  # noqa: E402
from speedplan.profile.load import load_profile  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEVICE = "NVIDIA H100 80GB HBM3"


def _write(path: Path, columns: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def aic_tree(root: Path) -> Path:
    """A two-GEMM-shape, one-head-shape h100_sxm/vllm/0.24.0 tree; latencies in ms."""
    data = root / "systems" / "data" / "h100_sxm"
    (root / "systems").mkdir(parents=True)
    (root / "systems" / "query_versions.yaml").write_text(
        'schema_version: 1\ndefaults:\n  vllm: {current: "0.24.0", previous: null}\n'
        'overrides:\n  a100_sxm:\n    vllm: {current: "0.14.0", previous: null}\n')
    (root / "systems" / "h100_sxm.yaml").write_text("gpu:\n  sm_version: 90\nmisc:\n  nccl_version: '2.27.3'\n")
    g = [(dt, m, n, k) for dt in ("bfloat16", "fp8", "fp8_block") for n, k in ((1024, 1024), (4096, 1024))
         for m in (1, 16, 64, 256)]
    _write(data / "gemm/vllm/0.24.0/gemm_perf.parquet", {
        "framework": ["VLLM"] * len(g), "device": [DEVICE] * len(g),
        "kernel_source": ["torch.nn.functional.linear" if r[0] == "bfloat16" else "Cutlass" for r in g],
        "gemm_dtype": [r[0] for r in g], "m": [r[1] for r in g], "n": [r[2] for r in g], "k": [r[3] for r in g],
        "latency": [0.002 + 1e-9 * r[1] * r[2] * r[3] / 1000 for r in g]})
    a = [(b, step, kvd, w) for b in (1, 8) for step in (1, 15, 255) for kvd in ("bfloat16", "fp8") for w in (0, 128)]
    _write(data / "attention/vllm/0.24.0/generation_attention_perf.parquet", {
        "device": [DEVICE] * len(a), "kernel_source": ["vllm_flash_attn_fa3"] * len(a),
        "batch_size": [r[0] for r in a], "isl": [1] * len(a), "step": [r[1] for r in a],
        "num_heads": [32] * len(a), "num_key_value_heads": [8] * len(a), "head_dim": [128] * len(a),
        "beam_width": [1] * len(a), "attn_dtype": ["bfloat16"] * len(a), "kv_cache_dtype": [r[2] for r in a],
        "window_size": [r[3] for r in a], "latency": [0.01 + 1e-6 * r[0] * r[1] for r in a]})
    c = [(b, isl) for b in (1, 8) for isl in (16, 256, 4096)]
    _write(data / "attention/vllm/0.24.0/context_attention_perf.parquet", {
        "device": [DEVICE] * len(c), "kernel_source": ["vllm_flash_attn_fa3"] * len(c),
        "batch_size": [r[0] for r in c], "isl": [r[1] for r in c], "step": [0] * len(c),
        "num_heads": [32] * len(c), "num_key_value_heads": [8] * len(c), "head_dim": [128] * len(c),
        "beam_width": [1] * len(c), "attn_dtype": ["bfloat16"] * len(c), "kv_cache_dtype": ["bfloat16"] * len(c),
        "window_size": [0] * len(c), "latency": [0.01 + 1e-7 * r[0] * r[1] ** 2 for r in c]})
    ar = [(gpus, size, kind) for gpus in (2, 8) for size in (1024, 1 << 20) for kind in ("graph", "eager")]
    _write(data / "comm/vllm/0.24.0/custom_allreduce_perf.parquet", {
        "device": [DEVICE] * len(ar), "kernel_source": [f"vLLM_custom_{r[2]}" for r in ar],
        "backend": [f"vllm_{r[2]}" for r in ar], "allreduce_dtype": ["bfloat16"] * len(ar),
        "num_gpus": [r[0] for r in ar], "message_size": [r[1] for r in ar],
        "latency": [0.004 + (0.02 if r[2] == "eager" else 0) + 1e-9 * r[1] for r in ar]})
    moe = [(t, 4096, 14336, 8, 2) for t in (1, 16, 256)]  # power-law routing only, as a100_sxm measured
    _write(data / "moe/vllm/0.24.0/moe_perf.parquet", {
        "device": [DEVICE] * len(moe), "kernel_source": ["vllm_fused_moe"] * len(moe), "moe_dtype": ["bfloat16"] * len(moe),
        "num_tokens": [r[0] for r in moe], "hidden_size": [r[1] for r in moe], "inter_size": [r[2] for r in moe],
        "num_experts": [r[3] for r in moe], "topk": [r[4] for r in moe], "moe_tp_size": [1] * len(moe),
        "moe_ep_size": [1] * len(moe), "distribution": ["power_law_1.01"] * len(moe), "latency": [0.05] * len(moe)})
    return root


@pytest.fixture()
def tree(tmp_path, monkeypatch):
    """The tree, found the way the real package is: importlib's find_spec and the
    distribution's version (patched to point at it)."""
    root = aic_tree(tmp_path / "aiconfigurator_core")
    spec = importlib.machinery.ModuleSpec("aiconfigurator_core", None, is_package=True)
    spec.submodule_search_locations = [str(root)]
    monkeypatch.setattr(aic.importlib.util, "find_spec", lambda name: spec if name == aic.MODULE else None)
    monkeypatch.setattr(aic.importlib.metadata, "version", lambda name: "0.12.0")
    return root


def _csv(path: Path) -> list[dict]:
    import csv

    return list(csv.DictReader(path.open()))


def test_import_converts_units_filters_and_states_provenance(tree, tmp_path):
    out = import_aic("h100_sxm", "vllm", None, tmp_path / "h100")
    gemm = _csv(out / "gemm.csv")
    assert {r["dtype"] for r in gemm} == {"bf16", "fp8"}  # fp8_block is not a speedplan dtype: left out
    row = next(r for r in gemm if (r["m"], r["n"], r["k"], r["dtype"]) == ("64", "4096", "1024", "bf16"))
    assert float(row["latency_us"]) == pytest.approx((0.002 + 1e-9 * 64 * 4096 * 1024 / 1000) * 1e3, rel=1e-4)  # ms -> µs
    attn = _csv(out / "attention.csv")
    assert len(attn) == 2 * 3 * 2  # window-128 rows dropped
    assert {r["kv_len"] for r in attn} == {"2", "16", "256"}  # isl + step: the new token included
    assert {r["q_len"] for r in attn} == {"1"} and {r["mask"] for r in attn} == {"causal"}
    assert {r["seq_len"] for r in _csv(out / "prefill.csv")} == {"16", "256", "4096"}
    ar = _csv(out / "allreduce.csv")
    assert len(ar) == 4 and {r["nbytes"] for r in ar} == {"2048", "2097152"}  # elements -> bytes; eager rows dropped
    meta = json.loads((out / "meta.json").read_text())
    assert meta["origin"] == "measured" and meta["hardware_preset"] == "h100-sxm" and meta["device_name"] == DEVICE
    assert meta["origin_label"] == "measured (AIConfigurator 0.12, vLLM 0.24 kernels)"
    src = meta["source"]
    assert (src["package"], src["package_version"], src["system"], src["backend"], src["backend_version"]) == (
        "aiconfigurator-core", "0.12.0", "h100_sxm", "vllm", "0.24.0")
    files = src["files"]
    assert set(files) >= {"gemm_perf", "generation_attention_perf", "context_attention_perf", "custom_allreduce_perf"}
    assert not (out / "moe.csv").exists()  # only balanced routing is kept; this table has none
    assert len(files["gemm_perf"]["sha256"]) == 64 and files["generation_attention_perf"]["kernel_sources"] == [
        "vllm_flash_attn_fa3"]
    # Apache-2.0 section 4: the licence text, the changes made, the copyright line
    assert "Apache License" in (out / "LICENSE.aiconfigurator-core.txt").read_text()
    notice = (out / "NOTICE.md").read_text()
    assert "NVIDIA CORPORATION & AFFILIATES" in notice and "Modified" in notice and "ms to us" in notice
    assert meta["notice"] in notice and meta["license"] == "Apache-2.0"


def test_imported_profile_loads_and_answers_its_rows_as_measured(tree, tmp_path):
    p = load_profile(import_aic("h100_sxm", "vllm", None, tmp_path / "h100"))
    lat, how = p.gemm_lookup(np.array([64.0]), 4096, 1024, "bf16")
    assert how[0] == "measured" and lat[0] == pytest.approx((0.002 + 1e-9 * 64 * 4096 * 1024 / 1000) * 1e3, rel=1e-4)
    lat, how = p.attention_lookup(8, 1, 256, 32, 8, 128, "causal", "bf16")
    assert how.item() == "measured" and lat.item() == pytest.approx((0.01 + 1e-6 * 8 * 255) * 1e3, rel=1e-4)
    lat, how = p.attention_lookup(8, 4, 256, 32, 8, 128, "causal", "bf16")
    assert how.item() == "derived" and lat.item() > (0.01 + 1e-6 * 8 * 255) * 1e3  # verification: decode + prefill


def test_a_second_import_replaces_the_profile_folder(tree, tmp_path):
    out = import_aic("h100_sxm", "vllm", None, tmp_path / "h100")
    (out / "mine.csv").write_text("a user's own table\n")  # not in the folder's .speedplan-files: kept
    with pytest.raises(SpeedplanInputError, match="it holds mine.csv"):
        import_aic("h100_sxm", "vllm", "0.24.0", out)
    (out / "mine.csv").rename(out / "stale.csv")
    with (out / ".speedplan-files").open("a") as f:
        f.write("stale.csv\n")  # a table an older import wrote, and listed
    import_aic("h100_sxm", "vllm", "0.24.0", out)
    assert not (out / "stale.csv").exists() and (out / "gemm.csv").exists()


@pytest.mark.parametrize("args, message", [
    (["--system", "nope"], "unknown --system 'nope'; aiconfigurator-core 0.12.0 has: h100_sxm"),
    (["--system", "h100_sxm", "--backend", "tgi"], "unknown --backend 'tgi'"),
    (["--system", "h100_sxm", "--version", "0.99.0"], "--version '0.99.0'"),
])
def test_bad_system_backend_or_version_is_one_line_exit_2(tree, tmp_path, capsys, args, message):
    code = run(["profile", "import-aic", *args, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_too_old_or_missing_package_is_exit_2(tree, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(aic.importlib.metadata, "version", lambda name: "0.11.4")
    assert run(["profile", "import-aic", "--system", "h100_sxm", "--out", str(tmp_path / "out")]) == 2
    assert "aiconfigurator-core 0.11.4 is older than 0.12.0" in capsys.readouterr().err
    monkeypatch.setattr(aic.importlib.util, "find_spec", lambda name: None)
    assert run(["profile", "import-aic", "--system", "h100_sxm", "--out", str(tmp_path / "out")]) == 2
    assert "aiconfigurator-core is not installed: pip install 'speedplan[aic]'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_moe_routing_picks_the_rows_of_one_measured_routing(tree, tmp_path):
    """--moe-routing power_law_1.01 keeps the rows this table measured with it (the default,
    balanced, keeps none here), and the profile prices them as measured; a routing the table
    lacks is refused, naming the ones it has."""
    from speedplan.cost.ops import load_cost_model

    out = import_aic("h100_sxm", "vllm", None, tmp_path / "skewed", moe_routing="power_law_1.01")
    rows = _csv(out / "moe.csv")
    assert len(rows) == 3 and {r["distribution"] for r in rows} == {"power_law_1.01"}
    assert json.loads((out / "meta.json").read_text())["moe_routing"] == "power_law_1.01"
    assert "power_law_1.01 MoE for the model presets' expert shapes" in (out / "NOTICE.md").read_text()
    assert load_cost_model(out).moe_routing == "power_law_1.01"
    with pytest.raises(SpeedplanInputError, match="--moe-routing 'power_law_9': the moe_perf table has power_law_1.01"):
        import_aic("h100_sxm", "vllm", None, tmp_path / "none", moe_routing="power_law_9")
    assert not (tmp_path / "none").exists()


def test_an_out_folder_that_is_not_a_profile_is_refused(tree, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me\n")
    with pytest.raises(SpeedplanInputError, match="not a profile folder"):
        import_aic("h100_sxm", "vllm", None, tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me\n"


def test_console_script_exit_code(tmp_path):
    """Whether or not aiconfigurator-core is installed here, a bad --system is exit 2, one line."""
    r = subprocess.run([sys.executable, "-m", "speedplan.cli", "profile", "import-aic", "--system", "nope",
                        "--out", str(tmp_path / "x")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()
