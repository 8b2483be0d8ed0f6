"""README.md shows what `speedplan sweep` prints on the shipped default. Its block must be
what the command prints now, line for line, but for the acceptance lines the README leaves
out (it says so): a stale block is a figure no command produced."""

from __future__ import annotations

import re
from pathlib import Path

from speedplan.cli.app import run

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme_block() -> list[str]:
    text = README.read_text()
    intro = re.search(r"`speedplan sweep` output \(the shipped default.*?\n```\n(.*?)\n```", text, re.S)
    assert intro, "README.md: no block after '`speedplan sweep` output (the shipped default'"
    return intro.group(1).splitlines()


def _printed_without_acceptance(printed: str) -> list[str]:
    lines, inside = [], False
    for line in printed.splitlines():
        inside = line.startswith("acceptance:") or (inside and line.startswith(" " * 12))
        if not inside:
            lines.append(line)
    return lines


def test_the_readme_sweep_block_is_what_the_default_sweep_prints(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the default --out, reports/<model>-<hardware>-<engine>/, as README's line names it
    assert run(["sweep"]) == 0
    printed = _printed_without_acceptance(capsys.readouterr().out)
    block = _readme_block()
    assert block == printed, "README.md's sweep block differs from `speedplan sweep`: re-run it and paste the output"
