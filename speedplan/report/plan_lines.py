"""The terminal's lines for the engine plans of a sweep: one line per engine (mechanism, how it
sets D, D per batch, worst loss) and a note where the first table and a plan name different draft
lengths for the same mechanism. `speedplan.report.summary.render_summary` prints them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from speedplan.plan.pick import TIE_TOLERANCE

if TYPE_CHECKING:
    from speedplan.plan.sweep import SweepResult


def pick_rows(rows: list, max_rows: int) -> list:
    """All rows, or max_rows (at least 2) evenly spaced ones keeping the first and the last."""
    if len(rows) <= max_rows:
        return rows
    max_rows = max(max_rows, 2)
    step = (len(rows) - 1) / (max_rows - 1)
    return [rows[round(i * step)] for i in range(max_rows)]


def setting_text(mechanism: str, draft_len: int, verify_tokens: int) -> str:
    """A setting as the plan lines name it: "plain decoding", "eagle3 D=5", or for a tree
    (more verified tokens per sequence than a chain's D + 1) "eagle3-tree D=3, 8 nodes"."""
    if mechanism == "none":
        return "plain decoding"
    tree = int(verify_tokens) > int(draft_len) + 1
    return f"{mechanism} D={int(draft_len)}" + (f", {int(verify_tokens) - 1} nodes" if tree else "")


def profile_reach(profile_name: str, batches) -> str:
    """"; B = 256–1024 beyond its profile's fitted rows (B = 1–64): extrapolated" where a plan covers
    batch sizes outside the rows its engine profile was fitted to, "; its profile fits no rows ..."
    where it was fitted to none; "" otherwise, or for a profile not found by name. The SGLang plan
    at B = 1024 stood on a per-sequence host term fitted up to B = 64 without a word (2026-12-05)."""
    from speedplan.engine.profile import get_engine
    from speedplan.errors import SpeedplanInputError
    from speedplan.report.summary import batch_ranges

    try:
        span = get_engine(profile_name).fitted_batches()
    except SpeedplanInputError:
        return ""
    if span is None:
        return "; its profile fits no rows (its terms from documents and stated assumptions)"
    beyond = [b for b in batches if b < span[0] or b > span[1]]
    fitted = f"{span[0]:g}" + (f"–{span[1]:g}" if span[1] > span[0] else "")
    return (f"; B = {batch_ranges(beyond)} beyond its profile's fitted rows (B = {fitted}): extrapolated"
            if beyond else "")


def engine_plan_lines(plans: dict, max_batches: int = 12, own: str | None = None) -> list[str]:
    """One line per engine: its mechanism, how it sets D, D at each planned batch (at most
    `max_batches` of them, evenly spaced, the whole schedule being in schedule.csv), worst loss,
    and how far its engine profile's fitted rows reach (`profile_reach`) unless that profile is
    `own`, the sweep's, which the engine line describes."""
    rows = [p.rows for p in plans.values() if len(p.rows)]
    if not rows:
        return ["plan per engine: nothing fits in memory"]
    batches = sorted(set().union(*(r["batch"].unique() for r in rows)))  # an engine may hold fewer (its memory rule)
    shown = pick_rows(batches, max_batches)
    some = f" of {len(batches)}; every one in schedule.csv" if len(shown) < len(batches) else ""
    lines = [f"plan per engine (D at B = {', '.join(map(str, shown))}{some}; each priced with its own engine "
             "profile; loss against the best that engine reaches at each B):"]
    width = max(len(p.mechanism) for p in plans.values())
    several_contexts = len(set().union(*(r["context"].unique() for r in rows))) > 1
    cells = set().union(*(set(zip(r["batch"], r["context"])) for r in rows))
    for name, p in plans.items():
        if not len(p.rows):
            lines.append(f"  {name:7s} " + (p.how if p.not_run else
                                             "not planned: its memory rule holds no sequence at any planned batch size"))
            continue
        d_at = p.rows.groupby("batch")["draft_len"].first()
        weighted = p.rows[p.rows["weight"] > 0] if "weight" in p.rows and (p.rows["weight"] > 0).any() else p.rows
        some_weighed = len(weighted) < len(p.rows)  # --batch-weights leaves batch sizes out: their loss counts for nothing
        at = weighted.sort_values(["loss_vs_best", "batch"], ascending=[False, True]).iloc[0]  # the worst, smallest B
        worst, loss = at.batch, at.loss_vs_best
        where = f"B={worst}" + (f", context {at.context}" if several_contexts else "")
        best = setting_text(at.best_mechanism, at.best_draft_len, at.best_verify_tokens)
        if loss >= 0.9995:  # the plan's own setting does not fit there
            setting = (setting_text(p.mechanism, at.draft_len, at.verify_tokens) if at.draft_len else
                       f"D = 0 with the {p.mechanism} drafter loaded")  # D = 0 does not unload it
            tail = f"worst loss 100% ({where}: {setting} does not fit in memory; {best} does)"
        elif loss > 0.0005:
            tail = (f"worst loss {100 * loss:.1f}%" + (" over the batch sizes --batch-weights counts" if some_weighed else "")
                    + f" ({where}: {best} reaches {at.best_speedup:.2f}x)")
        else:
            tail = "worst loss 0.0%"
        short = p.rows[(p.rows["runs_at_batch"] > 0) & (p.rows["runs_at_batch"] < p.rows["batch"])]
        if len(short):  # the launch, its drafter loaded, holds fewer sequences than offered
            starts = short.groupby("context")["batch"].min().sort_values()  # per context: the first B held short
            runs_at = sorted({int(x) for x in short["runs_at_batch"]})
            held = (f"it runs {runs_at[0]}, the most that fit" if len(runs_at) == 1 else
                    "it runs the most its setting holds" + (" at its context" if several_contexts else "")
                    + f" ({', '.join(map(str, runs_at))})")
            where_short = (", ".join(f"B={b} at context {c}" for c, b in starts.items()) if several_contexts
                           else f"B={starts.iloc[0]}")
            tail += f"; from {where_short} its launch does not hold every sequence: {held}, priced so (the rest wait)"
        capped = p.rows[p.running < p.rows["runs_at_batch"]]
        if len(capped):  # the engine's cap on a speculative launch's running requests (SGLang: 48 by default)
            tail += (f"; from B={capped['batch'].min()} a step runs {p.spec_max_running:g} requests, the engine's cap "
                     "with speculative decoding (spec_max_running), priced so (the rest wait)")
            slow = sorted({int(b) for b in capped.loc[capped["speedup"] < 0.9995, "batch"]})
            if slow and p.cap_note:  # the launch file's note says why and what to do
                tail += (f"; at B = {', '.join(map(str, slow))} that cap makes it slower than plain decoding: set "
                         "--max-running-requests to run more (not priced) or serve those loads without speculation")
        tail += _slower_than_plain(p, capped)
        ds = " ".join(str(int(d_at[b])) if b in d_at.index else "-" for b in shown)
        unheld = sorted(cells - set(zip(p.rows["batch"], p.rows["context"])))
        if unheld:  # cells the sweep's profile serves where this engine's memory rule holds no sequence
            tail += ("; its memory rule holds no sequence at " + ", ".join(
                f"B={b}" + (f" context {c}" if several_contexts else "") for b, c in unheld) + " (not planned there)")
        ds += f" ({p.tree_nodes} nodes)" if p.tree_nodes else ""  # a tree plan's size
        profile = p.engine_profile.split(":")[0]
        tail += profile_reach(profile, sorted(int(b) for b in p.rows["batch"].unique())) if profile != own else ""
        lines.append(f"  {name:7s} {p.mechanism:{width}s}  {p.mode:9s} D {ds}  {tail}"
                     + (f"  [engine profile {profile}]" if profile != name else ""))
    return lines


def _slower_than_plain(p, capped) -> str:
    """"; at B = 1 it is slower than plain decoding (0.80x): ..." where the plan drafts and its speedup is
    below 1 for a reason other than the engine's cap (said above): plans had set D > 0 at 0.74x without a word."""
    said = capped.index if p.cap_note else []  # the cap's own note covers those
    rows = p.rows[(p.rows["draft_len"] > 0) & (p.rows["speedup"] < 0.9995) & ~p.rows.index.isin(said)]
    if p.mechanism == "none" or rows.empty:
        return ""
    at = rows.sort_values("speedup").iloc[0]
    why = ("its launch holds fewer sequences with the drafter loaded" if at.runs_at_batch < at.batch
           else "one setting serves every batch size and speculation cannot be turned off for some" if p.mode == "fixed"
           else "its schedule keeps drafting there (turning it off and on again costs more over the weighted batches)")
    several = p.rows["context"].nunique() > 1  # say at which context: at another the same D may gain
    where = "; ".join(f"B = {', '.join(map(str, sorted({int(b) for b in group['batch']})))}"
                      + (f" at context {int(c)}" if several else "") for c, group in rows.groupby("context"))
    return (f"; at {where} it is slower than plain decoding "
            f"({at.speedup:.2f}x at B={int(at.batch)}" + (f", context {int(at.context)}" if several else "") + f"): {why}")


def table_plan_note(result: "SweepResult", plans: dict) -> str | None:
    """A note where the first table (`SweepResult.best`) and the plan of the engine whose profile
    priced it take the same mechanism at a batch size with another setting (D, or a tree's nodes)
    whose speedups are within `TIE_TOLERANCE` of each other: the table takes the fewest verified
    tokens (a chain's shortest draft) within that tolerance of the best tokens/s/GPU, a plan its
    engine's best setting (or its schedule's). None where they agree; a plan held further off by
    what its engine can run (a fixed tree) is left to its line's worst loss."""
    table_profile = result.meta.get("engine")
    best = result.best[["batch", "context", "mechanism", "draft_len", "verify_tokens", "speedup"]]
    for name, p in plans.items():
        if not len(p.rows) or p.engine_profile.split(":")[0] != table_profile:
            continue
        both = p.rows.merge(best, on=["batch", "context"], suffixes=("", "_table"))
        other = (both["draft_len_table"] != both["draft_len"]) | (both["verify_tokens_table"] != both["verify_tokens"])
        tie = (both["speedup"] - both["speedup_table"]).abs() <= TIE_TOLERANCE * both[["speedup", "speedup_table"]].max(axis=1)
        differ = both[(both["mechanism_table"] == p.mechanism) & other & tie]
        if differ.empty:
            continue
        several_contexts = both["context"].nunique() > 1
        cut = len(p.mechanism) + 1  # "eagle3 D=6" -> "D=6"
        where = _some([f"B = {r.batch}" + (f", context {r.context}" if several_contexts else "")
                       + f": {setting_text(p.mechanism, r.draft_len_table, r.verify_tokens_table)[cut:]} "
                       f"{r.speedup_table:.2f}x and {setting_text(p.mechanism, r.draft_len, r.verify_tokens)[cut:]} "
                       f"{r.speedup:.2f}x" for r in differ.sort_values(["batch", "context"]).itertuples()])
        # the table's rule (`pick.best_per_batch`): the fewest verified tokens within the tolerance, then the
        # fastest; for a chain that is the shortest draft, for a tree the depth can be the longer of two
        tree = ((differ["verify_tokens"] > differ["draft_len"] + 1)
                | (differ["verify_tokens_table"] > differ["draft_len_table"] + 1)).any()
        rule = "the setting that verifies the fewest tokens (of equals, the fastest)" if tree else "the shortest draft"
        return (f"note: the table and the {name} plan take {p.mechanism} with different settings ({where}): the table "
                f"takes {rule} within {100 * TIE_TOLERANCE:g}% of the most tokens/s/GPU, the plan its "
                "engine's best or its schedule's")
    return None


def capacity_note(result: "SweepResult", plans: dict) -> str | None:
    """A note where the first table shows plain decoding at a batch size (no speculative setting
    holds every sequence's KV cache there, and the table prices every sequence running) while
    the plan of the engine whose profile priced it speculates there with fewer sequences
    running, the rest waiting (`EnginePlan.running`, the engine's capacity). None elsewhere."""
    table_profile = result.meta.get("engine")
    best = result.best[["batch", "context", "mechanism"]]
    for name, p in plans.items():
        if not len(p.rows) or p.engine_profile.split(":")[0] != table_profile:
            continue
        both = p.rows.merge(best, on=["batch", "context"], suffixes=("", "_table"))
        cut = both[(both["mechanism_table"] == "none") & (both["mechanism"] != "none")
                   & (both["runs_at_batch"] < both["batch"])]
        if cut.empty:
            continue
        several_contexts = both["context"].nunique() > 1
        where = _some([f"B = {r.batch}" + (f", context {r.context}" if several_contexts else "")
                       + f": {r.runs_at_batch} running, {r.speedup:.2f}x" for r in cut.itertuples()])
        return (f"note: where the table says off, no speculative setting holds every sequence's KV cache, and the "
                f"table runs them all; the {name} plan speculates with fewer running, the rest waiting ({where}, "
                "against plain decoding of every sequence)")
    return None


def _some(items: list[str], most: int = 6) -> str:
    """At most `most` of `items`, '; '-joined, then how many more (schedule.csv has every batch size)."""
    more = f"; and {len(items) - most} more batch sizes (schedule.csv)" if len(items) > most else ""
    return "; ".join(items[:most]) + more
