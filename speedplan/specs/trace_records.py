"""The records of a runtime trace (speedplan.trace/1, docs/trace.md): the meta line, each step's
accepted counts and the summary line, checked field by field. The one reader of traces: the
planner's (`plan.acceptance_sources.fit_trace` fits acceptance from them) and the runtime's
(`speedplan.runtime.io.trace`, which writes them); here in specs because the runtime imports
nothing of the planner's."""

from __future__ import annotations

from pathlib import Path

from speedplan.errors import SpeedplanInputError
from speedplan.specs.files import parse_json, read_problem

MAX_DRAFT = 64  # the largest draft length or tree depth speedplan sweeps, reads or calibrates on
SCHEMA = "speedplan.trace/1"  # the meta line's schema, which the runtime writes (runtime.io.trace)


def read_trace(path: Path, required: tuple[str, ...] = ()) -> tuple[dict, list[dict], dict | None]:
    """The meta line, the step records and the summary line (None where absent) of a
    speedplan.trace/1 file, every step checked against the meta and holding every field of `required`."""
    meta: dict = {}
    summary: dict | None = None
    steps: list[tuple[int, dict]] = []
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read trace ({read_problem(e)})") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rec = parse_json(line, f"{path}:{i}")
        kind = rec.get("type") if isinstance(rec, dict) else None
        if kind == "meta":
            if meta or steps:
                raise SpeedplanInputError(f"{path}:{i}: a second meta line, or one after step records: a trace "
                                          "holds one, first (two traces joined? docs/trace.md)")
            meta = rec
            tree = rec.get("tree")
            if rec.get("draft_len") is not None and not _count(rec["draft_len"], 0):
                raise SpeedplanInputError(f"{path}:{i}: meta 'draft_len' must be an integer in 0..{MAX_DRAFT}")
            if rec.get("batch") is not None and not _whole(rec["batch"], 1):
                raise SpeedplanInputError(f"{path}:{i}: meta 'batch' must be an integer >= 1, got {rec['batch']!r}")
            if tree is not None and not (isinstance(tree, dict) and all(
                    tree.get(k) is None or _count(tree[k], 1) for k in ("depth", "topk"))):
                raise SpeedplanInputError(f"{path}:{i}: meta 'tree' must be an object with integer depth and topk")
        elif kind == "step":
            accepted = rec.get("accepted")
            missing = [k for k in required if k not in rec]
            if missing:
                raise SpeedplanInputError(f"{path}:{i}: step record lacks {', '.join(missing)}")
            if not isinstance(accepted, list) or not all(_count(a, 0) for a in accepted):
                raise SpeedplanInputError(f"{path}:{i}: step without a list of 'accepted' counts in 0..{MAX_DRAFT}")
            if "context" in rec and not _nested_ints(rec["context"], 1, len(accepted)):
                raise SpeedplanInputError(f"{path}:{i}: 'context' must hold one length per sequence of 'accepted'")
            for key, depth in (("accepted_ranks", 1), ("offered_ranks", 2)):
                if key in rec and not _nested_ints(rec[key], depth + 1, len(accepted)):
                    raise SpeedplanInputError(f"{path}:{i}: '{key}' must hold one list per sequence of 'accepted' "
                                              "(docs/trace.md)")
            steps.append((i, rec))
        elif kind == "summary":
            summary = rec
    if not steps or meta.get("schema") != SCHEMA:  # another schema's meta: the runtime's reader refuses it too
        raise SpeedplanInputError(f"{path}: no speedplan.trace/1 meta line (its schema: {meta.get('schema')!r}; "
                                  "docs/trace.md)" if steps else f"{path}: trace has no step records")
    for i, rec in steps:
        _check_step(rec, meta, f"{path}:{i}")
    return meta, [rec for _, rec in steps], summary


def _check_step(rec: dict, meta: dict, where: str) -> None:
    """A step against its trace's own header (docs/trace.md): one accepted count per active
    sequence (the step's batch, at most the meta's), each in 0..draft_len."""
    batch, limit, draft_len = rec.get("batch"), meta.get("batch"), meta.get("draft_len")
    accepted = rec["accepted"]
    if batch is not None and not _whole(batch, 1):
        raise SpeedplanInputError(f"{where}: step 'batch' must be an integer >= 1, got {batch!r}")
    if batch is not None and limit is not None and batch > limit:
        raise SpeedplanInputError(f"{where}: step 'batch' {batch} exceeds the meta's batch {limit}")
    if batch is not None and len(accepted) != batch:
        raise SpeedplanInputError(f"{where}: 'accepted' holds {len(accepted)} counts but the step's 'batch' is {batch} "
                                  "(one per active sequence)")
    if limit is not None and len(accepted) > limit:
        raise SpeedplanInputError(f"{where}: 'accepted' holds {len(accepted)} counts but the meta's 'batch' is {limit} "
                                  "(one per active sequence)")
    if draft_len is not None and max(accepted, default=0) > draft_len:
        raise SpeedplanInputError(f"{where}: 'accepted' count {max(accepted)} exceeds the meta's draft_len {draft_len} "
                                  "(a step accepts 0..draft_len draft tokens)")
    topk = (meta.get("tree") or {}).get("topk")  # a rank outside 1..topk, or a path not as long as its count, had
    for s, (a, path) in enumerate(zip(accepted, rec.get("accepted_ranks") or [])):  # been dropped without a word
        if len(path) != a or any(r < 1 or (topk and r > topk) for r in path):
            raise SpeedplanInputError(f"{where}: accepted_ranks[{s}] {path!r:.40} must hold {a} ranks (its 'accepted' "
                                      f"count), each in 1..{topk or 'topk'} (docs/trace.md)")


def _count(value, low: int) -> bool:
    return _whole(value, low) and value <= MAX_DRAFT


def _whole(value, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value


def _nested_ints(value, depth: int, length: int | None = None) -> bool:
    """`value` is lists nested `depth` deep around integers (the outer one `length` long)."""
    if not isinstance(value, list) or (length is not None and len(value) != length):
        return False
    if depth == 1:
        return all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    return all(_nested_ints(v, depth - 1) for v in value)
