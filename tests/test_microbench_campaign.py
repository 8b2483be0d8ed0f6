"""The issue-6 campaign script runs end to end on CPU with a tiny grid (--dry-run)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent


def test_campaign_dry_run(tmp_path):
    r = subprocess.run(["bash", "microbench/campaign.sh", "--dry-run", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    measured = json.loads((tmp_path / "profile-measured" / "meta.json").read_text())
    derived = json.loads((tmp_path / "profile-derived" / "meta.json").read_text())
    assert measured["complete"] is True and measured["origin"] == "measured"
    assert derived["origin"] == "derived" and derived["hardware_preset"] == "h100-sxm"
    check = json.loads((tmp_path / "profile-check.json").read_text())
    assert check["points"] > 20 and 0 <= check["median_error"] <= check["p90_error"]
    assert "campaign done" in r.stdout and "dry run: would run" in r.stdout  # the runtime hook
