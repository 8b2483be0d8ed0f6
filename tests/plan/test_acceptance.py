import itertools
import json

import numpy as np
import pytest

from speedplan.plan.acceptance import Acceptance, al_iid, fit_iid_alpha, fit_positions, fit_ranks
from speedplan.plan.acceptance_sources import parse_acceptance
from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanisms import REGISTRY
from speedplan.specs.model import get_model


def test_worked_number_and_closed_form():
    assert al_iid(0.8, 4) == pytest.approx(3.3616, abs=1e-4)
    for alpha, d in itertools.product([0.3, 0.6, 0.9], range(0, 9)):
        assert al_iid(alpha, d) == pytest.approx(sum(alpha**i for i in range(d + 1)))


def test_positional_al():
    acc = Acceptance.positional([0.9, 0.8, 0.5])
    assert acc.chain_al(3) == pytest.approx(1 + 0.9 + 0.72 + 0.36)
    assert acc.chain_al(4) == pytest.approx(1 + 0.9 + 0.72 + 0.36 + 0.18)  # last entry repeats


def _brute_force_tree(ranks, nodes, depth):
    """Enumerate trees as sets of rank paths (closed under prefixes and lower siblings)."""
    k = len(ranks)
    paths = [p for d in range(1, depth + 1) for p in itertools.product(range(k), repeat=d)]
    value = {p: float(np.prod([ranks[r] for r in p])) for p in paths}
    best = 0.0
    for size in range(1, nodes + 1):
        for combo in itertools.combinations(paths, size):
            s = set(combo)
            ok = all((p[:-1] in s or len(p) == 1) and (p[-1] == 0 or p[:-1] + (p[-1] - 1,) in s) for p in s)
            if ok:
                best = max(best, sum(value[p] for p in s))
    return best


@pytest.mark.parametrize("ranks, nodes, depth", [((0.6, 0.2), 4, 3), ((0.5, 0.3, 0.1), 5, 2), ((0.8,), 3, 5)])
def test_sequoia_dp_matches_brute_force(ranks, nodes, depth):
    acc = Acceptance.per_rank(ranks)
    assert acc.tree_al(depth, nodes) - 1 == pytest.approx(_brute_force_tree(ranks, nodes, depth))


def test_tree_al_monotone_in_budget_and_depth():
    acc = Acceptance.iid(0.7)
    table = np.array([[acc.tree_al(d, n, topk=8) for n in (1, 4, 16, 64)] for d in (1, 2, 4, 8)])
    assert (np.diff(table, axis=0) >= -1e-12).all() and (np.diff(table, axis=1) >= -1e-12).all()


@pytest.mark.parametrize("mech", sorted(REGISTRY))
def test_every_default_names_its_row(mech):
    """Defaults come only from ../shared/cases rows, each named with its file."""
    target = get_model("deepseek-v3" if mech == "mtp" else "llama-3.1-8b")
    cls = REGISTRY[mech]
    acc, source = (cls.default(target, draft=get_model("llama-3.2-1b")) if mech == "draft-model"
                   else cls.default(target))
    assert source.startswith("published: ") and ("published_cases.csv" in source or "engine_measurements.csv" in source)


def test_match_probability_scales_the_drafted_part():
    """α = 0.6, match = 0.5, D = 3: 1 + 0.5 · (0.6 + 0.36 + 0.216) = 1.588 (acceptance.py docstring)."""
    acc = Acceptance.iid(0.6, match=0.5)
    assert float(acc.chain_al(3)) == pytest.approx(1.588)
    assert float(acc.chain_al(0)) == 1.0
    with pytest.raises(SpeedplanInputError, match="match"):
        Acceptance.iid(0.6, match=0.0)


def test_fit_iid_alpha_inverts_the_closed_form():
    assert fit_iid_alpha(3.3616, 4) == pytest.approx(0.8, abs=1e-6)
    with pytest.raises(SpeedplanInputError):
        fit_iid_alpha(6.0, 4)


def test_fit_positions_recovers_iid_rate():
    rng = np.random.default_rng(0)
    alpha, d = 0.7, 5
    accepted = np.minimum(rng.geometric(1 - alpha, size=20000) - 1, d)
    p = fit_positions(np.bincount(accepted), d)
    assert np.allclose(p, alpha, atol=0.02)


def test_parse_acceptance_forms(tmp_path):
    assert parse_acceptance("alpha=0.8").chain_al(4) == pytest.approx(3.3616, abs=1e-4)
    assert parse_acceptance("positions=0.9,0.8").positions == (0.9, 0.8)
    f = tmp_path / "acc.json"
    f.write_text(json.dumps({"ranks": [0.6, 0.2]}))
    assert parse_acceptance(str(f)).ranks == (0.6, 0.2)
    trace = tmp_path / "t.jsonl"
    lines = [{"type": "meta", "schema": "speedplan.trace/1", "draft_len": 3}]
    lines += [{"type": "step", "accepted": [3, 1, 0, 2]}] * 10
    trace.write_text("\n".join(json.dumps(x) for x in lines))
    acc = parse_acceptance(str(trace))
    assert acc.positions[0] == pytest.approx(0.75) and "trace" in acc.source


@pytest.mark.parametrize("spec", ["alpha=1.5", "alpha=-0.1", "alpha=0.5,0.6", "positions=", "beta=0.3",
                                  "/no/such/file.jsonl", "ranks=0.7,0.5"])
def test_bad_acceptance_is_an_input_error(spec):
    with pytest.raises(SpeedplanInputError):
        parse_acceptance(spec)


def test_per_mechanism_acceptance_options():
    from speedplan.plan.acceptance_sources import parse_acceptance_options
    from speedplan.plan.sweep import sweep

    opts = parse_acceptance_options(["eagle:alpha=0.9", "alpha=0.5"], ("eagle", "ngram"))
    assert set(opts) == {"eagle", "*"}
    r = sweep(mechanisms=["eagle", "ngram"], batches=[1], draft_lens=[3], contexts=[2000], acceptance=opts)
    al = dict(zip(r.frame.mechanism, r.frame.acceptance_length))
    assert al["eagle"] == pytest.approx(1 + 0.9 + 0.81 + 0.729)
    assert al["ngram"] == pytest.approx(1.875)
    with pytest.raises(SpeedplanInputError, match="twice"):
        parse_acceptance_options(["alpha=0.5", "alpha=0.6"], ("eagle",))


def test_two_draft_models_take_an_acceptance_each():
    """`draft-model:NAME:alpha=...` reaches one of two swept draft models (it partitioned at the
    first colon and refused 'NAME:alpha=...'); a mechanism's own argument (eagle3:config=...)
    is not mistaken for one."""
    from speedplan.plan.acceptance_sources import parse_acceptance_options
    from speedplan.plan.sweep import sweep

    names = ("draft-model", "eagle3")
    opts = parse_acceptance_options(["draft-model:llama-3.2-1b:alpha=0.6", "draft-model:llama-3.2-3b:alpha=0.8",
                                     "eagle3:alpha=0.7"], names)
    assert set(opts) == {"draft-model:llama-3.2-1b", "draft-model:llama-3.2-3b", "eagle3"}
    r = sweep("llama-3.1-70b", "h100-sxm", ["draft-model:llama-3.2-1b", "draft-model:llama-3.2-3b"], [1], [2], tp=4,
              acceptance={k: v for k, v in opts.items() if k != "eagle3"})  # an unswept key is refused
    al = dict(zip(r.frame.mechanism, r.frame.acceptance_length))
    assert al["draft-model:llama-3.2-1b"] == pytest.approx(1.96)
    assert al["draft-model:llama-3.2-3b"] == pytest.approx(2.44)
    with pytest.raises(SpeedplanInputError, match="not alpha=, positions=, ranks=, al=A@D or an existing file"):
        parse_acceptance_options(["draft-model:llama-3.2-1b:nonsense"], names)


def test_rank_fit_counts_only_the_ranks_the_tree_offered():
    """fit_ranks' worked example: rank 1 took 1 of 3 chances, rank 2 1 of 2, ranks 3-4 0 of 2.
    Counting every depth reached as a chance for every rank (no offered_ranks) gives 1/4 each."""
    steps = [{"accepted": [1], "accepted_ranks": [[2]], "offered_ranks": [[[1, 2, 3, 4]]]},
             {"accepted": [1], "accepted_ranks": [[1]], "offered_ranks": [[[1, 2, 3, 4], [1]]]}]
    assert fit_ranks(steps, 3, 4).tolist() == pytest.approx([1 / 3, 1 / 2, 0.0, 0.0])
    old = [{k: v for k, v in s.items() if k != "offered_ranks"} for s in steps]
    assert fit_ranks(old, 3, 4).tolist() == pytest.approx([1 / 4, 1 / 4, 0.0, 0.0])


def test_tree_trace_fits_per_rank(tmp_path):
    trace = tmp_path / "tree.jsonl"
    lines = [{"type": "meta", "schema": "speedplan.trace/1", "draft_len": 3, "tree": {"topk": 4, "depth": 3, "nodes": 12}}]
    # every step: first child accepted at depth 1, second-ranked at depth 2, then a miss
    lines += [{"type": "step", "accepted": [2], "accepted_ranks": [[1, 2]]}] * 50
    trace.write_text("\n".join(json.dumps(x) for x in lines))
    acc = parse_acceptance(str(trace))
    assert acc.kind == "ranks"
    assert acc.ranks[0] == pytest.approx(1 / 3) and acc.ranks[1] == pytest.approx(1 / 3)


@pytest.mark.parametrize("lines, word", [
    (['{"type":"step","accepted":[99999999]}'], "'accepted' counts in 0..64"),  # was a 800 MB bincount
    (['{"type":"step","accepted":[1,2],"accepted_ranks":"x"}'], "'accepted_ranks' must hold one list per sequence"),
    (['{"type":"step","accepted":[1],"offered_ranks":[[1]]}'], "'offered_ranks' must hold"),
    (['{"type":"meta","draft_len":"x"}', '{"type":"step","accepted":[1]}'], "meta 'draft_len'"),  # was a ValueError
    (['{"type":"meta","tree":5}', '{"type":"step","accepted":[1]}'], "meta 'tree'"),  # was an AttributeError
])
def test_malformed_traces_are_one_line(tmp_path, lines, word):
    from speedplan.plan.acceptance_sources import fit_trace

    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SpeedplanInputError, match=word):
        fit_trace(path)


def test_what_a_chain_or_tree_assumes_beyond_the_given_numbers_is_stated():
    """positions=0.9,0.8 gives a chain two rates and a tree one rank-1 rate: the rows say how
    each fills in the rest (a tree's lower ranks, a chain's later positions)."""
    from speedplan.plan.acceptance_sources import parse_acceptance_options
    from speedplan.plan.sweep import sweep

    opts = parse_acceptance_options(["eagle:positions=0.9,0.8"], ("eagle", "eagle-tree"))
    r = sweep(mechanisms=["eagle", "eagle-tree"], batches=[1], draft_lens=[3], acceptance=opts)
    src = dict(zip(r.frame.mechanism, r.frame.acceptance_source))
    assert src["eagle"].startswith("user: positions=0.9,0.8") and "past 2 repeat the last" in src["eagle"]
    assert "lower ranks assumed geometric" in src["eagle-tree"] and "α = 0.9" in src["eagle-tree"]
    assert Acceptance.iid(0.7).extension(tree=False) == ""  # α at every position is what alpha= says
    assert "every depth" in Acceptance.per_rank([0.6, 0.2]).extension(tree=True)
