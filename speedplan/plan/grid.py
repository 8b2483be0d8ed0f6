"""The grid of points each mechanism contributes to a sweep: (draft length D, tree size N,
batch B, context) arrays, and what a sweep refuses or skips when a mechanism gets none.

A chain verifies D + 1 tokens (N = D + 1, unused). A depth-D tree keeping the top k per level
verifies N draft nodes with D ≤ N ≤ k·D (the engines keep a top-k frontier per level), so a tree
swept at tree sizes outside that band for every D has no point to price.
"""

from __future__ import annotations

import numpy as np

from speedplan.errors import SpeedplanInputError


def mechanism_grid(mech, batches, draft_lens, contexts, tree_nodes) -> dict[str, np.ndarray]:
    """The (draft_len, nodes, batch, context) points one mechanism contributes (mech None:
    plain decoding, D = 0); "nodes" is a tree's N draft nodes (D + 1 for a chain, where it is
    unused)."""
    if mech is None:
        pairs = np.array([[0, 1]])
    elif mech.is_tree:
        pairs = np.array([(d, n) for d in draft_lens if d >= 1 for n in tree_nodes if d <= n <= mech.topk * d],
                         dtype=int).reshape(-1, 2)
    else:
        pairs = np.array([(d, d + 1) for d in draft_lens if d >= 1], dtype=int).reshape(-1, 2)
    bb, cc, pp = np.meshgrid(np.asarray(batches), np.asarray(contexts), np.arange(len(pairs)), indexing="ij")
    pp = pp.ravel()
    return {
        "draft_len": pairs[pp, 0] if len(pairs) else np.zeros(0, int),
        "nodes": pairs[pp, 1] if len(pairs) else np.zeros(0, int),
        "batch": bb.ravel(),
        "context": cc.ravel(),
    }


def pointless(mech, draft_lens, tree_nodes) -> str:
    """Why tree `mech` has no point to price on these axes ('' when it has some, or is a chain:
    draft_lens [0] is a plain-decoding sweep)."""
    if not mech.is_tree or max(draft_lens) == 0 or any(d <= n <= mech.topk * d for d in draft_lens if d >= 1
                                                           for n in tree_nodes):
        return ""
    return (f"a depth-D tree keeping the top {mech.topk} per level verifies D to {mech.topk}·D nodes, and no swept "
            f"draft length ({','.join(str(d) for d in draft_lens if d >= 1)}) takes any swept tree size "
            f"({','.join(map(str, tree_nodes))})")


def drop_pointless(mechs, draft_lens, tree_nodes, named: bool, skipped: dict[str, str]) -> list:
    """The mechanisms that have points to price. One named by the caller without any is refused
    (it would vanish from every table while the plans said 'off'); one swept by default is skipped
    with the reason (`meta["skipped"]`)."""
    kept = []
    for mech in mechs:
        why = pointless(mech, draft_lens, tree_nodes)
        if not why:
            kept.append(mech)
        elif named:
            raise SpeedplanInputError(f"mechanism {mech.label}: nothing to price: {why}; give other --draft-len or "
                                      "--tree-nodes values")
        else:
            skipped[mech.label] = f"nothing to price: {why}"
    return kept
