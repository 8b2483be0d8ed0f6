"""The engine step model: its limits, its pieces, and the plain baseline through the same model."""

import numpy as np
import pytest

from speedplan.cost.forward import forward_cost
from speedplan.cost.ops import load_cost_model
from speedplan.engine.profile import TERMS, get_engine
from speedplan.engine.step import StepParts, plain_parts, speculative_parts, step_cost, without_drafting
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.mechanisms import parse_mechanism
from speedplan.plan.sweep import sweep
from speedplan.specs.model import get_model

ZERO = {**{t: 0.0 for t in TERMS}, "kernel_scale": 1.0}


def _parts(ops, host_draft=0.0, spec=True, batch=1.0, tokens=1.0):
    a = lambda v: np.array([float(v)])
    return StepParts(a(ops), a(batch), a(tokens), a(32), a(0), a(0), a(0), a(0), a(0), a(host_draft), np.array([spec]), a(0))


def test_overlap_one_is_max_and_zero_is_sum():
    """The docstring's worked example: 7 ms of GPU work, 1 ms of host work."""
    terms = {**ZERO, "host_step_us": 1000.0}
    parts = _parts(7e-3)
    assert step_cost({**terms, "overlap_spec": 1.0}, parts).total_s[0] == pytest.approx(7e-3)
    assert step_cost({**terms, "overlap_spec": 0.0}, parts).total_s[0] == pytest.approx(8e-3)
    half = step_cost({**terms, "overlap_spec": 0.5}, parts)
    assert half.exposed_host_s[0] == pytest.approx(0.5e-3) and half.total_s[0] == pytest.approx(7.5e-3)
    # host work longer than the GPU's: overlap hides at most the GPU time
    slow = step_cost({**ZERO, "host_step_us": 9000.0, "overlap_spec": 1.0}, parts)
    assert slow.total_s[0] == pytest.approx(9e-3)


def test_host_terms_scale_with_sequences_and_verified_tokens():
    terms = {**ZERO, "host_seq_us": 10.0, "host_token_us": 2.0}
    cost = step_cost(terms, _parts(0.0, batch=8, tokens=32))
    assert cost.host_s[0] == pytest.approx((10 * 8 + 2 * 32) * 1e-6)


def test_draft_launches_count_per_draft_forward():
    cost = load_cost_model("h100-sxm")
    target = get_model("llama-3.1-8b")
    mech = parse_mechanism("eagle", target, Acceptance.iid(0.7))
    b, d, n = np.array([1.0, 1.0]), np.array([2.0, 5.0]), np.array([2.0, 5.0])
    q = mech.verify_tokens(d, n)
    parts = speculative_parts(cost, target, mech, b, d, n, q, forward_cost(cost, target, b, q, 4096.0),
                              mech.draft_cost(cost, target, b, d, 4096.0, n, 1))
    terms = {**ZERO, "launch_us": 5.0, "draft_step_launches": 40.0}
    assert step_cost(terms, parts).launch_s == pytest.approx([2 * 40 * 5e-6, 5 * 40 * 5e-6])


def test_tree_level_us_counts_per_tree_level_and_not_for_a_chain():
    """A dynamic (top-k) tree of depth D pays tree_level_us D times (its top-k and bookkeeping per
    level), counted in its drafting; a chain of the same D, and Medusa's static tree, pay none; the
    term defaults to 0 in a profile that does not set it (every shipped profile but the runtime's fit
    leaves it there)."""
    cost = load_cost_model("h100-sxm")
    target = get_model("llama-3.1-8b")
    b, d = np.array([1.0, 1.0]), np.array([2.0, 5.0])
    terms = {**ZERO, "tree_level_us": 100.0}
    drafts = {}
    for name in ("eagle", "eagle-tree", "eagle3-tree", "medusa", "draft-model:llama-3.2-1b"):
        mech = parse_mechanism(name, target, Acceptance.iid(0.7))
        n = np.array([8.0, 16.0]) if mech.is_tree else d
        q = mech.verify_tokens(d, n)
        parts = speculative_parts(cost, target, mech, b, d, n, q, forward_cost(cost, target, b, q, 4096.0),
                                  mech.draft_cost(cost, target, b, d, 4096.0, n, 1))
        with_term, without = step_cost(terms, parts), step_cost({**terms, "tree_level_us": 0.0}, parts)
        drafts[name] = with_term.draft_s - without.draft_s
        assert with_term.verify_s == pytest.approx(without.verify_s)
        assert not np.any(without_drafting(parts, np.ones(2, dtype=bool)).tree_levels)  # vLLM past the positions
    for chain in ("eagle", "medusa", "draft-model:llama-3.2-1b"):
        assert drafts[chain] == pytest.approx([0.0, 0.0]), chain
    for tree in ("eagle-tree", "eagle3-tree"):
        assert drafts[tree] == pytest.approx([2 * 100e-6, 5 * 100e-6]), tree
    assert get_engine("vllm").values()["tree_level_us"] == 0.0
    assert "tree_level_us" in get_engine("speedplan-runtime").fit_order


def test_sampling_reads_the_verify_logits_of_every_token():
    cost = load_cost_model("h100-sxm")
    target = get_model("llama-3.1-8b")
    b = np.array([1.0, 64.0])
    plain = plain_parts(cost, target, b, forward_cost(cost, target, b, 1, 4096.0))
    t = step_cost({**ZERO, "sample_passes_plain": 1.0}, plain).sample_s
    assert t[1] > 5 * t[0] > 0  # 64 × 128k fp32 logits read and written, vs 1 × 128k at the kernel floor


def test_plain_baseline_goes_through_the_engine_model():
    """Speedup divides two steps of the same engine; making host work expensive hurts the
    speculative step (overlap_spec 0) more than the plain one (overlap_plain 1)."""
    base = get_engine("vllm")
    slow = base.with_terms({"host_seq_us": 200.0}, "test")
    r1 = sweep(mechanisms=["eagle"], batches=[64], draft_lens=[0, 3], engine=base).frame
    r2 = sweep(mechanisms=["eagle"], batches=[64], draft_lens=[0, 3], engine=slow).frame
    spec1, spec2 = (r[r.mechanism == "eagle"].iloc[0] for r in (r1, r2))
    assert spec2.speedup < spec1.speedup
    assert np.allclose(r1.t_step_s, r1.t_verify_s + r1.t_draft_s + r1.t_sample_s + r1.t_launch_s + r1.t_draft_host_s
                       + r1.t_host_exposed_s)
    assert (r1.engine == "vllm").all()


def test_speculation_switches_off_where_the_engine_makes_it_lose():
    """Host work per sequence that plain decoding hides (overlap 1) and the sync point exposes
    (overlap 0): plain decoding wins at B = 256, speculation at B = 1."""
    costly = get_engine("vllm").with_terms({"host_step_us": 500.0, "host_seq_us": 60.0, "host_token_us": 0.0,
                                             "overlap_plain": 1.0, "overlap_spec": 0.0, "draft_step_launches": 20.0}, "test")
    r = sweep(mechanisms=["eagle"], batches=[1, 256], draft_lens=range(0, 5), contexts=[512], engine=costly,
              acceptance=Acceptance.iid(0.8, "test"))
    best = r.best.set_index("batch")
    assert best.loc[1, "mechanism"] == "eagle" and best.loc[256, "mechanism"] == "none"


def test_drafting_loop_host_work_is_serial_and_per_drafted_token():
    """draft_token_us is paid per position the drafter proposes (B·D for a chain), never hidden
    by overlap: each draft forward waits for the previous one's tokens."""
    cost = load_cost_model("h100-sxm")
    target = get_model("llama-3.1-8b")
    mech = parse_mechanism("eagle3", target, Acceptance.iid(0.7))
    b, d, n = np.array([4.0]), np.array([3.0]), np.array([3.0])
    q = mech.verify_tokens(d, n)
    parts = speculative_parts(cost, target, mech, b, d, n, q, forward_cost(cost, target, b, q, 4096.0),
                              mech.draft_cost(cost, target, b, d, 4096.0, n, 1))
    terms = {**ZERO, "draft_token_us": 10.0, "overlap_spec": 1.0}
    cost_ = step_cost(terms, parts)
    assert cost_.draft_host_s[0] == pytest.approx(4 * 3 * 10e-6)
    assert cost_.total_s[0] == pytest.approx(cost_.ops_s[0] + cost_.draft_host_s[0])  # overlap hides none of it


def test_speculative_only_host_work_is_per_sequence_and_absent_from_plain_steps():
    """host_spec_seq_us: per-sequence host work only a speculative step does (its sync point).
    A plain step of the same batch is priced as if the term were 0."""
    terms = {**ZERO, "host_seq_us": 10.0, "host_spec_seq_us": 150.0}
    spec = step_cost(terms, _parts(0.0, batch=8, tokens=32))
    plain = step_cost(terms, _parts(0.0, spec=False, batch=8, tokens=8))
    assert spec.host_s[0] == pytest.approx((10 + 150) * 8 * 1e-6)
    assert plain.host_s[0] == pytest.approx(10 * 8 * 1e-6)


def test_kernel_scale_scales_kernels_and_sampler_not_host_work_or_launches():
    """kernel_scale: this machine's kernels against the profile's. It multiplies the forward
    passes and the sampler's passes; host work, launches and the drafting loop's host work stay."""
    a = lambda v: np.array([float(v)])
    parts = StepParts(a(6e-3), a(4), a(16), a(32), a(3), a(2), a(1e-4), a(2e-5), a(12), a(0), np.array([True]), a(1e-3))
    terms = {**ZERO, "host_step_us": 500.0, "launch_us": 5.0, "layer_launches": 10.0, "draft_step_launches": 4.0,
             "draft_token_us": 20.0, "sample_passes_plain": 1.0, "sample_passes_spec": 2.0}
    one, slow = step_cost(terms, parts), step_cost({**terms, "kernel_scale": 1.5}, parts)
    assert slow.ops_s[0] == pytest.approx(1.5 * one.ops_s[0]) and slow.sample_s[0] == pytest.approx(1.5 * one.sample_s[0])
    for kind in ("launch_s", "draft_host_s", "host_s"):
        assert getattr(slow, kind)[0] == pytest.approx(getattr(one, kind)[0])
    # the parts a profiler times: the target's forward (5 ms of kernels, 32 layers × 10 launches
    # × 5 µs) and the drafting (1 ms of kernels, its sampler's pass, 3 forwards × (2 layers × 10
    # + 4) launches × 5 µs, 12 rows × 20 µs); the rest of the step is the target's sampler and host work
    assert one.verify_s[0] == pytest.approx(5e-3 + 32 * 10 * 5e-6)
    assert one.draft_s[0] == pytest.approx(1e-3 + 2e-5 + 3 * (2 * 10 + 4) * 5e-6 + 12 * 20e-6)
    assert slow.verify_s[0] == pytest.approx(1.5 * 5e-3 + 32 * 10 * 5e-6)
    assert one.total_s[0] == pytest.approx(one.verify_s[0] + one.draft_s[0] + 2 * 1e-4 + 500e-6)
