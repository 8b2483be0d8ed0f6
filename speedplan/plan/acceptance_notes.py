"""What a measured acceptance says when it is priced for another drafter or target than the one
that ran (a runtime trace states both in its meta line: docs/trace.md)."""

from __future__ import annotations

from dataclasses import replace

# The reference runtime's drafters (speedplan.runtime.options.MECHANISMS) as the planner names
# them; its truncated drafters (the target's first layers) are none of the planner's.
RUNTIME_AS_PLANNED = {"ngram": "ngram", "draft-model": "draft-model", "eagle": "eagle", "eagle-tree": "eagle-tree"}


def planned_name(runtime_mechanism: str) -> str | None:
    """The planner's mechanism for a runtime drafter's name, or None (a truncated drafter)."""
    return RUNTIME_AS_PLANNED.get(str(runtime_mechanism).strip().lower())


def same_model(ran: str, target: str) -> bool:
    """Whether a trace's model ("SmolLM2-135M-Instruct.Q4_1") is the target preset ("smollm2-135m")."""
    return bool(target) and str(target).lower() in str(ran).lower()


def measured_elsewhere(mech, target):
    """`mech` with its acceptance source saying where a trace measured it on another drafter family
    or another model than `mech` and `target` (the numbers are used as given: not moved)."""
    by = mech.acceptance.measured_by
    if not by:
        return mech
    ran, model = by
    notes = []
    from speedplan.plan.mechanisms import REGISTRY

    planned = planned_name(ran)
    if ran and (planned is None or REGISTRY[planned].family_name() != mech.family_name()):
        notes.append(f"measured with the runtime's {ran} drafter, priced for {mech.label}: another drafter's "
                     "acceptance, used as given")
    if model and not same_model(model, target.name):
        notes.append(f"measured on {model}, priced on {target.name}: another target's acceptance, used as given")
    if not notes:
        return mech
    return replace(mech, acceptance_source=mech.acceptance_source + "; " + "; ".join(notes))
