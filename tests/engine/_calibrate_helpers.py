"""Synthetic measurements of an engine with known terms, shared by the calibrate tests (test_calibrate*.py)."""

from speedplan.cost.ops import load_cost_model
from speedplan.engine.calibrate import Setting, predict, price
from speedplan.engine.readers.measurements import Measurement
from speedplan.specs.model import get_model

TRUE = {"host_step_us": 1200.0, "draft_step_launches": 120.0, "host_seq_us": 45.0, "overlap_spec": 0.1}


def _setting():
    return Setting(get_model("llama-3.1-8b"), load_cost_model("h100-sxm"), 1, "llama-3.1-8b on h100-sxm")


def _grid(batches=(1, 4, 16, 64), draft_lens=(0, 2, 4)):
    rows = []
    for b in batches:
        for d in draft_lens:
            rows.append(Measurement("none" if d == 0 else "eagle", b, d, 2048, "tpot_ms", 1.0,
                                    None if d == 0 else 1 + 0.8 * d, f"synthetic B={b} D={d}"))
    return rows


def _measured(rows, truth):
    """The rows with values an engine with terms `truth` would have measured."""
    pairs = [(m, _setting()) for m in rows]
    values = predict(truth, price(pairs))
    return [Measurement(m.mechanism, m.batch, m.draft_len, m.context, m.quantity, float(v), m.acceptance_length,
                        m.where) for m, v in zip(rows, values)]
