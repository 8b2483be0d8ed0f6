"""A wheel install (`pip install .`) behaves like the editable one, and the planner imports
with nothing but the base dependencies: built, installed into a fresh virtual environment and
run from outside the source tree, so neither this checkout nor packages installed by hand on
this machine can stand in for what the wheel lacks."""

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Every planner-side package: none of them may need torch, gguf or anything outside the base
# dependencies of pyproject.toml.
PLANNER_PACKAGES = ("specs", "profile", "cost", "plan", "serving", "report", "cli")


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp / "dist"), str(ROOT)],
                   check=True, capture_output=True, text=True, timeout=600)
    wheel = next((tmp / "dist").glob("speedplan-*.whl"))
    venv.EnvBuilder(with_pip=True).create(tmp / "venv")
    bin_dir = tmp / "venv" / ("Scripts" if os.name == "nt" else "bin")
    proc = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tmp, bin_dir, wheel


def _run(bin_dir: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_wheel_prices_cpu_local_from_its_measured_profile(wheel_env):
    tmp, bin_dir, _ = wheel_env
    proc = _run(bin_dir, [str(bin_dir / "speedplan"), "sweep", "--hardware", "cpu-local", "--model", "smollm2-135m",
                          "--mechanism", "ngram", "--out", str(tmp / "report")], cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "latency: measured (speedplan bench, AMD EPYC, 2026-12-02) cpu-local" in proc.stdout  # who measured it
    meta = json.loads((tmp / "report" / "meta.json").read_text())
    assert meta["cost_origin"] == "measured (speedplan bench, AMD EPYC, 2026-12-02)"


def test_wheel_ships_presets_profiles_and_drafter_weights(wheel_env):
    import zipfile

    _, _, wheel = wheel_env
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("speedplan/specs/presets/models/llama-3.1-8b.json", "speedplan/specs/presets/hardware/h100-sxm.json",
                   "speedplan/data/profiles/cpu-local/gemm.csv", "speedplan/data/profiles/cpu-local/meta.json",
                   "speedplan/data/drafters/eagle_smollm2.pt", "speedplan/runtime/kernels/q4_1_matmul.c"):
        assert needed in names, needed
    licences = {n.split(".dist-info/licenses/")[1] for n in names if ".dist-info/licenses/" in n}
    assert licences == {"LICENSE", "speedplan/data/licenses/LICENSE.aiconfigurator-core.txt"}  # speedplan's, AIC's


def test_planner_imports_with_base_dependencies_only(wheel_env):
    """The fresh environment holds the wheel's base dependencies and nothing else (no torch,
    no click): every planner module imports there, and none pulls in torch."""
    tmp, bin_dir, _ = wheel_env
    code = (
        "import importlib, pkgutil, sys, speedplan, speedplan.entry\n"
        f"for pkg in {PLANNER_PACKAGES!r}:\n"
        "    mod = importlib.import_module('speedplan.' + pkg)\n"
        "    for info in pkgutil.walk_packages(mod.__path__, mod.__name__ + '.'):\n"
        "        if not info.name.endswith('__main__'):\n"
        "            importlib.import_module(info.name)\n"
        "print(sorted(m for m in ('torch', 'gguf', 'click') if m in sys.modules))\n"
    )
    proc = _run(bin_dir, [str(bin_dir / "python"), "-c", code], cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
    probe = _run(bin_dir, [str(bin_dir / "python"), "-c", "import torch"], cwd=tmp)
    assert probe.returncode != 0, "the fresh environment should not have torch"


def test_runtime_commands_without_torch_say_what_to_install(wheel_env):
    """On a base install (no torch) `speedplan run`, `validate` and `bench` ended in a
    ModuleNotFoundError traceback (2026-12-05): now one line naming the missing module and the
    extra that installs it, exit 2, and no output folder."""
    tmp, bin_dir, _ = wheel_env
    commands = (["run", "--prompt", "hi", "--mechanism", "ngram", "--draft-len", "3"],
                ["validate", "--device", "cpu", "--quick", "--out", str(tmp / "val")],
                ["bench", "--device", "cpu", "--grid", "tiny", "--out", str(tmp / "prof")])
    for args in commands:
        proc = _run(bin_dir, [str(bin_dir / "speedplan"), *args], cwd=tmp)
        assert proc.returncode == 2, (args, proc.stderr[-2000:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, (args, proc.stderr[-2000:])
        assert "needs torch" in lines[0] or "torch missing" in lines[0], lines[0]
        assert ".[runtime]" in lines[0] or ".[bench]" in lines[0], lines[0]
    assert not (tmp / "val").exists() and not (tmp / "prof").exists()
    assert not [p for p in tmp.iterdir() if p.name.startswith(".val.")]  # validate's staging folder, discarded
