"""speedplan: plan speculative decoding (mechanism and draft length per batch size) for LLM serving.

The planner side (model, hardware, cost, forward, acceptance, mechanisms, planner, serving,
report) never imports torch; the reference runtime lives in `speedplan.runtime`.

The names a notebook needs are here, imported on first use (so `import speedplan` costs
nothing):

    import speedplan
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 8, 64])
    plans = speedplan.plan_engines(r)                                   # {"vllm": EnginePlan, ...}
    files = speedplan.render_serving_configs(speedplan.serving_plans(r, plans))  # {name: text}
    print(speedplan.render_summary(r, plans=plans))                     # what the CLI prints
    speedplan.write_outputs(r, "report-dir", plans=plans)               # the report folder

Bad input raises `speedplan.SpeedplanInputError` (a ValueError) with one line naming it.
"""

from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "sweep": "plan.sweep", "reprice": "plan.sweep", "SweepResult": "plan.sweep",
    "plan_engines": "plan.engine_plan", "serving_plans": "plan.engine_plan",
    "memory_shortfall": "plan.shortfall",
    "render_serving_configs": "serving", "write_serving_configs": "serving",
    "render_summary": "report.summary", "write_outputs": "report.folder",
    "calibrate_rows": "engine.run_calibration", "calibrate_files": "engine.run_calibration",
    "get_engine": "engine.profile", "get_model": "specs.model", "Acceptance": "plan.acceptance",
    "SpeedplanInputError": "errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'speedplan' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
