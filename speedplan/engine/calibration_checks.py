"""Checks `speedplan calibrate` makes of its measurements as a whole, beyond each row's own
(`readers.measurement`): each file once, the models the files name, the setting (TP, GPU) a CSV's
rows name against the one calibrated, and rows no fit of the terms tried can reach."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from speedplan.engine.calibrate import Calibration, Setting
from speedplan.engine.calibration_bounds import beyond_fastest, beyond_slowest, slow_terms
from speedplan.engine.readers.measurement import PLAUSIBLE, Measurement, shown
from speedplan.errors import SpeedplanInputError
from speedplan.specs.model import preset_named, preset_names


def check_distinct(files: list) -> None:
    """Each file once: the same path twice, or two paths with the same content (a copy), would
    count every row twice in the fit."""
    seen: dict = {}
    contents: dict[bytes, object] = {}  # sha256 of each file's bytes -> the file
    for f in files:
        key = Path(f).resolve() if Path(f).exists() else Path(f)
        if key in seen:
            raise SpeedplanInputError(f"--measurements: {f} is given twice; give each file once")
        seen[key] = f
        if Path(f).is_file():
            try:
                digest = hashlib.sha256(Path(f).read_bytes()).digest()
            except OSError:
                continue  # read_measurements names it
            if digest in contents:
                raise SpeedplanInputError(f"--measurements: {f} has the same content as {contents[digest]}: one run "
                                          "counted twice; give it once")
            contents[digest] = f


_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # a Hugging Face repo id (org/name), not an alias or a path
_SIZE = re.compile(r"\d+(?:\.\d+)?[bm]")  # a parameter count in a model name: 8b, 70b, 1.5b, 135m


def _words(name: str) -> list[str]:
    """A model name's words, lower case, without its organisation: meta-llama/Llama-3.1-8B → llama, 3.1, 8b."""
    return [w for w in re.split(r"[-_\s]+", name.strip().rstrip("/").split("/")[-1].lower()) if w]


def check_models(named: list[tuple[str, str]], target: str, given: str) -> None:
    """Refuse names that are plainly two models: two sizes of one family in two files (Llama-3.1-8B
    and Llama-3.1-70B) or in a file and --model (Llama-3.1-70B for llama-3.1-8b), or two repo ids
    (org/name) neither of which holds the other, or a name of another shipped preset than --model's
    (`specs.model.preset_named`). Other names are not refused: a fine-tune, a
    local path or a --served-model-name alias ("llama8b", which the /metrics scrape labels where
    the bench JSON has the repo id) has any name; the caller notes them."""
    first: dict[str, str] = {}  # each name once, where it is first named
    for where, model in named:
        first.setdefault(model, where)
    named = [(where, model) for model, where in first.items()]
    for i, (where, model) in enumerate(named):
        for other_where, other in named[:i]:
            size = _other_size(other, model)
            if size:
                raise SpeedplanInputError(f"{where}: names the model {shown(model)}, {other_where} {shown(other)}: "
                                          f"two sizes ({size}) of one model; give one model's files")
            words, others = "-".join(_words(model)), "-".join(_words(other))
            if _REPO.fullmatch(model) and _REPO.fullmatch(other) and words not in others and others not in words:
                raise SpeedplanInputError(f"{where}: names the model {shown(model)}, {other_where} {shown(other)}: "
                                          "measurements of two models contradict each other; give one model's files")
        size = _other_size(target, model)
        if size:
            raise SpeedplanInputError(f"{where}: names the model {shown(model)}, another size than --model {given} "
                                      f"({target}, {size}): give the --model the measurements ran")
        preset = preset_named(model)
        if preset and target in preset_names() and preset != target:
            raise SpeedplanInputError(f"{where}: names the model {shown(model)}, the preset {preset}, not --model "
                                      f"{given}{f' ({target})' if target != given else ''}: give the --model the measurements ran")


def _other_size(reference: str, name: str) -> str | None:
    """"8b against 70b" where `name` has every word of `reference` but its one size, and another
    size (Llama-3.1-70B-Instruct against llama-3.1-8b), else None."""
    mine, theirs = _words(reference), _words(name)
    sizes = [w for w in mine if _SIZE.fullmatch(w)]
    their_sizes = [w for w in theirs if _SIZE.fullmatch(w)]
    if (len(sizes) == 1 and their_sizes and sizes[0] not in their_sizes
            and all(w in theirs for w in mine if w not in sizes)):
        return f"{sizes[0]} against {their_sizes[0]}"
    return None


def check_reachable(result: Calibration, setting: Setting) -> None:
    """Refuse a row no fit of the terms can price, on either side:

    - slower than every term tried at its slowest (`calibration_bounds.beyond_slowest`): a 9.5 s
      step (SGLang's step_time given in ms), a TPOT in µs, was fitted with a term at its bound, a
      -99.7% residual, and written;
    - faster than its kernels alone, 4x faster than the profile measured them
      (`calibration_bounds.beyond_fastest`): a step of 0.0205 ms (20.5 ms given in seconds) among
      rows of 6-12 ms was fitted with every term at 0, a +48,027% residual, and written; the sweep
      then priced B = 64 at 1.94x where the rows said 1.35x."""
    quantity = np.array([r["quantity"] for r in result.rows])
    _refuse(result, setting, beyond_slowest(result.measured, quantity, result.slowest), result.slowest, slow=True)
    if result.fastest is not None:
        _refuse(result, setting, beyond_fastest(result.measured, quantity, result.fastest), result.fastest, slow=False)


def _refuse(result: Calibration, setting: Setting, flagged: np.ndarray, bounds: np.ndarray, slow: bool) -> None:
    """One line naming the first `flagged` row: its file:row, field, value and the bound it passes."""
    if not flagged.any():
        return
    i = int(np.flatnonzero(flagged)[0])
    row, bound = result.rows[i], float(bounds[i])
    unit = PLAUSIBLE[row["quantity"]][2]
    per_second = row["quantity"] == "tokens_per_s"
    head = (f"{row['where']}: field {row['field']!r} ({row['measured']:.4g} {unit}"
            + (f" as {row['quantity']}" if row["field"] != row["quantity"] else "") + ") is ")
    if slow:
        tried = slow_terms(result.profile, [*result.fitted, *result.kept])
        raise SpeedplanInputError(
            head + ("fewer tokens/s than" if per_second else "slower than") + " any engine term can make it"
            f" for {setting.label}: {'at least' if per_second else 'at most'} {bound:.4g} {unit} "
            f"with {', '.join(tried) or 'the terms tried'} at their slowest; "
            + ("one request's tokens/s, not the batch's," if per_second else "a unit slip (µs or seconds for ms?),")
            + " or another model, GPU or TP than given")
    raise SpeedplanInputError(
        head + ("more tokens/s than" if per_second else "faster than") + " any engine term can make it for "
        f"{setting.label}: {'at most' if per_second else 'at least'} {bound:.4g} {unit} with its kernels alone, "
        "4x faster than the profile measured them; "
        + ("tokens/s of more requests than its batch," if per_second else "a unit slip (seconds for ms?),")
        + " or another model, GPU or TP than given")


def _gpu_family(name: str) -> str | None:
    """The hardware preset family a GPU's name names ("NVIDIA A100-SXM4-80GB", "8xH100" → a100,
    h100: the presets' first words), or None for a name of no preset's family (or of two)."""
    from speedplan.specs.hardware import PRESETS

    text = re.sub(r"(?<![a-z0-9])\d+\s*[x×*]\s*", " ", name.lower())  # 8xH100, 2 x A100: the GPU, not the count
    found = [f for f in sorted({p.split("-")[0] for p in PRESETS})
             if re.search(rf"(?<![a-z0-9]){re.escape(f)}(?![a-z0-9])", text)]
    return found[0] if len(found) == 1 else None


_FORMS = {"pcie": r"pcie", "sxm": r"sxm\d?", "nvl": r"nvl"}  # a GPU's board: memory bandwidth and clocks differ
_SHOWN = {"pcie": "PCIe", "sxm": "SXM", "nvl": "NVL"}


def _form(text: str) -> str | None:
    """The board a GPU's name or a preset's description names (PCIe, SXM, NVL), or None where it names none."""
    found = [f for f, pattern in _FORMS.items() if re.search(rf"(?<![a-z0-9]){pattern}(?![a-z0-9])", text.lower())]
    return found[0] if len(found) == 1 else None


def check_setting(rows: list[Measurement], setting: Setting) -> None:
    """Rows whose own tp or gpu column names another setting than the one calibrated (--tp,
    --hardware), or two GPUs between them: a fit of one setting's terms to both would split the
    difference (a CSV of H100 and A100 rows, or of TP 1 and TP 2, was fitted as one)."""
    ours = _gpu_family(setting.cost.hardware.name)
    seen: dict[str, Measurement] = {}  # GPU family -> the first row that names it
    for m in rows:
        if m.tp is not None and m.tp != setting.tp:
            raise SpeedplanInputError(f"{m.where}: field {m._f('tp')} {m.tp}, but --tp {setting.tp}: calibrate fits the "
                                      f"terms of one setting; give the rows measured at TP {setting.tp} (calibrate "
                                      f"each TP on its own)")
        family = _gpu_family(m.hardware) if m.hardware else None
        if family is None:
            continue  # no GPU named, or one of no preset's family: not refused
        if ours is not None and family != ours:
            raise SpeedplanInputError(f"{m.where}: field {m._f('gpu')} {shown(m.hardware)} names another GPU than "
                                      f"--hardware {setting.cost.hardware.name}: calibrate fits the terms of one "
                                      "setting; give each GPU's rows with its own --hardware")
        board, preset_board = _form(m.hardware), _form(setting.cost.hardware.description or "")
        if ours is not None and board and preset_board and board != preset_board:  # H100 PCIe rows on h100-sxm
            raise SpeedplanInputError(f"{m.where}: field {m._f('gpu')} {shown(m.hardware)} names a {_SHOWN[board]} "
                                      f"board, and --hardware {setting.cost.hardware.name} is {_SHOWN[preset_board]} "
                                      f"({setting.cost.hardware.description}): its memory bandwidth and clocks differ, "
                                      "and the fitted terms would absorb it; give --hardware a hardware JSON of that "
                                      "board (docs/extending.md: --hardware path/to/preset.json)")
        seen.setdefault(family, m)
        other = next((o for f, o in seen.items() if f != family), None)
        if other is not None:  # a --hardware of no preset's family: the rows still name one GPU
            raise SpeedplanInputError(f"{m.where}: field {m._f('gpu')} {shown(m.hardware)} names another GPU than "
                                      f"{other.where} ({shown(other.hardware)}): rows of two GPUs are not one fit; give "
                                      f"each GPU's rows with its own --hardware")


# A speedup above its acceptance length by more than this factor: its step would be faster than a
# plain step, which verifies fewer tokens and drafts none.
SPEEDUP_MARGIN = 1.10


def check_speedups(rows: list[Measurement]) -> None:
    """Refuse a speedup above its acceptance length (by SPEEDUP_MARGIN): speedup = AL x plain step /
    speculative step (x the requests each runs), and a step that drafts and verifies 1 + D tokens a
    sequence takes no less than a plain one. A speedup of 9.1 at AL 2.8 was fitted with a -74%
    residual and written (the shipped cases' speedups are at most 0.92 of their AL)."""
    for m in rows:
        if m.quantity == "speedup" and m.mechanism != "none" and m.value > SPEEDUP_MARGIN * m.acceptance_length:
            raise SpeedplanInputError(
                f"{m.where}: field {m._f('speedup')} {m.value:g} is above its acceptance length "
                f"{m.acceptance_length:g}: a speedup is AL x plain step / speculative step, and a step that drafts "
                f"and verifies {1 + m.draft_len} tokens a sequence takes no less than a plain one; check that the "
                "speedup is over plain decoding at the same batch and the acceptance length is this run's")
