"""Refitting a stored validation's calibration with and without overhead_ms rows (speedplan.validate.refit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from speedplan.validate.refit import calibration_rows, refit, step_errors

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "reports" / "validation-cpu-epyc-zen3-2026-12-07-b"  # a run from before overhead_ms rows


def _row(mechanism, batch, d, quantity, value):
    return {"mechanism": mechanism, "batch": batch, "draft_len": d, "context": 300, "quantity": quantity, "value": value,
            "acceptance_length": 2.0 if d else None, "where": f"calibration {mechanism} B={batch} D={d} {quantity}",
            "tree_nodes": None, "max_running": None, "names": [], "temperature": 0.0, "predicted": 1.0}


def test_overhead_rows_of_a_run_without_them_are_its_step_less_its_parts():
    summary = {"calibration": [_row("none", 4, 0, "step_ms", 50.0), _row("none", 4, 0, "verify_ms", 49.4),
                               _row("eagle", 4, 3, "step_ms", 80.0), _row("eagle", 4, 3, "verify_ms", 62.0),
                               _row("eagle", 4, 3, "draft_ms", 17.1)]}
    assert len(calibration_rows(summary, False)) == 5
    rows = calibration_rows(summary, True)
    extra = [(m.mechanism, m.quantity, round(m.value, 6), m.where) for m in rows[5:]]
    assert extra == [("none", "overhead_ms", 0.6, "calibration none B=4 D=0 overhead_ms (step less its parts)"),
                     ("eagle", "overhead_ms", 0.9, "calibration eagle B=4 D=3 overhead_ms (step less its parts)")]
    # a rest below a plausible measurement (1 µs) is left out, not refused with the whole run
    tiny = {"calibration": [_row("none", 8, 0, "step_ms", 50.0), _row("none", 8, 0, "verify_ms", 50.0 - 1e-4)]}
    assert [m.quantity for m in calibration_rows(tiny, True)] == ["step_ms", "verify_ms"]
    # a run that measured them keeps its own, and drops them when asked
    own = {"calibration": summary["calibration"] + [_row("none", 4, 0, "overhead_ms", 0.7)]}
    assert [m.value for m in calibration_rows(own, True) if m.quantity == "overhead_ms"] == [0.7]
    assert all(m.quantity != "overhead_ms" for m in calibration_rows(own, False))


@pytest.mark.skipif(not (RUN / "summary.json").is_file(), reason="the stored run is not in this checkout")
def test_a_stored_run_refitted_with_overhead_rows_prices_host_work_as_the_runtime_measured_it():
    """The Zen 3 run of 2026-12-07 09:29 measured a median 0.85 ms a step outside the forwards
    at B = 1 (its runs' step less their parts: acceptance, the argmax, bookkeeping); fitted without
    that, its host terms alone came to 1.9 ms there (1.3 ms a step, 0.6 ms a sequence), more than
    everything measured outside the forwards. Refitted with it, the host work is below what was
    measured; every point is priced, and without it the stored predictions come back."""
    pytest.importorskip("torch")  # the run keeps no drafter shapes: they are read from the shipped weights
    plain, info_plain = refit(RUN, overhead=False)
    with_rows, info = refit(RUN, overhead=True)
    assert info["rows"] == info_plain["rows"] + 15  # one overhead_ms row per calibration run
    assert np.isfinite(with_rows["refit_t_step"]).all() and len(with_rows) == 145
    assert np.allclose(plain["refit_t_step"], plain["pred_t_step"], rtol=1e-3)  # the run's own fit, rebuilt
    host = lambda v: (v["host_step_us"] + v["host_seq_us"] + v["host_spec_seq_us"]) * 1e-3  # ms at B = 1, speculative
    measured = [m.value for m in calibration_rows({"calibration": _stored_calibration()}, True)
                if m.quantity == "overhead_ms" and m.batch == 1]
    assert host(info_plain["values"]) > 2 * np.median(measured)
    assert host(info["values"]) < np.median(measured)
    assert set(step_errors(with_rows, "refit_t_step")) == {"median", "p90", "signed"}


def _stored_calibration():
    import json

    return json.loads((RUN / "summary.json").read_text())["calibration"]


NEW = ROOT / "reports" / "validation-cpu-epyc-zen4-2026-12-07-b"  # keeps its drafters' shapes: no torch needed


@pytest.mark.skipif(not (NEW / "summary.json").is_file(), reason="the stored run is not in this checkout")
@pytest.mark.parametrize("broken, message", [
    (lambda s: s.pop("grid"), "summary.json has no 'grid'"),
    (lambda s: s["grid"].update(rounds_per_point=3), "summary.json's grid is not one this code runs"),
    (lambda s: s["drafters"].pop("eagle"), "no draft_vocab and draft_layers for 'eagle'"),
    (lambda s: s["calibration"][0].pop("quantity"), "calibration rows are not Measurements"),
])
def test_a_stored_run_with_a_field_missing_or_foreign_is_an_input_error_naming_it(broken, message):
    """What `bench_overhead_rows.py` lists as skipped (it lets every other exception through)."""
    import json

    from speedplan.errors import SpeedplanInputError
    from speedplan.validate.reprice import load_validation

    table, summary = load_validation(NEW)
    summary = json.loads(json.dumps(summary))  # a copy to break
    broken(summary)
    with pytest.raises(SpeedplanInputError, match=message.replace("(", r"\(")):
        refit(NEW, True, (table, summary))


FREED = ROOT / "reports" / "validation-cpu-epyc-zen4-2026-12-07-e"  # the first run whose calibration freed tree_level_us


@pytest.mark.skipif(not (FREED / "summary.json").is_file(), reason="the stored run is not in this checkout")
def test_a_term_the_run_freed_can_be_held_back_to_see_what_it_bought():
    """Refitted as it ran, run e gives back its stored predictions and its fitted tree_level_us; less
    that term, the term keeps the base profile's value (0 µs a level) and the head's other terms take
    up what it priced: the EAGLE tree comes out cheaper and the EAGLE chain, which shares them, dearer
    (by a median 0.3% each on this run: what the term bought it was small). A term the profile does
    not have is an input error naming it, not a silent refit of the run's own terms."""
    import json

    stored = json.loads((FREED / "summary.json").read_text())["engine"]["terms"]["tree_level_us"]["value"]
    own, info = refit(FREED)
    held, info_held = refit(FREED, without_terms=("tree_level_us",))
    assert np.allclose(own["refit_t_step"], own["pred_t_step"], rtol=1e-3) and info["values"]["tree_level_us"] == pytest.approx(stored)
    assert stored > 0 and info_held["values"]["tree_level_us"] == 0.0
    moved = held["refit_t_step"] / own["refit_t_step"] - 1
    assert moved[own["mechanism"] == "eagle-tree"].median() < 0 < moved[own["mechanism"] == "eagle"].median()
    from speedplan.errors import SpeedplanInputError

    with pytest.raises(SpeedplanInputError, match="'tree_levels_us' is not a term"):
        refit(FREED, without_terms=("tree_levels_us",))
