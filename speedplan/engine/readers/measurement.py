"""One measurement of a serving engine (`Measurement`) and the checks every reader shares: a
malformed value is a SpeedplanInputError naming the file, the row and the field (as the file
calls it: `Measurement.names`)."""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, replace

from speedplan.errors import SpeedplanInputError
from speedplan.specs.trace_records import MAX_DRAFT
from speedplan.plan.mechanism_names import canonical_spec
from speedplan.plan.temperature import MAX_TEMPERATURE, check_temperature

QUANTITIES = ("tpot_ms", "step_ms", "tokens_per_s", "speedup", "verify_ms", "draft_ms", "overhead_ms")
DEFAULT_CONTEXT = 1024  # tokens, when a benchmark file does not say (stated in the fit's output)
# What a measurement of each quantity can be: wider than any engine on any GPU runs (a decode
# step of 1 µs to 10 minutes; 10^8 tokens/s; a speedup of 1/1000 to 100, where 1 + D ≤ 33 bounds
# a real one), so that only a unit slip or a corrupted cell is refused.
PLAUSIBLE = {"tpot_ms": (1e-3, 6e5, "ms"), "step_ms": (1e-3, 6e5, "ms"), "verify_ms": (1e-3, 6e5, "ms"),
             "draft_ms": (1e-3, 6e5, "ms"), "overhead_ms": (1e-3, 6e5, "ms"),
             "tokens_per_s": (1e-3, 1e8, "tokens/s"), "speedup": (1e-3, 100.0, "x")}
# Drafts a server's counters show shorter on average than this share of the draft length: the
# length varied over the run (vLLM's per-batch-size num_speculative_tokens), so the run is not
# one draft length. Truncation at a request's last tokens shortens a few drafts below that.
SHORT_DRAFTS = 0.95
MAX_TREE_NODES = 4096  # draft nodes a tree verifies per sequence (engines run 8-64; SGLang's num_draft_tokens - 1)
# Rows one calibration reads, all files together: a few hundred measured configurations identify
# every term; rows are priced as arrays and cross-validated in 10 folds, so 10,000 take seconds.
MAX_ROWS = 10_000
# A number in a text field: plain ASCII decimal or scientific notation (float() also takes
# "1_0" = 10 and non-ASCII digits), or inf / nan, which the callers refuse as not finite.
_NUMBER = re.compile(r"[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.I | re.A)
SHOWN = 40  # characters of a value an error line echoes
# Columns that name the setting a row ran on, each under the names users give it: calibrate
# checks them against its --tp, --hardware and --model (rows of two GPUs or TPs are not one fit).
SETTING_COLUMNS = {"tp": ("tp", "tp_size", "tensor_parallel_size", "tensor_parallel"),
                   "gpu": ("gpu", "gpu_type", "hardware"), "model": ("model", "model_id", "target_model")}


def canonical_mechanism(name: str) -> str:
    """`name` as speedplan names the mechanism (`speedplan.plan.mechanism_names`: lower case,
    an engine's or a user's alias replaced, plain decoding "none"); the options after ':' as given."""
    return canonical_spec(name)


def shown(value) -> str:
    """`value` as an error line echoes it: its repr, cut to SHOWN characters."""
    text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


def parse_number(text) -> float:
    """`text` (a number or a string) as a float; ValueError unless it is plain ASCII decimal or
    scientific notation (or inf / nan). An integer beyond a float's range (JSON allows 10**400)
    is ±inf, which every caller refuses as not finite."""
    if isinstance(text, str) and not _NUMBER.fullmatch(text.strip()):
        raise ValueError(text)
    try:
        return float(text)
    except OverflowError:
        return math.inf if text > 0 else -math.inf


@dataclass(frozen=True)
class Measurement:
    """One measured configuration: `value` of `quantity` at (mechanism, batch, draft_len, context).

    quantity: "step_ms" (one engine step), "tpot_ms" (time per output token of one sequence),
    "tokens_per_s" (aggregate output tokens/s of the batch), "speedup" (over the same
    engine's plain decoding at that batch), or a part of one step a profiler times: "verify_ms"
    (the target's forward pass, its kernels and launches), "overhead_ms" (the rest of the step
    outside the target's forward and the drafting: the sampler's and the rejection's passes over
    the logits and the exposed host work) and "draft_ms" (the drafting: its
    kernels, sampler, launches and host loop; speculative rows only). `mechanism` is "none" or a speedplan mechanism spec
    (e.g. "eagle3", "eagle-tree:topk=4", "draft-model:llama-3.2-1b"); `tree_nodes` is a tree's
    verified draft nodes N. `where` says which file and row it came from. `max_running` is the
    engine's cap on running requests the run was launched with (SGLang --max-running-requests,
    vLLM --max-num-seqs; a step runs min(batch, max_running) requests); None: the engine
    profile's default (`spec_max_running` for speculative steps, no cap for plain ones).
    `temperature` is the sampling temperature the run's requests asked for (0 = greedy, up to 2
    as `sweep --temperature` takes it): above 0 its steps are priced with the sampler's
    `sample_passes_random` passes over the target's logits."""

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
    # the file's own names for fields, where it is not a CSV: (("batch", "max_concurrency"), ...)
    names: tuple[tuple[str, str], ...] = ()
    model: str | None = None  # the model the file names (a vllm bench serve result's model_id), if any
    tp: int | None = None  # the TP a CSV row names (its tp column), checked against calibrate's --tp
    hardware: str | None = None  # the GPU a CSV row names (its gpu column), checked against --hardware
    notes: tuple[str, ...] = ()  # how the reader read it where the file did not say (a derived context), printed
    temperature: float = 0.0  # the run's sampling temperature (0 = greedy)
    engine: str | None = None  # the serving engine the file shows ran it ("sglang": an SGLang server's own fields); None: not said

    def running(self, spec_cap: float = 0.0, speculative: bool | None = None) -> int:
        """Requests one step of this run ran: min(batch, cap), the cap the row states
        (`max_running`) for any step, else the engine's `spec_cap` (spec_max_running, 0 = none)
        for a speculative one (`speculative`: default, whether the row is)."""
        speculative = self.mechanism != "none" if speculative is None else speculative
        cap = self.max_running or (spec_cap if speculative else 0)
        return int(min(self.batch, cap)) if cap and cap > 0 else self.batch

    def _f(self, field_name: str) -> str:
        """`field_name` as the file calls it, quoted: 'batch' in a CSV, 'batch_size' in SGLang's lines."""
        return repr(dict(self.names).get(field_name, field_name))

    def __post_init__(self) -> None:
        real = lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool)
        if not self.where:
            show = lambda v: (repr(v) if isinstance(v, bool) or not isinstance(v, numbers.Real) else
                              str(int(v)) if math.isfinite(v) and float(v).is_integer() else f"{v:g}")
            object.__setattr__(self, "where", f"measurement {self.mechanism} batch {show(self.batch)} "
                                              f"draft_len {show(self.draft_len)}"
                               + (f" temperature {show(self.temperature)}" if self.temperature is not None
                                  and not (real(self.temperature) and self.temperature == 0) else ""))
        for attr, field_name in (("batch", "batch"), ("draft_len", "draft_len"), ("context", "context"),
                                 ("tree_nodes", "tree_nodes"), ("max_running", "max_running_requests"), ("tp", "tp")):
            value = getattr(self, attr)
            if value is None:
                continue
            if not real(value) or not math.isfinite(value) or value != int(value):
                raise SpeedplanInputError(f"{self.where}: field {self._f(field_name)} must be an integer, "
                                          f"got {shown(value)}")
            object.__setattr__(self, attr, int(value))  # numpy integers or 8.0 → int
        for attr, field_name in (("value", self.quantity), ("acceptance_length", "acceptance_length")):
            value = getattr(self, attr)
            if value is None and attr == "acceptance_length":
                continue
            if not real(value):
                raise SpeedplanInputError(f"{self.where}: field {self._f(field_name)} must be a number, got {shown(value)}")
            object.__setattr__(self, attr, float(value))
        try:  # the range `sweep --temperature` takes (plan/temperature.py)
            temperature = 0.0 if self.temperature is None else self.temperature  # None: not stated, greedy
            object.__setattr__(self, "temperature", check_temperature(temperature))
        except SpeedplanInputError:
            raise SpeedplanInputError(f"{self.where}: field {self._f('temperature')} must be a number in "
                                      f"0..{MAX_TEMPERATURE:g}, the sampling temperature (0 = greedy), got "
                                      f"{f'{temperature:g}' if real(temperature) else shown(temperature)}") from None
        if isinstance(self.mechanism, str):
            object.__setattr__(self, "mechanism", canonical_mechanism(self.mechanism))
        speculative = self.mechanism != "none"
        if speculative:  # a name no mechanism has, before the draft length it would be checked against
            from speedplan.plan.mechanisms import MECHANISMS

            name = str(self.mechanism).split(":")[0].strip().lower()
            if name not in MECHANISMS:
                raise SpeedplanInputError(f"{self.where}: field {self._f('mechanism')}: unknown mechanism "
                                          f"{self.mechanism!r}; use none or one of {', '.join(MECHANISMS)}")
        if self.quantity not in QUANTITIES:
            raise SpeedplanInputError(f"{self.where}: quantity must be one of {', '.join(QUANTITIES)}")
        if not (math.isfinite(self.value) and self.value > 0):
            raise SpeedplanInputError(f"{self.where}: field {self._f(self.quantity)} must be a positive number, "
                                      f"got {self.value}")
        low, high, unit = PLAUSIBLE[self.quantity]
        if not low <= self.value <= high:
            raise SpeedplanInputError(f"{self.where}: field {self._f(self.quantity)} {self.value:g} is not a plausible "
                                      f"measurement (expected {low:g}..{high:g} {unit})")
        if not 1 <= self.batch <= 65536:
            raise SpeedplanInputError(f"{self.where}: field {self._f('batch')} must be in 1..65536, got {self.batch}")
        if self.tp is not None and not 1 <= self.tp <= 65536:
            raise SpeedplanInputError(f"{self.where}: field {self._f('tp')} must be in 1..65536, got {self.tp}")
        if self.max_running is not None and not 1 <= self.max_running <= 65536:
            raise SpeedplanInputError(f"{self.where}: field {self._f('max_running_requests')} must be in 1..65536, "
                                      f"got {self.max_running}")
        if not 1 <= self.context <= 10_000_000:
            raise SpeedplanInputError(f"{self.where}: field {self._f('context')} must be in 1..10000000, got {self.context}")
        if not 0 <= self.draft_len <= MAX_DRAFT:
            raise SpeedplanInputError(f"{self.where}: field {self._f('draft_len')} must be in 0..{MAX_DRAFT}, "
                                      f"got {self.draft_len}")
        if speculative != (self.draft_len > 0):
            raise SpeedplanInputError(f"{self.where}: field {self._f('draft_len')} is {self.draft_len} for mechanism "
                                      f"{self.mechanism!r} (plain decoding is mechanism none with draft_len 0)")
        if self.tree_nodes is not None and not (speculative and 1 <= self.tree_nodes <= MAX_TREE_NODES):
            raise SpeedplanInputError(f"{self.where}: field {self._f('tree_nodes')} {self.tree_nodes} " + (
                f"must be in 1..{MAX_TREE_NODES}" if speculative else "on a plain row (plain decoding verifies no tree)"))
        if speculative:
            al = self.acceptance_length
            if al is None:
                raise SpeedplanInputError(f"{self.where}: field {self._f('acceptance_length')} is needed for a speculative "
                                          "row (or calibrate --fit-acceptance fits it from rows at two or more draft lengths)")
            if not 1.0 <= al <= 1.0 + self.draft_len + 1e-9:
                raise SpeedplanInputError(f"{self.where}: field {self._f('acceptance_length')} {al} is outside "
                                          f"1..1+draft_len ({1 + self.draft_len}); it counts the bonus token")
        elif self.acceptance_length is not None and abs(self.acceptance_length - 1.0) > 1e-9:
            raise SpeedplanInputError(f"{self.where}: field {self._f('acceptance_length')} {self.acceptance_length:g} on "
                                      "a plain row: plain decoding emits one token a step (leave it empty, or 1)")
        elif self.quantity == "draft_ms":
            raise SpeedplanInputError(f"{self.where}: field 'draft_ms' needs a speculative row (plain decoding drafts nothing)")
        elif self.quantity == "speedup" and abs(self.value - 1.0) > 1e-6:
            raise SpeedplanInputError(f"{self.where}: field 'speedup' of plain decoding must be 1, got {self.value}")
        if not speculative:  # 1 or empty: the same plain row
            object.__setattr__(self, "acceptance_length", None)


def number_field(row: dict, key: str, where: str, integer: bool = False, required: bool = True):
    """`row[key]` as a number (an int where `integer`); None where it is empty and not `required`."""
    text = row.get(key)
    if text is None or (isinstance(text, str) and not text.strip()):
        if required:
            raise SpeedplanInputError(f"{where}: field {key!r} missing")
        return None
    if isinstance(text, bool):  # JSON true is not the number 1
        raise SpeedplanInputError(f"{where}: field {key!r} must be a number, got {shown(text)}")
    try:
        value = parse_number(text)
    except (TypeError, ValueError):
        comma = isinstance(text, str) and re.fullmatch(r"\s*[+-]?\d+,\d+\s*", text)  # 6,9: a decimal comma
        raise SpeedplanInputError(f"{where}: field {key!r} must be a number (plain digits, e.g. 7.25 or 1e3), "
                                  f"got {shown(text)}" + ("; write it with a decimal point" if comma else "")) from None
    if not math.isfinite(value):
        raise SpeedplanInputError(f"{where}: field {key!r} must be finite, got {shown(text)}")
    if integer:
        if value != int(value):
            raise SpeedplanInputError(f"{where}: field {key!r} must be an integer, got {shown(text)}")
        return int(value)
    return value


def drafts_ran_short(mean_draft_tokens: float | None, draft_len: int) -> float | None:
    """The mean draft length where a server's counters show drafts shorter on average than
    SHORT_DRAFTS of `draft_len` (the length varied over the run), else None."""
    if mean_draft_tokens is None or not mean_draft_tokens < SHORT_DRAFTS * draft_len:
        return None
    return float(mean_draft_tokens)


def no_acceptance(mechanism: str, draft_len: int) -> None:
    """The acceptance source of rows when no /metrics scrape was given: none."""
    return None


def scraped(acceptance, mechanism: str, draft_len: int, where: str) -> float | None:
    """`acceptance(mechanism, draft_len)` for a row that states no acceptance length, its
    refusal (a scrape with too few positions) naming the row `where`."""
    try:
        value = acceptance(mechanism, draft_len)
    except SpeedplanInputError as e:
        raise SpeedplanInputError(f"{where}: {e}") from None
    if value is not None and isinstance(getattr(acceptance, "taken_by", None), list):  # rows it stood in for
        acceptance.taken_by.append(where)
    return value


def repeated_lines(rows: list[tuple[int, list[str]]], read: list[Measurement]) -> list[Measurement]:
    """`read` with a note on each row whose cells repeat an earlier line's word for word: kept (two
    runs can round to one figure) but said, since a pasted line counts one run twice in the fit."""
    first: dict[tuple, int] = {}
    out = []
    for (line, cells), m in zip(rows, read):
        key = tuple(c.strip() for c in cells)
        seen = first.setdefault(key, line)
        out.append(m if seen == line else replace(
            m, notes=m.notes + (f"the same cells as line {seen}: counted as a second run (delete a pasted line)",)))
    return out


def check_decoded(run: dict, where: str) -> None:
    """Refuse a run that decoded nothing (checked after its failed requests, which say why)."""
    for key in ("completed", "total_output_tokens"):
        if number_field(run, key, where, required=False) == 0:
            raise SpeedplanInputError(f"{where}: field {key!r} is 0: no request finished decoding, so the run's "
                                      "throughput and TPOT measured nothing; rerun until requests complete")
