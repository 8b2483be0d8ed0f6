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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from speedplan.errors import SpeedplanInputError

MAX_DRAFT = 64


@dataclass(frozen=True)
class Acceptance:
    """How likely drafts are accepted. Build with `iid`, `positional` or `per_rank`.

    `positions[i]` is the chance that draft i+1 is accepted given drafts 1..i were (rank-1
    candidate); `ranks[r]` is the chance that the rank-(r+1) sibling is accepted given its
    parent was (trees). `source` says where the numbers came from, for reports."""

    positions: tuple[float, ...]
    ranks: tuple[float, ...]
    source: str
    kind: str  # "iid", "positions" or "ranks"

    def __post_init__(self) -> None:
        for label, values in (("positions", self.positions), ("ranks", self.ranks)):
            if not values:
                raise SpeedplanInputError(f"acceptance {label} must not be empty")
            for v in values:
                if not (0.0 <= v < 1.0) or v != v:
                    raise SpeedplanInputError(f"acceptance probabilities must be in [0, 1), got {v}")
        if sum(self.ranks) >= 1.0 + 1e-9:
            raise SpeedplanInputError(f"per-rank acceptance must sum to < 1, got {sum(self.ranks):.3f}")

    @classmethod
    def iid(cls, alpha: float, source: str = "user") -> "Acceptance":
        return cls((float(alpha),), _geometric_ranks(float(alpha)), source, "iid")

    @classmethod
    def positional(cls, probs, source: str = "user") -> "Acceptance":
        probs = tuple(float(p) for p in probs)
        if not probs:
            raise SpeedplanInputError("positions= needs at least one probability")
        return cls(probs, _geometric_ranks(probs[0]), source, "positions")

    @classmethod
    def per_rank(cls, ranks, source: str = "user") -> "Acceptance":
        ranks = tuple(float(r) for r in ranks)
        if not ranks:
            raise SpeedplanInputError("ranks= needs at least one probability")
        return cls((ranks[0],), ranks, source, "ranks")

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
        return al

    def tree_al(self, depth, nodes, topk: int | None = None) -> np.ndarray:
        """AL of the best tree with at most `nodes` draft nodes, depth ≤ `depth` and at most
        `topk` children per node (arrays broadcast together), bonus token included."""
        depth, nodes = np.broadcast_arrays(np.asarray(depth, dtype=int), np.asarray(nodes, dtype=int))
        dmax = int(depth.max(initial=0))
        nmax = int(nodes.max(initial=0))
        ranks = self.ranks[:topk] if topk else self.ranks
        table = _sequoia_table(ranks, nmax, dmax)
        return 1.0 + table[np.minimum(nodes, nmax), depth]

    def describe(self) -> str:
        if self.kind == "iid":
            return f"alpha={self.positions[0]:.3g}"
        if self.kind == "positions":
            return "positions=" + ",".join(f"{p:.3g}" for p in self.positions)
        return "ranks=" + ",".join(f"{p:.3g}" for p in self.ranks)


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
    for d in range(1, max_depth + 1):
        below = best[:, d - 1]
        forest = np.zeros(max_nodes + 1)  # forest over ranks ≥ width: empty
        for r in range(width - 1, -1, -1):
            new = forest.copy()
            for n in range(1, max_nodes + 1):
                m = np.arange(1, n + 1)
                candidates = p[r] * (1.0 + below[m - 1]) + forest[n - m]
                new[n] = max(new[n], candidates.max())
            forest = new
        best[:, d] = np.maximum.accumulate(forest)
    return best


# --------------------------------------------------------------------------- parsing ----
def parse_acceptance_options(specs: list[str], mechanisms: tuple[str, ...]) -> dict[str, Acceptance]:
    """Repeated --acceptance values: `MECH:SPEC` applies to one mechanism (e.g.
    `eagle:alpha=0.8`), a bare SPEC to every mechanism not named (key "*")."""
    out: dict[str, Acceptance] = {}
    for spec in specs:
        head, colon, rest = spec.partition(":")
        key = head.strip().lower() if colon and head.strip().lower() in mechanisms else "*"
        value = rest if key != "*" else spec
        if key in out:
            raise SpeedplanInputError(f"--acceptance given twice for {'all mechanisms' if key == '*' else key}")
        out[key] = parse_acceptance(value)
    return out


def parse_acceptance(spec: str) -> Acceptance:
    """`alpha=0.8`, `positions=0.9,0.8,0.7`, `ranks=0.6,0.15,0.05`, or a file: a trace
    (.jsonl, see docs/trace.md) or a JSON object {"alpha": ..} / {"positions": [..]} / {"ranks": [..]}."""
    text = spec.strip()
    key, sep, value = text.partition("=")
    if sep and key.strip() in ("alpha", "positions", "ranks"):
        try:
            numbers = [float(x) for x in value.split(",") if x.strip()]
        except ValueError:
            raise SpeedplanInputError(f"--acceptance {spec!r}: not a list of numbers") from None
        source = f"user: {text}"
        if key.strip() == "alpha":
            if len(numbers) != 1:
                raise SpeedplanInputError(f"--acceptance {spec!r}: alpha takes one number")
            return Acceptance.iid(numbers[0], source)
        return (Acceptance.positional if key.strip() == "positions" else Acceptance.per_rank)(numbers, source)
    path = Path(text)
    if not path.exists():
        raise SpeedplanInputError(
            f"--acceptance {spec!r}: not alpha=, positions=, ranks= or an existing file"
        )
    if path.suffix == ".jsonl":
        return fit_trace(path)
    try:
        obj = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read acceptance file ({e})") from None
    except json.JSONDecodeError as e:
        raise SpeedplanInputError(f"{path}: malformed JSON ({e.msg} at line {e.lineno})") from None
    source = f"file: {path}"
    if isinstance(obj, dict) and "alpha" in obj:
        return Acceptance.iid(float(obj["alpha"]), source)
    if isinstance(obj, dict) and "positions" in obj:
        return Acceptance.positional(obj["positions"], source)
    if isinstance(obj, dict) and "ranks" in obj:
        return Acceptance.per_rank(obj["ranks"], source)
    raise SpeedplanInputError(f"{path}: expected a JSON object with alpha, positions or ranks")


def read_trace(path: Path) -> tuple[dict, list[dict]]:
    """The meta line and the step records of a speedplan.trace/1 file."""
    meta: dict = {}
    steps: list[dict] = []
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read trace ({e})") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise SpeedplanInputError(f"{path}:{i}: not a JSON line") from None
        kind = rec.get("type") if isinstance(rec, dict) else None
        if kind == "meta":
            meta = rec
        elif kind == "step":
            accepted = rec.get("accepted")
            if not isinstance(accepted, list) or any(not isinstance(a, int) or a < 0 for a in accepted):
                raise SpeedplanInputError(f"{path}:{i}: step without a list of non-negative 'accepted' counts")
            steps.append(rec)
    if not steps:
        raise SpeedplanInputError(f"{path}: trace has no step records")
    return meta, steps


def accepted_histogram(path: Path) -> tuple[np.ndarray, dict]:
    """Counts of accepted draft tokens per sequence-step (index = accepted count) and the
    trace's meta line."""
    meta, steps = read_trace(path)
    counts = np.array([a for s in steps for a in s["accepted"]], dtype=int)
    return np.bincount(counts), meta


def fit_positions(histogram: np.ndarray, draft_len: int) -> np.ndarray:
    """Per-position conditional acceptance from an accepted-length histogram:
    p_i = P(accepted ≥ i) / P(accepted ≥ i − 1), for i = 1..draft_len (0 where unseen)."""
    h = np.zeros(max(draft_len + 1, len(histogram)))
    h[: len(histogram)] = histogram
    at_least = h[::-1].cumsum()[::-1]  # at_least[i] = #(accepted >= i)
    p = np.divide(at_least[1 : draft_len + 1], at_least[:draft_len], out=np.zeros(draft_len), where=at_least[:draft_len] > 0)
    return np.clip(p, 0.0, 0.999)


def fit_ranks(steps: list[dict], depth: int, width: int) -> np.ndarray:
    """Per-rank acceptance (Sequoia) from tree traces' `accepted_ranks`: each sequence-step
    offers one chance per depth reached (1..min(accepted + 1, depth)); ranks[r] is the share
    of those chances taken by the rank-(r+1) child."""
    taken = np.zeros(width)
    chances = 0
    for s in steps:
        for a, path in zip(s["accepted"], s.get("accepted_ranks") or [[]] * len(s["accepted"])):
            chances += min(a + 1, depth)
            for r in path:
                if 1 <= r <= width:
                    taken[r - 1] += 1
    ranks = taken / max(chances, 1)
    return np.clip(ranks, 0.0, 0.999)


def fit_trace(path: Path) -> Acceptance:
    """Fit acceptance from a runtime trace (speedplan.trace/1): per-rank for tree traces that
    carry `accepted_ranks`, per-position otherwise."""
    meta, steps = read_trace(path)
    counts = np.array([a for s in steps for a in s["accepted"]], dtype=int)
    draft_len = int(meta.get("draft_len") or counts.max(initial=0))
    if draft_len < 1:
        raise SpeedplanInputError(f"{path}: trace of plain decoding (draft_len 0) has no acceptance to fit")
    source = f"trace: {path} ({len(counts)} sequence-steps, D={draft_len})"
    tree = meta.get("tree")
    if tree and any("accepted_ranks" in s for s in steps):
        ranks = fit_ranks(steps, int(tree.get("depth") or draft_len), int(tree.get("topk") or 8))
        ranks = ranks[: max(1, int(np.nonzero(ranks)[0].max(initial=0)) + 1)]
        if ranks.sum() >= 1.0:
            ranks = ranks * 0.999 / ranks.sum()
        return Acceptance.per_rank(ranks, source)
    return Acceptance.positional(fit_positions(np.bincount(counts), draft_len), source)
