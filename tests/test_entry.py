"""The forked figure worker: it draws without pandas, the report is complete whether it works,
dies or is never used, and it is always reaped."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from speedplan import entry as figure_worker
from speedplan.report.folder import write_outputs
from speedplan.plan.sweep import sweep
from speedplan.report.summary import report_context, short_provenance
from speedplan.report.data import figure_set
from speedplan.report.figures import FIGURES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork")


@pytest.fixture(scope="module")
def result():
    return sweep(model="llama-3.1-8b", hardware="h100-sxm", mechanisms=["eagle", "ngram"], batches=[1, 16],
                 draft_lens=range(0, 4), contexts=[4096])


def _pngs_ok(folder: Path) -> None:
    for name in FIGURES.values():
        data = (folder / name).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 10_000, name


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_figures_draw_in_a_process_that_cannot_import_pandas(result, tmp_path):
    job = tmp_path / "job.pkl"
    job.write_bytes(pickle.dumps((figure_set(result, report_context(result.frame)), short_provenance(result))))
    out = tmp_path / "figs"
    out.mkdir()
    code = ("import sys, pickle; sys.modules['pandas'] = None\n"  # any pandas import now fails
            "from speedplan.report.figures import draw_figures\n"
            f"figures, caption = pickle.loads(open({str(job)!r}, 'rb').read())\n"
            f"draw_figures(figures, {str(out)!r}, caption)\n"
            "assert sys.modules['pandas'] is None\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    _pngs_ok(out)


def test_worker_draws_the_report_and_is_reaped(result, tmp_path):
    worker = figure_worker.start()
    assert worker is not None
    write_outputs(result, tmp_path / "rep", worker)
    _pngs_ok(tmp_path / "rep")
    assert worker.reaped and _reaped(worker.pid)


def test_the_worker_itself_draws_every_figure(result, tmp_path):
    worker = figure_worker.start()
    worker.submit(figure_set(result, report_context(result.frame)), tmp_path, short_provenance(result))
    assert worker.wait()  # True only if the worker (not a fallback) wrote all five PNGs
    _pngs_ok(tmp_path)


def test_a_dead_worker_leaves_the_parent_to_draw(result, tmp_path):
    worker = figure_worker.start()
    os.kill(worker.pid, signal.SIGKILL)
    write_outputs(result, tmp_path / "rep", worker)
    _pngs_ok(tmp_path / "rep")
    assert _reaped(worker.pid)


def test_a_worker_never_sent_a_job_is_stopped_and_reaped():
    worker = figure_worker.start()
    worker.cancel()
    assert _reaped(worker.pid)
    worker.cancel()  # twice is harmless


def test_early_worker_only_for_sweep_and_unclaimed_ones_are_cancelled():
    figure_worker.start_early(["sweep", "--help"])
    assert figure_worker._early is None
    figure_worker.start_early(["models"])
    assert figure_worker._early is None
    figure_worker.start_early(["sweep", "--batch", "1"])
    worker = figure_worker._early
    assert worker is not None
    figure_worker.cancel_unclaimed()
    assert figure_worker._early is None and _reaped(worker.pid)


def test_the_sweep_process_hides_pyarrow_from_pandas_and_writes_the_same_files(tmp_path):
    """Trick 5: pandas 3 imports pyarrow where it is installed (~0.1 s); the sweep writes CSV and JSON
    only, and its files are the same with pyarrow hidden as with it (timestamps aside)."""
    pytest.importorskip("pyarrow")
    probe = ("import sys, atexit, os; from speedplan import entry; "
             "sys.argv = ['speedplan', 'sweep', '--batch', '1,8', '--draft-len', '0-3', '--mechanism', 'eagle3', "
             "'--out', sys.argv[1]]; os._exit = lambda code: (print('pyarrow' in sys.modules and sys.modules['pyarrow'] "
             "is not None), sys.stdout.flush(), os.__dict__['_exit_real'](code)); entry.main()")
    outs = {}
    for name, env in (("hidden", {}), ("imported", {"SPEEDPLAN_SERIAL": "arrow"})):
        code = probe.replace("os._exit = ", "os.__dict__['_exit_real'] = os._exit; os._exit = ")
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], capture_output=True, text=True,
                              env={**os.environ, **env}, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        outs[name] = done.stdout.strip().splitlines()[-1]
    assert outs == {"hidden": "False", "imported": "True"}
    for f in sorted((tmp_path / "hidden").iterdir()):
        if f.name in ("meta.json", "report.html"):  # they hold the time of the run
            continue
        assert f.read_bytes() == (tmp_path / "imported" / f.name).read_bytes(), f.name
