"""Serving configs for a chosen plan, one module per engine (vllm, sglang, trtllm), found here
by name. Each engine module has `NAME`, `VERSION` (the engine source its option names were
checked against; docs/serving.md lists where each was found) and `render(plan) -> {filename:
text}`. A mechanism an engine cannot run gives a file that says so instead of a command that
would fail. Adding an engine is one module here (docs/extending.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

from speedplan.serving.plan import ServingPlan

_SHARED = {"plan", "text"}


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


def write_serving_configs(plan: ServingPlan, out_dir: Path) -> list[Path]:
    """Render every engine first (bad input fails before anything is written), then write the files."""
    files: dict[str, str] = {}
    for engine in ENGINES.values():
        files.update(engine.render(plan))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        path = out_dir / name
        path.write_text(text)
        if name.endswith(".sh"):
            path.chmod(0o755)
        paths.append(path)
    return paths


__all__ = ["ENGINES", "ENGINE_VERSIONS", "ServingPlan", "write_serving_configs"]
