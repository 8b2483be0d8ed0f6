"""An engine profile read from a file (`--engine my.json`, a calibrated or edited copy) keeps its
base's name: the terminal, report.html, recommendations.json and the serving files named its
path, schedule.csv's engine_profile column and the figure captions gave the bare name, the same
as the shipped profile's. And each engine's ServingPlan knows the engine it was made for."""

from __future__ import annotations

import csv
import html
import shutil

import pytest

import speedplan
from speedplan.engine.profile import PRESET_DIR
from speedplan.plan.engine_plan import schedule_frame
from speedplan.report.folder import write_outputs
from speedplan.report.summary import short_provenance

GRID = dict(mechanisms=["eagle3"], batches=(1, 8), draft_lens=(0, 2, 4), contexts=(2000,))  # within the head


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
    """A sweep priced by a copy of the shipped vLLM profile, and the copy's path."""
    path = tmp_path_factory.mktemp("engine") / "my-vllm.json"
    shutil.copy(PRESET_DIR / "vllm.json", path)
    return speedplan.sweep(engine=str(path), **GRID), str(path)


def test_the_name_of_a_file_read_profile_carries_its_path(edited):
    from speedplan.plan.engine_outputs import engine_profile_name

    result, path = edited
    assert engine_profile_name(result.meta) == f"vllm (file {path})"
    assert engine_profile_name(speedplan.sweep(**GRID).meta) == "vllm"  # the shipped one: its name alone
    assert f"file {path}" in result.meta["engine_label"]  # what the terminal and report.html already said


def test_schedule_and_captions_name_the_file_as_the_other_outputs_do(edited, tmp_path):
    result, path = edited
    plans = speedplan.plan_engines(result)
    profiles = dict(zip(*[schedule_frame(plans)[c] for c in ("engine", "engine_profile")]))
    assert profiles["vllm"] == f"vllm (file {path})"  # the file priced the vLLM plan
    assert profiles["sglang"] == "sglang" and profiles["trtllm"] == "trtllm"  # shipped profiles priced the others
    assert f"engine profile vllm (file {path}); acceptance: " in short_provenance(result)

    out = tmp_path / "report"
    write_outputs(result, out, plans=plans)
    rows = list(csv.DictReader((out / "schedule.csv").open()))
    assert {r["engine_profile"] for r in rows if r["engine"] == "vllm"} == {f"vllm (file {path})"}
    page = (out / "report.html").read_text()
    assert page.count(html.escape(f"engine profile vllm (file {path}); acceptance: ")) >= 5  # every figcaption
    assert f"file {path}" in (out / "vllm_serve.sh").read_text()
    assert f"file {path}" in (out / "recommendations.json").read_text()


def test_the_shipped_profile_is_still_named_alone(tmp_path):
    result = speedplan.sweep(**GRID)
    assert set(schedule_frame(speedplan.plan_engines(result))["engine_profile"]) == {"vllm", "sglang", "trtllm"}
    assert "; engine profile vllm; acceptance: " in short_provenance(result)


def test_serving_plans_name_their_engine_and_another_engines_files_are_refused(edited):
    result, _ = edited
    served = speedplan.serving_plans(result, speedplan.plan_engines(result))
    assert {name: p.engine for name, p in served.items()} == {name: name for name in served}
    with pytest.raises(speedplan.SpeedplanInputError, match=r"^sglang render: the plan was made for vllm, not sglang"):
        speedplan.render_serving_configs({"sglang": served["vllm"]})
    files = speedplan.render_serving_configs(served["vllm"])  # one engine's plan alone: its own files only
    assert files and all(name.startswith("vllm_") for name in files)


def test_recommendations_name_the_file_in_every_row(edited):
    result, path = edited
    from speedplan.plan.pick import recommendations

    recs = recommendations(result)
    assert {r["engine_profile"] for r in recs["per_batch"]} == {f"vllm (file {path})"}
    shipped = recommendations(speedplan.sweep(**GRID))
    assert {r["engine_profile"] for r in shipped["per_batch"]} == {"vllm"}


def test_sweep_and_sensitivity_csv_name_the_file_too(edited, tmp_path):
    """sweep.csv's and sensitivity.csv's engine column gave a file-read profile's bare name, the
    same as the shipped profile's, where every other output named its path."""
    result, path = edited
    write_outputs(result, tmp_path / "edited")
    write_outputs(speedplan.sweep(**GRID), tmp_path / "shipped")
    for name in ("sweep.csv", "sensitivity.csv"):
        assert {r["engine"] for r in csv.DictReader((tmp_path / "edited" / name).open())} == {f"vllm (file {path})"}
        assert {r["engine"] for r in csv.DictReader((tmp_path / "shipped" / name).open())} == {"vllm"}
