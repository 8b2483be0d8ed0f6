"""Published acceptance at a sampling temperature above 0 (`speedplan sweep --temperature T`).

The published defaults (`defaults.py`) are greedy rows (T = 0). Sampling accepts less: exact
speculative sampling keeps a draft token with probability min(1, p/q), which at T = 0 is 1
whenever the target's argmax agrees and falls below 1 as T spreads p. Some sources measured the
same drafter at T = 0 and T = 1 (same target, dataset and tree); their ratio is what a default
at T = 1 keeps:

    ρ(1) = α(T = 1) / α(T = 0)          rank-1 α fitted to each row as `defaults.HEADS` fits them
    ρ(T) = 1 − min(T, 1) · (1 − ρ(1))   assumption: linear in T between the two rows, the T = 1
                                        row's above it (no source measured higher temperatures)

and the default's rank-1 α (a head's lower-rank share kept), i.i.d. α or per-position rates
are multiplied by ρ(T). Worked number: EAGLE-3 on Llama-3.1-8B, EAGLE-3 paper Tab.1, MT-bench,
AL 6.13 at T = 0 and 4.24 at T = 1 on a depth-7, 60-node, top-10 tree: α 0.8297 and 0.6469,
ρ(1) = 0.7796; at T = 0.7, ρ = 0.846. A mechanism with no such pair of rows (n-gram, MTP,
Medusa) keeps its greedy row, and its source says so. Acceptance the user gives (--acceptance,
a trace, server counters) is taken as measured at the temperature it ran at: never scaled.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.defaults import DRAFT_SIZE_ROWS, EAGLE3_LOWER_RANK_SHARE, PC, draft_size_alpha
from speedplan.specs.files import finite

MAX_TEMPERATURE = 2.0  # engines accept up to 2 (OpenAI's API range); the rows stop at 1


@dataclass(frozen=True)
class TemperaturePair:
    """One source's greedy and T = 1 rows of one drafter: the rank-1 α fitted to each."""

    family: str
    target: str | None  # None: the family's pair for targets without their own
    alpha_greedy: float
    alpha_t1: float
    row: str

    @property
    def ratio(self) -> float:
        return self.alpha_t1 / self.alpha_greedy


_TREE = "MT-bench, tree of depth {d}, {n} nodes, top-10 (assumed, as the greedy default's)"
PAIRS: tuple[TemperaturePair, ...] = (
    TemperaturePair("eagle3", "llama-3.1-8b", 0.8297, 0.6469,
                    f'{PC}: "EAGLE-3 paper Tab.1", LLaMA-3.1-8B-Instruct, EAGLE-3 head, AL 6.13 at T=0 and 4.24 at '
                    f"T=1, {_TREE.format(d=7, n=60)}, lower-rank share {EAGLE3_LOWER_RANK_SHARE}"),
    TemperaturePair("eagle3", "llama-3.1-70b", 0.7857, 0.7693,
                    f'{PC}: "EAGLE-3 paper Tab.1", LLaMA-3.3-70B-Instruct (stand-in: same architecture), EAGLE-3 '
                    f"head, AL 5.63 at T=0 and 5.45 at T=1, {_TREE.format(d=7, n=60)}, lower-rank share "
                    f"{EAGLE3_LOWER_RANK_SHARE}"),
    TemperaturePair("eagle", "llama-3.1-8b", 0.5155, 0.3410,
                    f'{PC}: "EAGLE-3 paper Tab.1", LLaMA-3.1-8B-Instruct, EAGLE-2 head, AL 4.05 at T=0 and 3.16 at '
                    f"T=1, {_TREE.format(d=6, n=60)}, geometric ranks"),
    TemperaturePair("eagle3", None, 0.8297, 0.6469,
                    f'{PC}: "EAGLE-3 paper Tab.1", LLaMA-3.1-8B-Instruct, EAGLE-3 head, AL 6.13 at T=0 and 4.24 at '
                    f"T=1 (another target's pair)"),
    TemperaturePair("eagle", None, 0.5155, 0.3410,
                    f'{PC}: "EAGLE-3 paper Tab.1", LLaMA-3.1-8B-Instruct, EAGLE-2 head, AL 4.05 at T=0 and 3.16 at '
                    f"T=1 (another target's pair)"),
)

# Leviathan et al. 2023 Tab.2, T5-XXL target, EnDe, the same three drafts at T = 1 (greedy rows:
# defaults.DRAFT_SIZE_ROWS): α 0.62, 0.68, 0.71.
DRAFT_SIZE_ROWS_T1 = ((60e6, 0.62, "T5-small"), (220e6, 0.68, "T5-base"), (770e6, 0.71, "T5-large"))


def check_temperature(temperature) -> float:
    """The sampling temperature as a float in [0, MAX_TEMPERATURE]; SpeedplanInputError otherwise."""
    if not finite(temperature) or not 0 <= float(temperature) <= MAX_TEMPERATURE:
        raise SpeedplanInputError(f"temperature (--temperature) must be a number in 0..{MAX_TEMPERATURE:g} "
                                  f"(0 = greedy), got {temperature!r}")
    # a numpy float32 0.7 is 0.699999988 as a Python float: meta.json and the summary print what was meant
    return float(str(temperature)) if type(temperature).__module__ == "numpy" else float(temperature)


def ratio_at(ratio_t1: float, temperature: float) -> float:
    """ρ(T) = 1 − min(T, 1) · (1 − ρ(1)) (module docstring)."""
    return 1.0 - min(temperature, 1.0) * (1.0 - ratio_t1)


def _pair_ratio(mech, target) -> tuple[float, str] | None:
    """ρ(1) for this mechanism's default and the rows it comes from; None where no source has both."""
    family = mech.family_name()
    if family in ("eagle", "eagle3"):
        rows = [p for p in PAIRS if p.family == family]
        pair = next((p for p in rows if p.target == target.name), None) or next(p for p in rows if p.target is None)
        return pair.ratio, pair.row
    if family == "draft-model":
        draft = mech.draft
        greedy = draft_size_alpha(draft.param_count(), target.param_count())
        t1 = draft_size_alpha(draft.param_count(), target.param_count(), DRAFT_SIZE_ROWS_T1, (0.3, 0.9))
        rows = ", ".join(f"{n} {a0} and {a1}" for (_, a0, n), (_, a1, _) in zip(DRAFT_SIZE_ROWS, DRAFT_SIZE_ROWS_T1))
        return t1 / greedy, (f'{PC}: "Leviathan et al. 2023 Tab.2", T5-XXL target, EnDe, alpha at T=0 and T=1 ({rows}); '
                             f"log-linear in the draft's size at each temperature: {greedy:.3f} and {t1:.3f} at "
                             f"draft/target params {draft.param_count() / target.param_count():.3f}")
    return None


def _scaled(acc: Acceptance, rho: float) -> Acceptance:
    if acc.kind == "iid":
        return Acceptance.iid(acc.positions[0] * rho, acc.source, acc.match)
    if acc.kind == "positions":
        return Acceptance.positional([p * rho for p in acc.positions], acc.source, acc.match)
    alpha = acc.ranks[0]
    share = acc.ranks[1] / (alpha * (1 - alpha)) if len(acc.ranks) > 1 and 0 < alpha < 1 else 1.0
    return replace(Acceptance.head_ranks(alpha * rho, min(max(share, 1e-9), 1.0), acc.source), match=acc.match)


def at_temperature(mech, target, temperature: float):
    """`mech` with its published default acceptance moved to `temperature` (module docstring),
    its source saying how; unchanged at T = 0. The user's acceptance is never moved; where it
    states the temperature it was measured at (a runtime trace) and that differs, its source says so."""
    measured = mech.acceptance.measured_at
    if mech.acceptance.source != "published":  # the user's: moved never, but said where it ran elsewhere
        if measured is None or abs(measured - temperature) < 1e-9:
            return mech
        return replace(mech, acceptance_source=mech.acceptance_source + f"; measured at temperature {measured:g}, "
                       f"the sweep serves {temperature:g}: not moved (give acceptance measured at {temperature:g})")
    if temperature == 0:
        return mech
    found = _pair_ratio(mech, target)
    if found is None:
        note = (f"; published at T=0 only: at temperature {temperature:g} it accepts less (no source measured "
                "this drafter at T>0): give --acceptance measured at your temperature")
        return replace(mech, acceptance_source=mech.acceptance_source + note)
    ratio_t1, rows = found
    rho = ratio_at(ratio_t1, temperature)
    how = ("the T=1 row's ratio" if temperature >= 1 else "linear in T between the rows (assumption)")
    note = (f"; at temperature {temperature:g}: x {rho:.3f} ({how}; rho(1) = {ratio_t1:.3f} from {rows})"
            + ("; no row above T=1" if temperature > 1 else ""))
    return replace(mech, acceptance=_scaled(mech.acceptance, rho), acceptance_source=mech.acceptance_source + note)
