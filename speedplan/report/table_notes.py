"""Notes under the terminal's first table that explain a shape a user would not expect."""

from __future__ import annotations

import pandas as pd

RISE = 0.05  # a best speedup this much above B = 1's (relative) is called a rise


def moe_rise_line(meta: dict, best: pd.DataFrame) -> str | None:
    """On a mixture-of-experts model whose best speedup rises with the batch (dense models' fall),
    the reason: a plain step of B tokens reads the experts its tokens route to, about
    min(E, B·k) of E, while verifying B·(1+D) tokens reads up to (1+D) times as many; at B = 1
    that multiplies the expert bytes a step reads, and from B ≈ E/k a plain step reads most of
    them anyway, so the extra verified tokens cost little until compute binds. None otherwise
    (a dense model, no rise, or the table at several contexts)."""
    experts = str((meta.get("model") or {}).get("experts") or "").split(" ")[0]
    if "/" not in experts or best.empty or best["context"].nunique() != 1:
        return None
    k, total = (int(x) for x in experts.split("/"))
    rows = best[best["mechanism"] != "none"].sort_values("batch")
    first = best.sort_values("batch").iloc[0]
    if rows.empty or int(first["batch"]) != 1:
        return None
    top = rows.loc[rows["speedup"].idxmax()]
    if int(top["batch"]) == 1 or top["speedup"] < (1 + RISE) * float(first["speedup"]):
        return None
    before = best[(best["batch"] > 1) & (best["batch"] < int(top["batch"]))]
    low = before.loc[before["speedup"].idxmin()] if len(before) else None
    dip = (f" (through {low['speedup']:.2f}x at B={int(low['batch'])})"  # not a steady rise: said, not hidden
           if low is not None and low["speedup"] < (1 - RISE) * float(first["speedup"]) else "")
    return (f"note: the speedup rises from {float(first['speedup']):.2f}x at B=1 to {top['speedup']:.2f}x at "
            f"B={int(top['batch'])}{dip}: a mixture of experts ({k} of {total} per token) reads the experts its tokens "
            f"route to, and verifying 1+D tokens per sequence reads up to 1+D times as many as a plain step at "
            f"small B; from B ≈ {max(total // k, 1)} a plain step reads most of them already, so verifying costs "
            "less there until compute binds")


def cpu_engine_note(meta: dict) -> str:
    """On a CPU, where a serving engine's profile priced the steps: that its terms describe the
    engine on a GPU (CUDA graphs, kernel launches) and speedplan's own runtime, validated on
    CPUs, has a profile of its own; on a GPU, where the runtime's profile priced them: that its
    terms are eager PyTorch's on a CPU; "" elsewhere."""
    from speedplan.engine.profile import SHIPPED

    runtime = str(meta.get("engine_family") or "").startswith("speedplan")
    shipped = str(meta.get("engine_source") or "").endswith(SHIPPED)  # not a copy validate or calibrate fitted
    if runtime and shipped and meta.get("platform") not in (None, "cpu"):  # its shipped terms are a CPU's
        return ("; its terms describe speedplan's own runtime, eager PyTorch without CUDA graphs on a CPU (speedplan "
                "validate fits them there): not a serving engine on this GPU (--engine vllm, sglang or trtllm price those)")
    if meta.get("platform") != "cpu" or runtime:
        return ""
    return ("; on a CPU its terms describe the engine on a GPU (CUDA graphs, kernel launches), not measured here: "
            "speedplan's own runtime, validated on CPUs, is --engine speedplan-runtime")


def cpu_plans_note(meta: dict, plans: dict) -> str:
    """On a CPU, the plans of serving engines that run there: each is priced with that engine's
    shipped profile, whose terms describe it on a GPU; "" elsewhere or without such a plan."""
    from speedplan.engine.profile import preset_names

    shipped = set(preset_names()) - {"speedplan-runtime"}
    names = [n for n, p in plans.items() if len(p.rows) and str(p.engine_profile).split(":")[0] in shipped]
    if meta.get("platform") != "cpu" or not names:
        return ""
    return (f"note: on a CPU the {_listed(names)} plan{'s' * (len(names) > 1)} {'are' if len(names) > 1 else 'is'} "
            "priced with the shipped profile of each engine, whose terms describe it on a GPU (CUDA graphs, kernel "
            "launches): indicative, not measured here (speedplan calibrate with your own runs fits them)")


def placeholder_heads_note(meta: dict, plans: dict) -> str:
    """Where an engine's plan loads an EAGLE or EAGLE-3 head speedplan knows no published one of
    for the model on that engine (`serving.plan.EAGLE_HEADS`, `EAGLE3_HEADS`): its launch file holds
    a placeholder path, and the acceptance priced is the one the acceptance line names, not a
    head of yours; "" elsewhere."""
    from speedplan.serving.plan import EAGLE3_HEADS, EAGLE_HEADS

    model = str((meta.get("model") or {}).get("model", "")).strip().lower()
    missing = []
    for name, p in plans.items():
        family = p.mechanism.split(":")[0]
        if not len(p.rows) or family not in ("eagle", "eagle-tree", "eagle3", "eagle3-tree"):
            continue
        heads = EAGLE_HEADS if family in ("eagle", "eagle-tree") else EAGLE3_HEADS
        if model not in heads.get(name, {}):
            missing.append(name)
    if not missing:
        return ""
    return (f"note: speedplan knows no published head of {model} for {_listed(missing)}: the launch file"
            f"{'s hold' if len(missing) > 1 else ' holds'} a placeholder (<path-to-...-head-for-...>) to replace with "
            "yours, and the speedups assume the acceptance named below, not your head's (measure it: --acceptance)")


def _listed(names: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def unplanned_profile_note(meta: dict, plans: dict) -> str:
    """Where the sweep's engine profile describes none of the planned engines (speedplan-runtime,
    or a profile of an engine of one's own): that it prices the first table only; "" elsewhere."""
    name = meta.get("engine", "?")
    if not plans or name in {p.engine_profile.split(":")[0] for p in plans.values()}:
        return ""
    return (f"note: engine profile {name} describes {meta.get('engine_family', '?')!r}, none of the planned engines: "
            "it prices the first table; each plan is priced with that engine's shipped profile")


def plan_notes(result, plans: dict) -> list[str]:
    """The notes under the engine plans, in the terminal and in report.html alike: where the table
    and a plan differ (setting, or sequences running), CPU-priced serving engines, placeholder heads,
    a sweep profile that describes none of the planned engines."""
    from speedplan.report.plan_lines import capacity_note, table_plan_note

    return [n for n in (table_plan_note(result, plans), capacity_note(result, plans), cpu_plans_note(result.meta, plans),
                        placeholder_heads_note(result.meta, plans), unplanned_profile_note(result.meta, plans),
                        fitted_acceptance_note(result.meta)) if n]


def fitted_acceptance_note(meta: dict) -> str | None:
    """A note where the sweep's engine profile was calibrated with a mechanism's acceptance fitted
    alongside its terms (`speedplan calibrate --fit-acceptance`) and the sweep prices that mechanism
    at another acceptance than the user's: the terms absorbed what that acceptance did not, so the
    two price the measured throughput only together. None otherwise."""
    fitted = meta.get("engine_acceptance_fitted") or {}
    sources = meta.get("acceptance") or {}
    off = [m for m in fitted if m in sources and not str(sources[m]).startswith("user:")]
    if not off:
        return None
    from speedplan.engine.calibration_acceptance import sweep_acceptance

    given = " ".join(f"--acceptance {sweep_acceptance(m, (fitted[m]['p_1'], fitted[m]['decay']))}" for m in off)
    return (f"note: engine profile {meta.get('engine')} was calibrated with the acceptance of {', '.join(off)} fitted "
            f"with its terms (--fit-acceptance), and this sweep prices {'them' if len(off) > 1 else 'it'} at "
            f"another ({'; '.join(str(sources[m]) for m in off)}): the two price the measured throughput together; "
            f"add {given} to plan as calibrated")


def cheaper_than_plain_line(best: pd.DataFrame) -> str | None:
    """A note where the table's speculative pick is priced faster a step than plain decoding at its
    batch, per sequence the step runs (so its speedup exceeds its AL): verifying more tokens cannot cost less,
    but measured kernel tables are not monotone in M (B200's fp8 GEMM N=4096 K=7168: 26.8 µs at
    M = 1, 12.8 µs from M = 3; `speedplan profile check` counts such points). The rows are priced as
    measured; the note says to read those speedups as an upper bound. None where no row is so."""
    if best is None or best.empty or "speedup" not in best:
        return None
    # speedup > AL: a step priced cheaper per sequence it runs than plain decoding's (a step that runs
    # fewer sequences than plain decoding, under an engine's cap, is not cheaper for being shorter)
    odd = best[(best["mechanism"] != "none") & (best["speedup"] > 1.001 * best["acceptance_length"])]
    if odd.empty:
        return None
    from speedplan.report.summary import batch_ranges

    return (f"note: at B = {batch_ranges(sorted(odd['batch'].unique()))} the speculative step is priced faster than "
            "plain decoding's (the profile's measured kernel times fall as the tokens a step grow there), so its "
            "speedup exceeds its AL: read it as an upper bound (speedplan profile check names the GEMM points)")


def plain_dip_line(frame: pd.DataFrame) -> str | None:
    """A note where plain decoding is priced slower a step at a batch size than at a larger one
    (by over 5%, at one context): more sequences cannot take less time, but a measured kernel table
    can be slower at few rows than at more (B200's fp8 GEMMs at M = 1: 335 of 483 shapes at least
    1.5x their M = 2 time in the shipped profile). Every speedup at such a batch size divides by
    that slow plain step, so it is inflated; the note names the first such batch size per context.
    None where plain step times do not fall with B."""
    if frame is None or frame.empty or "t_plain_s" not in frame:
        return None
    dips = []
    for context, rows in frame.groupby("context"):
        plain = rows.groupby("batch")["t_plain_s"].first().sort_index()
        after = plain[::-1].cummin()[::-1].shift(-1)  # the fastest plain step at any larger batch size
        slow = plain[plain > 1.05 * after]
        if len(slow):
            b = slow.index[0]
            faster = plain[plain.index > b].idxmin()
            dips.append(f"B = {b} ({1e3 * plain[b]:.2f} ms) than at B = {faster} ({1e3 * plain[faster]:.2f} ms)"
                        + (f" at context {context}" if frame["context"].nunique() > 1 else ""))
    if not dips:
        return None
    return ("note: plain decoding is priced slower a step at " + "; at ".join(dips) + ": the profile's measured "
            "kernels are slower at fewer rows there (speedplan profile check names such GEMM points), so every "
            "speedup at that batch size divides by a slow plain step: read it as an upper bound")


def grouped(notes: dict[str, str] | None) -> list[tuple[str, str]]:
    """[(names, why)]: the mechanisms that share one note on one line ("eagle3, eagle3-tree"), in order."""
    by_why: dict[str, list[str]] = {}
    for name, why in (notes or {}).items():
        by_why.setdefault(why, []).append(name)
    return [(", ".join(names), why) for why, names in by_why.items()]
