"""Which engine profile prices each serving engine's plan of a sweep: the sweep's own where it
describes that engine (a calibrated vLLM profile prices the vLLM plan), else the shipped profile of
that engine's name, through which the sweep's kernels are repriced (`plan.sweep.reprice`)."""

from __future__ import annotations

from speedplan.plan.engine_outputs import read_from_file


def engine_pricing(result, name: str):
    """The sweep priced for serving engine `name`: the sweep itself when its engine profile
    describes that engine (a calibrated vLLM profile prices the vLLM plan), else the same
    sweep repriced through the shipped profile of that name (`plan.sweep.reprice`)."""
    from speedplan.engine.profile import get_engine
    from speedplan.plan.sweep import reprice

    return result if _priced_as(result, name) else reprice(result, get_engine(name))


def engine_profile_for(result, name: str):
    """The engine profile that prices serving engine `name`'s plan of this sweep (`engine_pricing`):
    the sweep's own where it describes that engine, else the shipped profile of that name."""
    from speedplan.engine.profile import get_engine

    return result.engine if _priced_as(result, name) and result.engine is not None else get_engine(name)


def _priced_as(result, name: str) -> bool:
    """The sweep's own pricing serves engine `name`: its profile describes that engine, or it has no
    pricing to reprice."""
    from speedplan.engine.profile import get_engine

    return result.meta.get("engine_family", result.meta.get("engine")) in (get_engine(name).engine, name) \
        or result.pricing is None


def _own_meta(result, name: str) -> dict:
    """What a sweep's meta would say of the profile that prices engine `name`'s plan (`engine_profile_for`):
    an engine that is not planned is still named with its own profile, not the sweep's."""
    from speedplan.engine.profile import get_engine

    return result.meta if _priced_as(result, name) else get_engine(name).meta()


def _profile_text(meta: dict) -> str:
    """"NAME: how its terms were set", with the file it was read from unless it is a shipped one (a
    calibrated or edited copy keeps its base's name and must not read as the shipped profile)."""
    source = read_from_file(meta)
    where = f"file {source}; " if source else ""
    return f"{meta.get('engine', '?')}: {where}{meta.get('engine_fit', '')}".rstrip(": ")
