"""Reading the JSON files users and presets give: one place that turns a bad file into one line."""

from __future__ import annotations

import json
from pathlib import Path

from speedplan.errors import SpeedplanInputError


def read_json(path: str | Path):
    """The parsed contents of a JSON file; a missing, unreadable or malformed file is a
    SpeedplanInputError naming the file (and the line of a syntax error)."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SpeedplanInputError(f"{path}: malformed JSON ({e.msg} at line {e.lineno})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
