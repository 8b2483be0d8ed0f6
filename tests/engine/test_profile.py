"""Engine profiles as data: every shipped one loads, names its version and a source per term;
bad files are one-line errors."""

import json

import pytest

from speedplan.engine.profile import TERMS, get_engine, preset_names
from speedplan.errors import SpeedplanInputError


def test_every_shipped_profile_states_version_and_sources():
    assert {"vllm", "sglang", "trtllm", "speedplan-runtime"} <= set(preset_names())
    for name in preset_names():
        e = get_engine(name)
        assert e.version and e.engine
        assert set(e.terms) == set(TERMS)
        assert all(len(t.source) > 10 for t in e.terms.values()), name


def test_round_trip_through_json(tmp_path):
    e = get_engine("sglang").with_terms({"host_seq_us": 12.5}, "test: round trip")
    path = tmp_path / "e.json"
    path.write_text(json.dumps(e.to_json()))
    back = get_engine(str(path))
    assert back.values() == e.values() and back.terms["host_seq_us"].source == "test: round trip"


@pytest.mark.parametrize("damage, word", [
    (lambda d: d.pop("version"), "version"),
    (lambda d: d["terms"].pop("launch_us"), "launch_us"),
    (lambda d: d["terms"].__setitem__("overlap_spec", {"value": 3, "source": "x"}), "overlap_spec"),
    (lambda d: d["terms"].__setitem__("warp", {"value": 1, "source": "x"}), "warp"),
    (lambda d: d["terms"].__setitem__("host_seq_us", {"value": "many", "source": "x"}), "host_seq_us"),
    (lambda d: d.__setitem__("fit", 3.5), "'fit' must be an object"),  # was an AttributeError
    (lambda d: d["fit"].__setitem__("median_abs_residual", "small"), "fit.median_abs_residual"),
    (lambda d: d.__setitem__("version", ["v1"]), "'version' must be text"),
])
def test_malformed_profiles_name_the_field(tmp_path, damage, word):
    data = get_engine("vllm").to_json()
    damage(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpeedplanInputError) as err:
        get_engine(str(path))
    assert word in str(err.value) and str(path) in str(err.value)


def test_unknown_engine_and_missing_file():
    with pytest.raises(SpeedplanInputError, match="unknown engine"):
        get_engine("tgi")
    with pytest.raises(SpeedplanInputError, match="no such engine profile"):
        get_engine("/no/such/engine.json")


def test_a_profile_written_before_the_sync_point_term_loads_with_zero():
    """Profile files written before host_spec_seq_us existed (user calibrations) still load,
    and price speculative steps as they did: no per-sequence host work beyond host_seq_us."""
    from speedplan.engine.profile import engine_from_json

    data = json.loads(json.dumps(get_engine("sglang").to_json()))
    del data["terms"]["host_spec_seq_us"]
    old = engine_from_json(data, "old.json")
    assert old.host_spec_seq_us == 0 and old.terms["host_spec_seq_us"].source.startswith("default")


def test_a_profile_knows_the_batch_sizes_it_was_fitted_at():
    assert get_engine("vllm").fitted_batches() == (1.0, 1.0)
    assert get_engine("sglang").fitted_batches() == (1.0, 64.0)
    assert get_engine("trtllm").fitted_batches() is None  # no row of shared/cases fitted it
    odd = get_engine("vllm")
    from dataclasses import replace
    odd = replace(odd, fit={**odd.fit, "rows": [{"batch": "many"}, "row", {"batch": 8}, {}]})
    assert odd.fitted_batches() == (8.0, 8.0)  # rows it cannot read are skipped, not fatal


def test_a_profile_written_before_the_zero_draft_settings_prices_d0_as_plain():
    """Files without zero_draft_forward / zero_draft_logits (written before 2026-12-03) load with
    0: a D = 0 step of a launch that loads a drafter runs no drafter forward, as they priced it;
    the shipped profiles say what each engine's code does, with the file it was read in."""
    from speedplan.engine.profile import engine_from_json

    data = json.loads(json.dumps(get_engine("vllm").to_json()))
    for name in ("zero_draft_forward", "zero_draft_logits"):
        del data["terms"][name]
    old = engine_from_json(data, "old.json")
    assert old.zero_draft_forward == 0 and old.terms["zero_draft_forward"].source.startswith("default")
    assert "propose" in get_engine("vllm").terms["zero_draft_forward"].source
    assert "_draft_extend_for_decode" in get_engine("sglang").terms["zero_draft_forward"].source
    with pytest.raises(SpeedplanInputError, match="zero_draft_logits = 0.5 must be 0 or 1"):
        get_engine("vllm").with_terms({"zero_draft_logits": 0.5}, "test")


def test_a_profile_from_a_file_says_so_even_under_a_shipped_name(tmp_path):
    """A copy of vllm.json, edited, printed "engine profile vllm (vLLM ...)" like the shipped one."""
    import shutil

    from speedplan.engine.profile import PRESET_DIR, get_engine

    mine = tmp_path / "mine.json"
    shutil.copy(PRESET_DIR / "vllm.json", mine)
    assert get_engine(str(mine)).label().startswith(f"engine profile vllm (file {mine}; vLLM ")
    assert get_engine("vllm").label().startswith("engine profile vllm (vLLM ")


def test_an_edited_fitted_term_is_named_and_the_plans_name_the_file(tmp_path):
    """A copy of vllm.json with host_step_us edited to 3000 said "3 of 17 terms fitted ... median
    |residual| 0.9%" everywhere, and the serving files' "Priced with engine profile vllm: ..." read as
    the shipped profile (an audit of 2026-12-04)."""
    from speedplan.engine.profile import PRESET_DIR
    from speedplan.plan.engine_plan import plan_engines
    from speedplan.plan.sweep import sweep

    data = json.loads((PRESET_DIR / "vllm.json").read_text())
    fitted = data["fit"]["values"]["host_step_us"]
    assert data["terms"]["host_step_us"]["value"] == fitted  # the shipped file records what its fit gave
    assert "edited" not in get_engine("vllm").provenance()
    data["terms"]["host_step_us"]["value"] = 3000.0
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps(data))
    text = get_engine(str(mine)).provenance()
    assert text.startswith("2 of 19 terms fitted") and f"host_step_us = 3000 edited (the fit gave {fitted:g})" in text
    assert "(the fit's, before the edit below)" in text
    plan = plan_engines(sweep(batches=[1, 8], engine=str(mine)), engines="vllm")["vllm"]
    assert plan.engine_profile.startswith(f"vllm: file {mine}; 2 of 19 terms fitted")
    shipped = plan_engines(sweep(batches=[1, 8]), engines="vllm")["vllm"]
    assert shipped.engine_profile.startswith("vllm: 3 of 19 terms fitted")
    # calibrated on top of the edited file: the edit still shows; this fit's own residuals are not stale
    from speedplan.engine.run_calibration import calibrate_rows

    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1024, "step_ms": 8.0 + 0.05 * b} for b in (1, 4, 16)]
    again = calibrate_rows("llama-3.1-8b", "h100-sxm", 1, str(mine), rows, free=["layer_launches"]).profile.provenance()
    assert f"host_step_us = 3000 edited (the fit gave {fitted:g})" in again and "before the edit" not in again
    # a term set by hand after the fit marks that fit's residuals too
    hand = get_engine("vllm").with_terms({"host_step_us": 500.0}, "my guess").provenance()
    assert "(the fit's, before the edit below)" in hand and "host_step_us = 500 set by hand (my guess)" in hand


def test_a_fit_record_with_malformed_values_is_refused(tmp_path):
    from speedplan.engine.profile import PRESET_DIR

    data = json.loads((PRESET_DIR / "vllm.json").read_text())
    data["fit"]["values"] = {"host_step_us": "990"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(SpeedplanInputError, match="fit.values must be an object"):
        get_engine(str(bad))


def test_a_profile_name_is_any_printable_text_and_the_report_folder_stays_safe(tmp_path):
    """Profiles calibrate wrote before 2026-12-04 may be named "vllm h100 (tuned)"; a name is
    printed, and the default report folder made from it is made safe (no climbing out of reports/)."""
    import json

    from speedplan.cli.sweep import _folder_name
    from speedplan.engine.profile import PRESET_DIR, get_engine

    data = json.loads((PRESET_DIR / "vllm.json").read_text())
    for name in ("vllm h100 (tuned)", "../../ESC"):
        (tmp_path / "p.json").write_text(json.dumps({**data, "name": name}))
        assert get_engine(str(tmp_path / "p.json")).name == name
    assert "/" not in _folder_name("llama-3.1-8b", "h100-sxm", "../../ESC") and not _folder_name("..").startswith(".")
    (tmp_path / "p.json").write_text(json.dumps({**data, "name": "a\nb"}))
    with pytest.raises(SpeedplanInputError, match="give printable text"):
        get_engine(str(tmp_path / "p.json"))
