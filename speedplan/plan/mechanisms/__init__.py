"""Speculative-decoding mechanisms, one module each, found here by name.

| mechanism   | drafting (per target step)                                           | verify          |
|-------------|----------------------------------------------------------------------|-----------------|
| ngram       | host-side prompt lookup; a step without a match drafts nothing       | chain of 1+D    |
| draft-model | D sequential draft forwards at the draft's TP                        | chain of 1+D    |
| eagle       | EAGLE-1/2 head: D forwards of one layer + 2h→h fuse + full lm_head   | chain of 1+D    |
| eagle-tree  | EAGLE-2 tree: depth-D expansion over a top-k frontier, EAGLE-1/2 head | tree of N nodes |
| eagle3      | EAGLE-3 head: fc 3h→h once, D forwards of one layer + reduced lm_head | chain of 1+D    |
| eagle3-tree | EAGLE-3 tree: the EAGLE-3 head over a top-k frontier                 | tree of N nodes |
| mtp         | D forwards of the model's own MTP layer(s), the last reused past them | chain of 1+D    |
| medusa      | one forward of D heads                                               | tree of N nodes |

A drafter with a KV cache runs its first pass after verification over the 1 + D verified
tokens of each sequence, as the engines lay them out (base.first_pass_tokens).

A tree and its chain share one head family (`Mechanism.family`) and one acceptance vector.

Adding a mechanism is one module here defining a `Mechanism` subclass with a `name`
(docs/extending.md). `MECHANISMS` maps names to classes; `parse_mechanism` builds one from a
spec such as `eagle-tree:topk=8` or `draft-model:llama-3.2-1b`.
"""

from __future__ import annotations

import importlib
import pkgutil

from speedplan.errors import SpeedplanInputError, did_you_mean
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.mechanism_names import canonical_name, canonical_spec
from speedplan.plan.mechanisms.base import Mechanism
from speedplan.specs.model import ModelSpec


def _discover() -> dict[str, type[Mechanism]]:
    """Every `Mechanism` subclass with a name defined in a module of this package, by name."""
    found: dict[str, type[Mechanism]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Mechanism) and obj.__module__ == module.__name__ and obj.name:
                found[obj.name] = obj
    return found


REGISTRY: dict[str, type[Mechanism]] = _discover()
MECHANISMS: tuple[str, ...] = tuple(REGISTRY)
TREE_MECHANISMS: tuple[str, ...] = tuple(n for n, cls in REGISTRY.items() if cls.is_tree)


def mechanism_class(name: str) -> type[Mechanism]:
    """The class of mechanism `name`, as speedplan or an engine names it (`mechanism_names`:
    EAGLE-3, draft_model, NEXTN, deepseek_mtp)."""
    key = canonical_name(name)
    if key == "none":
        raise SpeedplanInputError(f"mechanism {name!r:.60} is plain decoding, which every sweep prices (D = 0); "
                                  f"name a speculative mechanism: {', '.join(MECHANISMS)}")
    if key not in REGISTRY:
        parts = [canonical_name(part) for part in key.split(",")]  # EAGLE-3,ngram as eagle3,ngram
        if len(parts) > 1 and all(part in REGISTRY for part in parts):  # "eagle3,ngram": commas hold a mechanism's options
            raise SpeedplanInputError(f"mechanism {name!r:.60}: one mechanism per --mechanism (a comma starts a mechanism's "
                                      f"options): {' '.join('--mechanism ' + part for part in parts)}")
        raise SpeedplanInputError(f"unknown mechanism {name!r:.60}{did_you_mean(key, MECHANISMS)}; use one of {', '.join(MECHANISMS)}")
    return REGISTRY[key]


def parse_mechanism(spec: str, target: ModelSpec, acceptance: Acceptance | None = None) -> Mechanism:
    """`ngram`, `draft-model:llama-3.2-1b`, `draft-model:llama-3.2-1b,tp=1`, `eagle`,
    `eagle:vocab=32000`, `eagle-tree:topk=8`, `eagle3`, `eagle3:config=PATH`, `eagle3-tree:topk=8`,
    `mtp`, `medusa`. `acceptance` (user, trace or engine metrics) replaces the published default."""
    name, _, arg = canonical_spec(spec).partition(":")
    return mechanism_class(name).build(arg.strip(), target, acceptance)


__all__ = ["MECHANISMS", "Mechanism", "REGISTRY", "TREE_MECHANISMS", "canonical_spec", "mechanism_class", "parse_mechanism"]
