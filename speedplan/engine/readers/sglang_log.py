"""SGLang's decode-batch log lines: the accept length of speculative decoding.

SGLang logs every `--decode-log-interval` decode steps (python/sglang/srt/managers/
scheduler_components/metrics_reporter.py in 0.5.23):

    Decode batch, #running-req: 32, #token: 18234, token usage: 0.07, accept len: 3.21,
    accept rate: 0.55, cuda graph: True, gen throughput (token/s): 2450.12, #queue-req: 0

(with a forward-iteration counter, "Decode batch [1234], ...", when iterations are logged).
`accept len` is tokens emitted per request per verify step over that window, bonus token
included (spec_num_accept_tokens / spec_num_forward_ct), i.e. AL. `accept rate` (0.5.23; older
versions wrote "Decode batch. ..." without it) is correct drafts / (verify steps ×
(num_draft_tokens − 1)), so for a chain (topk 1) D = (AL − 1) / accept rate.

Checked in sglang commit 00df707e8de4 (`report_decode_stats`; the token-usage part comes from
`get_decode_usage_msg_parts`, `#token: N, token usage: U`, or `#full token: ...` on hybrid
models). The server also logs its settings once per launch, `server_args=ServerArgs(...,
speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, ...,
speculative_adaptive=False, ...)` (`logger.info(f"{server_args=}")` in the engine's launch). Where
the log has that line, a launch the decode lines cannot describe as one chain is refused: a token
tree (topk > 1, or more draft tokens than steps + 1: its accept len is a tree's and its accept rate
divides by the tree's nodes, not a draft length), `--speculative-adaptive` (the draft length moved
with the batch, and accept rate divides by the largest), and launches of different settings in one
file (their lines mix draft lengths).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from speedplan.engine.readers.measurement import parse_number
from speedplan.errors import SpeedplanInputError

_DECODE = re.compile(r"Decode batch(?: \[\d+\])?[.,]")  # " [N]" when SGLANG_LOG_FORWARD_ITERS is set
_ADAPTIVE_MOVED = "Adaptive spec params updated"  # adaptive_spec_params.py, when a slot changes its steps
_SETTING = re.compile(r"\b(speculative_(?:algorithm|num_steps|eagle_topk|num_draft_tokens|adaptive))=([^,)\s]+)")
_FIELD = {
    "accept_len": re.compile(r"accept len:\s*(\S+?),?(?:\s|$)"),
    "accept_rate": re.compile(r"accept rate:\s*(\S+?),?(?:\s|$)"),
    "running_req": re.compile(r"#running-req:\s*(\S+?),?(?:\s|$)"),
    "gen_throughput": re.compile(r"gen throughput \(token/s\):\s*(\S+?),?(?:\s|$)"),
}


@dataclass(frozen=True)
class DecodeLogLine:
    """One `Decode batch` line that reports speculative decoding."""

    line: int
    accept_len: float
    accept_rate: float | None
    running_req: int | None
    gen_throughput: float | None
    draft_len: int | None = None  # the chain's D by the launch's server_args line, where the log has one


@dataclass(frozen=True)
class Launch:
    """The speculative settings of one `server_args=ServerArgs(...)` line."""

    line: int
    algorithm: str | None
    steps: int | None
    topk: int | None
    draft_tokens: int | None
    adaptive: bool

    def key(self) -> tuple:
        return self.algorithm, self.steps, self.topk, self.draft_tokens, self.adaptive

    def draft_len(self) -> int | None:
        """A chain's D: draft tokens less the root (NGRAM sets steps to draft tokens // topk), else steps."""
        return self.draft_tokens - 1 if self.draft_tokens else self.steps

    def text(self) -> str:
        return (f"speculative_algorithm={self.algorithm}, speculative_num_steps={self.steps}, "
                f"speculative_eagle_topk={self.topk}, speculative_num_draft_tokens={self.draft_tokens}"
                + (", speculative_adaptive=True" if self.adaptive else ""))


def _launch(path: Path, i: int, text: str) -> Launch | None:
    """The settings a `server_args=ServerArgs(...)` line holds (None for another line)."""
    if "ServerArgs(" not in text:
        return None
    found = {k: v.strip("'\"") for k, v in _SETTING.findall(text)}
    if not found:
        return None
    counts: dict[str, int | None] = {}
    for key in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"):
        value = found.get(key, "None")
        if value == "None":
            counts[key] = None
            continue
        if not (value.isascii() and value.isdigit() and int(value) <= 100_000):  # int() takes "1_0" and "３"
            raise SpeedplanInputError(f"{path}:{i}: server_args {key}={value:.40} is not a whole number (0..100000)")
        counts[key] = int(value)
    algorithm = found.get("speculative_algorithm", "None")
    return Launch(i, None if algorithm == "None" else algorithm, counts["speculative_num_steps"],
                  counts["speculative_eagle_topk"], counts["speculative_num_draft_tokens"],
                  found.get("speculative_adaptive") == "True")


def _check_launch(path: Path, launch: Launch, decode_line: int) -> None:
    """A launch whose decode lines are one chain's: no tree, no adaptive draft length."""
    where = f"{path}:{decode_line}"
    if launch.adaptive:
        raise SpeedplanInputError(f"{where}: the server ran --speculative-adaptive (server_args, line {launch.line}), so "
                                  "its draft length moved with the batch: accept len mixes draft lengths and accept rate "
                                  "divides by the largest; measure with a fixed --speculative-num-steps")
    steps, topk, tokens = launch.steps, launch.topk, launch.draft_tokens
    if (topk is not None and topk > 1) or (steps is not None and tokens is not None and tokens > steps + 1):
        raise SpeedplanInputError(f"{where}: the server ran a token tree ({launch.text()}, server_args line "
                                  f"{launch.line}): a tree's accept len is not a chain's, and its accept rate divides by "
                                  f"the tree's {tokens - 1 if tokens else '?'} nodes, not a draft length; give a chain "
                                  "run's log (--speculative-eagle-topk 1), or the tree's per-rank rates as ranks=...")


def read_sglang_log(path: Path) -> list[DecodeLogLine]:
    """Every decode-batch line with an `accept len` (others are skipped); a line whose fields
    do not parse is an error naming the file, line and field."""
    path = Path(path)
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        raise SpeedplanInputError(f"{path}: cannot read SGLang log ({e.strerror})") from None
    out: list[DecodeLogLine] = []
    launch: Launch | None = None
    used: dict[tuple, Launch] = {}  # the launches decode lines were read under
    for i, text in enumerate(lines, 1):
        launch = _launch(path, i, text) or launch
        if _ADAPTIVE_MOVED in text:
            raise SpeedplanInputError(f"{path}:{i}: the server ran --speculative-adaptive and changed its draft length "
                                      "here: accept len mixes draft lengths and accept rate divides by the largest; "
                                      "measure with a fixed --speculative-num-steps")
        if not _DECODE.search(text) or "accept len" not in text:
            continue
        if launch is not None:
            _check_launch(path, launch, i)
            first = used.setdefault(launch.key(), launch)
            other = next((u for k, u in used.items() if k != launch.key()), None)
            if other is not None:
                raise SpeedplanInputError(f"{path}:{i}: the log holds launches with different settings (line {other.line}: "
                                          f"{other.text()}; line {first.line}: {first.text()}), so its accept len mixes "
                                          "them; give each launch's part of the log on its own")
        values: dict[str, float | None] = {}
        for field, pattern in _FIELD.items():
            m = pattern.search(text)
            if m is None:
                if field == "accept_len":
                    raise SpeedplanInputError(f"{path}:{i}: 'accept len' has no value")
                values[field] = None
                continue
            try:
                values[field] = parse_number(m.group(1))  # float() also takes "1_0" and non-ASCII digits
            except ValueError:
                raise SpeedplanInputError(f"{path}:{i}: {field.replace('_', ' ')} {m.group(1)!r} is not a number") from None
        running = values["running_req"]
        if running is not None and not (0 <= running <= 1e7 and running == int(running)):
            raise SpeedplanInputError(f"{path}:{i}: #running-req {running:g} is not a count of requests")
        if not 1.0 <= values["accept_len"] <= 1e4:
            raise SpeedplanInputError(f"{path}:{i}: accept len {values['accept_len']:g} is not a number from 1 (it counts "
                                      "the bonus token) to the tokens a step can verify")
        if values["accept_rate"] is not None and not 0.0 <= values["accept_rate"] <= 1.0:
            raise SpeedplanInputError(f"{path}:{i}: accept rate {values['accept_rate']:g} is outside 0..1")
        d = launch.draft_len() if launch is not None else None
        if d is not None and values["accept_len"] > 1 + d + 0.005:  # the log prints two decimals
            raise SpeedplanInputError(f"{path}:{i}: accept len {values['accept_len']:g} is above 1 + D = {1 + d}, the "
                                      f"most a step of the launch on line {launch.line} can accept")
        rate = values["accept_rate"]  # a chain's (accept len - 1) / D, both from one window's counters
        if d and rate is not None and abs(values["accept_len"] - 1 - rate * d) > 0.005 * (1 + d) + 1e-9:
            raise SpeedplanInputError(f"{path}:{i}: accept len {values['accept_len']:g} and accept rate {rate:g} disagree: "
                                      f"with D = {d} (server_args, line {launch.line}) the rate is (accept len - 1) / D "
                                      f"= {(values['accept_len'] - 1) / d:.3f}; the line was edited or pieced together")
        out.append(DecodeLogLine(i, values["accept_len"], values["accept_rate"],
                                 int(running) if running is not None else None, values["gen_throughput"],
                                 launch.draft_len() if launch is not None else None))
    if not out:
        raise SpeedplanInputError(f"{path}: no 'Decode batch ... accept len: X' lines (is speculative decoding on?)")
    return out


def mean_accept_length(records: list[DecodeLogLine]) -> float:
    """AL over the log: lines weighted by their running requests (each line is a window of
    the same number of decode steps; accept len is per request and step)."""
    weights = [r.running_req or 1 for r in records]
    return sum(w * r.accept_len for w, r in zip(weights, records)) / sum(weights)


def draft_len_from_rates(records: list[DecodeLogLine]) -> float | None:
    """D implied by accept len and accept rate for a chain, (AL − 1) / rate, over the lines
    that have both and a positive rate; None when no line has one (no accept rate, or 0 on every
    line: a rate of 0, or one rounded down to 0.00, says nothing of D)."""
    pairs = [(r.accept_len, r.accept_rate) for r in records if r.accept_rate]
    if not pairs:
        return None
    return sum(al - 1.0 for al, _ in pairs) / sum(rate for _, rate in pairs)


def looks_like_sglang_log(text: str) -> bool:
    return bool(_DECODE.search(text)) and "accept len" in text
