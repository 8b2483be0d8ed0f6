"""What `speedplan.sweep` returns: the priced frame and the tables read off it (frontier, best
configuration per batch size, SLO pick), kept in step with the frame when a notebook user filters it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from speedplan.engine.profile import EngineProfile
from speedplan.errors import SpeedplanInputError
from speedplan.plan.api_checks import sweep_result
from speedplan.plan.engine_outputs import runnable_rows
from speedplan.plan.pick import best_per_batch, pareto, slo_pick


@dataclass(eq=False)  # tables of arrays: compared by identity (== on DataFrames has no single truth value)
class SweepResult:
    """What `sweep` returns: its tables (units in `pricing.FRAME_COLUMNS`' names), meta and pricing."""

    frame: pd.DataFrame  # every grid point, infeasible ones included (feasible == False)
    pareto: pd.DataFrame  # feasible Pareto-optimal rows (max tokens/s/user and tokens/s/GPU)
    best: pd.DataFrame  # per (batch, context): feasible row with the highest tokens/s/GPU
    slo_pick: pd.Series | None  # best tokens/s/GPU with tokens/s/user >= the SLO, or None
    meta: dict = field(default_factory=dict)
    # what `reprice` needs to price the same sweep through another engine: the engine-independent
    # pricing of each mechanism, the hardware, target and TP (not written to any file)
    pricing: tuple | None = field(default=None, repr=False, compare=False)
    engine: EngineProfile | None = field(default=None, repr=False, compare=False)  # the profile that priced it
    tables_of: object = field(default=None, init=False, repr=False, compare=False)  # the frame pareto/best were read off

    def __setattr__(self, name: str, value) -> None:
        before = self.__dict__.get(name)
        super().__setattr__(name, value)
        if name == "frame" and self.__dict__.get("best") is not None:  # r.frame = r.frame[...]: r.best follows at once
            try:
                sweep_result(self, "SweepResult.frame")
            except SpeedplanInputError:
                super().__setattr__(name, before)  # a frame refused leaves the result as it was
                raise

    def read_tables(self) -> "SweepResult":
        """Read the frontier, the best row per batch and the SLO pick off `frame` again: a
        notebook user who filters `frame` gets tables, summary, report and plans of the rows kept:
        assigning `r.frame` calls this at once; after dataclasses.replace(r, frame=...) (whose
        tables are those given) the library's entry points call it, or call it yourself. Returns self."""
        self.pareto, self.best = pareto(self.frame), best_per_batch(self.frame)
        slo = self.meta.get("min_tokens_per_user")
        self.slo_pick = None if slo is None else slo_pick(runnable_rows(self.frame, self.meta), slo)
        self.tables_of = self.frame
        return self

    def __repr__(self) -> str:
        m = self.meta
        feasible = int(self.frame["feasible"].sum()) if "feasible" in self.frame else "?"
        return (f"SweepResult({(m.get('model') or {}).get('model', '?')} on {m.get('hardware', '?')}, TP {m.get('tp', '?')}, "
                f"engine profile {m.get('engine', '?')}: {len(self.frame)} rows, {feasible} feasible, "
                f"{len(self.pareto)} on the Pareto frontier; .frame .pareto .best .meta)")
