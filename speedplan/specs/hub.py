"""Hugging Face Hub names: the repo id a huggingface.co URL names (a preset's or a config's
`_source`), which the serving files launch where speedplan has no repo of its own for a model."""

from __future__ import annotations

import re


def hf_repo_of(url: str | None) -> str | None:
    """The Hugging Face repo id ("org/name") a huggingface.co URL of one of its files names
    (https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json); None for anything else."""
    match = re.match(r"https?://(?:www\.)?huggingface\.co/([\w.-]+/[\w.-]+)(?:/|$)", str(url or ""))
    return match.group(1) if match and not match.group(1).startswith(("datasets/", "spaces/")) else None
