"""Speculative sampling is exact: emitted tokens follow p_target. Each test also runs with the
residual rule broken (resample from p_target instead of norm(max(0, p_target - p_draft)))
and checks that the test then fails, so it has the power to catch that bug."""

import pytest

torch = pytest.importorskip("torch")

import speedplan.runtime.accept as verify_mod  # noqa: E402
from speedplan.runtime.drafters.lm import LMDrafter, truncated_target  # noqa: E402
from speedplan.runtime.generate import generate  # noqa: E402
from speedplan.runtime.transformer import LlamaConfig  # noqa: E402
from speedplan.runtime.accept import SamplingParams, probs_from_logits, verify_sampling  # noqa: E402

from tests.runtime.tiny import tiny_target  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def chi2_stat(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    keep = expected > 0
    return float((((counts - expected) ** 2)[keep] / expected[keep]).sum())


def first_token_counts(p_target, p_draft, n, d, seed, one_hot=False):
    g = torch.Generator().manual_seed(seed)
    v = p_target.shape[-1]
    pt = p_target.expand(n, d + 1, v)
    pd = p_draft.expand(n, d, v)
    draft = torch.multinomial(pd.reshape(-1, v), 1, generator=g).view(n, d) if not one_hot \
        else p_draft.argmax(-1).expand(n, d)
    verdict = verify_sampling(pt, draft, torch.full((n,), d), None if one_hot else pd, g)
    first = torch.where(verdict.num_accepted > 0, draft[:, 0], verdict.next_token)
    return torch.bincount(first, minlength=v).float()


P_TARGET = torch.tensor([0.40, 0.25, 0.15, 0.10, 0.06, 0.04])
P_DRAFT = torch.tensor([0.05, 0.10, 0.50, 0.05, 0.20, 0.10])
CHI2_LIMIT = 20.5  # chi-square, 5 degrees of freedom, p = 0.001


@pytest.mark.parametrize("one_hot", [False, True])
def test_speculative_sampling_matches_target(one_hot, monkeypatch):
    counts = first_token_counts(P_TARGET, P_DRAFT, 40000, 2, seed=0, one_hot=one_hot)
    assert chi2_stat(counts, P_TARGET) < CHI2_LIMIT
    monkeypatch.setattr(verify_mod, "residual", lambda p_target, p_draft: p_target)  # the bug
    broken = first_token_counts(P_TARGET, P_DRAFT, 40000, 2, seed=0, one_hot=one_hot)
    assert chi2_stat(broken, P_TARGET) > 10 * CHI2_LIMIT


def test_top_p_applied():
    probs = probs_from_logits(torch.log(P_TARGET)[None], SamplingParams(1.0, 0.7))[0]
    assert torch.allclose(probs[:3], P_TARGET[:3] / 0.8) and float(probs[3:].sum()) == 0.0


def _second_token_counts(model, drafter, n):
    prompts = [[3, 1, 4, 1, 5]] * n
    out = generate(model, prompts, drafter, 2 if drafter else 0, batch=n,
                   sampling=SamplingParams(temperature=1.0), max_new_tokens=2, seed=7)
    return torch.bincount(torch.tensor([t[1] for t in out.token_ids]), minlength=model.cfg.vocab).float()


def test_tiny_model_sampling_distribution(monkeypatch):
    """End to end on a tiny model (vocab 8): the 2nd generated token (drawn by the verify rule
    after a drafted 1st token) has the same distribution as plain sampling's 2nd token."""
    cfg = LlamaConfig(hidden=32, layers=3, heads=2, kv_heads=1, head_dim=16, intermediate=64, vocab=8,
                      tie_embeddings=True, name="tiny-v8")
    model = tiny_target(cfg)
    n = 3000
    plain = _second_token_counts(model, None, n)
    p_ref = (plain + 1) / (plain + 1).sum()
    spec = _second_token_counts(model, LMDrafter(truncated_target(model, 1)), n)
    limit = 2 * 24.3  # two-sample chi-square, 7 dof, p = 0.001 (x2 for the reference's own noise)
    assert chi2_stat(spec, p_ref) < limit
    monkeypatch.setattr(verify_mod, "residual", lambda p_target, p_draft: p_target)
    broken = _second_token_counts(model, LMDrafter(truncated_target(model, 1)), n)
    assert chi2_stat(broken, p_ref) > limit


def test_reduced_vocabulary_drafter_samples_among_its_tokens_and_stays_exact():
    """A draft model over half the vocabulary (EAGLE-3 style) samples among its own tokens;
    p_draft is spread back over the whole vocabulary (0 elsewhere), so the rule stays exact."""
    from speedplan.runtime.drafters.base import DraftRequest
    from speedplan.runtime.drafters.draft_model import DraftModelDrafter, student_from_target

    cfg = LlamaConfig(hidden=32, layers=3, heads=2, kv_heads=1, head_dim=16, intermediate=64, vocab=8,
                      tie_embeddings=True, name="tiny-v8")
    model = tiny_target(cfg)
    vocab = torch.tensor([1, 2, 5, 6])
    make = lambda: DraftModelDrafter(student_from_target(model, [0], vocab))  # noqa: E731
    drafter = make()
    prompts = [[3, 1, 4, 1, 5]] * 200
    drafter.start(prompts, None, torch.arange(200))
    g = torch.Generator().manual_seed(0)
    draft = drafter.propose(DraftRequest(torch.arange(200), prompts, None, 3, SamplingParams(temperature=1.0), g))
    assert set(draft.tokens.unique().tolist()) <= set(vocab.tolist())
    assert torch.allclose(draft.p_draft.sum(-1), torch.ones(200, 3))
    outside = torch.ones(8, dtype=torch.bool).index_fill_(0, vocab, False)
    assert float(draft.p_draft[..., outside].abs().max()) == 0.0
    n = 3000
    plain = _second_token_counts(model, None, n)
    p_ref = (plain + 1) / (plain + 1).sum()
    assert chi2_stat(_second_token_counts(model, make(), n), p_ref) < 2 * 24.3


def test_tree_sampling_matches_target():
    """Tree rule: the first emitted token (an accepted child or the residual sample) ~ p_target."""
    from speedplan.runtime.drafters.base import TreeDraft
    from speedplan.runtime.accept import verify_tree

    n = 3000
    logits = torch.log(P_TARGET).expand(n, 4, -1)  # [n, 1+N, V], same distribution at every node
    draft = TreeDraft(torch.tensor([[2, 4, 1]]).expand(n, -1), torch.tensor([[0, 0, 1]]).expand(n, -1),
                      torch.tensor([[1, 2, 1]]).expand(n, -1))
    g = torch.Generator().manual_seed(0)
    verdict, path, _, _ = verify_tree(logits, draft, SamplingParams(temperature=1.0), g)
    node_token = torch.tensor([-1, 2, 4, 1])
    first = torch.where(verdict.num_accepted > 0, node_token[path[:, 0]], verdict.next_token)
    counts = torch.bincount(first, minlength=6).float()
    assert chi2_stat(counts, P_TARGET) < CHI2_LIMIT
    assert 0 < int((verdict.num_accepted == 2).sum()) < n  # the depth-2 path is reached sometimes


def test_tree_verify_reports_the_ranks_each_path_node_offered():
    """Root offers ranks 1, 2; node 1 (rank 1) offers rank 1; node 2 and node 3 are leaves."""
    from speedplan.runtime.drafters.base import TreeDraft
    from speedplan.runtime.accept import verify_tree

    vocab = 6
    draft = TreeDraft(torch.tensor([[2, 4, 1], [2, 4, 1]]), torch.tensor([[0, 0, 1], [0, 0, 1]]),
                      torch.tensor([[1, 2, 1], [1, 2, 1]]))
    logits = torch.zeros(2, 4, vocab)
    logits[0, 0, 2] = logits[0, 1, 5] = 1.0  # row 0: takes node 1 (rank 1), then misses at node 1
    logits[1, 0, 4] = 1.0  # row 1: takes node 2 (rank 2), a leaf
    verdict, _, ranks, offered = verify_tree(logits, draft, SamplingParams(temperature=0.0), None)
    assert verdict.num_accepted.tolist() == [1, 1]
    assert offered == [[[1, 2], [1]], [[1, 2]]]
