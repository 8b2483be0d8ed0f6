"""How a model's attention reads in one phrase, for reports and `speedplan models` (from
`ModelSpec.summary()`, or meta.json's "model"); `speedplan.specs.model` re-exports it."""

from __future__ import annotations


def attention_label(summary: dict) -> str:
    """A model's attention variants in one phrase, from its `ModelSpec.summary()` (or meta.json's
    "model"): sliding or chunked window, linear layers, sparse attention; "" for full attention."""
    linear, sparse = summary.get("linear_attention"), summary.get("sparse_attention")
    return "; ".join(filter(None, [summary.get("sliding_window"), linear and f"linear on {linear}",
                                   sparse and f"sparse {sparse}"]))
