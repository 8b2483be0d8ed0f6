"""vLLM's Prometheus `/metrics` scrape: the speculative-decoding counters.

vLLM (vllm/v1/spec_decode/metrics.py, `SpecDecodingProm`, v0.33.0 @ 4ba787ec9) exports
counters, exposed with prometheus_client's `_total` suffix:

    vllm:spec_decode_num_drafts_total{engine="0",model_name="M"} 100.0
    vllm:spec_decode_num_draft_tokens_total{...} 300.0
    vllm:spec_decode_num_accepted_tokens_total{...} 210.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{...,position="0"} 90.0

`num_drafts` counts, per step, each request that had drafts; `per_pos[i]` counts the drafts
whose token at position i (0-based) was accepted. So per_pos[i] / num_drafts is the
unconditional chance that draft i+1 is accepted, and AL = 1 + Σ_i per_pos[i] / num_drafts
(as `vllm bench serve` computes `spec_decode_acceptance_length`). Series of several engines
(label `engine`) are summed. Counters are cumulative since the server started: scrape a
server that has served only the workload you want to measure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from speedplan.engine.readers.measurement import parse_number, shown
from speedplan.errors import SpeedplanInputError
from speedplan.specs.files import read_problem

PREFIX = "vllm:spec_decode_"
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_SAMPLE = re.compile(r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$')
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


@dataclass(frozen=True)
class SpecDecodeCounters:
    """The counters of one scrape, summed over series; `accepted_per_position[i]` is position i."""

    path: str
    num_drafts: float
    num_draft_tokens: float | None
    num_accepted_tokens: float | None
    accepted_per_position: tuple[float, ...]
    models: tuple[str, ...]

    @property
    def position_rates(self) -> tuple[float, ...]:
        """per_pos[i] / num_drafts: the chance draft i+1 is accepted (unconditional)."""
        return tuple(a / self.num_drafts for a in self.accepted_per_position)

    @property
    def acceptance_length(self) -> float:
        return 1.0 + sum(self.position_rates)

    @property
    def mean_draft_tokens(self) -> float | None:
        """Draft tokens per draft (the server's K when its drafts were all full length)."""
        return None if self.num_draft_tokens is None else self.num_draft_tokens / self.num_drafts


def _labels(text: str, where: str) -> dict[str, str]:
    labels, pos = {}, 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if not m:
            raise SpeedplanInputError(f"{where}: malformed labels {{{text}}}")
        labels[m.group(1)] = m.group(2)
        pos = m.end()
    return labels


def read_vllm_metrics(path: Path) -> SpecDecodeCounters:
    """Parse a Prometheus text scrape of a vLLM server (`curl host:8000/metrics > FILE`)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()  # a leading BOM is not part of the first name
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read vLLM metrics ({read_problem(e)})") from None
    totals = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED: 0.0}
    seen: set[str] = set()
    per_pos: dict[int, float] = {}
    models: set[str] = set()
    bare: set[str] = set()  # counters without the _total suffix prometheus_client gives every counter
    for i, line in enumerate(lines, 1):
        line = line.strip()
        if not line.startswith(PREFIX):
            continue  # comments, other metrics, and `_created` gauges are not read
        where = f"{path}:{i}"
        m = _SAMPLE.match(line)
        if not m:
            raise SpeedplanInputError(f"{where}: not a Prometheus sample line")
        name = m.group("name")
        if name not in totals and name != PER_POSITION:
            if f"{name}_total" in (*totals, PER_POSITION):
                bare.add(name)
            continue
        try:
            value = parse_number(m.group("value"))
        except ValueError:
            raise SpeedplanInputError(f"{where}: {name} value {shown(m.group('value'))} is not a number") from None
        if not 0 <= value < float("inf"):
            raise SpeedplanInputError(f"{where}: {name} value must be a finite count >= 0, got {m.group('value')}")
        labels = _labels(m.group("labels") or "", where)
        if "model_name" in labels:
            models.add(labels["model_name"])
        seen.add(name)
        if name == PER_POSITION:
            position = labels.get("position")
            if position is None or not (position.isascii() and position.isdigit() and len(position) <= 6):
                raise SpeedplanInputError(f"{where}: {name} needs an integer label position=\"N\", got {position!r}")
            per_pos[int(position)] = per_pos.get(int(position), 0.0) + value
        else:
            totals[name] += value
    if not seen & {DRAFTS, PER_POSITION} and bare:
        name = min(bare, key=lambda n: (n != DRAFTS.removesuffix("_total"), n))
        raise SpeedplanInputError(f"{path}: has {name} but no {name}_total: prometheus_client exposes each vLLM counter "
                                  "with the _total suffix, and this file lacks those samples (edited, or written by "
                                  "another exporter); give the scrape as `curl HOST:8000/metrics` writes it")
    if not seen & {DRAFTS, PER_POSITION} and any(line.lstrip().startswith(PREFIX) for line in lines):
        raise SpeedplanInputError(f"{path}: vLLM speculative-decoding metrics without {DRAFTS}: vLLM exports the "
                                  "per-draft and per-position counters from 0.8.5 on (PR #16665); scrape a newer "
                                  "server, or give each row its acceptance_length")
    if DRAFTS not in seen:
        raise SpeedplanInputError(f"{path}: no {DRAFTS} sample (is this a vLLM /metrics scrape with speculative decoding on?)")
    if len(models) > 1:  # one server serves one model; its engines' series (engine="0", "1") are summed
        raise SpeedplanInputError(f"{path}: series of {len(models)} models ({', '.join(sorted(models))}): summing their "
                                  "counters mixes two drafters' acceptance; give one server's scrape")
    if totals[DRAFTS] <= 0:
        raise SpeedplanInputError(f"{path}: {DRAFTS} is 0: the server has not drafted yet")
    if not per_pos:
        raise SpeedplanInputError(f"{path}: no {PER_POSITION}{{position=...}} samples")
    if sorted(per_pos) != list(range(len(per_pos))):
        raise SpeedplanInputError(f"{path}: {PER_POSITION} positions {sorted(per_pos)} are not 0..{len(per_pos) - 1}")
    counts = [per_pos[k] for k in range(len(per_pos))]
    for k in range(1, len(counts)):
        if counts[k] > counts[k - 1] + 1e-9:
            raise SpeedplanInputError(f"{path}: {PER_POSITION} position {k} ({counts[k]:g}) exceeds position "
                                      f"{k - 1} ({counts[k - 1]:g}); a draft is accepted only after its predecessors")
    if counts[0] > totals[DRAFTS] + 1e-9:
        raise SpeedplanInputError(f"{path}: {PER_POSITION} position 0 ({counts[0]:g}) exceeds {DRAFTS} ({totals[DRAFTS]:g})")
    return SpecDecodeCounters(
        path=str(path), num_drafts=totals[DRAFTS],
        num_draft_tokens=totals[DRAFT_TOKENS] if DRAFT_TOKENS in seen else None,
        num_accepted_tokens=totals[ACCEPTED] if ACCEPTED in seen else None,
        accepted_per_position=tuple(counts), models=tuple(sorted(models)))


# The accepted total and the per-position sum may differ by this share (series scraped a moment apart).
TOTALS_SPREAD = 0.01


def check_totals(counters: SpecDecodeCounters) -> None:
    """The counters of a scrape agree with each other: vLLM counts each accepted token once in
    the accepted total and once at its position, and accepts no more than it drafted
    (vllm/v1/spec_decode/metrics.py, `SpecDecodingStats.observe_draft`, commit
    016a8587edb04ae53c913a1da9355a07dc0ca4ae; the per-position counters are registered for every
    position 0..num_speculative_tokens-1). Disagreeing totals are a scrape cut short (positions
    missing), edited, or pieced together from several scrapes or servers. `speedplan calibrate`
    checks its scrape so (`read_vllm_metrics` reads what a file holds)."""
    path, accepted, drafted = counters.path, counters.num_accepted_tokens, counters.num_draft_tokens
    per_position = sum(counters.accepted_per_position)
    if accepted is not None and abs(accepted - per_position) > TOTALS_SPREAD * max(accepted, per_position, 1.0):
        raise SpeedplanInputError(f"{path}: {ACCEPTED} ({accepted:g}) is not the sum of {PER_POSITION} over its "
                                  f"positions ({per_position:g}): vLLM counts each accepted token in both, so positions "
                                  "are missing or the counters come from different scrapes; give one whole scrape")
    if drafted is not None and max(accepted or 0.0, per_position) > drafted * (1 + TOTALS_SPREAD):
        raise SpeedplanInputError(f"{path}: more tokens accepted ({max(accepted or 0.0, per_position):g}) than drafted "
                                  f"({DRAFT_TOKENS} {drafted:g}): the counters come from different scrapes or servers; "
                                  "give one whole scrape")


def plain_server_scrape(text: str) -> bool:
    """A vLLM /metrics scrape (its `vllm:` metrics) without the spec-decode counters: a server
    that ran without --speculative-config (they are registered only with a speculative config)."""
    lines = text.splitlines()
    return (any(line.startswith("vllm:") for line in lines)
            and not any(line.lstrip().startswith(PREFIX) for line in lines))


NO_SPEC_COUNTERS = ("a vLLM /metrics scrape with no vllm:spec_decode_* counters: that server ran without "
                    "speculative decoding, so it gives no acceptance")


def looks_like_vllm_metrics(text: str) -> bool:
    return DRAFTS in text or PER_POSITION in text or any(line.lstrip().startswith(PREFIX) for line in text.splitlines())
