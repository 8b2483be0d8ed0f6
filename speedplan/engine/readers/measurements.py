"""Measurements of a serving engine, read from what users have: a CSV, the JSON that
`vllm bench serve --save-result` writes, or the JSON lines of SGLang's `bench_serving` or
`scripts/playground/bench_speculative.py`. Each becomes `Measurement` records; a malformed or
contradictory file is a SpeedplanInputError naming the file, the row and the field.

The record and its checks are `readers.measurement`; the engines' benchmark files (field names
checked in the engines' own sources) are `readers.bench_results` and `readers.sglang_serving`.
"""

from __future__ import annotations

import csv
import difflib
import itertools
import json
import math
import numbers
from pathlib import Path

from speedplan.engine.readers.bench_results import SGLANG_KEYS, read_sglang_bench, read_vllm_bench
from speedplan.engine.readers.sglang_log import looks_like_sglang_log
from speedplan.engine.readers.sglang_serving import read_serving_results
from speedplan.engine.readers.vllm_metrics import NO_SPEC_COUNTERS, plain_server_scrape
from speedplan.engine.readers.measurement import (DEFAULT_CONTEXT, MAX_ROWS, MAX_TREE_NODES, PLAUSIBLE,  # noqa: F401
                                                  QUANTITIES, SETTING_COLUMNS, Measurement, canonical_mechanism,
                                                  no_acceptance, number_field, repeated_lines, scraped, shown)
from speedplan.errors import SpeedplanInputError
from speedplan.specs.files import parse_json, read_problem


def read_csv(path: Path, acceptance=no_acceptance) -> list[Measurement]:
    """Columns mechanism, batch, draft_len, context, one of tpot_ms/step_ms/tokens_per_s/speedup
    (or several, each row filling one),
    acceptance_length for speculative rows (else `acceptance(mechanism, draft_len)`), optional
    tree_nodes, max_running_requests (the cap the server ran with; empty = the engine's default) and
    temperature (the run's sampling temperature, 0..2; empty = 0, greedy),
    and the setting a row ran on (`SETTING_COLUMNS`: tp, gpu, model), checked against the command's.
    Cells are separated as the header line separates them (a comma, else a semicolon or a tab: a
    spreadsheet's export where the decimal mark is a comma); blank lines and lines whose first
    cell starts with '#' (a comment, a row commented out) are skipped; each row is named by the
    line it starts on."""
    try:
        with Path(path).open(newline="", encoding="utf-8-sig") as f:  # -sig: Excel's "CSV UTF-8" starts with a BOM
            records = list(itertools.islice(_records(path, f), MAX_ROWS + 2))  # the header, MAX_ROWS + 1 rows
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read ({read_problem(e)})") from None
    if not records:
        raise SpeedplanInputError(f"{path}: empty file")
    header = _header([h.strip() for h in records[0][1]])
    rows = records[1:]
    _too_many(path, len(rows))
    _check_header(path, header)
    for line, cells in rows:
        if len(cells) > len(header):
            raise SpeedplanInputError(f"{path}:{line}: {len(cells)} cells for {len(header)} columns")
    for key in ("mechanism", "batch", "draft_len", "context"):
        if key not in header:
            raise SpeedplanInputError(f"{path}: missing column {key!r}")
    quantities = [q for q in QUANTITIES if q in header]
    if not quantities:
        raise SpeedplanInputError(f"{path}: needs one of the columns {', '.join(QUANTITIES)}, found none")
    if not rows:
        raise SpeedplanInputError(f"{path}: no rows")
    # several quantity columns: each row fills exactly one of them (a TPOT row beside speedup rows,
    # as calibrate_rows takes them from Python)
    quantity = quantities[0] if len(quantities) == 1 else None
    lines = [line for line, _ in rows]
    read = measurements_from_rows([{h: c for h, c in zip(header, cells) if h} for _, cells in rows], quantity,
                                  acceptance, where=lambda i: f"{path}:{lines[i]}")
    return repeated_lines(rows, read)


def _records(path, f):
    """(line, cells) of each record of an open CSV file: the line it starts on and its cells,
    separated as the first line that is not blank or a comment separates them. Blank records and
    those whose first cell starts with '#' are skipped."""
    skipped = 0
    first = ""
    for first in f:
        if first.strip() and not first.lstrip().startswith("#"):
            break
        skipped += 1
    else:
        return
    delimiter = next((d for d in (",", ";", "\t") if d in first), ",")
    reader = csv.reader(itertools.chain([first], f), delimiter=delimiter, strict=True)  # strict: an open quote is an error
    done = 0  # lines read before the record being read
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            hint = "; a quote opened there is not closed" if "unexpected end of data" in str(e) else ""
            raise SpeedplanInputError(f"{path}:{skipped + done + 1}: cannot read ({e}{hint})") from None
        start, done = skipped + done + 1, reader.line_num
        if any(c.strip() for c in cells) and not cells[0].lstrip().startswith("#"):
            yield start, cells


def _plain(name: str) -> str:
    """A column name as speedplan spells its own: lower case, spaces and dashes as underscores."""
    return "_".join(name.lower().replace("-", " ").split())


def _header(names: list[str]) -> list[str]:
    """The header's names, each that is a column speedplan reads but for its case, spaces or
    dashes ("Mechanism", "Acceptance Length", "TPOT_ms") taken as that column."""
    out = []
    for name in names:
        plain = _plain(name)
        out.append(plain if name not in KNOWN and plain in KNOWN and plain not in names else name)
    return out


def _too_many(where, rows: int) -> None:
    """Refuse more than MAX_ROWS rows (`where`: the file, or "calibrate" for all files together)."""
    if rows > MAX_ROWS:
        raise SpeedplanInputError(f"{where}: more than {MAX_ROWS:,} rows; calibrate reads at most {MAX_ROWS:,} in all "
                                  "(a few hundred configurations identify every term: average repeated runs first)")


COLUMNS = ("mechanism", "batch", "draft_len", "context", *QUANTITIES, "acceptance_length", "tree_nodes",
           "max_running_requests", "temperature")
# every column a CSV may name (the setting's, under any of their names: checked against the command's)
KNOWN = (*COLUMNS, *(name for names in SETTING_COLUMNS.values() for name in names))


# the engines' own names for a column speedplan reads under another: refused with the name to use,
# since dropping them changes the fit (vLLM --max-num-seqs, SGLang --max-running-requests,
# TensorRT-LLM max_batch_size all cap the requests a step runs)
ENGINE_NAMES = {"max_num_seqs": "max_running_requests", "max_running": "max_running_requests",
                "max_batch_size": "max_running_requests", "max_concurrency": "batch", "concurrency": "batch",
                "num_speculative_tokens": "draft_len", "temp": "temperature"}


def _check_header(path: Path | str, header: list[str]) -> None:
    """A column named twice, or one a letter or two from a column speedplan reads (a typo that
    would silently drop, say, the server's cap on running requests), is refused; other columns
    (notes, dataset) are left alone."""
    names = [n for n in header if n]  # a spreadsheet's trailing empty header cells name nothing
    seen = set()
    for name in names:
        if name in seen:
            raise SpeedplanInputError(f"{path}: column {shown(name)} appears twice")
        seen.add(name)
        if name not in KNOWN and _plain(name) in KNOWN and _plain(name) in names:  # Batch beside batch: one was dropped
            raise SpeedplanInputError(f"{path}: columns {name!r} and {_plain(name)!r} are one column to calibrate "
                                      "(case, spaces and dashes aside); keep one")
        engine_name = ENGINE_NAMES.get(_plain(name))
        if name not in KNOWN and engine_name and engine_name not in names:
            raise SpeedplanInputError(f"{path}: column {name!r}: calibrate reads it as {engine_name!r} "
                                      "(speedplan's name for it, whatever the engine calls it); rename the column")
        if name not in KNOWN:
            near = [n for n in difflib.get_close_matches(name, KNOWN, n=1, cutoff=0.85) if n not in names]
            if near:  # a column beside the one it resembles (step_us beside step_ms) is the user's own
                raise SpeedplanInputError(f"{path}: unknown column {name!r} (did you mean {near[0]!r}?)")


def measurements_from_rows(rows: list[dict], quantity: str | None = None, acceptance=no_acceptance,
                           where=lambda i: f"row {i}") -> list[Measurement]:
    """Measurements from dicts keyed like the CSV's columns (mechanism, batch, draft_len,
    context, the quantity, acceptance_length, tree_nodes, max_running_requests, temperature); values may be
    numbers or text. `quantity`: the column that holds the measured value (default: the one of
    QUANTITIES each row has). `where(i)` names row i in errors."""
    out = []
    _too_many("calibrate", len(rows))
    for i, raw in enumerate(rows):
        if not isinstance(raw, dict):
            raise SpeedplanInputError(f"{where(i)}: a measurement row must be a dict of column: value, "
                                      f"got {type(raw).__name__}")
        _check_header(where(i), [str(k).strip() for k in raw if k])
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
    mech = canonical_mechanism(str(row.get("mechanism") or ""))  # EAGLE-3, draft_model: as speedplan names them
    if not mech:
        raise SpeedplanInputError(f"{where}: field 'mechanism' missing")
    draft_len = number_field(row, "draft_len", where, True)
    al = number_field(row, "acceptance_length", where, required=False)  # a plain row's: empty or 1 (Measurement)
    if mech != "none" and al is None:
        al = scraped(acceptance, mech, draft_len, where)
    setting = {kind: next(((c, row[c]) for c in names if c in row), (None, None))
               for kind, names in SETTING_COLUMNS.items()}  # the setting the row names: checked by calibrate
    gpu, model = setting["gpu"][1], setting["model"][1]
    return Measurement(
        mechanism=mech, batch=number_field(row, "batch", where, True), draft_len=draft_len,
        context=number_field(row, "context", where, True), quantity=quantity,
        value=number_field(row, quantity, where), acceptance_length=al,
        where=where, tree_nodes=number_field(row, "tree_nodes", where, True, required=False),
        max_running=number_field(row, "max_running_requests", where, True, required=False),
        temperature=number_field(row, "temperature", where, required=False) or 0.0,  # empty: greedy
        tp=number_field(row, setting["tp"][0], where, True, required=False) if setting["tp"][0] else None,
        hardware=str(gpu).strip() if gpu is not None else None, model=str(model).strip() if model is not None else None,
        names=tuple((kind, column) for kind, (column, _) in setting.items() if column and column != kind))


REPEAT_SPREAD = 1.5  # repeated runs of one configuration further apart than this factor contradict each other
REPEAT_NOTE = 1.2  # ... and further apart than this are kept, each a row of the fit, with a note


def implied_step_ms(m: Measurement, spec_cap: float = 0.0) -> float | None:
    """The engine step `m` implies (ms), where its quantity says one: step_ms itself, tpot_ms × AL
    (one sequence's step emits AL tokens), or R·AL / tokens_per_s with R = `m.running(spec_cap)`;
    None for a part of a step or a speedup."""
    al = (m.acceptance_length or 1.0) if m.mechanism != "none" else 1.0
    if m.quantity == "step_ms":
        return m.value
    if m.quantity == "tpot_ms":
        return m.value * al
    if m.quantity == "tokens_per_s":
        return 1000.0 * m.running(spec_cap) * al / m.value
    return None


def check_consistent(rows: list[Measurement], spec_cap: float = 0.0) -> list[str]:
    """Refuse rows that contradict each other: the same configuration (mechanism, batch,
    draft_len, context, tree_nodes, requests a step ran, temperature) measured twice more than `REPEAT_SPREAD`
    apart as an engine step (`_compared`): step_ms, tpot_ms × AL, R·AL / tokens_per_s, a speedup
    against a plain row of its batch (and temperature), or (no plain row) AL / speedup, the step over plain
    decoding's. A step's time does not depend on acceptance (a dataset that drafts better takes
    fewer steps, not shorter ones), so rows of other acceptance lengths are compared too, except
    n-gram's (a step without a match verifies one token: the match rate sets both).
    Repeated runs of an engine differ by a few percent; 1.5x is a mislabelled row (a unit, a
    batch, another model), which a fit would split the difference of. `spec_cap`: the base
    profile's spec_max_running. Returns a note for each configuration whose rows are more than
    REPEAT_NOTE apart but kept: the fit meets them between."""
    plains: dict[tuple, tuple[Measurement, float]] = {}
    for m in rows:  # the plain step a speedup row of the same batch and context is over
        step = implied_step_ms(m, spec_cap) if m.mechanism == "none" else None
        if step is not None:
            plains.setdefault((m.batch, m.context, m.running(spec_cap), m.temperature), (m, step))
    seen: dict[tuple, list[tuple[Measurement, float, Measurement | None]]] = {}
    spread: dict[tuple, tuple[float, float]] = {}  # smallest and largest value of each configuration so far
    for m in rows:
        kind, value, plain = _compared(m, spec_cap, plains)
        # an n-gram step verifies one token where nothing matched: its match rate, which sets its
        # acceptance, sets its step time too, so n-gram rows are compared at one acceptance only
        per_al = m.acceptance_length if m.mechanism.split(":")[0] == "ngram" else None
        key = (m.mechanism, m.batch, m.draft_len, m.context, m.tree_nodes, m.running(spec_cap), m.temperature, kind,
               per_al)
        low, high = spread.get(key, (value, value))
        if value > REPEAT_SPREAD * low or high > REPEAT_SPREAD * value:  # then name the earliest row it contradicts
            for first, other, first_plain in seen[key]:
                if max(value, other) > REPEAT_SPREAD * min(value, other):
                    _contradiction(m, first, value, other, kind, plain or first_plain)
        spread[key] = (min(low, value), max(high, value))
        seen.setdefault(key, []).append((m, value, plain))
    shown_as = {"step": "engine steps of {:.3g} to {:.3g} ms", "speedup": "steps {:.3g}x to {:.3g}x plain decoding's"}
    return [f"{', '.join(m.where for m, _, _ in seen[key])}: one configuration ({key[0]}, batch {key[1]}, draft_len "
            f"{key[2]}, context {key[3]}) measured {high / low:.2f}x apart, as "
            + shown_as.get(key[7], key[7] + " {:.3g} to {:.3g}").format(low, high) + "; kept (a repeat more than "
            f"{REPEAT_SPREAD:g}x apart is refused): the fit takes them together, in effect their mean; check the runs"
            for key, (low, high) in spread.items() if high > REPEAT_NOTE * low]


def _compared(m: Measurement, spec_cap: float, plains: dict) -> tuple[str, float, Measurement | None]:
    """What `check_consistent` compares of `m`: ("step", its engine step in ms, the plain row a
    speedup was taken against), ("speedup", AL / speedup, None) for a speedup with no plain row
    of its batch, or (quantity, value, None) for a part of a step (verify_ms, draft_ms, overhead_ms)."""
    step = implied_step_ms(m, spec_cap)
    if step is not None:
        return "step", step, None
    if m.quantity != "speedup":
        return m.quantity, m.value, None
    al = m.acceptance_length or 1.0
    found = plains.get((m.batch, m.context, m.running(speculative=False), m.temperature))
    if found is None or m.mechanism == "none":
        return "speedup", al / m.value, None
    plain, plain_step = found  # speedup = (R·AL / step) / (R_p / plain step)
    return "step", m.running(spec_cap) * al * plain_step / (m.value * plain.running(spec_cap)), plain


def _contradiction(m: Measurement, first: Measurement, a: float, b: float, kind: str = "step",
                   plain: Measurement | None = None) -> None:
    """The one line naming two rows of one configuration that disagree (`a`, `b`: what was
    compared, of `kind` as `_compared` says)."""
    same = m.quantity == first.quantity and plain is None and m.acceptance_length == first.acceptance_length
    if same:
        why = ""
    elif kind == "speedup":
        why = (f" (at acceptance lengths {m.acceptance_length:g} and {first.acceptance_length:g}: steps "
               f"{a:.3g}x and {b:.3g}x plain decoding's, AL / speedup; a step's time does not depend on acceptance)")
    else:
        notes = ["output throughput also counts prefill and ramp-up, which TPOT and step times leave out: give one "
                 "quantity per configuration" if "tokens_per_s" in (m.quantity, first.quantity) else "",
                 f"a speedup's step is running x AL / speedup times {plain.where}'s plain step"
                 if plain is not None else "",
                 "a step's time does not depend on acceptance" if m.acceptance_length != first.acceptance_length else ""]
        why = f" (as engine steps: {a:.3g} ms here, {b:.3g} ms there{''.join('; ' + n for n in notes if n)})"
    raise SpeedplanInputError(
        f"{m.where}: field {m._f(m.quantity)} {m.value:g} contradicts {first.where} "
        f"({'' if m.quantity == first.quantity else first.quantity + ' '}"
        f"{first.value:g}): the same configuration ({m.mechanism}, batch {m.batch}, draft_len {m.draft_len}, "
        f"context {m.context}{f', temperature {m.temperature:g}' if m.temperature else ''}) measured more than "
        f"{REPEAT_SPREAD:g}x apart{why}")


def read_measurements(path: str | Path, mechanism: str = "eagle3", acceptance=no_acceptance) -> list[Measurement]:
    """Any of the supported files, told apart by content: a CSV, a vLLM bench result (JSON
    object or list, or lines), SGLang bench_serving output (JSON lines; keys only it writes tell
    it from vLLM's: `readers.sglang_serving`), SGLang bench_speculative output (JSON lines).
    `mechanism` names the drafter of bench_speculative chain rows, which the file does not
    state; `acceptance(mechanism, draft_len)` gives the acceptance length of speculative rows
    that state none (e.g. from a vLLM /metrics scrape)."""
    path = Path(path)
    if path.is_dir():
        raise SpeedplanInputError(f"{path}: is a folder; give its files (--measurements {path}/*.csv)")
    if not path.is_file():
        raise SpeedplanInputError(f"{path}: " + ("not a regular file (a device or a pipe); give a measurements file"
                                                 if path.exists() else "no such measurements file"))
    try:
        text = path.read_text().removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read ({read_problem(e)})") from None
    if "\x00" in text[:4096]:  # UTF-16 without a byte-order mark decodes as UTF-8 with NULs between the letters
        raise SpeedplanInputError(f"{path}: cannot read (NUL bytes in the text: UTF-16 or binary without a "
                                  "byte-order mark? save it as UTF-8)")
    stripped = text.strip()
    if not stripped:
        raise SpeedplanInputError(f"{path}: empty file")
    lines = stripped.splitlines()
    first = lines[0] if lines else ""
    if path.suffix.lower() not in (".csv", ".tsv", ".json", ".jsonl") and looks_like_sglang_log(stripped):
        # "[2026-...] Decode batch, ...": it read as malformed JSON
        raise SpeedplanInputError(f"{path}: an SGLang server log: its accept len is acceptance, not step times; "
                                  "calibrate reads SGLang's bench_speculative.py output (a log goes to speedplan "
                                  f"sweep --acceptance MECH:{path.name}[@D])")
    # the header of a CSV: its first line that is no comment, cells separated by , ; or a tab
    header = next((line for line in lines if line.strip() and not line.lstrip().startswith("#")), "")
    if path.suffix.lower() in (".csv", ".tsv") or (
            not header.startswith(("{", "[")) and not plain_server_scrape(stripped)
            and any(d in header for d in ",;\t")):
        return read_csv(path, acceptance)
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        data = None
    except RecursionError:
        raise SpeedplanInputError(f"{path}: malformed JSON (nested too deeply)") from None
    if isinstance(data, list) and not data:
        raise SpeedplanInputError(f"{path}: an empty JSON list (no runs)")
    if isinstance(data, list):
        _too_many(path, len(data))
    if isinstance(data, list):
        return read_vllm_bench(path, data, acceptance)
    if isinstance(data, dict) and "output_throughput" in data:  # one run: vLLM's --save-result, or SGLang's one line
        return read_serving_results(path, [(1, data)], acceptance)
    head = _json_object(first)
    if isinstance(head, dict) and "output_throughput" in head and not any(key in head for key in SGLANG_KEYS):
        # a run a line: vllm bench serve --append-result, or SGLang's bench_serving --output-file
        numbered = [(i, line) for i, line in enumerate(lines, 1) if line.strip()]
        _too_many(path, len(numbered))
        return read_serving_results(path, [(i, parse_json(line, f"{path}:{i}")) for i, line in numbered], acceptance)
    if first.startswith("{") and any(f'"{key}"' in first for key in SGLANG_KEYS):
        _too_many(path, sum(1 for line in lines if line.strip()))  # a row a line
        return read_sglang_bench(path, lines, mechanism)
    if first.startswith("{") and "output_throughput" in first:  # vllm bench serve --append-result
        _too_many(path, sum(1 for line in lines if line.strip()))  # a run a line
        return read_vllm_bench(path, [parse_json(line, f"{path}:{i}") for i, line in enumerate(lines, 1)
                                      if line.strip()], acceptance)
    if isinstance(data, dict):
        raise SpeedplanInputError(f"{path}: not a vllm bench serve result (no 'output_throughput')")
    if data is None and first.startswith(("{", "[")):
        parse_json(stripped if len(lines) == 1 or first.startswith("[") else first, f"{path}")  # names the syntax error
    if plain_server_scrape("\n".join(lines)):
        raise SpeedplanInputError(f"{path}: {NO_SPEC_COUNTERS} (scrape a server with --speculative-config)")
    raise SpeedplanInputError(f"{path}: not a measurements CSV, a vllm bench serve JSON or SGLang "
                              "bench_serving or bench_speculative output")


def _json_object(line: str):
    """`line` as JSON, or None where it is not JSON (the first line of JSON lines, or of a CSV)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None
