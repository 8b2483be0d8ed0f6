"""`speedplan validate` on a CPU no shipped profile was measured on: a full run measures this CPU's
profile first (DESIGN.md, validation step 1) and keeps it in its folder, under profile/.

The run itself is replaced by a stand-in that returns a stored run's table (a real one takes an
hour): what is tested is the wiring around it, with a real (tiny-grid) measurement."""

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
STORED = ROOT / "reports" / "validation-cpu-epyc-zen3-2026-12-05"


@pytest.fixture
def unmatched_cpu(monkeypatch):
    """No shipped profile was measured on this CPU; what a run measures is the tiny grid (seconds)."""
    import speedplan.validate.device_profile as device_profile

    monkeypatch.setattr(device_profile, "shipped_profile_of_this_cpu", lambda: None)
    monkeypatch.setattr(device_profile, "MEASURE_GRIDS", ("tiny",))
    return device_profile


@pytest.fixture
def stand_in_run(monkeypatch):
    """run_validation replaced: records the profile it was given and checks that a measured one
    (profile/ in the staging folder) describes this CPU."""
    import speedplan.validate.run as run_module
    from microbench.env import same_cpu, this_cpu
    from speedplan.cost.ops import load_cost_model
    from speedplan.validate.reprice import load_validation

    given = []

    def fake(grid, hardware, progress=None):
        cost = load_cost_model(hardware)
        assert cost.hardware.is_cpu
        if Path(hardware).name == "profile":
            assert cost.origin.startswith("measured") and same_cpu(cost.profile.meta, this_cpu())
        given.append(hardware)
        table, summary = load_validation(STORED)
        return table, {**summary, "hardware": hardware}

    monkeypatch.setattr(run_module, "run_validation", fake)
    return given


def _run(*args):
    from speedplan.cli.app import run

    return run(["validate", *args])


def test_a_full_run_on_an_unmatched_cpu_measures_its_profile_and_keeps_it(unmatched_cpu, stand_in_run, tmp_path, capsys):
    out = tmp_path / "val"
    assert _run("--device", "cpu", "--out", str(out)) == 0
    err = capsys.readouterr().err
    assert "measuring a profile of this CPU" in err and "warning: the profile was measured on" not in err
    assert len(stand_in_run) == 1 and Path(stand_in_run[0]).name == "profile"
    assert not Path(stand_in_run[0]).exists()  # it was measured in the staging folder, which became `out`
    summary = json.loads((out / "summary.json").read_text())
    assert summary["hardware"] == "profile" and summary["profile_measured"] is True
    meta = json.loads((out / "profile" / "meta.json").read_text())
    assert meta["hardware_preset"] == "cpu-local" and meta["origin"] == "measured"
    assert f"--hardware {out / 'profile'}" in (out / "profile" / "README.md").read_text()
    assert "measured by this run" in (out / "report.html").read_text()
    # --reprice finds the folder's own profile; a rerun may replace the folder, profile/ and all
    assert _run("--reprice", str(out)) == 0
    assert f"repriced ({out / 'profile'})" in capsys.readouterr().out
    assert _run("--device", "cpu", "--out", str(out)) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["val"]  # no staging folder left beside it


def test_quick_runs_and_a_named_profile_do_not_measure(unmatched_cpu, stand_in_run, tmp_path, capsys):
    assert _run("--device", "cpu", "--quick", "--out", str(tmp_path / "q")) == 0
    assert _run("--device", "cpu", "--hardware", "cpu-local-xeon", "--out", str(tmp_path / "x")) == 0
    assert stand_in_run == ["cpu-local", "cpu-local-xeon"]
    assert "measuring" not in capsys.readouterr().err
    assert not (tmp_path / "q" / "profile").exists()
    # asked for, a quick run measures too
    assert _run("--device", "cpu", "--quick", "--measure-cpu", "--out", str(tmp_path / "m")) == 0
    assert (tmp_path / "m" / "profile" / "meta.json").is_file()


def test_no_measure_cpu_keeps_the_shipped_profile(unmatched_cpu, stand_in_run, tmp_path):
    assert _run("--device", "cpu", "--no-measure-cpu", "--out", str(tmp_path / "v")) == 0
    assert stand_in_run == ["cpu-local"] and not (tmp_path / "v" / "profile").exists()


def test_the_default_measures_only_a_full_run_on_an_unmatched_cpu(monkeypatch):
    import speedplan.validate.device_profile as device_profile
    from speedplan.errors import SpeedplanInputError

    should = device_profile.should_measure
    monkeypatch.setattr(device_profile, "shipped_profile_of_this_cpu", lambda: "cpu-local-epyc-zen3")
    assert should(None, False, None) is False
    monkeypatch.setattr(device_profile, "shipped_profile_of_this_cpu", lambda: None)
    assert should(None, False, None) is True
    assert should(None, True, None) is False and should(None, False, "cpu-local") is False
    assert should(True, True, None) is True and should(False, False, None) is False
    with pytest.raises(SpeedplanInputError, match="--measure-cpu prices with the profile it measures"):
        should(True, False, "cpu-local-xeon")


def test_conflicting_options_are_one_line_and_write_nothing(tmp_path, capsys):
    assert _run("--device", "cpu", "--measure-cpu", "--hardware", "cpu-local", "--out", str(tmp_path / "v")) == 2
    assert _run("--reprice", str(STORED), "--measure-cpu") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("speedplan: error: ") for line in err)
    assert "--measure-cpu" in err[0] and "--measure-cpu" in err[1]
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_fails_after_measuring_leaves_nothing(unmatched_cpu, monkeypatch, tmp_path):
    import speedplan.validate.run as run_module
    from speedplan.errors import SpeedplanInputError

    def failing(grid, hardware, progress=None):
        assert (Path(hardware) / "meta.json").is_file()
        raise SpeedplanInputError("the runtime failed")

    monkeypatch.setattr(run_module, "run_validation", failing)
    assert _run("--device", "cpu", "--out", str(tmp_path / "v")) == 2
    assert list(tmp_path.iterdir()) == []


def test_a_folder_holding_a_profile_subfolder_of_its_own_is_not_replaced(tmp_path):
    """Only the subfolder validate writes, listed in the folder's manifest, makes a folder ours."""
    from speedplan.outputs import VALIDATION, _ours

    folder = tmp_path / "v"
    (folder / "profile").mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"points": 1, "grid": {}}))
    (folder / "validation.csv").write_text("a\n1\n")
    assert _ours(folder, VALIDATION) is None  # before manifests: by name
    (folder / ".speedplan-files").write_text("summary.json\nvalidation.csv\n")
    assert "profile" in _ours(folder, VALIDATION)  # not in the manifest: the user's
    (folder / ".speedplan-files").write_text("summary.json\nvalidation.csv\nprofile\n")
    assert _ours(folder, VALIDATION) is None
    (folder / "mine").mkdir()
    assert "mine" in _ours(folder, VALIDATION)


def test_a_measurement_asked_for_on_a_matched_cpu_says_so(stand_in_run, monkeypatch, tmp_path, capsys):
    """The run of 2026-12-05 13:53 (--measure-cpu where cpu-local-epyc-zen3 matched) said "no shipped
    profile was measured on this CPU" on its terminal and in its profile's README."""
    import speedplan.validate.device_profile as device_profile

    monkeypatch.setattr(device_profile, "shipped_profile_of_this_cpu", lambda: "cpu-local-epyc-zen3")
    monkeypatch.setattr(device_profile, "MEASURE_GRIDS", ("tiny",))
    assert _run("--device", "cpu", "--quick", "--measure-cpu", "--out", str(tmp_path / "v")) == 0
    said = "asked for with --measure-cpu (the shipped cpu-local-epyc-zen3 was measured on this CPU too)"
    assert said in capsys.readouterr().err and said in (tmp_path / "v" / "profile" / "README.md").read_text()
    assert "no shipped profile" not in (tmp_path / "v" / "profile" / "README.md").read_text()
