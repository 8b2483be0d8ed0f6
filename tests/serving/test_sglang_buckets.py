"""SGLang's adaptive buckets are keyed by the batch SGLang routes on: the requests a step runs, at most
the launch's --max-running-requests (48 when a speculative launch leaves it unset), so every offered B at
or above that cap runs the cap and shares its bucket; the plan prices at each offered B the D of that
bucket; and where the cap leaves the plan slower than plain decoding, the launch file says so.

SGLang's rule, re-implemented here from its source (not from speedplan): a decode step calls
activate_step_by_batch(batch.seq_lens.shape[0]) (speculative/eagle_worker_v2.py, 0.5.23 wheel line 1445;
main @ 015c872628e3), and AdaptiveSpeculativeParams._route pads that to the next CUDA-graph batch size
(bisect_left; past the largest it stays) and takes the slot with the largest key <= it (bisect_right - 1,
clamped to the first): 0.5.23 wheel speculative/adaptive_spec_params.py _route, _pad_to_cuda_graph_bs,
_find_closest_bs; main @ 015c872628e3 AdaptiveStepRouter.batch_size_key_for_batch (adaptive_step_router.py
@ a12239f6ac74). Main pads to the decode graph sizes (arg_groups/cuda_graph_hook.py
generate_decode_cuda_graph_batch_sizes @ 399499ca159d, speculative branch, max_bs cut to
max_running_requests); 0.5.23 only to an explicit --cuda-graph-bs-decode, so both are checked.
arg_groups/speculative_hook.py _handle_eagle_family sets max_running_requests = 48 only `if
max_running_requests is None` (0.5.23 wheel lines 1086-1093; main @ d9ccf6a78adc).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import replace

import pytest

import speedplan.serving.sglang as sglang
from speedplan.engine.profile import get_engine
from speedplan.plan.engine_plan import plan_engines, schedule_frame, serving_plans
from speedplan.plan.sweep import sweep
from speedplan.serving import ServingPlan
from speedplan.serving.plan import segments
from tests.serving._helpers import flag_values, shell_command

SLOWER = "this launch is slower than plain decoding"


def graph_bs(max_bs: int) -> list[int]:
    """generate_decode_cuda_graph_batch_sizes, speculative branch, with max_bs = the running cap."""
    capture = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
               + list(range(272, max_bs + 1, 16)))
    capture = [b for b in capture if b <= max_bs]
    return capture + ([max_bs] if max_bs not in capture else [])


def routed_key(config: dict, running: int, cuda_graph_bs: list[int] | None) -> int:
    """AdaptiveSpeculativeParams._route: the slot key a step of `running` requests takes."""
    keys = sorted(int(k) for k in config if k.isdigit())
    if cuda_graph_bs:
        graphs = sorted(cuda_graph_bs)
        i = bisect.bisect_left(graphs, running)
        running = graphs[i] if i < len(graphs) else running
    return keys[max(0, bisect.bisect_right(keys, running) - 1)]


def routed_d(config: dict, running: int, cuda_graph_bs: list[int] | None) -> int:
    (steps,) = config[str(routed_key(config, running, cuda_graph_bs))]["candidate_steps"]
    return steps


def launch_cap(launch: str) -> int:
    """The running cap the launch gets: its --max-running-requests, else SGLang's 48 for speculative decoding."""
    return int(flag_values(shell_command(launch)).get("--max-running-requests", 48))


def _planned(result):
    plans = plan_engines(result, engines=["sglang"])
    return plans, sglang.render(serving_plans(result, plans)["sglang"])


@pytest.fixture(scope="module")
def walkthrough():
    """`speedplan sweep --model llama-3.1-70b --hardware a100-80gb --tp 4 --engine trtllm`: its SGLang
    plan wrote {"1": [8], "16": [7], "64": [4]}, a key SGLang's 48 running requests never reach."""
    return _planned(sweep("llama-3.1-70b", "a100-80gb", tp=4, engine="trtllm"))


@pytest.fixture(scope="module")
def mtp():
    """DeepSeek-V3 MTP under SGLang's profile: an adaptive plan that loses to plain decoding at B = 128
    and 256, where plain decoding runs every request and a speculative step 48. (At context 2,048: at
    the default 4,096 the plan became one D = 3 everywhere when MLA's verify attention was priced with
    its query width, 2026-12-06, D = 4 and 5 costing a second 64-row block.)"""
    return _planned(sweep("deepseek-v3", "h200-sxm", ["mtp"], tp=8, engine="sglang", contexts=[2048]))


@pytest.fixture(scope="module")
def padded():
    """Batch sizes SGLang pads to one CUDA-graph size (33 and 40 to 40; 64 and more run 48). At context
    1,024 the planner without buckets took D = 5 at B = 33 and 4 at B = 40, which no keys express."""
    return _planned(sweep("deepseek-v3", "h200-sxm", ["mtp"], [1, 2, 4, 8, 16, 32, 33, 40, 44, 64, 96, 128, 256],
                          contexts=[1024], tp=8, engine="sglang"))


@pytest.mark.parametrize("case", ["walkthrough", "mtp", "padded"])
def test_keys_are_running_batches_sglang_reaches(case, request):
    plans, files = request.getfixturevalue(case)
    assert plans["sglang"].mode == "adaptive"
    config = json.loads(files[sglang.ADAPTIVE_FILE])
    cap = launch_cap(files["sglang_launch.sh"])
    keys = sorted(int(k) for k in config)
    assert cap == 48 and keys[0] == 1 and keys[-1] <= cap
    for key in keys:  # a step of `key` requests lands in its own bucket, padded or not
        assert routed_key(config, key, graph_bs(cap)) == routed_key(config, key, None) == key
    if case == "walkthrough":
        assert "64" not in config and keys[-1] == 48  # B = 64 and 128 run 48 requests


@pytest.mark.parametrize("case", ["walkthrough", "mtp", "padded"])
def test_the_d_priced_at_each_offered_batch_is_the_d_sglang_routes_it_to(case, request):
    plans, files = request.getfixturevalue(case)
    config = json.loads(files[sglang.ADAPTIVE_FILE])
    cap = launch_cap(files["sglang_launch.sh"])
    rows = schedule_frame(plans)
    for r in rows.itertuples():
        running = min(int(r.batch), cap)
        assert routed_d(config, running, graph_bs(cap)) == routed_d(config, running, None) == r.draft_len, r.batch
    above = rows[rows["batch"] >= cap]
    assert len(above) and above["draft_len"].nunique() == 1  # one bucket, one D
    if case == "padded":  # 33 and 40 pad to 40 (44 to 44): one bucket each way, so one D
        d = rows.set_index("batch")["draft_len"]
        assert d[33] == d[40]


def test_a_plan_without_a_cap_is_unchanged(monkeypatch):
    """No cap (spec_max_running 0): the launch sets --max-running-requests to the largest planned batch,
    every planned batch runs as offered, and keys and D are what they were before running batches."""
    hand = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=6, spec_max_running=0.0,
                       schedule=((1, 6), (8, 4), (32, 2), (64, 1), (128, 0)))
    files = sglang.render(hand)
    config = json.loads(files[sglang.ADAPTIVE_FILE])
    assert config == {str(lo): {"candidate_steps": [d]} for lo, _, d in segments(hand)}
    assert launch_cap(files["sglang_launch.sh"]) == 128
    assert sglang.plan_groups([1, 2, 4, 8, 16, 32, 64, 128, 256], 0.0) == list(range(9))

    uncapped = get_engine("sglang").with_terms({"spec_max_running": 0}, "test: no cap")
    r = sweep("deepseek-v3", "h200-sxm", ["mtp"], tp=8, engine=uncapped)
    plans, files = _planned(r)
    monkeypatch.delattr(sglang, "plan_groups")  # the planner as it was, without buckets
    before = plan_engines(r, engines=["sglang"])["sglang"]
    assert before.rows.equals(plans["sglang"].rows) and before.mode == plans["sglang"].mode
    if sglang.ADAPTIVE_FILE in files:
        config = json.loads(files[sglang.ADAPTIVE_FILE])
        assert config == {str(lo): {"candidate_steps": [d]} for lo, _, d in
                          segments(serving_plans(r, {"sglang": before})["sglang"])}
    assert SLOWER not in files["sglang_launch.sh"] and plans["sglang"].cap_note == ""


def test_the_cap_note_appears_exactly_where_the_cap_loses_to_plain_decoding(walkthrough, mtp):
    plans, files = mtp
    rows = plans["sglang"].rows
    slow = sorted(int(b) for b, sp in zip(rows["batch"], rows["speedup"]) if b > 48 and sp < 0.9995)
    assert slow == [128, 256]  # below plain decoding: a speculative step runs 48 of B
    launch = files["sglang_launch.sh"]
    note = plans["sglang"].cap_note
    assert note.startswith("at B = 128, 256 " + SLOWER) and note in " ".join(launch.replace("# ", "").split("\n"))
    assert "--max-running-requests N" in note and "without speculation" in note
    plans, files = walkthrough  # faster than plain decoding at every B, 64 and 128 included
    assert (plans["sglang"].rows["speedup"] >= 1).all()
    assert SLOWER not in files["sglang_launch.sh"] and plans["sglang"].cap_note == ""

    def launch(per_batch, **kw):
        p = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=4, schedule=((1, 4), (32, 2), (64, 1)),
                        per_batch=per_batch, **kw)
        return sglang.render(p)["sglang_launch.sh"]

    fast = ((1, 4, 2.0, 0.0, 1), (32, 2, 1.2, 0.0, 32))
    assert SLOWER not in launch(fast + ((64, 1, 1.1, 0.0, 64),))  # faster everywhere
    assert SLOWER not in launch(((1, 4, 2.0, 0.0, 1), (32, 2, 0.9, 0.1, 32), (64, 1, 1.1, 0.0, 64)))  # below the cap
    assert SLOWER not in launch(fast + ((64, 1, 0.8, 0.2, 40),))  # memory holds 40: not the cap
    assert SLOWER not in launch(fast + ((64, 1, 0.8, 0.2, 64),), spec_max_running=0.0)  # no cap
    capped = launch(fast + ((64, 1, 0.8, 0.2, 64),))
    assert "at B = 64 " + SLOWER + " (0.80x of it)" in capped and "SGLang's default" in capped
    raised = launch(fast + ((64, 1, 0.8, 0.2, 64),), spec_max_running=32.0)
    assert "--max-running-requests 32" in raised and "at B = 64 " + SLOWER in raised


def test_a_hand_made_plan_above_the_cap_takes_the_cap_bucket():
    """A hand-made plan (no pricing) keeps SGLang's default cap: B = 64 and 128 both run 48 requests and
    reach one bucket, which takes the first one's D; the other's D is said to be lost."""
    p = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=6, schedule=((1, 6), (32, 3), (64, 2), (128, 0)))
    files = sglang.render(p)
    config = json.loads(files[sglang.ADAPTIVE_FILE])
    assert config == {"1": {"candidate_steps": [6]}, "32": {"candidate_steps": [3]}, "48": {"candidate_steps": [2]}}
    text = files["sglang_launch.sh"]
    assert "B = 128 was planned at D = 0" in text and "bucket keyed 48 (D = 2)" in text
    assert sglang.buckets(replace(p, spec_max_running=96.0))[0] == [(1, 6), (32, 3), (64, 2), (96, 0)]
