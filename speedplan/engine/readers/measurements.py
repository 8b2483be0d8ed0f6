"""Measurements of a serving engine, read from what users have: a CSV, the JSON that
`vllm bench serve --save-result` writes, or the JSON lines of SGLang's
`scripts/playground/bench_speculative.py`. Each becomes `Measurement` records; a malformed or
contradictory file is a SpeedplanInputError naming the file, the row and the field.

Field names were checked in the engines' own sources (docs/calibration.md cites file and commit):
- vLLM `vllm/benchmarks/serve.py` (v0.33.0, commit 4ba787ec9): `max_concurrency`,
  `output_throughput` (aggregate output tokens/s), `mean_tpot_ms`, `median_tpot_ms`,
  `spec_decode_acceptance_length` (1 + accepted / drafts); `--metadata KEY=VALUE` pairs are
  written as top-level keys, which is how a run says its mechanism and draft length.
- SGLang `scripts/playground/bench_speculative.py`: one JSON object per line with `batch_size`,
  `steps`, `topk`, `num_draft_tokens`, `acc_length`, `step_time` (seconds per decode step,
  20th percentile), `speed` (tokens/s per request). The script launches each server with
  `--max-running-requests` and `--cuda-graph-max-bs` equal to the batch size (sglang commit
  01d2a3d0d57b, `main`), so its rows run every request of the batch: speculative steps are not
  capped at SGLang's default 48.
"""

from __future__ import annotations

import csv
import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import MAX_DRAFT

QUANTITIES = ("tpot_ms", "step_ms", "tokens_per_s", "speedup", "verify_ms", "draft_ms")
DEFAULT_CONTEXT = 1024  # tokens, when a benchmark file does not say (stated in the fit's output)


@dataclass(frozen=True)
class Measurement:
    """One measured configuration: `value` of `quantity` at (mechanism, batch, draft_len, context).

    quantity: "step_ms" (one engine step), "tpot_ms" (time per output token of one sequence),
    "tokens_per_s" (aggregate output tokens/s of the batch), "speedup" (over the same
    engine's plain decoding at that batch), or a part of one step a profiler times: "verify_ms"
    (the target's forward pass, its kernels and launches) and "draft_ms" (the drafting: its
    kernels, sampler, launches and host loop; speculative rows only). `mechanism` is "none" or a speedplan mechanism spec
    (e.g. "eagle3", "eagle-tree:topk=4", "draft-model:llama-3.2-1b"); `tree_nodes` is a tree's
    verified draft nodes N. `where` says which file and row it came from. `max_running` is the
    engine's cap on running requests the run was launched with (SGLang --max-running-requests,
    vLLM --max-num-seqs; a step runs min(batch, max_running) requests); None: the engine
    profile's default (`spec_max_running` for speculative steps, no cap for plain ones)."""

    mechanism: str
    batch: int
    draft_len: int
    context: int
    quantity: str
    value: float
    acceptance_length: float | None
    where: str = ""  # "" in Python: described by its own fields
    tree_nodes: int | None = None
    max_running: int | None = None

    def __post_init__(self) -> None:
        if not self.where:
            show = lambda v: (repr(v) if isinstance(v, bool) or not isinstance(v, numbers.Real) else
                              str(int(v)) if math.isfinite(v) and float(v).is_integer() else f"{v:g}")
            object.__setattr__(self, "where", f"measurement {self.mechanism} batch {show(self.batch)} "
                                              f"draft_len {show(self.draft_len)}")
        real = lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool)
        for attr, field_name in (("batch", "batch"), ("draft_len", "draft_len"), ("context", "context"),
                                 ("tree_nodes", "tree_nodes"), ("max_running", "max_running_requests")):
            value = getattr(self, attr)
            if value is None:
                continue
            if not real(value) or not math.isfinite(value) or value != int(value):
                raise SpeedplanInputError(f"{self.where}: field {field_name!r} must be an integer, got {value!r}")
            object.__setattr__(self, attr, int(value))  # numpy integers or 8.0 → int
        for attr, field_name in (("value", self.quantity), ("acceptance_length", "acceptance_length")):
            value = getattr(self, attr)
            if value is None and attr == "acceptance_length":
                continue
            if not real(value):
                raise SpeedplanInputError(f"{self.where}: field {field_name!r} must be a number, got {value!r}")
            object.__setattr__(self, attr, float(value))
        speculative = self.mechanism != "none"
        if self.max_running is not None and not 1 <= self.max_running <= 65536:
            raise SpeedplanInputError(f"{self.where}: field 'max_running_requests' must be in 1..65536, "
                                      f"got {self.max_running}")
        if self.quantity not in QUANTITIES:
            raise SpeedplanInputError(f"{self.where}: quantity must be one of {', '.join(QUANTITIES)}")
        if not (math.isfinite(self.value) and self.value > 0):
            raise SpeedplanInputError(f"{self.where}: field {self.quantity!r} must be a positive number, got {self.value}")
        if not 1 <= self.batch <= 65536:
            raise SpeedplanInputError(f"{self.where}: field 'batch' must be in 1..65536, got {self.batch}")
        if not 1 <= self.context <= 10_000_000:
            raise SpeedplanInputError(f"{self.where}: field 'context' must be in 1..10000000, got {self.context}")
        if speculative != (self.draft_len > 0):
            raise SpeedplanInputError(f"{self.where}: field 'draft_len' is {self.draft_len} for mechanism "
                                      f"{self.mechanism!r} (plain decoding is mechanism none with draft_len 0)")
        if not 0 <= self.draft_len <= MAX_DRAFT:
            raise SpeedplanInputError(f"{self.where}: field 'draft_len' must be in 0..{MAX_DRAFT}, got {self.draft_len}")
        if speculative:
            al = self.acceptance_length
            if al is None:
                raise SpeedplanInputError(f"{self.where}: field 'acceptance_length' is needed for a speculative row")
            if not 1.0 <= al <= 1.0 + self.draft_len + 1e-9:
                raise SpeedplanInputError(f"{self.where}: field 'acceptance_length' {al} is outside 1..1+draft_len "
                                          f"({1 + self.draft_len}); it counts the bonus token")
        elif self.quantity == "draft_ms":
            raise SpeedplanInputError(f"{self.where}: field 'draft_ms' needs a speculative row (plain decoding drafts nothing)")
        elif self.quantity == "speedup" and abs(self.value - 1.0) > 1e-6:
            raise SpeedplanInputError(f"{self.where}: field 'speedup' of plain decoding must be 1, got {self.value}")


def _number(row: dict, key: str, where: str, integer: bool = False, required: bool = True):
    text = row.get(key)
    if text is None or (isinstance(text, str) and not text.strip()):
        if required:
            raise SpeedplanInputError(f"{where}: field {key!r} missing")
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise SpeedplanInputError(f"{where}: field {key!r} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise SpeedplanInputError(f"{where}: field {key!r} must be finite, got {text!r}")
    if integer:
        if value != int(value):
            raise SpeedplanInputError(f"{where}: field {key!r} must be an integer, got {text!r}")
        return int(value)
    return value


def _no_acceptance(mechanism: str, draft_len: int) -> None:
    return None


def read_csv(path: Path, acceptance=_no_acceptance) -> list[Measurement]:
    """Columns mechanism, batch, draft_len, context, one of tpot_ms/step_ms/tokens_per_s/speedup,
    acceptance_length for speculative rows (else `acceptance(mechanism, draft_len)`), optional
    tree_nodes and max_running_requests (the cap the server ran with; empty = the engine's default)."""
    try:
        with Path(path).open(newline="") as f:
            reader = csv.DictReader(f)
            header = [h.strip() for h in (reader.fieldnames or [])]
            rows = list(reader)
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    for key in ("mechanism", "batch", "draft_len", "context"):
        if key not in header:
            raise SpeedplanInputError(f"{path}: missing column {key!r}")
    quantities = [q for q in QUANTITIES if q in header]
    if len(quantities) != 1:
        raise SpeedplanInputError(f"{path}: needs exactly one of the columns {', '.join(QUANTITIES)}, "
                                  f"found {', '.join(quantities) or 'none'}")
    if not rows:
        raise SpeedplanInputError(f"{path}: no rows")
    return measurements_from_rows(rows, quantities[0], acceptance, where=lambda i: f"{path}:{i + 2}")


def measurements_from_rows(rows: list[dict], quantity: str | None = None, acceptance=_no_acceptance,
                           where=lambda i: f"row {i}") -> list[Measurement]:
    """Measurements from dicts keyed like the CSV's columns (mechanism, batch, draft_len,
    context, the quantity, acceptance_length, tree_nodes, max_running_requests); values may be
    numbers or text. `quantity`: the column that holds the measured value (default: the one of
    QUANTITIES each row has). `where(i)` names row i in errors."""
    out = []
    for i, raw in enumerate(rows):
        if not isinstance(raw, dict):
            raise SpeedplanInputError(f"{where(i)}: a measurement row must be a dict of column: value, "
                                      f"got {type(raw).__name__}")
        row = {str(k).strip(): v for k, v in raw.items() if k and not _missing(v)}
        present = [q for q in QUANTITIES if q in row]
        q = quantity or (present[0] if len(present) == 1 else None)
        if q is None:
            raise SpeedplanInputError(f"{where(i)}: needs exactly one of the fields {', '.join(QUANTITIES)}, "
                                      f"found {', '.join(present) or 'none'}")
        out.append(_measurement(row, q, acceptance, where(i)))
    return out


def _missing(value) -> bool:
    """An empty cell: None, "", a NaN of any float type, or pandas' NA/NaT."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return math.isnan(float(value))
    return type(value).__name__ in ("NAType", "NaTType")


def _measurement(row: dict, quantity: str, acceptance, where: str) -> Measurement:
    mech = str(row.get("mechanism") or "").strip().lower()
    if not mech:
        raise SpeedplanInputError(f"{where}: field 'mechanism' missing")
    draft_len = _number(row, "draft_len", where, True)
    al = None
    if mech != "none":
        al = _number(row, "acceptance_length", where, required=False)
        al = al if al is not None else acceptance(mech, draft_len)
    return Measurement(
        mechanism=mech, batch=_number(row, "batch", where, True), draft_len=draft_len,
        context=_number(row, "context", where, True), quantity=quantity,
        value=_number(row, quantity, where), acceptance_length=al,
        where=where, tree_nodes=_number(row, "tree_nodes", where, True, required=False),
        max_running=_number(row, "max_running_requests", where, True, required=False))


def read_vllm_bench(path: Path, data, acceptance=_no_acceptance) -> list[Measurement]:
    """One `vllm bench serve --save-result` run (or several, with --append-result). The run's
    mechanism and draft length come from `--metadata mechanism=NAME draft_len=K [context=L]
    [max_running_requests=N]` (the last: the server's --max-num-seqs, where it capped the batch)."""
    runs = data if isinstance(data, list) else [data]
    out = []
    for i, run in enumerate(runs, start=1):
        where = f"{path}:run {i}"
        if not isinstance(run, dict) or "output_throughput" not in run:
            raise SpeedplanInputError(f"{where}: not a vllm bench serve result (no 'output_throughput')")
        mech = str(run.get("mechanism") or "").strip().lower()
        if not mech:
            raise SpeedplanInputError(f"{where}: field 'mechanism' missing: run vllm bench serve with "
                                      "--metadata mechanism=NAME draft_len=K (mechanism=none for plain decoding)")
        batch = run.get("max_concurrency")
        if batch is None:
            raise SpeedplanInputError(f"{where}: field 'max_concurrency' missing: run with --max-concurrency B")
        draft_len = _number(run, "draft_len", where, True) if mech != "none" else 0
        al = _number(run, "spec_decode_acceptance_length", where, required=False)
        if mech != "none" and al is None:
            al = _number(run, "acceptance_length", where, required=False)
        if mech != "none" and al is None:
            al = acceptance(mech, draft_len)
        out.append(Measurement(
            mechanism=mech, batch=_number(run, "max_concurrency", where, True), draft_len=draft_len,
            context=_number(run, "context", where, True, required=False) or DEFAULT_CONTEXT,
            quantity="tokens_per_s", value=_number(run, "output_throughput", where),
            acceptance_length=al if mech != "none" else None, where=where,
            max_running=_number(run, "max_running_requests", where, True, required=False)))
    return out


def read_sglang_bench(path: Path, lines: list[str], mechanism: str) -> list[Measurement]:
    """JSON lines of SGLang's bench_speculative.py; steps = 0 rows are plain decoding. The
    file does not say which drafter ran: `mechanism` (eagle or eagle3) does, and a row with
    topk > 1 (or more draft tokens than steps + 1) is that head's tree (eagle3-tree:topk=K)."""
    out = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{i}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise SpeedplanInputError(f"{where}: not a JSON line") from None
        if not isinstance(rec, dict):
            raise SpeedplanInputError(f"{where}: expected a JSON object")
        steps = _number(rec, "steps", where, True)
        topk = _number(rec, "topk", where, True, required=False) or 1
        draft_tokens = _number(rec, "num_draft_tokens", where, True, required=False) or (steps + 1)
        if steps == 0:
            mech, nodes = "none", None
        elif topk > 1 or draft_tokens > steps + 1:  # the tree of the head `mechanism` names
            mech, nodes = f"{mechanism.split(':')[0].removesuffix('-tree')}-tree:topk={topk}", draft_tokens - 1
        else:
            mech, nodes = mechanism, None
        if _number(rec, "step_time", where) <= 0:
            raise SpeedplanInputError(f"{where}: field 'step_time' must be a positive number of seconds, "
                                      f"got {rec['step_time']!r}")
        out.append(Measurement(
            mechanism=mech, batch=_number(rec, "batch_size", where, True), draft_len=steps,
            context=_number(rec, "context", where, True, required=False) or DEFAULT_CONTEXT,
            quantity="step_ms", value=_number(rec, "step_time", where) * 1e3,
            acceptance_length=_number(rec, "acc_length", where) if steps else None, where=where, tree_nodes=nodes,
            max_running=_number(rec, "batch_size", where, True)))
    return out


REPEAT_SPREAD = 1.5  # repeated runs of one configuration further apart than this factor contradict each other


def check_consistent(rows: list[Measurement]) -> None:
    """Refuse rows that contradict each other: the same configuration (mechanism, batch,
    draft_len, context, tree_nodes, cap on running requests, quantity, and acceptance length
    within 5%) measured twice with values more than `REPEAT_SPREAD` apart. Repeated runs of an
    engine differ by a few percent; 1.5x is a mislabelled row (a unit, a batch, another model),
    which a fit would split the difference of. Rows with other acceptance lengths may differ:
    another dataset drafts better."""
    seen: dict[tuple, Measurement] = {}
    for m in rows:
        key = (m.mechanism, m.batch, m.draft_len, m.context, m.tree_nodes, m.max_running, m.quantity)
        first = seen.setdefault(key, m)
        if first is m:
            continue
        same_al = (m.acceptance_length is None and first.acceptance_length is None) or (
            m.acceptance_length is not None and first.acceptance_length is not None
            and abs(m.acceptance_length / first.acceptance_length - 1.0) <= 0.05)
        if same_al and max(m.value, first.value) > REPEAT_SPREAD * min(m.value, first.value):
            raise SpeedplanInputError(
                f"{m.where}: field {m.quantity!r} {m.value:g} contradicts {first.where} ({first.value:g}): the same "
                f"configuration ({m.mechanism}, batch {m.batch}, draft_len {m.draft_len}, context {m.context}) "
                f"measured more than {REPEAT_SPREAD:g}x apart")


def read_measurements(path: str | Path, mechanism: str = "eagle3", acceptance=_no_acceptance) -> list[Measurement]:
    """Any of the supported files, told apart by content: a CSV, a vLLM bench result (JSON
    object or list), SGLang bench_speculative output (JSON lines). `mechanism` names the drafter
    of SGLang chain rows, which the file does not state; `acceptance(mechanism, draft_len)`
    gives the acceptance length of speculative rows that state none (e.g. from a vLLM /metrics
    scrape)."""
    path = Path(path)
    if path.is_dir():
        raise SpeedplanInputError(f"{path}: is a folder; give its files (--measurements {path}/*.csv)")
    if not path.is_file():
        raise SpeedplanInputError(f"{path}: no such measurements file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read ({e})") from None
    if path.suffix.lower() == ".csv":
        return read_csv(path, acceptance)
    stripped = text.strip()
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, (dict, list)) and (isinstance(data, list) or "output_throughput" in data):
        return read_vllm_bench(path, data, acceptance)
    lines = stripped.splitlines()
    first = lines[0] if lines else ""
    if first.startswith("{") and ("step_time" in first or "acc_length" in first):
        return read_sglang_bench(path, lines, mechanism)
    if first.startswith("{") and "output_throughput" in first:  # vllm bench serve --append-result
        try:
            return read_vllm_bench(path, [json.loads(line) for line in lines if line.strip()], acceptance)
        except json.JSONDecodeError:
            raise SpeedplanInputError(f"{path}: a line is not valid JSON") from None
    if path.suffix.lower() == ".json" and isinstance(data, dict) and "output_throughput" not in data:
        raise SpeedplanInputError(f"{path}: not a vllm bench serve result (no 'output_throughput')")
    raise SpeedplanInputError(f"{path}: not a measurements CSV, a vllm bench serve JSON or SGLang "
                              "bench_speculative output")
