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

What each name takes and returns (units: batch B = concurrent requests, D = drafted tokens,
context = tokens of KV per sequence, times in seconds, rates in tokens/s, memory in bytes):

- `sweep(model, hardware, mechanisms, batches, draft_lens, contexts, tp, acceptance, ...)` ->
  `SweepResult`: `.frame` one row per (mechanism, D, B, context) with `t_*_s` step parts, `speedup`
  (over plain decoding on the same engine), `tokens_per_s_per_user`, `tokens_per_s_per_gpu`,
  `memory_bytes` per GPU and `fits_memory`; `.pareto`, `.best` (per B), `.meta`. batches, draft_lens
  and contexts take lists or the CLI's text ("1-256", "1,8,64").
- `reprice(result, engine)` -> the same sweep priced with another engine profile (`SweepResult`).
- `memory_shortfall(result)` -> why plain decoding fits at no swept (B, context) (str), or None.
- `plan_engines(result, batch_weights=None, engines=None)` -> {engine name: `EnginePlan`}; an
  EnginePlan's `.schedule` is [(first B, last B, D), ...], `.rows` a DataFrame per planned B
  (draft_len, speedup, tokens_per_s_per_gpu, runs_at_batch, loss_vs_best as a fraction 0..1).
- `serving_plans(result, plans)` -> {engine name: `ServingPlan`}; `render_serving_configs(plans)` ->
  {file name: text}; `write_serving_configs(plans, out_dir)` -> the paths written.
- `render_summary(result, plans=None)` -> the text `speedplan sweep` prints (str).
- `write_outputs(result, out_dir, plans=None)` -> the report folder's paths (what `speedplan sweep
  --out` writes; refused, as by the CLI, when plain decoding fits at no swept B and context).
- `calibrate_rows(model, hardware, tp, engine, rows)` / `calibrate_files(..., files)` -> a
  `Calibration` (`.profile` the fitted EngineProfile, per-row `.residual`, `.loo_error` fractions);
  rows give `tpot_ms` / `step_ms` in milliseconds, `tokens_per_s`, or `speedup`.
- `get_engine(name or file)` -> `EngineProfile`; `get_model(name or config.json)` -> `ModelSpec`.
- `list_models(configs=None)`, `list_hardware(names=None)`, `list_engines()`,
  `list_mechanisms(model=None, tp=1, draft_len=3)` -> DataFrames of what `speedplan models`, `hardware`,
  `engines` and `mechanisms` list (presets, shipped profiles, registered mechanisms).
- `Acceptance.iid(alpha)`, `.positional([p1, p2, ...])`, `.per_rank([r1, r2, ...])` -> an
  `Acceptance` (probabilities in [0, 1)), for `sweep(acceptance=...)` or {mechanism: Acceptance}.
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
    "list_models": "report.catalog", "list_hardware": "report.catalog", "list_engines": "report.catalog",
    "list_mechanisms": "report.catalog",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'speedplan' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
