import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python -m speedplan.cli ARGS` the way a user's shell would."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "speedplan.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny matrices: one thread avoids OpenMP waits when other jobs share the cores."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
