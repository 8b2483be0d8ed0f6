"""Batch-size weights: the share of serving time at each batch size (`--batch-weights`), and
w(B, L) over the (batch, context) cells a plan covers (`plan.engine_plan`)."""

from __future__ import annotations

import math
import numbers
import re
from pathlib import Path

import pandas as pd

from speedplan.errors import SpeedplanInputError, far_too_large
from speedplan.specs.files import is_a, parse_json, read_problem


_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]*)?", re.ASCII)  # 8, 8.0 or 8.


def parse_batch_weights(spec: str | None) -> dict[int, float] | None:
    """`1=4,8=2,64=1`, or a file: JSON {"1": 4, ...} or CSV with columns batch,weight."""
    if spec is None or not str(spec).strip():
        return None
    text = str(spec).strip()
    path = Path(text)
    pairs: list[tuple[str, object, str]] = []
    if is_a(path, "file"):  # False for a name longer than the OS looks up: then read as pairs, and refused so
        try:
            body = path.read_text(encoding="utf-8-sig")  # Excel's "CSV UTF-8" starts with a BOM
        except (OSError, UnicodeDecodeError) as e:
            raise SpeedplanInputError(f"--batch-weights {path}: cannot read ({read_problem(e)})") from None
        if path.suffix == ".json":
            obj = parse_json(body, f"--batch-weights {path}")
            if not isinstance(obj, dict):
                raise SpeedplanInputError(f"--batch-weights {path}: expected an object {{\"batch\": weight}}")
            pairs = [(k, v, f"{path}: key {k!r}") for k, v in obj.items()]
        else:
            lines = [l for l in body.splitlines() if l.strip()]
            if not lines or [c.strip() for c in lines[0].split(",")][:2] != ["batch", "weight"]:
                raise SpeedplanInputError(f"--batch-weights {path}:1: expected a header 'batch,weight'")
            for i, line in enumerate(lines[1:], 2):
                cells = [c.strip() for c in line.split(",")]
                if len(cells) < 2:
                    raise SpeedplanInputError(f"--batch-weights {path}:{i}: expected 'batch,weight'")
                pairs.append((cells[0], cells[1], f"{path}:{i}"))
    else:
        for item in (x.strip() for x in text.split(",")):
            if not item:  # "1=1,,2=1": a pair missing, as --batch 1,,2 is refused
                raise SpeedplanInputError(f"--batch-weights {text!r:.60}: an empty pair between commas; give BATCH=WEIGHT "
                                          "pairs like 1=4,8=2")
            b, eq, w = item.partition("=")
            if not eq:
                named = text.endswith((".json", ".csv")) or "/" in text  # a file meant, not there
                raise SpeedplanInputError(f"--batch-weights {text!r:.60}: " + ("no such file" if named else
                                          "expected BATCH=WEIGHT pairs like 1=4,8=2 or a file"))
            pairs.append((b, w, f"--batch-weights {item!r}"))
    return _checked(pairs, "--batch-weights")


def batch_weights_arg(value) -> dict[int, float] | None:
    """What `plan_engines` takes from a Python caller: None, {batch: weight} (keys may be text,
    as json.load gives them), or the CLI's text ("1=4,8=2" or a file), checked alike."""
    if value is None or isinstance(value, (str, Path)):
        return parse_batch_weights(None if value is None else str(value))
    if not isinstance(value, dict):
        raise SpeedplanInputError(f"batch_weights: expected {{batch: weight}} or text like '1=4,8=2', "
                                  f"got {type(value).__name__}")
    return _checked([(k, v, f"batch_weights[{k!r}]") for k, v in value.items()], "batch_weights")


def _batch(key: object) -> int:
    """A batch-weight key as an int: 8, np.int64(8), 8.0 and the text "8" or "8.0" are batch 8
    (as `sweep(batches=[8.0])` takes 8.0); ValueError names what is wrong with anything else."""
    if isinstance(key, bool):
        raise ValueError(f"got {key!r}")
    if isinstance(key, numbers.Integral):
        return int(key)
    if isinstance(key, numbers.Real):
        number = float(key)
        if not math.isfinite(number) or number != int(number):
            raise ValueError(f"{key!r} is not a whole number")
        return int(number)
    text = str(key).strip()
    match = _NUMBER.fullmatch(text)  # int() and float() also take "1_0" (10) and non-ASCII digits
    if not match:
        raise ValueError(f"got {text!r}")
    if match.group(1) and match.group(1).strip(".0"):
        raise ValueError(f"{text:.20} is not a whole number")
    whole = match.group(0).partition(".")[0]
    if too_large := far_too_large(whole):
        raise ValueError(too_large)
    return int(whole)


def _checked(pairs: list[tuple[object, object, str]], name: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for b, w, where in pairs:
        try:
            batch = _batch(b)
        except ValueError as e:
            raise SpeedplanInputError(f"{where}: batch must be an integer (8 or 8.0) and weight a number; {e}") from None
        try:
            weight = float(str(w).strip())
        except ValueError:
            raise SpeedplanInputError(f"{where}: batch must be an integer and weight a number, "
                                      f"got weight {str(w).strip()!r:.40}") from None
        problem = (f"batch {batch} is below 1" if batch < 1 else
                   f"batch {batch} is listed twice" if batch in out else
                   f"weight {weight}" if not 0 <= weight < float("inf") else None)
        if problem:
            raise SpeedplanInputError(f"{where}: batch must be >= 1 and listed once, weight a finite number >= 0 "
                                      f"({problem})")
        out[batch] = weight
    if not out or sum(out.values()) <= 0:
        raise SpeedplanInputError(f"{name}: give at least one positive weight")
    return out


UNWEIGHTED = 1e-6  # weight of a planned batch size --batch-weights leaves out, relative to the largest given


def serving_weights(servable: pd.DataFrame, batch_weights: dict[int, float] | None) -> pd.Series:
    """w(B, L) over servable (batch, context) cells: w_B split evenly over B's contexts, Σ = 1.
    Batch sizes `batch_weights` leaves out (or weights 0) get UNWEIGHTED of the largest weight."""
    batches = sorted(servable["batch"].unique())
    if batch_weights is None:
        wb = {b: 1.0 for b in batches}
    else:
        unknown = sorted(set(batch_weights) - set(batches))
        positive = [b for b in unknown if batch_weights[b] > 0]
        if positive:
            raise SpeedplanInputError(f"--batch-weights: batch {positive[0]} was not swept or does not fit in memory "
                                      f"with plain decoding (planned batches: {', '.join(map(str, batches))})")
        wb = {b: float(batch_weights.get(b, 0.0)) for b in batches}
        if max(wb.values()) <= 0:
            raise SpeedplanInputError("--batch-weights: every planned batch has weight 0")
        top = max(wb.values())
        wb = {b: w / top for b, w in wb.items()}  # relative to the largest: weights of 1e308 sum without overflow
        # a batch size left out (or weighted 0) still gets its own best D, but counts for nothing
        # in the objective: without this its D would be arbitrary (plain decoding, the first key)
        floor = UNWEIGHTED * max(wb.values())
        wb = {b: max(w, floor) for b, w in wb.items()}
    n_ctx = servable.groupby("batch")["context"].transform("count")
    w = servable["batch"].map(wb) / n_ctx
    return pd.Series((w / w.sum()).to_numpy(), index=pd.MultiIndex.from_frame(servable[["batch", "context"]]))
