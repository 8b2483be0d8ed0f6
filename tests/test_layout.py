"""The package shows its architecture, and its import rules hold (DESIGN.md, "Layout"):
the runtime does not import the planner, microbench imports no speedplan code, the command
line holds no model logic (it imports no numpy), and no module grows past 400 lines."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "speedplan"
PLANNER = ("plan", "cost", "profile", "engine", "report", "serving", "validate", "cli")


def _imports(path: Path) -> set[str]:
    """Every module named by an import statement of `path` (anywhere in the file)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_folders_are_the_architecture():
    root_modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    subpackages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert len(root_modules) <= 6, root_modules
    assert len(subpackages) >= 5, subpackages


def test_no_module_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in list(PACKAGE.rglob("*.py")) + list((ROOT / "microbench").glob("*.py"))
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_runtime_does_not_import_the_planner():
    for path in (PACKAGE / "runtime").rglob("*.py"):
        bad = [m for m in _imports(path) if any(m == f"speedplan.{p}" or m.startswith(f"speedplan.{p}.") for p in PLANNER)]
        assert not bad, (path, bad)


def test_microbench_imports_no_speedplan_code():
    for path in (ROOT / "microbench").glob("*.py"):
        assert not [m for m in _imports(path) if m.split(".")[0] == "speedplan"], path


def test_command_modules_hold_no_model_logic():
    """A command parses, calls the library, renders: no numpy, pandas or torch at its top."""
    for path in (PACKAGE / "cli").glob("*.py"):
        heavy = {m for m in _top_level_imports(path) if m.split(".")[0] in ("numpy", "pandas", "torch", "matplotlib")}
        assert not heavy, (path, heavy)
