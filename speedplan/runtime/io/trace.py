"""Trace files (JSON Lines, schema "speedplan.trace/1"; see docs/trace.md): a meta line, one
line per speculative step, an optional summary line. The planner reads them without torch."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from speedplan.specs.trace_records import SCHEMA, read_trace as read_records

STEP_KEYS = ("step", "batch", "context", "accepted", "t_draft_s", "t_verify_s", "t_accept_s", "t_overhead_s", "t_step_s")


@dataclass(frozen=True)
class TraceMeta:
    model: str
    mechanism: str
    draft_len: int
    tree: dict | None  # {"topk", "depth", "nodes"} or None
    batch: int
    device: str
    dtype: str
    temperature: float
    top_p: float

    def to_json(self) -> dict:
        return {"type": "meta", "schema": SCHEMA, "model": self.model, "mechanism": self.mechanism,
                "draft_len": self.draft_len, "tree": self.tree, "batch": self.batch, "device": self.device,
                "dtype": self.dtype, "temperature": self.temperature, "top_p": self.top_p,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def step_json(record) -> dict:
    """A StepRecord as a trace line."""
    line = {"type": "step", "step": record.step, "batch": record.batch, "context": list(record.context),
            "accepted": list(record.accepted), "t_draft_s": record.t_draft_s, "t_verify_s": record.t_verify_s,
            "t_accept_s": record.t_accept_s, "t_overhead_s": record.t_overhead_s, "t_step_s": record.t_step_s}
    if record.accepted_ranks is not None:
        line["accepted_ranks"] = [list(r) for r in record.accepted_ranks]
    if getattr(record, "offered_ranks", None) is not None:
        line["offered_ranks"] = [[list(r) for r in seq] for seq in record.offered_ranks]
    return line


def write_trace(path: str | Path, meta: TraceMeta, result) -> Path:
    """Write meta, steps and summary for a RunResult; written to a temp file then renamed,
    so a failed run never leaves a half-written trace."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        f.write(json.dumps(meta.to_json()) + "\n")
        for record in result.steps:
            f.write(json.dumps(step_json(record)) + "\n")
        f.write(json.dumps({"type": "summary", "acceptance_length": result.acceptance_length,
                            "tokens_per_s": result.tokens_per_s, "steps": len(result.steps)}) + "\n")
    tmp.replace(path)
    return path


def read_trace(path: str | Path) -> tuple[dict, list[dict], dict | None]:
    """(meta, steps, summary) of a trace file as the runtime writes it: read and checked as the
    planner reads any trace (`speedplan.specs.trace_records`), every step holding every field of
    STEP_KEYS; SpeedplanInputError (a ValueError) if not.
    For tree mechanisms draft_len is the tree depth (the most drafts one step can accept)."""
    return read_records(Path(path), required=STEP_KEYS)
