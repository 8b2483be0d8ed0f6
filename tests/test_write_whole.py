"""outputs.write_whole: a file written whole or not at all, the one writer the file commands share."""

from __future__ import annotations

import os

import pytest

from speedplan import outputs
from speedplan.errors import SpeedplanInputError


def test_writes_through_missing_folders_and_replaces_a_file(tmp_path):
    out = tmp_path / "a" / "b" / "x.json"
    assert outputs.write_whole(out, "one\n") == out and out.read_text() == "one\n"
    outputs.write_whole(out, "two\n")
    assert out.read_text() == "two\n" and sorted(p.name for p in out.parent.iterdir()) == ["x.json"]


def test_a_failed_write_leaves_the_old_file_and_nothing_else(tmp_path, monkeypatch):
    old = tmp_path / "x.csv"
    old.write_text("old\n")
    fresh = tmp_path / "new" / "deeper" / "y.csv"

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs.os, "replace", full)
    with pytest.raises(SpeedplanInputError, match=r"^--json-out .*x\.csv: cannot write \(No space left on device\)$"):
        outputs.write_whole(old, "new\n", "--json-out")
    with pytest.raises(SpeedplanInputError, match="cannot write"):
        outputs.write_whole(fresh, "new\n")
    assert old.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv"]  # no temporary file, no folder made for y.csv


def test_through_a_symbolic_link_the_file_it_points_to(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    os.symlink(real, link)
    outputs.write_whole(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_folders_made_for_a_write_that_fails_before_its_file_are_removed(tmp_path, monkeypatch):
    """A failure in mkstemp (after the folders were made, before any file) removes them too."""
    def refuse(*args, **kwargs):
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(outputs.tempfile, "mkstemp", refuse)
    with pytest.raises(SpeedplanInputError, match="cannot write"):
        outputs.write_whole(tmp_path / "a" / "b" / "x.json", "x")
    assert list(tmp_path.iterdir()) == []
