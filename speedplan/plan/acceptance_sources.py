"""Where acceptance comes from besides the published defaults: the user's numbers, JSON files, runtime
traces, what serving engines report (a vLLM `/metrics` scrape, an SGLang log). Each is an `Acceptance`.

`--acceptance` forms (repeatable; `MECH:` in front applies one to a mechanism, and a head
family's name, `eagle` or `eagle3`, also reaches its tree):

    alpha=0.8                     i.i.d. rate (Leviathan et al.)
    positions=0.9,0.8,0.7         conditional per-position rates (last one repeats)
    ranks=0.6,0.2,0.05            per-rank rates of one head (Sequoia); its chain uses ranks[0]
    alpha=0.6,match=0.5           ... with a chance `match` that a step proposes anything (n-gram)
    al=3.2@4                      a chain's AL measured at D = 4 (an engine's mean accept length): its i.i.d. rate (mtp refits it with its decay: defaults.mtp_from_al)
    al=2.2@4,match=0.5            ... over the steps that drafted, and the share that did (n-gram)
    FILE.jsonl                    a runtime trace (docs/trace.md); a short one's source names its widest rate interval
    FILE (vLLM /metrics scrape)   per-position accepted counts over drafts
    FILE[@D] (SGLang server log)  mean `accept len` of one chain launch; D from its server_args
                                  line (an @D it contradicts is refused), else @D, else `accept rate`
    FILE.json                     {"alpha": ..} | {"positions": [..]} | {"ranks": [..]}, optional "match"
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from speedplan.engine.readers.sglang_log import (draft_len_from_rates, looks_like_sglang_log, mean_accept_length,
                                                 read_sglang_log)
from speedplan.engine.readers.measurement import drafts_ran_short
from speedplan.engine.readers.vllm_metrics import (NO_SPEC_COUNTERS, check_totals, looks_like_vllm_metrics,
                                                   plain_server_scrape, read_vllm_metrics)
from speedplan.errors import SpeedplanInputError, clipped
from speedplan.specs.files import finite, is_a, parse_json, refuse_wide_text
from speedplan.specs.trace_records import MAX_DRAFT, read_trace
from speedplan.plan.mechanism_names import canonical_name, canonical_spec
from speedplan.plan.acceptance import (Acceptance, conditional_from_position_rates, fit_iid_alpha, fit_positions,
                                       fit_ranks, fit_runs)
from speedplan.plan.acceptance_notes import small_sample_note

_FORMS = ("alpha", "positions", "ranks")
# How the sources that measured one drafter begin: the sweep refuses one for several mechanisms at once
ONE_DRAFTER_SOURCES = ("vLLM metrics:", "SGLang log:", "trace:")
_AL = re.compile(r"([0-9]{1,20}(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)@([0-9]{1,12})", re.ASCII)  # al=A@D: 3.2@4
_EXPECTED = "give alpha=, positions=, ranks=, al=A@D or an acceptance file (a trace, a vLLM scrape, an SGLang log, JSON)"


def _split_mechanism(spec: str, mechanisms: tuple[str, ...]) -> tuple[str, str]:
    """(key, value) of one --acceptance text: `MECH:SPEC` → (MECH, SPEC), where MECH may be a
    whole mechanism spec with its argument (`draft-model:llama-3.2-1b:alpha=0.6`, for one of two
    draft models) when SPEC is numbers, an existing file (`draft-model:llama-3.2-1b:run.jsonl`) or empty;
    a bare SPEC → ("*", SPEC)."""
    parts = spec.split(":")
    for i in range(len(parts) - 1, 1, -1):  # the longest MECH:ARG prefix followed by numbers or a file
        head, rest = canonical_spec(":".join(parts[:i]).lower()), ":".join(parts[i:])
        if head.split(":")[0] in mechanisms and (rest.partition("=")[0].strip() in (*_FORMS, "al") or not rest.strip()
                                                 or _names_file(rest)):
            return head, rest
    head, colon, rest = spec.partition(":")
    return (canonical_name(head), rest) if colon and canonical_name(head) in mechanisms else ("*", spec)


def _names_file(text: str) -> bool:
    """`text` is an existing file, or FILE@D of one (an SGLang log read at draft length D)."""
    return is_a(Path(text), "file") or is_a(Path(text.rpartition("@")[0]), "file")


def parse_acceptance_options(specs: list[str], mechanisms: tuple[str, ...]) -> dict[str, Acceptance]:
    """Repeated --acceptance values: `MECH:SPEC` applies to one mechanism (e.g.
    `eagle:alpha=0.8`, or `draft-model:llama-3.2-1b:alpha=0.6` to one of two draft models), a
    bare SPEC to every mechanism not named (key "*")."""
    out: dict[str, Acceptance] = {}
    for spec in specs:
        key, value = _split_mechanism(spec, mechanisms)
        if key != "*" and not value.strip():
            raise SpeedplanInputError(f"--acceptance {spec!r:.80}: nothing after '{key}:'; {_EXPECTED}")
        if key in out:
            raise SpeedplanInputError(f"--acceptance given twice for {'all mechanisms' if key == '*' else key}")
        out[key] = parse_acceptance(value)
    return out


def _numbers(spec: str) -> dict[str, list[float]]:
    """`positions=0.9,0.8,match=0.5` → {"positions": [0.9, 0.8], "match": [0.5]}."""
    out: dict[str, list[float]] = {}
    key = None
    for item in spec.rstrip().rstrip(",").split(","):  # a trailing comma is harmless; an empty middle item is not
        item = item.strip()
        if not item:
            raise SpeedplanInputError(f"--acceptance {spec!r:.80}: an empty item between commas")
        name, eq, value = item.partition("=")
        if eq:
            key = name.strip()
            if key not in (*_FORMS, "match") or key in out:
                raise SpeedplanInputError(f"--acceptance {spec!r:.80}: unknown or repeated key {key!r:.40}")
            out[key] = []
            item = value
        if key is None:
            raise SpeedplanInputError(f"--acceptance {spec!r:.80}: expected alpha=, positions= or ranks=")
        try:
            out[key].append(float(item))
        except ValueError:
            raise SpeedplanInputError(f"--acceptance {spec!r:.80}: {item!r:.40} is not a number") from None
    return out


def parse_acceptance(spec: str) -> Acceptance:
    """One --acceptance value (without its `MECH:` prefix): numbers or a file (module docstring)."""
    text = spec.strip()
    if not text:
        raise SpeedplanInputError(f"--acceptance {spec!r:.80}: empty; {_EXPECTED}")
    key = text.partition("=")[0].strip()
    if key in _FORMS:
        values = _numbers(text)
        forms = [k for k in _FORMS if k in values]
        if len(forms) != 1 or not values[forms[0]]:
            raise SpeedplanInputError(f"--acceptance {spec!r:.80}: give exactly one of alpha=, positions=, ranks=")
        match = values.get("match", [1.0])
        if len(match) != 1:
            raise SpeedplanInputError(f"--acceptance {spec!r:.80}: match takes one number")
        return _build(forms[0], values[forms[0]], f"user: {text}", match[0], spec)
    if key == "al":
        return _from_al(text, spec)
    return _from_file(text)


def _from_al(text: str, spec: str) -> Acceptance:
    """`al=A@D`: a chain's acceptance length A (tokens per step, the bonus token counted: what
    SGLang logs as accept len and vLLM reports as mean acceptance length) measured at draft
    length D, as the i.i.d. alpha whose chain of D gives it (`fit_iid_alpha`). `al=A@D,match=M`
    (n-gram): A over the steps that drafted (vLLM's acceptance length counts drafts only), M the
    share of steps that drafted at all."""
    body, _, rest = text.partition("=")[2].strip().partition(",")
    share = 1.0
    if rest:
        key, _, number = rest.partition("=")
        try:
            values = _numbers(f"match={number}") if key.strip() == "match" else {}
        except SpeedplanInputError:
            raise SpeedplanInputError(f"--acceptance {spec!r:.80}: match must be a number in (0, 1]") from None
        if len(values.get("match", [])) != 1:
            raise SpeedplanInputError(f"--acceptance {spec!r:.80}: after al=A@D only ,match=M (the share of steps that "
                                      "drafted, n-gram) is read")
        share = values["match"][0]
        if not 0.0 < share <= 1.0:
            raise SpeedplanInputError(f"--acceptance {spec!r:.80}: match must be in (0, 1], got {share:g}")
    match = _AL.fullmatch(body)  # int() and float() also take "1_0" and other digits
    al, draft_len = (float(match.group(1)), int(match.group(2))) if match else (float("nan"), 0)
    if not np.isfinite(al) or draft_len < 1:
        raise SpeedplanInputError(f"--acceptance {spec!r:.80}: expected al=A@D, an acceptance length A measured at draft "
                                  "length D, e.g. al=3.2@4")
    if draft_len > MAX_DRAFT:
        raise SpeedplanInputError(f"--acceptance {spec!r:.80}: D must be in 1..{MAX_DRAFT}, got {draft_len}")
    if not 1.0 <= al < 1.0 + draft_len:
        raise SpeedplanInputError(f"--acceptance {spec!r:.80}: an acceptance length at D = {draft_len} is in "
                                  f"[1, {1 + draft_len}) (it counts the bonus token; {1 + draft_len} would be every "
                                  f"draft accepted, no rate below 1), got {al:g}")
    alpha = fit_iid_alpha(al, draft_len)
    if rest:
        return Acceptance.iid(alpha, f"user: al={al:g} at D={draft_len} over the steps that drafted, match={share:g} "
                                     f"(i.i.d. alpha {alpha:.3f})", share)
    return replace(Acceptance.iid(alpha, f"user: al={al:g} at D={draft_len} (i.i.d. alpha {alpha:.3f})"),
                   al_at=(al, draft_len))  # a mechanism whose rates fall with depth refits it (mtp)


def _build(form: str, numbers, source: str, match: float, where: str) -> Acceptance:
    if form == "alpha" and len(numbers) != 1:
        raise SpeedplanInputError(f"{clipped(where)}: alpha takes one number")
    try:
        if form == "alpha":
            return Acceptance.iid(numbers[0], source, match)
        return (Acceptance.positional if form == "positions" else Acceptance.per_rank)(numbers, source, match)
    except SpeedplanInputError as e:
        raise SpeedplanInputError(f"{clipped(where)}: {e}") from None  # which file or option the numbers came from


def _from_file(text: str) -> Acceptance:
    """A file, or `FILE@D` (an SGLang log read at draft length D, checked against its server_args line);
    a file whose own name holds an @ is read whole."""
    path_text, at, draft_len = text.rpartition("@") if "@" in text and not is_a(Path(text), "file") else (text, "", "")
    path = Path(path_text)
    if is_a(path, "dir"):
        raise SpeedplanInputError(f"--acceptance {text!r:.80}: is a folder; give a file in it")
    if not is_a(path, "file"):
        from speedplan.plan.mechanisms import MECHANISMS

        head, _, rest = text.partition(":")  # eagel3:alpha=0.8, eagel3:FILE: a misspelt mechanism in front
        prefixed = rest and re.fullmatch(r"[A-Za-z][\w.-]*", head) and (
            "=" in rest or "/" in rest or _names_file(rest))
        hint = f" ({head!r:.40} is not a mechanism: MECH:... takes one of {', '.join(MECHANISMS)})" if prefixed else ""
        if "=" not in text and ("/" in path_text or path.suffix in (".json", ".jsonl", ".txt", ".log")):
            missing = rest.rpartition("@")[0] if prefixed and "@" in rest and not is_a(Path(rest), "file") else rest
            if not prefixed or not is_a(Path(missing), "file"):  # the whole path, however long
                raise SpeedplanInputError(f"--acceptance {(missing if prefixed else path_text)!r}: no such file{hint}")
        raise SpeedplanInputError(f"--acceptance {text!r:.80}: not alpha=, positions=, ranks=, al=A@D or an existing file{hint}")
    if at and (path.suffix == ".jsonl" or not looks_like_sglang_log(path.read_text(errors="replace"))):
        raise SpeedplanInputError(f"--acceptance {text!r:.80}: @D is for an SGLang server log whose lines give no "
                                  f"accept rate; {path.name} is not one")
    if path.suffix == ".jsonl":
        return fit_trace(path)
    refuse_wide_text(path)
    try:
        body = path.read_text(errors="replace")
    except OSError as e:
        raise SpeedplanInputError(f"{path}: cannot read acceptance file ({e.strerror})") from None
    if looks_like_vllm_metrics(body):
        return from_vllm_metrics(path)
    if plain_server_scrape(body):
        raise SpeedplanInputError(f"{path}: {NO_SPEC_COUNTERS}")
    if looks_like_sglang_log(body):
        if at and not (draft_len.isascii() and draft_len.isdigit() and 1 <= int(draft_len) <= MAX_DRAFT):
            raise SpeedplanInputError(f"--acceptance {text!r:.80}: the draft length after @ must be an integer in "
                                      f"1..{MAX_DRAFT}")
        return from_sglang_log(path, int(draft_len) if at else None)
    try:
        obj = parse_json(body, str(path))
    except SpeedplanInputError as e:
        if path.suffix.lower() == ".json":
            raise
        why = str(e).partition("malformed JSON ")[2]  # "(Expecting value at line 1, column 1)"
        raise SpeedplanInputError(f"{path}: neither an SGLang server log ('Decode batch ... accept len' lines), "
                                  f"a vLLM /metrics scrape nor JSON {why}") from None
    forms = [k for k in _FORMS if isinstance(obj, dict) and k in obj]
    unknown = [k for k in obj if k not in (*_FORMS, "match")] if isinstance(obj, dict) else []  # a typo was dropped
    if len(forms) != 1 or unknown:
        raise SpeedplanInputError(f"{path}: {f'unknown key {unknown[0]!r}; ' if unknown else ''}expected a JSON object with "
                                  "one of alpha, positions or ranks, and match or not (or a trace, vLLM scrape or SGLang log)")
    try:
        numbers = [float(obj[forms[0]])] if forms[0] == "alpha" else [float(v) for v in obj[forms[0]]]
    except (TypeError, ValueError):
        raise SpeedplanInputError(f"{path}: {forms[0]} must be numbers") from None
    try:
        match = float(obj.get("match", 1.0))
    except (TypeError, ValueError):
        raise SpeedplanInputError(f"{path}: match must be a number") from None
    return _build(forms[0], numbers, f"file: {path}", match, str(path))


def from_vllm_metrics(path: Path) -> Acceptance:
    """Per-position conditional acceptance from a vLLM scrape (see engine.readers.vllm_metrics)."""
    check_totals(counters := read_vllm_metrics(path))  # refused as calibrate refuses it: one whole scrape
    rates = counters.position_rates
    if min(rates) >= 1.0 - 1e-9:
        raise SpeedplanInputError(f"{path}: every drafted token was accepted at all {len(rates)} positions "
                                  f"({counters.num_drafts:g} drafts): no acceptance rate below 1 can be read from it "
                                  "(a workload that repeats its prompt?); measure a representative one")
    p = conditional_from_position_rates(rates)
    short = drafts_ran_short(counters.mean_draft_tokens, len(rates))
    source = (f"vLLM metrics: {path} ({counters.num_drafts:g} drafts, AL {counters.acceptance_length:.3f} "
              f"at D={len(rates)}" + (f"; drafts averaged {short:.2f} of {len(rates)} tokens (a schedule or an n-gram "
                                      "drafter): understated for full drafts" if short is not None else "")
              + "".join(f"; its server's model {m!r:.60}" for m in counters.models) + ")")  # a scrape of which model
    return Acceptance.positional(np.maximum(p, 1e-6), source)


def from_sglang_log(path: Path, draft_len: int | None = None) -> Acceptance:
    """An i.i.d. α that gives the log's mean accept length at its draft length D: the launch's
    (its server_args line, where the log has one; a FILE@D that disagrees is refused), else
    FILE@D, else from accept rate: D = (AL − 1) / rate, for chains."""
    records = read_sglang_log(path)
    al = mean_accept_length(records)
    how = "given"
    launched = {r.draft_len for r in records if r.draft_len is not None}  # the log's server_args line (one launch)
    before = next((r.line for r in records if r.draft_len is None), None)
    if launched and before is not None:
        raise SpeedplanInputError(f"{path}:{before}: a decode line before the log's first server_args line, of a launch "
                                  "the log does not show, beside lines of one it does: give one launch's part of the log")
    if launched and draft_len is not None and draft_len not in launched:
        (d,) = launched
        raise SpeedplanInputError(f"{path}@{draft_len}: the log's server_args line says the server drafted {d} tokens "
                                  f"a step; give {path} or {path}@{d}")
    if launched and draft_len is None:
        (draft_len,) = launched
        how = "from the log's server_args line"
        if draft_len > MAX_DRAFT:
            raise SpeedplanInputError(f"{path}: the log's server_args line says the server drafted {draft_len} tokens "
                                      f"a step; speedplan prices draft lengths of 1..{MAX_DRAFT}")
    if draft_len is None:  # @D given is trusted: accept rate gives D for chains only (a tree divides by its nodes)
        implied = draft_len_from_rates(records)
        if implied is None and all(r.accept_rate is None for r in records):
            raise SpeedplanInputError(f"{path}: its lines have no 'accept rate'; give the draft length as {path}@D")
        if implied is None and al > 1.0 + 1e-9:  # 0.00 is a rate rounded down: D = (AL - 1) / rate is unbounded
            raise SpeedplanInputError(f"{path}: accept rate is 0 on every line but mean accept len is {al:.3f} > 1, so "
                                      f"the rate was rounded to 0 and gives no draft length; give it as {path}@D")
        if implied is None:  # accept rate 0 and accept len 1: no draft was accepted, at any D
            return Acceptance.iid(0.0, f"SGLang log: {path} ({len(records)} decode lines, accept rate 0 and accept "
                                       "len 1 on every line: no drafted token accepted; i.i.d. alpha 0)")
        if implied > MAX_DRAFT:
            raise SpeedplanInputError(f"{path}: accept len and accept rate give a draft length of {implied:.4g}, above "
                                      f"{MAX_DRAFT}: the rates are rounded or not a chain's; give it as {path}@D")
        draft_len, how = max(1, int(round(implied))), f"from accept rate ({implied:.2f})"
    if draft_len < 1:
        raise SpeedplanInputError(f"{path}@{draft_len}: the draft length must be >= 1")
    if al > 1.0 + draft_len + 1e-6:
        raise SpeedplanInputError(f"{path}@{draft_len}: mean accept len {al:.3f} exceeds 1 + D = {1 + draft_len} "
                                  "(it counts the bonus token): the server drafted more than D tokens")
    if al >= 1.0 + draft_len - 1e-6:
        raise SpeedplanInputError(f"{path}@{draft_len}: mean accept len {al:.3f} is 1 + D: every drafted token was "
                                  "accepted, so no acceptance rate below 1 can be read from it")
    alpha = fit_iid_alpha(al, draft_len)
    source = (f"SGLang log: {path} ({len(records)} decode lines, mean accept len {al:.3f}, D={draft_len} {how}; "
              f"i.i.d. alpha {alpha:.3f})")
    return Acceptance.iid(alpha, source)


def fit_trace(path: Path) -> Acceptance:
    """Fit acceptance from a runtime trace (speedplan.trace/1): per-rank for tree traces that
    carry `accepted_ranks`, per-position otherwise."""
    meta, steps, _ = read_trace(path)
    counts = np.array([a for s in steps for a in s["accepted"]], dtype=int)
    draft_len = int(meta.get("draft_len") or counts.max(initial=0))
    if draft_len < 1:
        raise SpeedplanInputError(f"{path}: trace of plain decoding (draft_len 0) has no acceptance to fit")
    ran = " on ".join(str(meta[k]) for k in ("mechanism", "model") if meta.get(k))  # whose acceptance it is
    by = (str(meta.get("mechanism") or ""), str(meta.get("model") or ""))
    temperature = float(meta["temperature"]) if finite(meta.get("temperature")) and meta["temperature"] >= 0 else None
    at = f"T={temperature:g}, " if temperature is not None else ""
    source = f"trace: {path} ({ran + ', ' if ran else ''}{at}{len(counts)} sequence-steps, D={draft_len}"
    tree = meta.get("tree")
    if tree and any("accepted_ranks" in s for s in steps):
        ranks = fit_ranks(steps, int(tree.get("depth") or draft_len), int(tree.get("topk") or 8))
        ranks = ranks[: max(1, int(np.nonzero(ranks)[0].max(initial=0)) + 1)]
        if ranks.sum() >= 1.0:
            ranks = ranks * 0.999 / ranks.sum()
        return replace(Acceptance.per_rank(ranks, source + ")"), measured_at=temperature, measured_by=by)
    fit = fit_runs if by[0] == "ngram" else fit_positions  # n-gram lookup's agreement comes in runs of copied text
    few = small_sample_note(np.bincount(counts), draft_len)  # a short trace, or one that saw no draft rejected
    source += f"; {few})" if few else ")"
    return replace(Acceptance.positional(fit(np.bincount(counts), draft_len), source), measured_at=temperature, measured_by=by)
