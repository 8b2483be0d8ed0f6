"""What a measured acceptance says when it is priced for another drafter or target than the one
that ran (a runtime trace states both in its meta line: docs/trace.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from speedplan.plan.acceptance import reached

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




def small_sample_note(histogram, draft_len: int, z: float = 1.96) -> str:
    """What a chain's acceptance fitted from an accepted-length `histogram` (sequence-steps per
    accepted count, draft length `draft_len`) cannot tell, for its source text ("" where nothing):

    - a position's rate p = k / n rests on the n sequence-steps that reached it; where its 95%
      Wilson interval (z = 1.96) is wider than 0.2 (under about 93 such steps at p = 0.5, 37 at
      p = 0.9) the widest is named;
    - where every draft was accepted the rates are clipped to 0.999 (`fit_positions`, which
      `fit_runs` falls back to there): a D beyond the measured one is priced on a rate no step
      saw fail."""
    at_least = reached(histogram, draft_len)
    n, k = at_least[:draft_len], at_least[1: draft_len + 1]
    notes = []
    if (n > 0).any():
        nn = np.maximum(n, 1.0)
        p = k / nn
        mid = (p + z * z / (2 * nn)) / (1 + z * z / nn)
        half = z * np.sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / (1 + z * z / nn)
        lo, hi = np.clip(mid - half, 0, 1), np.clip(mid + half, 0, 1)
        width = np.where(n > 0, hi - lo, 0.0)
        i = int(np.argmax(width))
        if width[i] > 0.2:
            notes.append(f"few samples: position {i + 1}'s rate {p[i]:.3g} rests on {int(n[i])} sequence-steps "
                         f"(95% interval {lo[i]:.2f}-{hi[i]:.2f})")
    if at_least[0] > 0 and at_least[draft_len] >= at_least[0]:
        notes.append(f"every draft of its {int(at_least[0])} sequence-steps was accepted: the rates are clipped to "
                     "0.999, and a longer D is priced on a rate no step saw fail")
    return "; ".join(notes)
