"""Stop 53's fixes, each with the input that showed it."""

import re

import pytest

import speedplan as sp
from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanisms import REGISTRY, parse_mechanism
from speedplan.specs.model import get_model


def test_mechanisms_lists_every_registered_one_with_a_spec_that_parses():
    # sweep --help's --mechanism list was hand-written: an added mechanism was not listed anywhere
    rows = sp.list_mechanisms()
    assert sorted(rows["mechanism"]) == sorted(REGISTRY)
    target = get_model("llama-3.1-8b")
    values = {"vocab": "32000", "topk": "4", "tp": "1"}
    for name, spec in zip(rows["mechanism"], rows["spec"]):
        assert spec.startswith(name)
        options = re.findall(r"[:,](\w+)=(?:N|K|PATH)\]", spec)
        for key in options:
            if key == "config":
                continue
            arg = f"llama-3.2-1b,tp=1" if key == "tp" else f"{key}={values[key]}"
            if REGISTRY[name].cannot_run(target) is None:
                parse_mechanism(f"{name}:{arg}", target)  # each option the spec names is one the parser reads
        if "[" not in spec and name != "ngram":  # a spec without options: the parser refuses one
            with pytest.raises(SpeedplanInputError):
                parse_mechanism(f"{name}:vocab=32000", get_model("deepseek-v3"))


def test_mechanisms_for_a_model_match_what_its_sweep_prices():
    rows = sp.list_mechanisms("llama-3.1-8b")
    swept = rows[rows["swept"] == "yes"]
    r = sp.sweep(model="llama-3.1-8b", batches=[1], draft_lens=[3], tree_nodes=[16])
    priced = r.frame[r.frame["mechanism"] != "none"]
    assert set(swept["mechanism"]) == set(priced["mechanism"])
    for _, row in swept.iterrows():
        al = priced.loc[priced["mechanism"] == row["mechanism"], "acceptance_length"]
        assert abs(al.iloc[0] - row["AL at D=3"]) < 0.01, row["mechanism"]
        assert priced.loc[priced["mechanism"] == row["mechanism"], "acceptance_source"].iloc[0] == \
            row["acceptance source"]
    left = rows[rows["swept"] != "yes"]
    assert "mtp" in set(left["mechanism"]) and left["swept"].str.startswith("no: ").all()


def test_mechanisms_command(cli):
    out = cli("mechanisms")
    assert out.returncode == 0 and "eagle3-tree[:topk=K]" in out.stdout
    out = cli("mechanisms", "--model", "deepseek-v3", "--tp", "8")
    assert out.returncode == 0 and re.search(r"^mtp .* yes ", out.stdout, re.M)
    for args, says in ((("--model", "nope"), "unknown model 'nope'"),
                       (("--model", "deepseek-v3", "--tp", "3"), "--tp 3"),
                       (("--draft-len", "0"), "--draft-len 0")):
        out = cli("mechanisms", *args)
        assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr
    assert "speedplan mechanisms" in cli("sweep", "--help").stdout


def test_no_faster_than_plain_note_where_the_engine_cap_shortens_the_step():
    # SGLang runs 48 requests a speculative step at B = 256: its step was compared with plain decoding's
    # over 256, and the note said the speedup exceeded the AL beside a 0.73x at AL 3.56
    from speedplan.report.table_notes import cheaper_than_plain_line

    r = sp.sweep(model="llama-3.1-70b", tp=4, engine="sglang", batches=[1, 64, 256], mechanisms=["eagle3"])
    capped = r.best[(r.best["mechanism"] != "none") & (r.best["running"] < r.best["batch"])]
    assert len(capped) and (capped["t_step_s"] < capped["t_plain_s"]).any()
    assert (r.best["speedup"] <= 1.001 * r.best["acceptance_length"]).all()
    assert cheaper_than_plain_line(r.best) is None


def test_recommendations_say_not_planned_not_off(tmp_path):
    # TensorRT-LLM on an MI300X was written as {"mechanism": "none", "mode": "off"} (a script reads "launch it
    # without speculation") with SGLang's profile named; one whose memory rule holds nothing got a launch script
    import json

    r = sp.sweep(model="mixtral-8x7b", hardware="mi300x", engine="sglang", batches=[1, 8], draft_lens=[0, 2])
    files = sp.write_outputs(r, tmp_path / "a")
    rec = json.loads((tmp_path / "a" / "recommendations.json").read_text())["engines"]
    assert rec["trtllm"]["mechanism"] is None and rec["trtllm"]["mode"] == "not planned"
    assert rec["trtllm"]["engine_profile"] is None and "cuda" in rec["trtllm"]["how"]
    assert rec["vllm"]["mode"] != "not planned" and rec["vllm"]["per_batch"]
    assert not any("trtllm" in str(f) for f in files)
    one = sp.sweep(model="llama-3.1-70b", hardware="h100-sxm", mechanisms=["eagle3"], batches=[1], draft_lens=[0, 2],
                   contexts=[65536], tp=2, engine="trtllm")
    sp.write_outputs(one, tmp_path / "b")
    rec = json.loads((tmp_path / "b" / "recommendations.json").read_text())["engines"]
    assert rec["vllm"]["mode"] == "not planned" and rec["vllm"]["engine_profile"].startswith("vllm")
    assert rec["trtllm"]["mode"] != "not planned"
    written = {p.name for p in (tmp_path / "b").iterdir()}
    assert not any(n.startswith(("vllm", "sglang")) for n in written) and any(n.startswith("trtllm") for n in written)


def test_the_runtime_profile_on_a_gpu_says_what_it_describes():
    # --engine speedplan-runtime on an H100 gave a 4.48x headline priced with eager PyTorch's CPU terms, unflagged
    line = sp.render_summary(sp.sweep(engine="speedplan-runtime", batches=[1, 8]))
    assert "eager PyTorch without CUDA graphs, fitted on CPUs" in line
    cpu = sp.render_summary(sp.sweep(model="smollm2-135m", hardware="cpu-local", engine="speedplan-runtime",
                                     batches=[1, 8]))
    assert "fitted on CPUs" not in cpu and "on a CPU its terms describe" not in cpu
