"""The sweep and the constants shared by the report tests (test_report*.py)."""

from __future__ import annotations

import pytest

from speedplan.plan.sweep import sweep

MEASURED = "measured (AIConfigurator 0.12, vLLM 0.24 kernels) h100-sxm"  # the shipped h100-sxm profile
SMALL = dict(model="llama-3.1-8b", hardware="h100-sxm", mechanisms=["eagle", "ngram", "eagle-tree"],
             batches=[1, 8, 64], draft_lens=range(0, 5), contexts=[4096])


@pytest.fixture(scope="module", name="result")
def small_sweep():
    """The tests' `result`: one small sweep, with an SLO, for each module that imports this."""
    return sweep(**SMALL, min_tokens_per_user=100.0)
