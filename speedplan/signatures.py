"""What a function of a user's own object accepts: a cost model or a mechanism subclass written
before a keyword existed is called as it was (`cost.forward` passes MLA's query width only to an
`attention` that takes it, `plan.memory` the engine's window pool only to an
`extra_memory_bytes` that takes it)."""

from __future__ import annotations

import functools
import inspect


@functools.cache
def takes_keyword(function, name: str) -> bool:
    """Whether `function` (read once per function) takes the keyword `name`, by name or through **kwargs;
    False for what has no signature (None, a builtin)."""
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)
