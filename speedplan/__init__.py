"""speedplan: plan speculative decoding (mechanism and draft length per batch size) for LLM serving.

The planner side (model, hardware, cost, forward, acceptance, mechanisms, planner, serving,
report) never imports torch; the reference runtime lives in `speedplan.runtime`.
"""

__version__ = "0.1.0"
