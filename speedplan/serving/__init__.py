"""Serving configs for a chosen plan, one module per engine (vllm, sglang, trtllm), found here
by name. Each engine module has `NAME`, `VERSION` (the engine source its option names were
checked against; docs/serving.md lists where each was found), `render(plan) -> {filename:
text}`, `support(mechanism, mtp_layers) -> Support | None` (what it can run and how it can
vary D with the batch size: the planner plans within it), `draft_tp_options(mechanism,
tp)`, and may say where it runs (`PLATFORMS`: "cuda", "rocm", "cpu"; everywhere where it does
not say). A mechanism an engine cannot run gives a file that says so instead of a command that
would fail. Adding an engine is one module here (docs/extending.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

from speedplan.errors import SpeedplanInputError
from speedplan.outputs import writing
from speedplan.serving.plan import Mode, ServingPlan, Support, point_ranges

_SHARED = {"plan", "text", "context"}


def _discover() -> dict[str, ModuleType]:
    engines = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in _SHARED:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "render") and hasattr(module, "NAME"):
            engines[module.NAME] = module
    return engines


ENGINES: dict[str, ModuleType] = _discover()
ENGINE_VERSIONS: dict[str, str] = {name: module.VERSION for name, module in ENGINES.items()}


def engine_module(name: str) -> ModuleType:
    """The serving module of engine `name` (vllm, sglang, trtllm): its render, support, VERSION."""
    key = str(name).strip().lower()
    if key not in ENGINES:
        raise SpeedplanInputError(f"unknown serving engine {name!r}; use one of {', '.join(ENGINES)}")
    return ENGINES[key]


def launch_ranges(engine: str | None, points, mode: str, spec_max_running) -> tuple[list[tuple[int, int, int]], bool]:
    """Inclusive (first B, last B, D) ranges of schedule `points` ((B, D), ascending) as engine
    `engine`'s launch runs them by the requests offered (from 1, the last open to OPEN_END_BATCH),
    and whether they differ from the planned ranges: where its module's `launch_ranges` says so
    (SGLang's adaptive buckets, keyed by the requests a step runs, capped at 48 by default), else
    the planned ones (`plan.point_ranges`). The launch files' comments and recommendations.json
    both read them here."""
    points = [(int(b), int(d)) for b, d in points]
    planned = point_ranges(points)
    routed = getattr(engine_module(engine), "launch_ranges", None) if engine and points else None
    ranges = routed(points, mode, spec_max_running) if routed else None
    if not ranges:
        return planned, False
    merged: list[tuple[int, int, int]] = []
    for lo, hi, d in ranges:  # equal neighbours merged, as point_ranges does
        merged[-1:] = [(merged[-1][0], hi, d)] if merged and merged[-1][2] == d else [*merged[-1:], (lo, hi, d)]
    return merged, merged != planned


def runs_on(name: str, platform: str) -> bool:
    """Whether serving engine `name` runs on hardware of `platform` ("cuda", "rocm", "cpu": the
    hardware preset's `platform`); an engine module's PLATFORMS lists where (all, where it does not say)."""
    return platform in getattr(engine_module(name), "PLATFORMS", (platform,))


def not_run_reason(name: str, hw) -> str | None:
    """Why serving engine `name` cannot run on hardware `hw` (its `platform`), e.g. "trtllm runs on
    cuda only, and mi300x is a rocm device"; None where it runs there."""
    if runs_on(name, hw.platform):
        return None
    return f"{name} runs on {', '.join(engine_module(name).PLATFORMS)} only, and {hw.name} is a {hw.platform} device"


def check_runs_on(profile, hw) -> None:
    """Refuse pricing with engine profile `profile` (an `engine.profile.EngineProfile`) on hardware
    `hw` whose platform the engine it describes (a shipped profile's name, or its engine family) does
    not run on: TensorRT-LLM on an MI300X. Profiles of no serving engine (speedplan-runtime) pass."""
    from speedplan.engine.profile import get_engine

    for name in ENGINES:
        why = not_run_reason(name, hw)
        if why and (profile.name == name or profile.engine == get_engine(name).engine):
            raise SpeedplanInputError(f"engine (--engine) {profile.name}: {why}; price with an engine that runs there "
                                      f"({', '.join(n for n in ENGINES if runs_on(n, hw.platform))})")


def draft_tp_choices(mechanism: str, tp: int) -> set[int]:
    """Every draft TP some engine runs `mechanism`'s draft at, beside a target at `tp`."""
    return set().union(*(set(e.draft_tp_options(mechanism, tp)) for e in ENGINES.values()))


def render_serving_configs(plan: ServingPlan | dict[str, ServingPlan]) -> dict[str, str]:
    """{file name: text} of every engine's serving files, written nowhere. `plan` is one plan for
    every engine, or {engine name: its plan} (engines left out get no files), e.g.
    `render_serving_configs(serving_plans(result, plan_engines(result)))`. A plan that
    `serving_plans` made for one engine (`ServingPlan.engine`) renders that engine's files only,
    and under another engine's name it is refused: those files would carry its numbers."""
    return _render(plan, "render_serving_configs")


def _render(plan: ServingPlan | dict[str, ServingPlan], where: str) -> dict[str, str]:
    """`render_serving_configs` for the function `where`, which bad input is reported as."""
    if isinstance(plan, ServingPlan):
        plans = {plan.engine: plan} if plan.engine is not None else {name: plan for name in ENGINES}
    else:
        plans = plan if isinstance(plan, dict) else {name: plan for name in ENGINES}
    wrong = [p for p in plans.values() if not isinstance(p, ServingPlan)]
    if not plans:  # an empty dict: what serving_plans returns where no engine plan has a row
        raise SpeedplanInputError(f"{where}: no engine plan to render (serving_plans gives none for an engine that does not "
                                  "run on this hardware or fits no sequence in memory at any planned batch size: "
                                  "speedplan.memory_shortfall(result) says why, and plan_engines' plans hold the reasons)")
    if wrong:
        got = type(wrong[0]).__name__
        hint = ": serving_plans(result, plans) makes them from plan_engines' EnginePlans" if got == "EnginePlan" else ""
        raise SpeedplanInputError(f"{where}: expected a ServingPlan or {{engine: ServingPlan}}, got {got}{hint}")
    files: dict[str, str] = {}
    for key, engine_plan in plans.items():  # each engine's render refuses a plan made for another (check_engine)
        files.update(engine_module(key).render(engine_plan))
    return files


def write_serving_configs(plan: ServingPlan | dict[str, ServingPlan], out_dir: Path) -> list[Path]:
    """Render every engine first (bad input fails before anything is written), then write the
    files into `out_dir` (files of the same names are replaced). `plan` as for
    `render_serving_configs`."""
    files = _render(plan, "write_serving_configs")
    if not isinstance(out_dir, (str, Path)) or not str(out_dir).strip():
        raise SpeedplanInputError(f"write_serving_configs: out_dir must be a folder path, got {out_dir!r}")
    out_dir = Path(out_dir).expanduser()  # "~/sv": the home folder, not a folder named "~"
    if out_dir.exists() and not out_dir.is_dir():
        raise SpeedplanInputError(f"write_serving_configs: {out_dir} exists and is not a folder")
    with writing(out_dir, "write_serving_configs"):
        out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        path = out_dir / name
        with writing(path, "write_serving_configs"):
            path.write_text(text)
        if name.endswith(".sh"):
            path.chmod(0o755)
        paths.append(path)
    return paths


__all__ = ["ENGINES", "ENGINE_VERSIONS", "Mode", "ServingPlan", "Support", "draft_tp_choices", "engine_module",
           "render_serving_configs", "write_serving_configs"]
