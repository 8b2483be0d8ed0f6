"""Engine profiles: the terms of the engine step model for one serving engine, as data.

A profile is a JSON file (`speedplan/specs/presets/engines/NAME.json`, or any path a user gives): the engine,
the version it describes, and for every term of `TERMS` its value and where that came from (a fit with its rows
and residuals, a document, a measurement, or a stated assumption). `speedplan calibrate` writes the same format.
Adding an engine is one JSON file. Every term has a unit and a physical meaning (`TERMS`); none is a polynomial in B.

    {"name": "vllm", "engine": "vLLM", "version": "...", "description": "...", "fit": {...},
     "terms": {"host_step_us": {"value": 950, "source": "fitted: ..."}, ...}}   # fit: calibrate's"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from speedplan.engine.fit_record import fit_record
from speedplan.engine.profile_keys import check_profile_keys
from speedplan.engine.memory_rule import DEFAULT_MEMORY, MemoryRule, memory_rule
from speedplan.errors import SpeedplanInputError, did_you_mean
from speedplan.specs.files import finite, read_json

PRESET_DIR = Path(__file__).resolve().parent.parent / "specs" / "presets" / "engines"
SHIPPED = " (shipped)"  # how a shipped profile's origin ends
DEFAULT_ENGINE = "vllm"


@dataclass(frozen=True)
class TermSpec:
    """What a term means: its unit, its physical meaning, and the range calibration may fit in."""

    unit: str
    meaning: str
    low: float
    high: float
    # whether each bound is a physical limit (no negative host work; a fraction is at most 1), or
    # only the range a fit searches (a fit pinned there says the rows would take it further)
    physical: tuple[bool, bool] = (True, False)


TERMS: dict[str, TermSpec] = {
    "host_step_us": TermSpec(
        "µs per step", "host work once per engine step: scheduling, input preparation, launching the "
        "step's graphs, the GPU→CPU copy of the sampled tokens and output handling", 0.0, 20_000.0),
    "host_seq_us": TermSpec(
        "µs per sequence per step", "host work per running sequence per step: block tables, stop checks, "
        "detokenisation, per-request output objects", 0.0, 5000.0),
    "host_spec_seq_us": TermSpec(
        "µs per sequence per speculative step", "host work per running sequence that only a speculative "
        "step does, on its critical path at the sync point (SGLang's spec v1 worker, for one: it prepares "
        "draft, verify and draft-extend batches where a plain step prepares one, and walks each request's "
        "accepted tokens in Python with a stop check per token: EagleVerifyInput.verify in "
        "python/sglang/srt/speculative/eagle_info.py, sglang commit f1f60ea0258f)", 0.0, 5000.0),
    "host_token_us": TermSpec(
        "µs per verified token per step", "host work per token the target verifies: positions, slot "
        "mapping, acceptance bookkeeping", 0.0, 2000.0),
    "overlap_plain": TermSpec(
        "fraction", "share of a plain step's host work that runs while the GPU computes the previous "
        "step (async / overlap scheduling); 0 = none, 1 = all", 0.0, 1.0, (True, True)),
    "overlap_spec": TermSpec(
        "fraction", "the same for speculative steps: the accepted count decides the next step's lengths, "
        "a GPU→CPU sync point that often keeps host work exposed", 0.0, 1.0, (True, True)),
    "launch_us": TermSpec(
        "µs per kernel launch", "host time to launch one kernel that is not inside a CUDA graph", 0.0, 100.0),
    "layer_launches": TermSpec(
        "launches per decoder layer per forward", "kernels each decoder layer launches outside CUDA graphs "
        "(0 for an engine that replays graphs; every kernel for an eager runtime)", 0.0, 1000.0),
    "draft_step_launches": TermSpec(
        "launches per draft forward", "kernels around each sequential draft forward that run outside CUDA "
        "graphs (input preparation, sampling, metadata of the drafting loop)", 0.0, 5000.0),
    "tree_level_us": TermSpec("µs per tree level", "host work of a dynamic tree's drafting per level beside its draft "
        "forward: the top-k over the level's logits, the gathers and scatter that grow the tree (0 for a chain)", 0.0, 20_000.0),
    "draft_token_us": TermSpec(
        "µs per drafted token", "host work of the drafting loop per token it proposes or scores (per-sequence "
        "inputs, candidate bookkeeping); serial, since each draft forward needs the previous one's tokens", 0.0, 5000.0),
    "sample_passes_plain": TermSpec(
        "passes over the logits", "how many times plain decoding's sampler reads and writes the B×vocab "
        "fp32 logits (and a drafter's sampler its own)", 0.0, 20.0),
    "sample_passes_spec": TermSpec(
        "passes over the logits", "how many times sampling and rejection read and write the verify pass's "
        "B·(1+D)×vocab fp32 logits", 0.0, 20.0),
    "sample_passes_random": TermSpec(
        "passes over the logits", "extra passes the target's sampler makes over its logits (T verified tokens "
        "× vocab: B, B·(1+D), or B·(N+1) for a tree) when requests sample at a temperature above 0: temperature scaling, "
        "softmax and the random draw, on top of sample_passes_plain or sample_passes_spec (the drafter's "
        "own sampler is priced greedy)", 0.0, 20.0),
    "kernel_scale": TermSpec(
        "ratio", "time the machine's kernels take now over what the op cost model's profile measured: clocks, "
        "power cap, a co-tenant, or the engine's kernels against the profiled ones (1 = as profiled); it "
        "scales the forward passes and the sampler, not host work or launches", 0.25, 4.0, (False, False)),
    "spec_max_running": TermSpec(
        "sequences", "most requests the engine runs in one speculative step by default; with more in flight "
        "the rest wait in its queue (0 = no such cap). Not fitted: an engine setting", 0.0, 1e6),
    "zero_draft_forward": TermSpec(
        "drafter forwards per step", "forwards a loaded drafter with a KV cache (EAGLE, EAGLE-3 or MTP head, "
        "draft model) runs in a step whose draft length is 0, over the step's one token per sequence, to keep "
        "that cache current for when drafting resumes (0: none, the cache goes stale). Not fitted: how the "
        "engine's code runs", 0.0, 1.0),
    "zero_draft_logits": TermSpec(
        "0 or 1", "whether that forward also computes the drafter's logits (1) or stops before its lm_head "
        "(0). Not fitted: how the engine's code runs", 0.0, 1.0),
    "host_draft_overlap": TermSpec("0 or 1", "whether a speculative step whose drafter runs on the host (n-gram lookup) "
        "overlaps host work as the engine's other speculative steps do (1: overlap_spec) or runs with the overlap "
        "scheduler off (0). Not fitted: how the engine's code runs", 0.0, 1.0),
}

# Terms a profile file may leave out (files written before the term existed), with the value
# and source it then gets.
OPTIONAL_TERMS: dict[str, tuple[float, str]] = {
    "host_spec_seq_us": (0.0, "default: no host work beyond host_seq_us per sequence in speculative steps (not set)"),
    "kernel_scale": (1.0, "default: kernels run as the op cost model's profile measured them (the profile sets none)"),
    "spec_max_running": (0.0, "default: no cap on the requests a speculative step runs (the profile does not set one)"),
    "zero_draft_forward": (0.0, "default: a step with draft length 0 runs no drafter forward (the profile does not say)"),
    "zero_draft_logits": (0.0, "default: no drafter logits in a step with draft length 0 (the profile does not say)"),
    "sample_passes_random": (0.0, "default: sampling at a temperature above 0 priced as greedy (the profile does not say)"),
    "tree_level_us": (0.0, "default: a tree level does no host work beside its draft forward (the profile does not say)"),
    "host_draft_overlap": (1.0, "default: steps drafted on the host overlap as the others (the profile does not say)"),
}


def running_requests(batch, speculative, spec_max_running: float) -> np.ndarray:
    """Requests one step runs when `batch` are in flight: min(batch, spec_max_running) for a speculative step of an
    engine with that cap (> 0), else batch. SGLang's cap 48, B = 64 → 48 for a speculative step, 64 for a plain one."""
    batch = np.asarray(batch, dtype=float)
    capped = np.asarray(speculative, dtype=bool) & (spec_max_running > 0)
    return np.where(capped, np.minimum(batch, spec_max_running if spec_max_running > 0 else np.inf), batch)


# engine settings the pricing applies as given (a cap; what a D = 0 step runs), never fitted
SETTINGS = ("spec_max_running", "zero_draft_forward", "zero_draft_logits", "host_draft_overlap")
SOURCE_KINDS = ("fitted", "document", "assumption", "measured", "starting point", "default")


def source_kind(source: str) -> str | None:
    """The kind of a term's source, the word it starts with (fitted, document, assumption,
    measured, starting point, default: a term a profile file left out); None for any other
    text, which a user set by hand (`EngineProfile.with_terms`, an edited file)."""
    head = source.split(":")[0].strip()
    return next((k for k in SOURCE_KINDS if head.startswith(k) and (k != "default" or source.startswith("default:"))),
                None)


@dataclass(frozen=True)
class Term:
    value: float
    source: str


@dataclass(frozen=True)
class EngineProfile:
    """The engine step model's terms for one engine (see `TERMS` for units and meanings).

    `fit` holds what calibration fitted, when it did: rows, residuals, leave-one-out error."""

    name: str
    engine: str
    version: str
    description: str
    terms: dict[str, Term]
    origin: str = ""  # the file it was read from
    fit: dict = field(default_factory=dict)
    fit_order: tuple[str, ...] = ()  # terms calibration tries first for this engine (default: calibrate.FIT_ORDER)
    memory: MemoryRule = DEFAULT_MEMORY  # how much of a GPU weights + KV cache may use (memory_rule.py)

    def __post_init__(self) -> None:
        if (not isinstance(self.name, str) or not self.name.strip() or len(self.name) > 200
                or re.search(r"[\x00-\x1f\x7f]", self.name)):
            # printed in every output; report folder names made from it are made safe (cli/sweep._folder_name)
            raise SpeedplanInputError(f"engine profile name {self.name!r}: give printable text (up to 200 characters)")
        for key in ("engine", "version", "description", "origin"):  # printed, or read as a path (origin)
            if not isinstance(getattr(self, key), str):
                raise SpeedplanInputError(f"engine profile {self.name}: {key} must be text, got {getattr(self, key)!r}")
        if not isinstance(self.fit, dict):
            raise SpeedplanInputError(f"engine profile {self.name}: fit must be a dict (what calibrate fitted), "
                                      f"got {type(self.fit).__name__}")
        if isinstance(self.fit_order, list):  # with_terms(..., fit_order=[...])
            object.__setattr__(self, "fit_order", tuple(self.fit_order))
        if (not isinstance(self.fit_order, tuple) or any(not isinstance(t, str) or t not in TERMS for t in self.fit_order)
                or len(set(self.fit_order)) < len(self.fit_order)):
            raise SpeedplanInputError(f"engine profile {self.name}: fit_order must list terms of {', '.join(TERMS)}, "
                                      f"each once; got {self.fit_order!r}")
        if not isinstance(self.memory, MemoryRule):  # None or 0.9 failed in the planner with an AttributeError
            raise SpeedplanInputError(f"engine profile {self.name}: memory must be a MemoryRule, got {self.memory!r:.60}")
        if not isinstance(self.terms, dict):
            raise SpeedplanInputError(f"engine profile {self.name}: terms must be a dict of {{name: Term}}")
        missing = [t for t in TERMS if t not in self.terms]
        if missing:
            raise SpeedplanInputError(f"engine profile {self.name}: missing term {missing[0]!r}")
        for name, term in self.terms.items():
            spec = TERMS.get(name)
            if spec is None:
                raise SpeedplanInputError(f"engine profile {self.name}: unknown term {name!r}; terms: {', '.join(TERMS)}")
            if not spec.low <= term.value <= spec.high:
                raise SpeedplanInputError(f"engine profile {self.name}: {name} = {term.value} outside "
                                          f"{spec.low:g}..{spec.high:g} ({spec.unit})")
            if name in SETTINGS and term.value != int(term.value):
                whole = "0 or 1" if spec.high == 1 else f"a whole number of {spec.unit}"
                raise SpeedplanInputError(f"engine profile {self.name}: {name} = {term.value} must be {whole}")

    def __getattr__(self, name: str) -> float:
        terms = self.__dict__.get("terms", {})
        if name in terms:
            return terms[name].value
        raise AttributeError(name)

    def values(self) -> dict[str, float]:
        """Every term's value by name, as `speedplan.engine.step.step_cost` takes them."""
        return {name: term.value for name, term in self.terms.items()}

    def with_terms(self, values: dict[str, float], source: str, **changes) -> "EngineProfile":
        """A copy with some terms replaced, each marked with `source`. The copy is no longer the
        file it was read from: its `origin` is "" unless `changes` give one."""
        if not isinstance(values, dict):
            raise SpeedplanInputError(f"engine profile {self.name}: with_terms takes {{term: value}}, got "
                                      f"{type(values).__name__}")
        if not isinstance(source, str) or not source.strip():
            raise SpeedplanInputError(f"engine profile {self.name}: with_terms needs a source (text saying where the "
                                      "values came from)")
        unknown = sorted(set(changes) - {"name", "engine", "version", "description", "origin", "fit", "fit_order"})
        if unknown:
            raise SpeedplanInputError(f"engine profile {self.name}: with_terms cannot change {unknown[0]!r}")
        terms = dict(self.terms)
        for name, value in values.items():
            if name not in TERMS:
                raise SpeedplanInputError(f"engine profile {self.name}: unknown term {name!r}; terms: {', '.join(TERMS)}")
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise SpeedplanInputError(f"engine profile {self.name}: {name} must be a number, got {value!r}")
            terms[name] = Term(float(value), source)
        return replace(self, terms=terms, **{"origin": "", **changes})

    def provenance(self) -> str:
        """How the terms were set, e.g. "4 of 10 terms fitted to 12 rows (...), median |residual| 8%;
        the others from documents or stated assumptions"."""
        edited = self.edited()  # said by _by_hand, not counted as fitted
        fitted = [n for n, t in self.terms.items() if t.source.startswith("fitted") and n not in edited]
        if not fitted:
            return ("no term fitted: documents and stated assumptions (see the profile's sources)"
                    + self._by_hand())
        fit = self.fit or {}
        latest = [n for n in fit.get("fitted", fitted) if n in fitted]  # this fit's; the rest came with its base
        before = [n for n in fitted if n not in latest]
        parts = [f"{len(latest)} of {len(self.terms)} terms fitted"]
        if fit.get("described"):
            parts[0] += f" to {len(fit.get('rows', []))} row{'s' * (len(fit.get('rows', [])) != 1)}{self.fitted_at()} ({fit['described']})"
        if fit.get("median_abs_residual") is not None:
            parts.append(f"median |residual| {fit['median_abs_residual']:.1%}")
        if fit.get("loo_median_error") is not None:
            parts.append(f"{fit.get('cross_validation', 'leave-one-out')} {fit['loo_median_error']:.1%}")
        earlier = (f"; {', '.join(before)} fitted earlier (base {fit.get('base')}: see its source)"
                   if before else "")
        # this fit's residuals are stale where a term it fitted was changed since (edited, or set by hand)
        changed = any(n in fit.get("fitted", []) and (n in edited or source_kind(t.source) is None)
                      for n, t in self.terms.items())
        stale = " (the fit's, before the edit below)" if changed and len(parts) > 1 else ""
        return (", ".join(parts) + stale + earlier + self._by_hand()
                + "; the others from documents or stated assumptions")

    def fitted_batches(self) -> tuple[float, float] | None:
        """The smallest and largest batch size (requests in flight) among the rows this profile's
        fit used; None when it has no fitted rows. Beyond them the fit extrapolates: rows all at
        B = 1 cannot tell per-step from per-sequence host work."""
        rows = (self.fit or {}).get("rows") or []  # a file's are checked by fit_record: batch finite where given
        batches = [float(r["batch"]) for r in rows if isinstance(r, dict) and finite(r.get("batch")) and r["batch"] > 0]
        return (min(batches), max(batches)) if batches else None

    def fitted_settings(self) -> list[str]:
        """What the fitted rows ran on, as calibrate labels them ("llama-3.1-8b on h100-sxm, TP=1"), each once."""
        labels = [row.get("setting") for row in (self.fit or {}).get("rows") or []]
        return sorted({label for label in labels if isinstance(label, str) and label})

    def fitted_at(self) -> str:
        """" at B = 1–64" (the fitted rows' batch sizes, for a provenance line); "" without rows."""
        span = self.fitted_batches()
        return "" if span is None else f" at B = {span[0]:g}" + (f"–{span[1]:g}" if span[1] > span[0] else "")

    def _by_hand(self) -> str:
        """"; host_seq_us = 500 set by hand (my guess)" for terms whose source is none of the kinds
        a shipped or calibrated profile uses (a `with_terms` override, a hand-edited file), and
        "; host_step_us = 3000 edited (the fit gave 990.588)" for a fitted term whose value is not the
        one its fit recorded (`fit["values"]`: a file edited by hand after calibrate wrote it)."""
        hand = [(n, t) for n, t in self.terms.items() if source_kind(t.source) is None]
        return ("".join(f"; {n} = {t.value:g} set by hand ({t.source})" for n, t in hand)
                + "".join(f"; {n} = {self.terms[n].value:g} edited (the fit gave {v:g})" for n, v in self.edited().items()))

    def edited(self) -> dict[str, float]:
        """{term: the value its fit gave} for each term marked fitted whose value is another one."""
        recorded = (self.fit or {}).get("values") or {}
        return {n: float(v) for n, v in recorded.items() if n in self.terms and source_kind(self.terms[n].source) == "fitted"
                and not np.isclose(self.terms[n].value, float(v), rtol=1e-9, atol=0.0)}

    def running(self, batch, speculative) -> np.ndarray:  # `running_requests` with its spec_max_running
        return running_requests(batch, speculative, self.terms["spec_max_running"].value)

    def meta(self) -> dict:
        """What a sweep's meta records of the profile that priced it."""
        return {"engine": self.name, "engine_family": self.engine, "engine_label": self.label(),
                "engine_source": self.origin, "engine_fit": self.provenance(),
                "engine_spec_max_running": self.terms["spec_max_running"].value,
                "engine_fitted_batches": list(self.fitted_batches() or []),
                "engine_fitted_settings": self.fitted_settings(), "engine_memory": self.memory.to_json(),
                "engine_acceptance_fitted": dict((self.fit or {}).get("acceptance_fitted") or {})}  # --fit-acceptance

    def prices_like(self, other: "EngineProfile") -> bool:
        """Whether two profiles price alike and are labelled alike (name, file, every term's value, memory rule)."""
        return (self.name == other.name and self.origin == other.origin and self.values() == other.values()
                and self.provenance() == other.provenance() and self.memory == other.memory)

    def label(self) -> str:
        """What every output says priced it, e.g. "engine profile vllm (vLLM V1, 2025-2026 releases)"."""
        from_file = self.origin and not self.origin.endswith(SHIPPED)
        where = f"file {self.origin}; " if from_file else ""  # a file named like a shipped one must not read as it
        return f"engine profile {self.name} ({where}{self.engine} {self.version})"

    def to_json(self) -> dict:
        return {
            "name": self.name, "engine": self.engine, "version": self.version, "description": self.description,
            "terms": {n: {"value": t.value, "unit": TERMS[n].unit, "meaning": TERMS[n].meaning, "source": t.source}
                      for n, t in self.terms.items()},
            **({"fit_order": list(self.fit_order)} if self.fit_order else {}),
            **({"memory": self.memory.to_json()} if self.memory != DEFAULT_MEMORY else {}),
            **({"fit": self.fit} if self.fit else {}),
        }


def engine_from_json(data, where: str) -> EngineProfile:
    """An EngineProfile from a parsed JSON object; problems name the file and field."""
    if not isinstance(data, dict):
        raise SpeedplanInputError(f"{where}: expected a JSON object")
    for key in ("name", "engine", "version", "terms"):
        if key not in data:
            raise SpeedplanInputError(f"{where}: missing field {key!r}")
    for key in ("name", "engine", "version", "description"):
        if key in data and not isinstance(data[key], str):
            raise SpeedplanInputError(f"{where}: field {key!r} must be text, got {data[key]!r:.60}")
        if key in ("engine", "version") and not (data[key].strip() and data[key].isprintable()):
            raise SpeedplanInputError(f"{where}: field {key!r} must be one line of printable text, got {data[key]!r:.60}")
    if "memory" in data and data["memory"] is None:
        raise SpeedplanInputError(f"{where}: 'memory' is null; leave it out for the default (0.9 of the device) "
                                  "or give {\"share\", \"of\", \"source\"}")
    check_profile_keys(data, where, TERMS)
    fit = fit_record({} if data.get("fit") is None else data["fit"], where, tuple(TERMS))
    if not isinstance(data["terms"], dict):
        raise SpeedplanInputError(f"{where}: 'terms' must be an object of {{name: {{value, source}}}}")
    terms = {}
    for name, entry in data["terms"].items():
        value = entry.get("value") if isinstance(entry, dict) else None
        if not finite(value) or not isinstance(entry.get("source"), str):
            raise SpeedplanInputError(f"{where}: terms.{name}: expected {{\"value\": number, \"source\": text}}")
        terms[name] = Term(float(value), entry["source"])
    for name, (value, source) in OPTIONAL_TERMS.items():
        terms.setdefault(name, Term(value, source))
    order = data.get("fit_order") or []
    if not isinstance(order, list) or any(not isinstance(t, str) or t not in TERMS for t in order) or len(set(order)) < len(order):
        raise SpeedplanInputError(f"{where}: 'fit_order' must list terms of {', '.join(TERMS)}, each once")
    memory = memory_rule(data.get("memory"), where)
    try:
        return EngineProfile(str(data["name"]), str(data["engine"]), str(data["version"]),
                             str(data.get("description", "")), terms, where, fit, tuple(order), memory)
    except SpeedplanInputError as e:  # said once, by the file: not "FILE: engine profile NAME: ..."
        said = f"engine profile {data['name']}: "
        raise SpeedplanInputError(f"{where}: {str(e).removeprefix(said)}") from None


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


def get_engine(name_or_path: str | Path | EngineProfile) -> EngineProfile:
    """A shipped engine profile by name (`vllm`, `sglang`, `trtllm`, `speedplan-runtime`), a
    JSON file written by `speedplan calibrate`, or a profile (or a Calibration's) as it is."""
    if isinstance(name_or_path, EngineProfile):
        return name_or_path
    if hasattr(name_or_path, "profile") and isinstance(name_or_path.profile, EngineProfile):
        return name_or_path.profile  # a Calibration: the profile it fitted
    if not isinstance(name_or_path, (str, Path)):
        raise SpeedplanInputError(f"engine: expected a profile name, a JSON file or an EngineProfile, "
                                  f"got {type(name_or_path).__name__}")
    key = str(name_or_path).strip()
    path = PRESET_DIR / f"{key.lower()}.json"
    if not path.exists():
        path = Path(key)
        if not (path.suffix == ".json" or "/" in key):
            raise SpeedplanInputError(f"unknown engine {key!r}{did_you_mean(key, preset_names())}; engine profiles: "
                                      f"{', '.join(preset_names())} (or a JSON file from speedplan calibrate)")
        if not path.is_file():
            raise SpeedplanInputError(f"engine profile {key}: " + ("is a folder; give the engine profile's JSON file"
                                      if path.is_dir() else "not a regular file" if path.exists() else "no such engine profile file"))
        data = None
        try:  # "runs.csv: malformed JSON" did not say that the file was given as the engine profile
            data = read_json(path)
            return engine_from_json(data, str(path))
        except SpeedplanInputError as e:  # where the file is no profile at all, say what is
            hint = "" if isinstance(data, dict) and "terms" in data else " (give a shipped profile's name or a JSON file speedplan calibrate wrote)"
            raise SpeedplanInputError(f"engine profile {key}: {str(e).removeprefix(f'{path}: ')}{hint}") from None
    # a shipped profile is named by its place in the package, not this machine's install path
    return engine_from_json(read_json(path), f"speedplan/specs/presets/engines/{path.name}{SHIPPED}")

