"""Acceptance models: expected tokens per target step (AL) from α, per-position or per-rank
acceptance, and fitting them from runtime traces.

What counts: AL is the expected number of tokens a sequence emits per target step, the
target's own bonus token included, so 1 ≤ AL ≤ 1 + D. An accepted-length histogram (as in a
trace's `accepted` field) counts accepted *draft* tokens only, 0..D.

- i.i.d. rate α (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
  Decoding", eq. 1): AL = (1 − α^(D+1)) / (1 − α).  Worked number: α = 0.8, D = 4 gives
  (1 − 0.8^5) / 0.2 = 3.3616.
- Per-position conditional acceptance p_1..p_D (EAGLE/MTP heads decay with depth):
  AL = 1 + Σ_i Π_{j≤i} p_j. A vector shorter than D repeats its last entry.
- Trees (Sequoia, Chen et al. 2024): a child of rank r is accepted with probability
  ranks[r−1] given its parent was; the expected accepted length of a tree is the sum over
  its nodes of the product of acceptance along the node's path. `tree_al` finds the best
  tree for a node budget and depth limit by Sequoia's dynamic program.
- One head family, one vector: `Acceptance.per_rank(ranks)` prices the family's chain with
  p_i = ranks[0] at every depth (the rank-1 child at each level) and its trees with all ranks,
  so a chain and a tree of one head never disagree about how good the head is.
- Drafters that sometimes propose nothing (n-gram lookup finds no match): `match` is the
  chance a step has drafts at all; AL = 1 + match · (drafted part), and a step without a
  match verifies one token. Worked number: α = 0.6, match = 0.5, D = 3 gives
  1 + 0.5 · (0.6 + 0.36 + 0.216) = 1.588.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from speedplan.errors import SpeedplanInputError


@dataclass(frozen=True)
class Acceptance:
    """How likely drafts are accepted. Build with `iid`, `positional` or `per_rank`.

    `positions[i]` is the chance that draft i+1 is accepted given drafts 1..i were (rank-1
    candidate); `ranks[r]` is the chance that the rank-(r+1) sibling is accepted given its
    parent was (trees). `source` says where the numbers came from, for reports."""

    positions: tuple[float, ...]
    ranks: tuple[float, ...]
    source: str | None  # None: "user: " and the numbers (`describe`)
    kind: str  # "iid", "positions" or "ranks"
    match: float = 1.0  # chance a step proposes any draft (n-gram lookup); 1 for model drafters
    measured_at: float | None = None  # sampling temperature it was measured at, where known (a runtime trace)
    measured_by: tuple[str, str] | None = None  # (drafter, model) that ran, where known (a runtime trace's meta)
    al_at: tuple[float, int] | None = None  # (AL, D) a user's al=A@D gave, where the rate was fitted to one AL

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) and self.source is not None:  # every report appends to it
            raise SpeedplanInputError(f"acceptance source must be text saying where the numbers came from, "
                                      f"got {self.source!r}")
        _number(self.match, "match")
        for label, values in (("positions", self.positions), ("ranks", self.ranks)):
            if not isinstance(values, tuple):
                raise SpeedplanInputError(f"acceptance {label} must be a tuple of numbers (build an Acceptance with "
                                          f"iid, positional or per_rank), got {values!r}")
            for v in values:
                _number(v, label)
        if not (0.0 < self.match <= 1.0):
            raise SpeedplanInputError(f"acceptance match probability must be in (0, 1], got {self.match}")
        for label, values in (("positions", self.positions), ("ranks", self.ranks)):
            if not values:
                raise SpeedplanInputError(f"acceptance {label} must not be empty")
            for v in values:
                if not (0.0 <= v < 1.0) or v != v:
                    raise SpeedplanInputError(f"acceptance probabilities must be in [0, 1), got {v}")
        if sum(self.ranks) >= 1.0 + 1e-9:
            raise SpeedplanInputError(f"per-rank acceptance must sum to < 1, got {sum(self.ranks):.3f}")
        if self.source is None:  # the user's numbers, said as the CLI's --acceptance alpha=0.7 says them
            object.__setattr__(self, "source", f"user: {self.describe(digits=12)}")

    @classmethod
    def iid(cls, alpha: float, source: str | None = None, match: float = 1.0) -> "Acceptance":
        """Every draft accepted with the same chance `alpha` in [0, 1) (Leviathan et al.);
        `match` is the chance a step proposes any draft at all (n-gram lookup; 1 otherwise).
        `source` (here and in `positional`, `per_rank`): where the numbers came from; None:
        "user: " and the numbers (`describe`), as the CLI's --acceptance alpha=0.7 says."""
        alpha, match = _number(alpha, "alpha"), _number(match, "match")
        return cls((alpha,), _geometric_ranks(alpha), source, "iid", match)

    @classmethod
    def positional(cls, probs, source: str | None = None, match: float = 1.0) -> "Acceptance":
        """`probs[i]`: the chance draft i+1 is accepted given drafts 1..i were; positions past
        the last given repeat its rate. Trees take the geometric ranks of probs[0]."""
        probs = _numbers(probs, "positions")
        if not probs:
            raise SpeedplanInputError("positions= needs at least one probability")
        return cls(probs, _geometric_ranks(probs[0]), source, "positions", _number(match, "match"))

    @classmethod
    def per_rank(cls, ranks, source: str | None = None, match: float = 1.0) -> "Acceptance":
        """`ranks[r]`: the chance the rank-(r+1) child of an accepted node is accepted (Sequoia);
        they sum to < 1. Chains use ranks[0] at every depth."""
        ranks = _numbers(ranks, "ranks")
        if not ranks:
            raise SpeedplanInputError("ranks= needs at least one probability")
        return cls((ranks[0],), ranks, source, "ranks", _number(match, "match"))

    @classmethod
    def geometric_ranks(cls, alpha: float, source: str) -> "Acceptance":
        """A head family's one vector when only its rank-1 rate α is known (see
        `_geometric_ranks`): chains get α at every depth, trees the geometric ranks."""
        return cls.per_rank(_geometric_ranks(float(alpha)), source)

    @classmethod
    def head_ranks(cls, alpha: float, lower_share: float, source: str) -> "Acceptance":
        """ranks = [α, c·α(1−α), c·α(1−α)², ...]: the rank-1 rate and a share c ≤ 1 of the
        geometric split for the lower ranks (c = 1 is `geometric_ranks`). Worked example:
        α = 0.5, c = 0.6 → ranks 0.5, 0.15, 0.075, ...; the chain still uses 0.5 per depth."""
        if not 0.0 < lower_share <= 1.0:
            raise SpeedplanInputError(f"lower-rank share must be in (0, 1], got {lower_share}")
        geo = _geometric_ranks(float(alpha))
        return cls.per_rank((geo[0], *(lower_share * r for r in geo[1:])), source)

    def position_vector(self, depth: int) -> np.ndarray:
        """p_1..p_depth, the last given entry repeated past the vector's end."""
        p = np.array(self.positions, dtype=float)
        if depth <= len(p):
            return p[:depth]
        return np.concatenate([p, np.full(depth - len(p), p[-1])])

    def chain_al(self, draft_len) -> np.ndarray:
        """AL of a chain of `draft_len` drafts (array-valued), bonus token included."""
        d = np.asarray(draft_len, dtype=int)
        if np.any(d < 0):
            raise SpeedplanInputError("draft length must be >= 0")
        depth = int(d.max(initial=0))
        cumulative = 1.0 + np.concatenate([[0.0], np.cumsum(np.cumprod(self.position_vector(depth)))])
        al = cumulative[d]
        if self.kind != "positions":  # same numbers, but the closed form is exact for α
            alpha = self.positions[0]
            al = (1.0 - alpha ** (d + 1)) / (1.0 - alpha)
        return 1.0 + self.match * (al - 1.0)

    def tree_al(self, depth, nodes, topk: int | None = None) -> np.ndarray:
        """AL of the best tree with at most `nodes` draft nodes, depth ≤ `depth` and at most
        `topk` children per node (arrays broadcast together), bonus token included."""
        depth, nodes = np.broadcast_arrays(np.asarray(depth, dtype=int), np.asarray(nodes, dtype=int))
        dmax = int(depth.max(initial=0))
        nmax = int(nodes.max(initial=0))
        ranks = self.ranks[:topk] if topk else self.ranks
        table = _sequoia_table(ranks, nmax, dmax)
        return 1.0 + self.match * table[np.minimum(nodes, nmax), depth]

    def extension(self, tree: bool) -> str:
        """How a chain or a tree extends the numbers given, in words for the acceptance source
        ("" where nothing is assumed beyond them)."""
        if tree:
            if self.kind == "ranks":
                return "the same per-rank rates at every depth (assumed)"
            return (f"a tree's lower ranks assumed geometric from the first rate, α(1−α)^(r−1) with "
                    f"α = {self.positions[0]:.3g}, at every depth; give ranks= or a trace to replace them")
        if self.kind == "positions" and len(self.positions) > 1:
            return f"positions past {len(self.positions)} repeat the last rate (assumed)"
        if self.kind == "ranks":
            return f"a chain accepts the rank-1 rate {self.positions[0]:.3g} at every depth (assumed)"
        return ""

    def describe(self, digits: int = 3) -> str:
        """The numbers as `--acceptance` spells them ("alpha=0.7,match=0.5"), to `digits` significant digits."""
        f = f".{digits}g"
        if self.kind == "iid":
            text = f"alpha={self.positions[0]:{f}}"
        elif self.kind == "positions":
            text = "positions=" + ",".join(f"{p:{f}}" for p in self.positions)
        else:
            text = "ranks=" + ",".join(f"{p:{f}}" for p in self.ranks)
        return text + (f",match={self.match:{f}}" if self.match < 1.0 else "")


def al_iid(alpha: float, draft_len: int) -> float:
    """Leviathan et al.: expected tokens per step, (1 − α^(D+1)) / (1 − α). al_iid(0.8, 4) = 3.3616."""
    return float(Acceptance.iid(alpha).chain_al(draft_len))


def _geometric_ranks(alpha: float, width: int = 16) -> tuple[float, ...]:
    """Per-rank acceptance when only the rank-1 rate is known: the rank-r candidate is right
    with α(1 − α)^(r−1) — each lower rank catches a fraction α of what the ones above missed.
    An assumption (stated in reports), not a measurement; give `ranks=` or a trace to replace it."""
    return tuple(alpha * (1.0 - alpha) ** r for r in range(width))


@lru_cache(maxsize=256)
def _sequoia_table(ranks: tuple[float, ...], max_nodes: int, max_depth: int) -> np.ndarray:
    """best[n, d]: expected accepted drafts of the best tree with ≤ n nodes, depth ≤ d.

    Sequoia's recursion: a node's children use the top ranks 1..c (acceptance falls with
    rank, so a best tree never skips one). forest[n, d, r] is the best value of children
    ranked r.. with n nodes in all, each subtree at most d deep:
      forest[n, d, r] = max(forest[n, d, r+1],
                            max_{1≤m≤n} ranks[r]·(1 + best[m−1, d−1]) + forest[n−m, d, r+1]).
    Values are monotone in n and d (a smaller tree fits a bigger budget)."""
    p = np.array(ranks, dtype=float)
    width = min(len(p), max_nodes) if max_nodes else 0
    best = np.zeros((max_nodes + 1, max_depth + 1))
    # every (n, m) pair at once: the first child's subtree takes m of the n nodes (1 ≤ m ≤ n);
    # pairs with m > n are masked out
    n_idx, m_idx = np.meshgrid(np.arange(max_nodes + 1), np.arange(1, max_nodes + 1), indexing="ij")
    valid = m_idx <= n_idx
    rest = np.where(valid, n_idx - m_idx, 0)
    for d in range(1, max_depth + 1):
        below = best[:, d - 1]
        first = 1.0 + below[m_idx - 1]  # 1 + best[m−1, d−1]: the child and its own subtree
        forest = np.zeros(max_nodes + 1)  # forest over ranks ≥ width: empty
        for r in range(width - 1, -1, -1):
            candidates = np.where(valid, p[r] * first + forest[rest], -np.inf)
            forest = np.maximum(forest, candidates.max(axis=1, initial=-np.inf))
        best[:, d] = np.maximum.accumulate(forest)
    return best


def reached(histogram, draft_len: int) -> np.ndarray:
    """at_least[i]: the sequence-steps of an accepted-length histogram that accepted i drafts or
    more, i = 0..max(draft_len, the histogram's last count)."""
    h = np.zeros(max(int(draft_len) + 1, len(histogram)))
    h[: len(histogram)] = histogram
    return h[::-1].cumsum()[::-1]


def fit_positions(histogram: np.ndarray, draft_len: int) -> np.ndarray:
    """Per-position conditional acceptance from an accepted-length histogram:
    p_i = P(accepted ≥ i) / P(accepted ≥ i − 1), for i = 1..draft_len (0 where unseen)."""
    at_least = reached(histogram, draft_len)
    p = np.divide(at_least[1 : draft_len + 1], at_least[:draft_len], out=np.zeros(draft_len), where=at_least[:draft_len] > 0)
    return np.clip(p, 0.0, 0.999)


def _non_increasing(values: np.ndarray) -> np.ndarray:
    """`values` made non-increasing by pooling adjacent ones that rise into their mean (pool
    adjacent violators): the least-squares non-increasing sequence."""
    pooled: list[list[float]] = []  # [sum, count]
    for v in values:
        pooled.append([float(v), 1])
        while len(pooled) > 1 and pooled[-1][0] / pooled[-1][1] > pooled[-2][0] / pooled[-2][1]:
            total, count = pooled.pop()
            pooled[-1] = [pooled[-1][0] + total, pooled[-1][1] + count]
    return np.array([t / c for t, c in pooled for _ in range(c)])


def fit_runs(histogram: np.ndarray, draft_len: int, positions: int | None = None) -> np.ndarray:
    """Per-position acceptance for a drafter whose agreement with the target comes in runs (n-gram
    lookup: it copies earlier text, right until the copy and the target part), from the
    accepted-length histogram of steps of `draft_len`: the p_i whose chain AL matches, at every
    D = 1..`positions` (default 2·draft_len), the run model's AL.

    Run model: a step that accepts a < draft_len tokens ends a run of a agreeing tokens; one that
    accepts all draft_len continues it into the next step. A step of D starting in a run of r
    accepts min(r, D), so a run of r tokens takes ⌊r/(D+1)⌋ + 1 steps of D and yields r + 1 tokens:
    AL(D) = E[r + 1] / E[⌊r/(D+1)⌋ + 1] over the runs, which equals the measured AL at D = draft_len.
    `fit_positions` assumes each step's first draft is accepted alike whatever D; for n-gram
    lookup a short D leaves the rest of a run to the next step, which then starts inside it, so its
    small-D AL came out 6-7% low (SmolLM2 on 24 and 16 prompts, D = 7 fitted, 2026-12-05:
    benchmarks/bench_ngram_runs.py). Worked number: histogram [6, 2, 2, 0] at D = 3 (no step
    accepted all three) gives AL(3) = 1.6, and at D = 1 a run of 2 takes two steps: AL(1) =
    1.6 / (0.6 + 0.2 + 0.2·2) = 1.3333, where `fit_positions` gives 1.4.

    Increments of AL in D that rise (the floor's arithmetic) are pooled to keep p_i ≤ 1, those up
    to draft_len apart from those beyond, so that AL(draft_len) stays the measured one."""
    d0 = int(draft_len)
    h = np.zeros(d0 + 1)
    h[: min(len(histogram), d0 + 1)] = np.asarray(histogram, float)[: d0 + 1]
    n = int(positions or 2 * d0)
    if d0 < 1 or h.sum() <= 0 or h[d0] >= h.sum():  # no steps, or every step accepted all: no run seen to end
        return fit_positions(h, d0) if n <= d0 else np.pad(fit_positions(h, d0), (0, n - d0), mode="edge")
    share, full = h / h.sum(), h[d0] / h.sum()
    k = np.arange(int(np.ceil(np.log(1e-12) / np.log(full))) + 1 if full > 0 else 1)  # full steps before the run ends
    weight = np.outer(full ** k * (1 - full), share[:d0] / (1 - full))  # P(k full steps, then a accepted)
    run = k[:, None] * (d0 + 1) + np.arange(d0)[None, :]  # agreeing tokens in the run
    al = np.array([1.0] + [float((weight * (run + 1)).sum() / (weight * (run // (d + 1) + 1)).sum())
                           for d in range(1, n + 1)])
    rise = np.maximum(np.diff(al), 0.0)  # P(accepted >= i) of the chain that matches: non-increasing needed
    inside = _non_increasing(rise[:d0])  # pooled within D <= draft_len and beyond it apart: AL(draft_len) stays
    reach = np.concatenate([[1.0], inside, np.minimum(_non_increasing(rise[d0:]), inside[-1])])  # the measured one
    p = np.divide(reach[1:], reach[:-1], out=np.zeros(n), where=reach[:-1] > 0)
    return np.clip(p, 0.0, 0.999)


def fit_ranks(steps: list[dict], depth: int, width: int) -> np.ndarray:
    """Per-rank acceptance (Sequoia) from tree traces' `accepted_ranks`: ranks[r] is the chance
    that the rank-(r+1) child is accepted given its parent was and the tree offered it.

    With `offered_ranks` (the sibling ranks present at each node of the accepted path that has
    children) a rank's chances are the path nodes that offered it: a pruned tree (N best nodes
    of a top-k expansion) drops low-ranked siblings at most depths, and a path can end at a
    leaf, which offered nothing. Worked example: two steps whose root offered ranks 1-4, the
    first accepting rank 2 at a leaf, the second accepting rank 1 whose node offered rank 1
    only, then rejecting: rank 1 took 1 of 3 chances, rank 2 took 1 of 2.
    Without it (older traces, other engines), every depth reached (1..min(accepted + 1, depth))
    counts as a chance for every rank: biased low when the tree was pruned."""
    taken = np.zeros(width)
    chances = np.zeros(width)
    for s in steps:
        paths = s.get("accepted_ranks") or [[]] * len(s["accepted"])
        offered = s.get("offered_ranks")
        for i, (a, path) in enumerate(zip(s["accepted"], paths)):
            for r in path:
                if 1 <= r <= width:
                    taken[r - 1] += 1
            if offered is None:
                chances += min(a + 1, depth)
                continue
            for node in offered[i]:
                for r in node:
                    if 1 <= r <= width:
                        chances[r - 1] += 1
    ranks = np.divide(taken, chances, out=np.zeros(width), where=chances > 0)
    return np.clip(ranks, 0.0, 0.999)


def fit_iid_alpha(acceptance_length: float, draft_len: int) -> float:
    """The i.i.d. α whose chain of `draft_len` drafts has this AL (bisection on the closed
    form; AL rises with α). fit_iid_alpha(3.3616, 4) = 0.8."""
    if draft_len < 1 or not 1.0 <= acceptance_length <= 1.0 + draft_len:
        raise SpeedplanInputError(f"acceptance length {acceptance_length:.3g} is outside 1..1+D for D={draft_len}")
    return rate_for(lambda alpha: al_iid(alpha, draft_len), acceptance_length)


def rate_for(al_of, acceptance_length: float, hi: float = 0.999) -> float:
    """The rate in [0, hi] at which `al_of(rate)`, an acceptance length rising with the rate,
    reaches `acceptance_length` (bisection, 60 halvings); `hi` where it falls short even there."""
    lo = 0.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if al_of(mid) < acceptance_length else (lo, mid)
    return (lo + hi) / 2


def conditional_from_position_rates(rates) -> np.ndarray:
    """Per-position conditional acceptance p_i from unconditional per-position rates r_i =
    P(draft i accepted) (what vLLM counts: accepted-at-position / drafts):
    p_1 = r_1, p_i = r_i / r_(i−1). Worked example: r = [0.72, 0.50, 0.33] →
    p = [0.72, 0.694, 0.66]; AL = 1 + Σ r_i = 2.55 either way."""
    r = np.asarray(rates, dtype=float)
    prev = np.concatenate([[1.0], r[:-1]])
    p = np.divide(r, prev, out=np.zeros_like(r), where=prev > 0)
    return np.clip(p, 0.0, 0.999)


def _number(value, name: str) -> float:
    """`value` as a float, or one line saying what `name` must be."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SpeedplanInputError(f"acceptance {name} must be a number, got {value!r}")
    return float(value)


def _numbers(values, name: str) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise SpeedplanInputError(f"acceptance {name} must be a list of numbers, got {values!r}")
    return tuple(_number(v, name) for v in values)
