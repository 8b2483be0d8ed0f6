"""Notes `speedplan calibrate` prints on a fit as a whole (docs/engine.md, "`speedplan calibrate`"):
rows priced to one side while a fitted term sits at its limit (`one_sided`), rows far beyond the
others (`outliers`), and a tree's measured acceptance, which `speedplan sweep --acceptance` has no
form for (`tree_acceptance`).

A row's residual is predicted / measured − 1 of its own quantity: + is priced slower for a time
(step_ms, tpot_ms, verify_ms, draft_ms, overhead_ms) and faster for a rate (tokens_per_s, speedup)."""

from __future__ import annotations

import numpy as np

from speedplan.engine.calibrate import Calibration, bound_side
from speedplan.engine.profile import TERMS
from speedplan.plan.mechanisms import TREE_MECHANISMS

RATES = ("tokens_per_s", "speedup")  # quantities that are higher where the engine is faster
# A row is named as a possible outlier where its leave-one-out error (else its |residual|) is above
# both OUTLIER_FACTOR x the median over the rows and OUTLIER_FLOOR: one bench_speculative row 2.5x its
# neighbours moved host_step_us from 0 to 6071 µs and left others 26% off, without a word (2026-12-06).
OUTLIER_FACTOR = 3.0
OUTLIER_FLOOR = 0.15  # a fraction


def time_residual(result: Calibration) -> np.ndarray:
    """Each row's residual as predicted time / measured time − 1 (a fraction): the residual itself
    for a time, measured / predicted − 1 for a rate (a rate priced 10% high is a time ~9% short)."""
    r = np.asarray(result.residual, dtype=float)
    rate = np.array([row["quantity"] in RATES for row in result.rows], dtype=bool)
    return np.where(rate, 1.0 / (1.0 + r) - 1.0, r)


def one_sided(result: Calibration, margin: float = 0.05) -> str | None:
    """A note where the rows are priced slower (or faster) than measured by more than `margin`
    (a fraction of their time) at the median while a fitted term sits at its limit: the terms
    tried cannot go further, and a base value not tried (the launches a build of one's own may not
    make) holds the rows away. vLLM rows 14-16% slower than priced with host work at 0 said nothing
    of layer_launches, whose base value (1.45 ms a step on a Llama-3.1-8B) was never tried
    (2026-12-05). A tokens_per_s or speedup row priced above its measurement is priced faster."""
    case = _one_sided_case(result, margin)
    if case is None:
        return None
    which, mask, at_limit, untried = case
    t = time_residual(result)[mask]
    slow = float(np.median(t)) > 0
    rates = "; a tokens_per_s or speedup row's time is measured / predicted" if any(
        row["quantity"] in RATES for row in result.rows) else ""
    return (f"{which} are priced {'slower' if slow else 'faster'} than measured ({np.median(t):+.1%} in time at the "
            f"median, {np.mean(t > 0 if slow else t < 0):.0%} of them{rates}) with {', '.join(at_limit)} at "
            f"{'its' if len(at_limit) == 1 else 'their'} limit: the terms tried cannot "
            f"go further; {', '.join(untried)} kept the base's value{'s' if len(untried) > 1 else ''} "
            f"(--fit {','.join([*result.fitted, *untried])} tries {'them' if len(untried) > 1 else 'it'} too)")


def _one_sided_case(result: Calibration, margin: float = 0.05) -> tuple[str, np.ndarray, list, list] | None:
    """What `one_sided` speaks of: ("the rows" or a leaning kind's name, the mask of those rows, the
    fitted terms at their limit, the launch terms not tried); None where it has nothing to say."""
    t, p = time_residual(result), result.profile
    at_limit = [term for term in result.fitted if bound_side(term, p.terms[term].value) is not None]
    untried = [term for term in result.not_tried if term in TERMS and "never fitted" not in result.not_tried[term]
               and term.endswith("launches")]  # launch_us times them: one of the two is enough
    if not len(t) or not at_limit or not untried:
        return None
    if abs(float(np.median(t))) > margin:
        return "the rows", np.ones(len(t), dtype=bool), at_limit, untried
    group = _leaning_group(result, margin)
    return None if group is None else (*group, at_limit, untried)


def _leaning_group(result: Calibration, margin: float) -> tuple[str, np.ndarray] | None:
    """("the plain rows" or "the speculative rows", their mask) where every row of that kind (2
    or more) is priced to one side by more than `margin` in time while the other kind fits: four
    plain TPOTs 15-22% slower than priced beside six EAGLE-3 rows within 3% had a median over all
    rows of 2.4%, and were called outliers where the base's launches held them away (2026-12-06).
    None where no kind leans so."""
    t = time_residual(result)
    plain = np.array([row["mechanism"] == "none" for row in result.rows], dtype=bool)
    for label, mask in (("the plain rows", plain), ("the speculative rows", ~plain)):
        others_fit = (~mask).any() and abs(float(np.median(t[~mask]))) <= margin
        if mask.sum() >= 2 and others_fit and (np.all(t[mask] > margin) or np.all(t[mask] < -margin)):
            return label, mask
    return None


def outliers(result: Calibration) -> str | None:
    """A note naming the rows (of 3 or more) whose leave-one-out error (where the fit has one; else
    their |residual|) is above OUTLIER_FACTOR x its median over the rows and above OUTLIER_FLOOR:
    a disturbed or mislabelled run pulls every fitted term toward it, and the others off. Held out,
    such a row is predicted by the others alone; its own residual is shrunk by the pull, and its
    neighbours' swollen by it, so leave-one-out tells it from them."""
    r = np.abs(np.asarray(result.residual, dtype=float))
    loo = np.asarray(result.loo_error, dtype=float)
    error, kind = (loo, "leave-one-out error") if len(loo) and np.isfinite(loo).all() else (r, "|residual|")
    if len(r) < 3:
        return None
    bound = np.full(len(r), max(OUTLIER_FACTOR * float(np.median(error)), OUTLIER_FLOOR))
    case = _one_sided_case(result)
    group = case[:2] if case is not None and not case[1].all() else None  # a kind `one_sided` names, not all rows
    if group is not None:  # rows of one kind leaning together, which `one_sided` names: among them only a row
        bound[group[1]] = max(OUTLIER_FACTOR * float(np.median(error[group[1]])), OUTLIER_FLOOR)  # far past their lean
    idx = np.flatnonzero(error > bound)
    if not len(idx) or len(idx) * 2 > len(r):  # most rows far off is a poor fit, not outliers (the |residual| line)
        return None
    named = "; ".join(f"{row['where']} ({row['mechanism']} B={row['batch']} D={row['draft_len']}, {row['quantity']}) "
                      f"residual {row['residual']:+.1%}" + ("" if row["loo_error"] is None else
                                                            f", leave-one-out {row['loo_error']:.1%}")
                      for row in (result.rows[i] for i in idx[:4])) + ("; ..." if len(idx) > 4 else "")
    one = len(idx) == 1
    it, its = ("it", "its") if one else ("them", "their")
    return (f"{'this row stands' if one else 'these rows stand'} far from the others: {named}, where the rows' median "
            f"{kind} is {np.median(error):.1%}" + (f" ({group[0]}' {np.median(error[group[1]]):.1%}, which lean together)"
                                                 if group is not None else "")
            + f" (named above {OUTLIER_FACTOR:g}x the median{' of its kind' if group is not None else ''} and "
            f"{OUTLIER_FLOOR:.0%}); "
            f"{'it may be an outlier' if one else 'they may be outliers'} (a disturbed or mislabelled run), which "
            f"pull{'s' * one} every fitted term toward {it}: check {it}, or leave {it} out (delete {its} line{'s' * (not one)}"
            f", or start a CSV's with #; or leave {its} file{'s' * (not one)} off --measurements) and calibrate again")


def tree_acceptance(result: Calibration, args: list[str]) -> list[str]:
    """Notes for the sweep command `args` (`sweep_arguments`): the acceptance length each tree the
    runs measured reached, at its depth and nodes, which `speedplan sweep --acceptance` has no form
    for (al=A@D is a chain's): the sweep derives the tree's from its head's chain acceptance in
    `args`, else from the published one, so its tree AL may differ from the measured one."""
    from speedplan.engine.calibration_temperature import sweep_temperature

    temperature = sweep_temperature(result.rows)
    trees: dict[tuple, list[float]] = {}
    for row in result.rows:
        head = row["mechanism"].split(":")[0]
        if head in TREE_MECHANISMS and float(row.get("temperature") or 0.0) == temperature:
            key = (row["mechanism"], head, row["draft_len"], row.get("tree_nodes"))
            trees.setdefault(key, []).append(float(row["acceptance_length"]))
    given = {v.split(":")[0]: v for k, v in zip(args, args[1:]) if k == "--acceptance" and ":al=" in v}
    notes = []
    for (mech, head, depth, nodes), als in sorted(trees.items(), key=lambda kv: str(kv[0])):
        chain = given.get(head.removesuffix("-tree"))
        source = (f"from {chain}, the chain's (its i.i.d. rate; the lower ranks assumed geometric)" if chain else "from the published acceptance")
        notes.append(f"the runs measured {mech} at acceptance length {np.mean(als):.3g} (depth {depth}"
                     + (f", {nodes} nodes" if nodes else "") + f"); speedplan sweep --acceptance has no form for a "
                     f"tree's acceptance length (al=A@D is a chain's), so the sweep derives the tree's {source}: its "
                     f"tree AL may differ from {np.mean(als):.3g} (ranks= or a runtime trace sets a tree's)")
    return notes
