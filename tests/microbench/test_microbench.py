"""microbench: resumable writing (injected stop and a real SIGKILL), masks, refusals."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from microbench.grid import KEY_COLUMNS, Grid, point_key, tiny_grid  # noqa: E402
from microbench.runner import run  # noqa: E402
from microbench.store import ProfileStore  # noqa: E402
from microbench.torch_backend import AttentionPoint, attention_mask, tree_mask_block  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAST = dict(min_time_s=0.002, progress=False, quiet_tries=1)


def keys(folder: Path) -> dict[str, list[tuple[str, ...]]]:
    out = {}
    for family, cols in KEY_COLUMNS.items():
        path = folder / f"{family}.csv"
        if path.exists():
            with path.open(newline="") as f:
                out[family] = [tuple(r[c] for c in cols) for r in csv.DictReader(f)]
    return out


def expected(grid: Grid) -> dict[str, set]:
    return {family: {point_key(p) for p in getattr(grid, family)} for family in KEY_COLUMNS}


@pytest.mark.parametrize("interleave", [True, False], ids=["blocks", "one-by-one"])
def test_stop_and_resume_equals_uninterrupted_run(tmp_path, interleave):
    grid = tiny_grid()
    whole = run(grid, "cpu", tmp_path / "whole", "cpu-local", interleave=interleave, **FAST)
    assert whole.remaining == 0 and whole.meta["complete"] is True
    assert ("interleaved" in whole.meta["timing"]) == interleave
    first = run(tiny_grid(), "cpu", tmp_path / "resumed", "cpu-local", stop_after=7, interleave=interleave, **FAST)
    assert (first.measured, first.remaining) == (7, len(grid) - 7)
    assert json.loads((tmp_path / "resumed" / "meta.json").read_text())["complete"] is False
    second = run(tiny_grid(), "cpu", tmp_path / "resumed", "cpu-local", interleave=interleave, **FAST)
    assert second.measured == len(grid) - 7  # only the missing points were measured
    a, b = keys(tmp_path / "whole"), keys(tmp_path / "resumed")
    assert {f: set(v) for f, v in a.items()} == {f: set(v) for f, v in b.items()} == {
        f: s for f, s in expected(grid).items() if s}
    assert all(len(v) == len(set(v)) for v in b.values())  # no point written twice
    third = run(tiny_grid(), "cpu", tmp_path / "resumed", "cpu-local", interleave=interleave, **FAST)
    assert third.measured == 0 and third.meta["complete"] is True


def test_sigkill_mid_run_then_resume(tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "microbench", "--device", "cpu", "--grid", "tiny", "--out", str(out),
           "--min-time-ms", "40", "--no-progress", "--quiet-tries", "1"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        path = out / "attention.csv"
        if path.exists() and path.read_text().count("\n") >= 4:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    partial = keys(out)
    assert json.loads((out / "meta.json").read_text())["complete"] is False
    resumed = subprocess.run(cmd[:-5] + ["--min-time-ms", "2", "--no-progress", "--quiet-tries", "1"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    final = keys(out)
    for family, rows in partial.items():
        assert final[family][: len(rows)] == rows  # nothing measured was lost or rewritten
    assert {f: set(v) for f, v in final.items()} == {f: s for f, s in expected(tiny_grid()).items() if s}
    assert all(len(v) == len(set(v)) for v in final.values())


def test_interleaved_visits_stop_and_resume(tmp_path):
    grid = tiny_grid()
    first = run(grid, "cpu", tmp_path, "cpu-local", stop_after=11, visit_count=2, interleave=True, **FAST)
    assert first.measured == 11  # stopped inside a block: the rest of it is measured again
    second = run(tiny_grid(), "cpu", tmp_path, "cpu-local", visit_count=2, interleave=True, **FAST)
    assert second.measured == len(grid) - 11 and second.remaining == 0
    assert {f: set(v) for f, v in keys(tmp_path).items()} == {f: s for f, s in expected(grid).items() if s}
    with (tmp_path / "gemm.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert all(int(r["repeats"]) >= 2 * 5 for r in rows)  # two visits of >= 5 repeats each


def test_combine_takes_the_median_visit():
    from microbench.runner import combine
    from microbench.timing import Timing

    t = combine([Timing(10, 9, 11, 5, 1, 0.0), Timing(30, 8, 40, 5, 1, 0.1), Timing(12, 11, 13, 5, 1, 0.0)])
    assert (t.latency_us, t.min_us, t.p90_us, t.repeats, t.other_cpu) == (12, 8, 13, 15, 0.1)


def test_torn_last_line_is_dropped_on_resume(tmp_path):
    run(tiny_grid(), "cpu", tmp_path, "cpu-local", stop_after=3, **FAST)
    gemm = tmp_path / "gemm.csv"
    gemm.write_text(gemm.read_text() + "8,64,6")  # killed mid-write
    store = ProfileStore(tmp_path, {"device": "cpu", "device_name": json.loads((tmp_path / "meta.json").read_text())["device_name"],
                                    "hardware_preset": "cpu-local", "threads": 2})
    assert gemm.read_text().endswith("\n") and len(store.done["gemm"]) == 3


def test_store_refuses_a_folder_of_another_device(tmp_path):
    run(tiny_grid(), "cpu", tmp_path, "cpu-local", stop_after=1, **FAST)
    with pytest.raises(ValueError, match="hardware_preset"):
        run(tiny_grid(), "cpu", tmp_path, "h100-sxm", **FAST)
    with pytest.raises(ValueError, match="threads=2, not 1"):  # one profile, one thread count (audit 2026-12-04)
        run(tiny_grid(), "cpu", tmp_path, "cpu-local", threads=1, **FAST)


def test_causal_mask_is_lower_right_aligned():
    m = attention_mask(AttentionPoint(4, 2, 16, "fp32", 2, 10, 3, "causal"), torch.Generator())
    assert m.shape == (2, 1, 3, 10)
    assert m[0, 0, :, :7].all()  # every cached slot
    assert m[0, 0, 0, 7:].tolist() == [True, False, False]
    assert m[0, 0, 2, 7:].tolist() == [True, True, True]
    assert attention_mask(AttentionPoint(4, 2, 16, "fp32", 1, 10, 1, "causal"), torch.Generator()) is None


def test_tree_mask_is_an_ancestor_closure():
    anc = tree_mask_block(8, torch.Generator().manual_seed(3))
    assert anc[:, 0].all() and anc.diagonal().all()  # root is everyone's ancestor; self-attend
    assert not anc.triu(1).any()  # parents come before children
    for i in range(8):  # ancestors of an ancestor are ancestors
        for j in torch.nonzero(anc[i]).flatten().tolist():
            assert bool((anc[i] | ~anc[j]).all())


def test_bench_replaces_a_roofline_placeholder_but_not_a_measured_profile(tmp_path):
    from speedplan.profile.grid import run_bench
    from speedplan.errors import SpeedplanInputError
    from speedplan.profile.tools import write_roofline_profile

    write_roofline_profile("h100-sxm", tiny_grid("bf16"), tmp_path / "p")
    result = run_bench(["tiny"], "cpu", str(tmp_path / "p"), min_time_ms=2, stop_after=2, progress=False,
                       quiet_tries=1, visits=1)
    assert result.measured == 2 and json.loads((tmp_path / "p" / "meta.json").read_text())["origin"] == "measured"
    with pytest.raises(SpeedplanInputError, match="hardware-preset h100-sxm: describes a GPU"):
        run_bench(["tiny"], "cpu", str(tmp_path / "p"), hardware_preset="h100-sxm", min_time_ms=2, progress=False)


def test_quick_cpu_grid_covers_what_the_planner_asks_for_smollm2():
    """M = B(1+D) for B 1..16 and D 0..7 on every linear layer, and M = B(1+N) of the runtime's
    top-4 trees (N = 4..16 nodes); verify attention at q_len 1..8 and at a tree's 1 + N (causal;
    tree from 2) over batches 1..16 and KV lengths up to 2048, elementwise ops up to a tree
    verify's B*N tokens. Without the tree shapes a B = 16 tree verify (M = 272, q_len 17) was
    extrapolated and priced 1.18x its measured time (2026-12-02)."""
    from speedplan.profile.grid import build_grid

    grid = build_grid(["quick"], "cpu")
    model = [p for p in grid.gemm if p.k in (576, 1536) and p.n in (576, 960, 3072, 49152)]
    for n, k in {(p.n, p.k) for p in model}:
        ms = {p.m for p in model if (p.n, p.k) == (n, k)}
        assert {b * (1 + d) for b in (1, 2, 4, 8, 16) for d in range(8)} <= ms, (n, k)
        assert {b * (1 + nodes) for b in (1, 2, 4, 8, 16) for nodes in (4, 8, 12, 16)} <= ms, (n, k)
    attn = [p for p in grid.attention if p.num_heads == 9]
    trees = [5, 9, 13, 17]
    for mask, qs in (("causal", [*range(1, 9), *trees]), ("tree", [*range(2, 9), *trees])):
        have = {(p.batch, p.q_len, p.kv_len) for p in attn if p.mask == mask}
        assert {(b, q, kv) for b in (1, 2, 4, 8, 16) for q in qs for kv in (64, 256, 1024, 2048)} <= have, mask
    assert max(p.numel // p.hidden for p in grid.elementwise) >= 16 * 17


def test_random_inputs_are_fresh_non_zero_buffers():
    from microbench.torch_backend import POOL_NUMEL, TorchBackend

    backend = TorchBackend("cpu", 2**20, 0.001)
    a, b = backend._rand(3 * POOL_NUMEL // 2 + 5, dtype="fp32"), backend._rand(3 * POOL_NUMEL // 2 + 5, dtype="fp32")
    assert a.data_ptr() != b.data_ptr() and not torch.equal(a, b)  # separate memory, different draws
    assert (a != 0).float().mean() > 0.999 and 0.09 < float(a.std()) < 0.11
    assert backend._rand(4, 8, dtype="bf16").shape == (4, 8) and backend._rand(2, dtype="bf16").dtype == torch.bfloat16


def test_blocks_group_points_that_share_weights_or_kv_cache():
    from microbench.runner import MAX_BLOCK, blocks_of

    grid = tiny_grid()
    todo = [(p, "gemm" if hasattr(p, "m") else "x") for p in grid.points()]
    blocks = blocks_of(todo)
    assert [p for b in blocks for p in b] == todo  # every point once, in grid order
    for b in blocks:
        assert 1 <= len(b) <= MAX_BLOCK
        gemm = [p for p, _ in b if isinstance(p, type(grid.gemm[0]))]
        assert len({(p.n, p.k) for p in gemm}) <= 1
        attn = [p for p, _ in b if isinstance(p, AttentionPoint)]
        assert len({(p.batch, p.kv_len) for p in attn}) <= 1 and (not attn or len(attn) == len(b))
    assert len([b for b in blocks if isinstance(b[0][0], AttentionPoint)]) == 4  # batch 1, 2 x kv 16, 64


def test_interleaved_timing_keeps_each_points_own_time():
    from microbench.timing import time_cpu_interleaved

    def sleeper(seconds):
        return [lambda: time.sleep(seconds)]

    order = []
    calls = [[lambda i=i: order.append(("a", i)) for i in range(4)], [lambda i=i: order.append(("b", i)) for i in range(4)]]
    time_cpu_interleaved(calls, min_time_s=0.0, min_repeats=5, repeat_s=0.0)
    timed = order[-10:]  # after the warm-up: one call of each point per round, a, b, a, b, ...
    assert [p for p, _ in timed] == ["a", "b"] * 5
    assert [i for _, i in timed] == [j % 4 for j in range(10)]  # one cursor: b goes on to the next set
    fast, slow = time_cpu_interleaved([sleeper(0.001), sleeper(0.004)], min_time_s=0.02, repeat_s=0.0)
    assert fast.repeats == slow.repeats >= 5
    assert 2.5 < slow.latency_us / fast.latency_us < 5


def test_measure_block_returns_one_timing_per_point_in_order():
    from microbench.torch_backend import TorchBackend

    backend = TorchBackend("cpu", 2**20, 0.002)
    points = [p for p in tiny_grid().attention if (p.batch, p.kv_len) == (2, 64)]
    timings = backend.measure_block(points)
    assert len(timings) == len(points) and all(t.latency_us > 0 for t in timings)


@pytest.mark.parametrize("error", [RuntimeError("CUDA error: no kernel image"), MemoryError("Out of memory allocating")],
                         ids=["torch-runtime-error", "cupy-out-of-memory"])
def test_a_cuda_point_that_fails_is_skipped_and_left_to_do(tmp_path, monkeypatch, error, capsys):
    """On CUDA a point whose op fails (torch raises RuntimeError, cupy's out-of-memory is a
    MemoryError) is skipped with a line on stderr and stays to do; the others are kept. The GPU
    is faked: the point's timing comes from a stand-in for the measuring call."""
    import microbench.env
    import microbench.runner as runner
    from microbench.timing import Timing

    grid = tiny_grid()
    victim = grid.finalize().points()[2]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(microbench.env, "provenance", lambda device, threads: {"gpu": "fake"})

    def fake_measure(backend, points, device, tries, wait_s):
        if victim in points:
            raise error
        return [Timing(10.0, 9.0, 11.0, 5, 1) for _ in points]

    monkeypatch.setattr(runner, "_measure_quietly", fake_measure)
    result = run(grid, "cuda", tmp_path, "h100-sxm", **FAST)
    assert result.measured == len(grid.finalize().points()) - 1 and result.remaining == 1
    err = capsys.readouterr().err
    assert "skipped" in err and "1 point(s) skipped for errors" in err


def _busy_cpu_run(monkeypatch, interrupt_after: int | None = None):
    """A CPU run whose every block is timed busy (other_cpu 1.5 cores); with `interrupt_after`, the
    retry of the deferred blocks raises KeyboardInterrupt (Ctrl-C) after that many retries."""
    import microbench.runner as runner
    from microbench.timing import Timing

    calls = {"retries": 0}

    def fake_measure(backend, points, device, tries, wait_s):
        if tries > 2:  # the end-of-run retry of a deferred block
            if interrupt_after is not None and calls["retries"] >= interrupt_after:
                raise KeyboardInterrupt
            calls["retries"] += 1
        return [Timing(10.0, 9.0, 11.0, 5, 1, other_cpu=1.5) for _ in points]

    monkeypatch.setattr(runner, "_measure_quietly", fake_measure)


def test_busy_points_are_counted_and_a_ctrl_c_keeps_the_deferred_blocks(tmp_path, monkeypatch):
    # Ctrl-C during the retry of blocks timed busy had lost them (written only after their retry)
    # while the CLI said "what was measured so far is kept"; the busy points went uncounted
    grid = tiny_grid()
    total = len(grid.finalize().points())
    _busy_cpu_run(monkeypatch, interrupt_after=1)
    with pytest.raises(KeyboardInterrupt):
        run(grid, "cpu", tmp_path, "cpu-local", **{**FAST, "quiet_tries": 3})
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert sum(meta["points"].values()) == total and meta["busy_points"] == total and meta["complete"] is True
    assert not (tmp_path / ".bench.lock").exists()


def test_a_second_bench_into_one_folder_is_refused(tmp_path):
    import os

    from microbench.store import LOCK, ProfileStore, lock_holder

    (tmp_path / LOCK).write_text(f"{os.getppid()} {os.uname().nodename}\n")  # a live process of this machine
    assert lock_holder(tmp_path) == os.getppid()
    with pytest.raises(ValueError, match=f"another speedplan bench \\(pid {os.getppid()}\\)"):
        ProfileStore(tmp_path, {"device": "cpu"})
    (tmp_path / LOCK).write_text("999999999 " + os.uname().nodename + "\n")  # gone: taken over
    assert lock_holder(tmp_path) is None
    ProfileStore(tmp_path, {"device": "cpu"}).finish(True, 0.0)
    assert not (tmp_path / LOCK).exists()


def test_a_refused_resume_leaves_no_lock(tmp_path):
    from microbench.store import LOCK, ProfileStore, is_busy

    ProfileStore(tmp_path, {"device": "cpu"}).finish(True, 0.0)
    with pytest.raises(ValueError, match="holds a profile of device='cpu'"):
        ProfileStore(tmp_path, {"device": "cuda"})
    assert not (tmp_path / LOCK).exists()
    assert [is_busy(x) for x in ("1.4", 1.4, "0.1", "", None, "n/a")] == [True, True, False, False, False, False]
