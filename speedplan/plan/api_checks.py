"""What notebook callers pass to the library's entry points, checked on the way in: a wrong
type, or plans of another sweep, is the one-line SpeedplanInputError the CLI would print, not an
AttributeError deep inside (or a report of one model carrying another's plan)."""

from __future__ import annotations

from speedplan.errors import SpeedplanInputError


def sweep_result(result, where: str):
    """`result` when it is the SweepResult `speedplan.sweep` returns."""
    from speedplan.plan.sweep import SweepResult

    if not isinstance(result, SweepResult):
        raise SpeedplanInputError(f"{where}: expected the SweepResult speedplan.sweep returns, "
                                  f"got {type(result).__name__}")
    import pandas as pd

    if not (isinstance(result.frame, pd.DataFrame) and isinstance(result.pareto, pd.DataFrame)
            and isinstance(result.best, pd.DataFrame) and isinstance(result.meta, dict)):
        raise SpeedplanInputError(f"{where}: a SweepResult without its tables (frame, pareto and best are "
                                  "DataFrames, meta a dict, as speedplan.sweep returns them)")
    from speedplan.plan.pricing import FRAME_COLUMNS

    missing = [c for c in FRAME_COLUMNS if c not in result.frame.columns]
    if missing:  # rows may be filtered out, not columns: each is read somewhere (a KeyError deep inside)
        raise SpeedplanInputError(f"{where}: the SweepResult's frame has no column {missing[0]!r} (filter its rows "
                                  "if you like, but keep the columns speedplan.sweep gave it)")
    if not isinstance(result.meta.get("model"), dict) or "tp" not in result.meta:
        raise SpeedplanInputError(f"{where}: the SweepResult's meta lacks 'model' or 'tp' (keep the meta "
                                  "speedplan.sweep gave it)")
    frame = result.frame
    if len(frame) and not (frame["mechanism"] == "none").any():  # every plan said "nothing fits in memory"
        raise SpeedplanInputError(f"{where}: the SweepResult's frame holds no plain-decoding row (mechanism 'none'); "
                                  "every speedup and plan is measured against one: keep them when filtering its rows")
    if result.tables_of is not result.frame:  # rows filtered since: frontier, best and SLO pick follow them
        result.read_tables()
    return result


def plain_fits(result, where: str) -> None:
    """Refuse, with the CLI's line, a sweep in which plain decoding (every speedup's baseline) fits at
    no swept batch size and context: its engine plans are empty and no report can be written of it
    (the CLI refuses such a sweep before it writes anything; `write_outputs` does the same)."""
    frame = result.frame
    plain = frame[frame["mechanism"] == "none"]
    if plain["fits_memory"].astype(bool).any():
        return
    if not plain.empty:
        from speedplan.plan.shortfall import memory_shortfall

        shortfall = memory_shortfall(result)
        if shortfall:
            raise SpeedplanInputError(f"{where}: {shortfall}")
    raise SpeedplanInputError(f"{where}: the SweepResult's frame holds no plain-decoding row (mechanism 'none') that "
                              f"fits in memory ({len(frame)} rows, {len(plain)} plain); every speedup and plan is "
                              "measured against one: keep them when filtering its rows")


def sweep_key(result) -> str:
    """What a plan records of the sweep it was planned on: model, hardware, TP, when it ran and
    the sweep's own id (two sweeps in one second differ by it)."""
    meta = result.meta
    return (f"{(meta.get('model') or {}).get('model', '?')} on {meta.get('hardware', '?')}, TP={meta.get('tp', 1)}, "
            f"swept {meta.get('created', '?')} (id {str(meta.get('sweep_id', '?'))[:8]})")


def engine_plans(plans, result, where: str) -> dict:
    """`plans` when they are `plan_engines(result)`'s {engine: EnginePlan}, planned on `result`."""
    from speedplan.plan.engine_plan import EnginePlan

    if not (isinstance(plans, dict) and all(isinstance(k, str) and isinstance(v, EnginePlan) for k, v in plans.items())):
        raise SpeedplanInputError(f"{where}: plans must be the {{engine: EnginePlan}} dict plan_engines(result) "
                                  f"returns, got {type(plans).__name__}")
    misfiled = next((n for n, p in plans.items() if n != p.engine), None)
    if misfiled is not None:  # an sglang file from vLLM's plan prints vLLM's speedups and cap
        raise SpeedplanInputError(f"{where}: plans[{misfiled!r}] is the {plans[misfiled].engine} plan; each plan under "
                                  "its own engine's name, as plan_engines(result) returns them")
    key = sweep_key(result)
    other = next((n for n, p in plans.items() if p.sweep_key and p.sweep_key != key), None)
    if other is not None:
        raise SpeedplanInputError(f"{where}: the {other} plan was planned on another sweep ({plans[other].sweep_key}; "
                                  f"this one: {key}); plan this sweep: plan_engines(result)")
    return plans
