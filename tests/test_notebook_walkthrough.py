"""A notebook user's walk through `speedplan`'s docstring: sweep -> plan_engines -> serving_plans
-> render_serving_configs -> render_summary -> write_outputs gives what `speedplan sweep` gives
for the same inputs, and bad arguments are one-line SpeedplanInputErrors."""

import dataclasses

import pytest
from typer.testing import CliRunner

import speedplan
from speedplan.cli.app import app

runner = CliRunner()
REPORT_FILES = ("schedule.csv", "recommendations.json", "sweep.csv", "pareto.csv", "sensitivity.csv")


def test_every_export_is_described_in_the_module_docstring():
    described = [n for n in speedplan.__all__ if not n.startswith("_") and f"{n}(" not in speedplan.__doc__
                 and f"`{n}`" not in speedplan.__doc__]
    assert described == [n for n in described if n in ("SweepResult", "SpeedplanInputError")], described


@pytest.mark.parametrize("cli_args, call", [
    (["--model", "llama-3.1-8b", "--mechanism", "eagle3", "--batch", "1,8,64"],
     dict(args=("llama-3.1-8b", "h100-sxm", ["eagle3"]), sweep=dict(batches=[1, 8, 64]), plan={})),
    (["--engine", "trtllm", "--plan-for", "trtllm", "--model", "deepseek-v3", "--hardware", "h200-sxm", "--tp", "8",
      "--mechanism", "mtp", "--batch", "1,16,128", "--batch-weights", "1=4,128=1", "--acceptance", "mtp:al=2.4@3"],
     dict(args=("deepseek-v3", "h200-sxm", ["mtp"]),
          sweep=dict(batches=[1, 16, 128], tp=8, engine="trtllm", acceptance={"mtp": "al=2.4@3"}),
          plan=dict(batch_weights={1: 4, 128: 1}, engines=["trtllm"]))),
])
def test_library_walk_matches_the_cli(tmp_path, cli_args, call):
    cli_out, lib_out = tmp_path / "cli", tmp_path / "lib"
    proc = runner.invoke(app, ["sweep", *cli_args, "--out", str(cli_out)])
    assert proc.exit_code == 0, proc.output

    r = speedplan.sweep(*call["args"], **call["sweep"])
    plans = speedplan.plan_engines(r, **call["plan"])
    files = speedplan.render_serving_configs(speedplan.serving_plans(r, plans))
    summary = speedplan.render_summary(r, plans=plans)
    written = speedplan.write_outputs(r, lib_out, plans=plans)

    assert proc.stdout.startswith(summary) and proc.stdout[len(summary):].strip().startswith("report:")
    assert files and all((cli_out / name).read_text() == text for name, text in files.items())
    assert {p.name for p in written} == {p.name for p in cli_out.iterdir() if not p.name.startswith(".")}
    for name in REPORT_FILES:
        assert (lib_out / name).read_text() == (cli_out / name).read_text(), name


@pytest.fixture(scope="module")
def small():
    return speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 8, 64])


BAD = {
    "batches=[0]": lambda r: speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[0]),
    "batches='8-1'": lambda r: speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches="8-1"),
    "negative context": lambda r: speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], contexts=[-4096]),
    "unknown engine": lambda r: speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], engine="tgi"),
    "missing engine file": lambda r: speedplan.get_engine("/nonexistent/my-vllm.json"),
    "missing model file": lambda r: speedplan.get_model("/nonexistent/config.json"),
    "missing measurements": lambda r: speedplan.calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm",
                                                                ["/nonexistent/runs.csv"]),
    "acceptance a float": lambda r: speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], acceptance=0.8),
    "acceptance a list": lambda r: speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"],
                                                   acceptance=[speedplan.Acceptance.iid(0.7)]),
    "acceptance of a mechanism not swept": lambda r: speedplan.sweep(
        "llama-3.1-8b", "h100-sxm", ["eagle3"], acceptance={"ngram": speedplan.Acceptance.iid(0.5)}),
    "Acceptance.iid(1.2)": lambda r: speedplan.Acceptance.iid(1.2),
    "plan_engines(frame)": lambda r: speedplan.plan_engines(r.frame),
    "unknown serving engine": lambda r: speedplan.plan_engines(r, engines=["tgi"]),
    "render EnginePlans": lambda r: speedplan.render_serving_configs(speedplan.plan_engines(r)),
    "reprice unknown engine": lambda r: speedplan.reprice(r, "tgi"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_arguments_are_one_line_input_errors(small, name):
    with pytest.raises(speedplan.SpeedplanInputError) as err:
        BAD[name](small)
    assert str(err.value).strip() and "\n" not in str(err.value)


def test_write_outputs_refuses_a_sweep_where_nothing_fits_as_the_cli_does(tmp_path):
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[256], contexts=[131072])
    assert speedplan.memory_shortfall(r)  # the library still says why
    proc = runner.invoke(app, ["sweep", "--mechanism", "eagle3", "--batch", "256", "--context", "131072",
                               "--out", str(tmp_path / "cli")])
    # in-process the CLI raises the error its entry point turns into exit 2 with this line
    assert isinstance(proc.exception, speedplan.SpeedplanInputError) and not (tmp_path / "cli").exists()
    with pytest.raises(speedplan.SpeedplanInputError, match="fits in memory at no swept batch") as err:
        speedplan.write_outputs(r, tmp_path / "lib")
    assert "\n" not in str(err.value) and not (tmp_path / "lib").exists()


def test_write_outputs_refuses_a_frame_filtered_to_no_plain_rows(tmp_path, small):
    no_plain = dataclasses.replace(small, frame=small.frame[small.frame.mechanism != "none"])
    with pytest.raises(speedplan.SpeedplanInputError, match="no plain-decoding row"):
        speedplan.write_outputs(no_plain, tmp_path / "lib")
    kept = dataclasses.replace(small, frame=small.frame[small.frame.batch <= 8])  # filtering rows is fine
    names = {p.name for p in speedplan.write_outputs(kept, tmp_path / "ok")}
    assert {"schedule.csv", "trtllm_extra_llm_api_options.yaml"} <= names


def test_plans_of_a_sweep_where_nothing_fits_are_empty_not_a_key_error():
    """EnginePlan.running read rows['runs_at_batch'] from rows without columns (KeyError)."""
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[256], contexts=[131072])
    plans = speedplan.plan_engines(r)
    assert plans and all(len(p.running) == 0 for p in plans.values())
