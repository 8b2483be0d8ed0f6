"""Greedy speculative output equals plain greedy output, token for token, for every drafter,
batch sizes 1..8 with ragged prompts (tiny random model, so it runs in seconds)."""

import pytest

torch = pytest.importorskip("torch")

from speedplan.runtime.drafters.lm import LMDrafter, truncated_target  # noqa: E402
from speedplan.runtime.drafters.ngram import NgramDrafter  # noqa: E402
from speedplan.runtime.drafters.tree import TreeDrafter  # noqa: E402
from speedplan.runtime.generate import generate  # noqa: E402
from tests.runtime.tiny import ragged_prompts, tiny_target  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def target():
    torch.manual_seed(0)
    return tiny_target()


def drafters(target):
    return {
        "ngram": (NgramDrafter(1, 3), 4),
        "chain-lm": (LMDrafter(truncated_target(target, 2)), 3),
        "tree-lm": (TreeDrafter(LMDrafter(truncated_target(target, 2)), topk=3, depth=3, nodes=10), 3),
    }


@pytest.mark.parametrize("batch,n_prompts", [(1, 3), (3, 7), (8, 8)])
def test_greedy_speculative_equals_plain(target, batch, n_prompts):
    prompts = ragged_prompts(n_prompts)
    plain = generate(target, prompts, None, 0, batch=batch, max_new_tokens=24)
    assert all(len(t) == 24 for t in plain.token_ids)
    for name, (drafter, d) in drafters(target).items():
        spec = generate(target, prompts, drafter, d, batch=batch, max_new_tokens=24)
        assert spec.token_ids == plain.token_ids, f"{name} at batch {batch} diverged from plain greedy"
        assert 1.0 < spec.acceptance_length < d + 1, f"{name}: no rejections or no acceptances exercised"


def test_speculation_accepts_something(target):
    prompts = ragged_prompts(4)
    spec = generate(target, prompts, LMDrafter(truncated_target(target, 4)), 4, batch=4, max_new_tokens=16)
    # a 'truncated' copy with all layers is the target itself: every draft must be accepted
    assert spec.acceptance_length > 4.0
    assert all(a == 4 for s in spec.steps for a in s.accepted[:1] if s.step < 2)


def test_eos_stops_each_sequence(target):
    prompts = ragged_prompts(3)
    plain = generate(target, prompts, None, 0, batch=3, max_new_tokens=20)
    eos = plain.token_ids[1][5]  # a token the second sequence emits: it must stop there
    out = generate(target, prompts, NgramDrafter(), 3, batch=3, max_new_tokens=20, eos_ids=[eos])
    assert out.token_ids[1] == plain.token_ids[1][: plain.token_ids[1].index(eos) + 1]


def test_static_span_path_matches(target):
    """The CUDA-graph layout (attend over the whole cache under the mask) gives the same tokens."""
    prompts = ragged_prompts(4)
    plain = generate(target, prompts, None, 0, batch=4, max_new_tokens=12)
    target.static_span = True
    try:
        for drafter, d in [(NgramDrafter(), 3), (TreeDrafter(LMDrafter(truncated_target(target, 2)), 2, 2, 4), 2)]:
            assert generate(target, prompts, drafter, d, batch=4, max_new_tokens=12).token_ids == plain.token_ids
    finally:
        target.static_span = False


def test_a_reused_prefill_generates_what_a_fresh_one_does(target):
    """PrefillCache (validation reuses the target's prefill of a wave across runs): every run,
    first or copied, plain or speculative, emits the tokens and acceptance a fresh prefill gives,
    and runs never share K/V (a tree run, which packs K/V in place, comes between)."""
    from speedplan.runtime.generate import PrefillCache

    prompts = ragged_prompts(6)
    prefills = PrefillCache()
    for name, (drafter, d) in [("none", (None, 0)), *drafters(target).items(), ("none again", (None, 0))]:
        fresh = generate(target, prompts, drafter, d, batch=3, max_new_tokens=16)
        reused = generate(target, prompts, drafter, d, batch=3, max_new_tokens=16, prefills=prefills)
        assert reused.token_ids == fresh.token_ids, name
        assert [s.accepted for s in reused.steps] == [s.accepted for s in fresh.steps], name
        assert [s.context for s in reused.steps] == [s.context for s in fresh.steps], name
    assert prefills.hits == 2 * 4  # two waves, computed on the first run and copied on the four after it
