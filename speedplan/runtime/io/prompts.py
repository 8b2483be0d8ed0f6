"""Real prompts built from the standard library's own sources, present on any Python install.

Three kinds, from functions that have a docstring and a body of at least 6 lines:
- "complete": the function's signature, docstring and first half, to be completed;
- "summarize": the docstring, to be summarised;
- "explain": a question about the function with its source.
Selection is deterministic for a given Python version (modules in fixed lists, functions in
source order). Three splits, so that no prompt serves two purposes and no function two splits:
- "training": the "complete" prompts of the functions of TRAINING_MODULES, modules no other
  split reads (the drafters are trained on the target's continuations of them);
- "calibration" and "evaluation": the "summarize" and "explain" prompts of the functions of
  MODULES, a function's two going to one split, functions alternating between the two, so that
  both splits hold both kinds (speedplan validate fits acceptance and the runtime's engine terms
  on calibration and checks its predictions on evaluation).
Until 2026-12-07 the training split held the "complete" prompts of MODULES' own functions, so
the drafters had seen the first half of the code that the "explain" prompts show; on prompts of
functions no split held, both trained drafters accepted 0.90x what they did on evaluation
prompts, where n-gram lookup accepted 1.22x (benchmarks/bench_unseen_functions.py, 2026-12-07).
Earlier the splits took turns prompt by prompt; with three kinds and three splits that put
each kind in a split of its own, and n-gram acceptance fitted on the "summarize" prompts came
out 1.26x what the "explain" prompts gave (reports/validation-cpu before 2026-12-01 16:00).
"""

from __future__ import annotations

import ast
import sysconfig
import textwrap
from dataclasses import dataclass
from pathlib import Path

MODULES = ("textwrap.py", "string.py", "heapq.py", "bisect.py", "shlex.py", "fractions.py", "glob.py",
           "fnmatch.py", "calendar.py", "statistics.py", "difflib.py", "base64.py", "colorsys.py",
           "pprint.py", "copy.py", "queue.py", "sched.py", "json/decoder.py", "json/encoder.py",
           "csv.py", "ipaddress.py", "random.py", "dataclasses.py", "functools.py")
# The drafters' training functions: modules none of the above is, and none of the held-out set of
# benchmarks/bench_unseen_functions.py (the shipped drafters: Python 3.11, 72 functions). Each is a
# file from Python 3.10 to 3.13, but from 3.12 datetime.py is a shim that holds no function (69 there).
TRAINING_MODULES = ("contextlib.py", "enum.py", "collections/__init__.py", "datetime.py", "gzip.py",
                    "subprocess.py", "threading.py", "ast.py", "dis.py", "traceback.py", "tempfile.py",
                    "uuid.py", "mimetypes.py", "optparse.py", "cmd.py", "code.py", "pkgutil.py", "pickle.py",
                    "warnings.py", "graphlib.py", "os.py", "codecs.py", "selectors.py", "typing.py")
MAX_SOURCE_LINES = 40
KINDS = ("complete", "summarize", "explain")
SPLITS = ("training", "calibration", "evaluation")


@dataclass(frozen=True)
class Prompt:
    id: str  # "<module>:<function>:<kind>"
    kind: str
    text: str
    split: str  # one of SPLITS


def _functions(path: Path) -> list[tuple[str, str, str]]:
    """(qualified name, docstring, source) of documented functions with >= 6 body lines."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        body = getattr(node, "body", [])
        for fn in body if isinstance(body, list) else []:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(fn):
                segment = textwrap.dedent(" " * fn.col_offset + (ast.get_source_segment(source, fn) or ""))
                if fn.end_lineno - fn.lineno >= 6:
                    owner = getattr(node, "name", "")
                    found.append((fn.lineno, f"{owner}.{fn.name}" if owner else fn.name, ast.get_docstring(fn), segment))
    return [f[1:] for f in sorted(found)]


def _text(kind: str, module: str, name: str, doc: str, src: str) -> str:
    lines = src.splitlines()[:MAX_SOURCE_LINES]
    if kind == "complete":
        half = "\n".join(lines[: max(3, len(lines) // 2)])
        return f"Complete this Python function from the standard library module `{module}`:\n```python\n{half}\n```"
    if kind == "summarize":
        return f"Summarize in two sentences what `{module}.{name}` does, given its documentation:\n\n{doc}"
    code = "\n".join(lines)
    return f"Here is `{module}.{name}` from Python's standard library:\n```python\n{code}\n```\nHow does it work, and when would you use it?"


def _module_functions(modules: tuple[str, ...], per_module: int) -> list[tuple[str, str, str, str]]:
    """(module, qualified name, docstring, source) of the first `per_module` functions of each module
    present on this Python."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return [(rel[:-3].replace("/", ".").removesuffix(".__init__"), *fn)
            for rel in modules if (root / rel).exists() for fn in _functions(root / rel)[:per_module]]


def stdlib_prompts(split: str | None = None, per_module: int = 3, limit: int | None = None) -> list[Prompt]:
    """Prompts from the standard library; split = one of SPLITS, or None for all of them."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    prompts: list[Prompt] = []
    for i, (module, name, doc, src) in enumerate(_module_functions(MODULES, per_module)):
        checked = "calibration" if i % 2 == 0 else "evaluation"
        prompts += [Prompt(f"{module}:{name}:{kind}", kind, _text(kind, module, name, doc, src), checked)
                    for kind in ("summarize", "explain")]
    prompts += [Prompt(f"{module}:{name}:complete", "complete", _text("complete", module, name, doc, src), "training")
                for module, name, doc, src in _module_functions(TRAINING_MODULES, per_module)]
    chosen = [p for p in prompts if split is None or p.split == split]
    return chosen[:limit] if limit else chosen
