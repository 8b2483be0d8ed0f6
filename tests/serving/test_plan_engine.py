"""A ServingPlan knows the engine it was made for (`ServingPlan.engine`), so that one engine's
plan is never rendered as another engine's files: render_serving_configs({"sglang": vllm_plan})
wrote SGLang's launch script with vLLM's draft lengths and speedups, silently."""

from __future__ import annotations

import pytest

from speedplan.errors import SpeedplanInputError
from speedplan.serving import ENGINES, ServingPlan, render_serving_configs, write_serving_configs
from speedplan.serving.sglang import render as render_sglang
from speedplan.serving.trtllm import render as render_trtllm
from speedplan.serving.vllm import render as render_vllm

ROWS = ((1, 5, 2.4, 0.0), (8, 4, 1.9, 0.01), (32, 2, 1.3, 0.0))


def made_for(engine: str | None, **kw) -> ServingPlan:
    base = dict(model="llama-3.1-8b", mechanism="eagle3", draft_len=5, schedule=((1, 5), (8, 4), (32, 2)),
                hardware="h100-sxm", per_batch=ROWS, engine=engine)
    base.update(kw)
    return ServingPlan(**base)


def test_a_plan_made_for_one_engine_is_refused_under_another():
    vllm_plan = made_for("vllm")
    with pytest.raises(SpeedplanInputError) as e:
        render_serving_configs({"sglang": vllm_plan})
    line = str(e.value)
    assert "\n" not in line and line.startswith("sglang render: the plan was made for vllm, not sglang")
    # every entry is checked, not only the first
    with pytest.raises(SpeedplanInputError, match=r"^trtllm render: the plan was made for vllm, not trtllm"):
        render_serving_configs({"vllm": vllm_plan, "trtllm": vllm_plan})


def test_write_serving_configs_refuses_it_before_writing_anything(tmp_path):
    out = tmp_path / "configs"
    with pytest.raises(SpeedplanInputError, match=r"^sglang render: the plan was made for vllm, not sglang"):
        write_serving_configs({"vllm": made_for("vllm"), "sglang": made_for("vllm")}, out)
    assert not out.exists()


def test_each_engines_own_plan_renders_as_before():
    """The engine a plan was made for changes no byte of its files: only which files it may fill."""
    own = {name: made_for(name) for name in ENGINES}
    files = render_serving_configs(own)
    assert files == render_serving_configs({name: made_for(None) for name in ENGINES})
    assert {"vllm_serve.sh", "sglang_launch.sh", "trtllm_serve.sh"} <= set(files)
    assert render_serving_configs({"VLLM": made_for("vllm")}) == render_vllm(made_for(None))  # names as engine_module reads them


def test_a_hand_built_plan_still_serves_every_engine():
    files = render_serving_configs(made_for(None))
    assert {name.split("_")[0] for name in files} == set(ENGINES)


def test_a_single_plan_made_for_one_engine_renders_only_that_engines_files(tmp_path):
    files = render_serving_configs(made_for("sglang"))
    assert set(files) == set(render_sglang(made_for(None)))
    assert all(name.startswith("sglang_") for name in files)
    paths = write_serving_configs(made_for("trtllm"), tmp_path)
    assert {p.name for p in paths} == set(render_trtllm(made_for(None)))


@pytest.mark.parametrize("render, name", [(render_vllm, "vllm"), (render_sglang, "sglang"), (render_trtllm, "trtllm")])
def test_an_engine_module_refuses_another_engines_plan(render, name):
    other = next(n for n in ENGINES if n != name)
    with pytest.raises(SpeedplanInputError, match=f"^{name} render: the plan was made for {other}, not {name}"):
        render(made_for(other))
    assert render(made_for(name)) == render(made_for(None))


def test_the_engine_name_is_checked_when_the_plan_is_made():
    assert made_for(" vLLM ").engine == "vllm"
    with pytest.raises(SpeedplanInputError, match="unknown serving engine 'tgi'"):
        made_for("tgi")
    assert made_for(None).engine is None
