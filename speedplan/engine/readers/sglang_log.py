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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from speedplan.engine.readers.measurement import parse_number
from speedplan.errors import SpeedplanInputError

_DECODE = re.compile(r"Decode batch(?: \[\d+\])?[.,]")  # " [N]" when SGLANG_LOG_FORWARD_ITERS is set
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


def read_sglang_log(path: Path) -> list[DecodeLogLine]:
    """Every decode-batch line with an `accept len` (others are skipped); a line whose fields
    do not parse is an error naming the file, line and field."""
    path = Path(path)
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        raise SpeedplanInputError(f"{path}: cannot read SGLang log ({e.strerror})") from None
    out: list[DecodeLogLine] = []
    for i, text in enumerate(lines, 1):
        if not _DECODE.search(text) or "accept len" not in text:
            continue
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
        out.append(DecodeLogLine(i, values["accept_len"], values["accept_rate"],
                                 int(running) if running is not None else None, values["gen_throughput"]))
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
