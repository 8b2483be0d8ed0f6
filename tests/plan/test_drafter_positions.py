"""A drafter swept past the positions it holds carries a caution (plan/drafter_positions.py): the
published EAGLE heads for Llama-3.1-8B hold 2,048 positions, and vLLM drafts nothing for a batch
whose longest sequence + D passes a drafter's (gpu_model_runner._input_fits_in_drafter)."""

from __future__ import annotations

import json

import pytest

from speedplan.cli.app import run
from speedplan.plan.defaults import head_positions
from speedplan.plan.drafter_positions import positions_needed
from speedplan.plan.mechanisms import parse_mechanism
from speedplan.plan.sweep import sweep
from speedplan.report.table_notes import grouped
from speedplan.specs.model import get_model

# yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's config.json, as in test_eagle_head_configs.py
HEAD3 = {"architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 32000, "hidden_size": 4096,
         "intermediate_size": 14336, "model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
         "num_hidden_layers": 1, "torch_dtype": "float16", "vocab_size": 128256}
HEAD1 = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336, "model_type": "llama",
         "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256}
HEADS = ["eagle", "eagle-tree", "eagle3", "eagle3-tree"]


def _config(tmp_path, base: dict, positions: int) -> str:
    path = tmp_path / f"head-{positions}.json"
    path.write_text(json.dumps({**base, "max_position_embeddings": positions}))
    return str(path)


def test_the_published_llama_heads_record_their_positions_and_others_do_not():
    assert head_positions("eagle3", "llama-3.1-8b")[0] == 2048
    assert "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" in head_positions("eagle3", "llama-3.1-8b")[1]
    assert head_positions("eagle", "llama-3.1-8b")[0] == 2048
    # no source states the positions of the other rows' heads, nor of the fallback row's
    assert head_positions("eagle3", "qwen3-30b-a3b") is None and head_positions("eagle3", "llama-3.1-70b") is None
    assert head_positions("eagle3", "mistral-7b") is None


def test_the_default_sweep_cautions_each_published_head_once_per_head(tmp_path, capsys):
    result = sweep(mechanisms=HEADS + ["ngram"], batches=[1, 8], draft_lens=[0, 4], contexts=[4096])
    cautions = result.meta["cautions"]
    assert sorted(cautions) == sorted(HEADS)  # n-gram lookup holds no positions of its own
    assert "holds 2,048 positions" in cautions["eagle3"] and "need up to 4,161 (context 4,096, then 1 + k" in cautions["eagle3"]
    assert "D 4 for eagle3, 32 nodes for eagle3-tree" in cautions["eagle3"]  # 4,096 + 1 + 2 x 32
    assert "Model Runner V1 drafts nothing (priced so: AL 1" in cautions["eagle3"] and "#6783" in cautions["eagle3"]
    assert "V2, vLLM 0.33's default, gives a head whose RoPE type allows it the target's positions and drafts on at an " \
        "acceptance not measured there, or else lowers max_model_len to the drafter's" in cautions["eagle3"]
    assert cautions["eagle3"] == cautions["eagle3-tree"] != cautions["eagle"] == cautions["eagle-tree"]
    assert run(["sweep", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert out.count("caution: eagle3, eagle3-tree: its drafter holds 2,048 positions") == 1
    assert out.count("caution: eagle, eagle-tree: its drafter holds 2,048 positions") == 1
    html = (tmp_path / "o" / "report.html").read_text()
    assert "caution: eagle3, eagle3-tree:" in html
    assert set(json.loads((tmp_path / "o" / "meta.json").read_text())["cautions"]) == set(HEADS)


def test_no_caution_within_the_positions_or_for_another_target_and_ones_own_acceptance_still_gets_one():
    # 2,031 + 1 + 2 x 8 = 2,048: every position a step verifies and then drafts fits (trees of 8 nodes)
    within = sweep(mechanisms=HEADS, batches=[1], draft_lens=[0, 8], contexts=[2031], tree_nodes=[8])
    assert within.meta["cautions"] == {}
    past = sweep(mechanisms=HEADS, batches=[1], draft_lens=[0, 8], contexts=[2032], tree_nodes=[8])
    assert sorted(past.meta["cautions"]) == HEADS and "need up to 2,049" in past.meta["cautions"]["eagle3"]
    # a tree of 16 nodes at 2,031 needs 2,064: only the trees are cautioned, with the widest step each one takes
    trees = sweep(mechanisms=HEADS, batches=[1], draft_lens=[0, 8], contexts=[2031], tree_nodes=[8, 16]).meta["cautions"]
    assert sorted(trees) == ["eagle-tree", "eagle3-tree"] and "16 nodes for eagle3-tree" in trees["eagle3-tree"]
    # the user's acceptance says nothing of which head is served: the launch files name the published one, so
    # its positions hold (and vLLM's rule with them); the caution leaves out "published acceptance"
    mine = sweep(mechanisms=HEADS, batches=[1], draft_lens=[0, 4], contexts=[4096], acceptance={"eagle3": "alpha=0.7"})
    assert sorted(mine.meta["cautions"]) == HEADS
    assert "published acceptance" not in mine.meta["cautions"]["eagle3"] and "eagle3:config=PATH" in mine.meta["cautions"]["eagle3"]
    assert (_rows(mine, "eagle3")["acceptance_length"] == 1).all()
    # llama-3.1-70b's published EAGLE-3 row names a head whose positions no source states
    far = sweep(model="llama-3.1-70b", tp=4, mechanisms=["eagle3"], batches=[1], draft_lens=[0, 4], contexts=[8192])
    assert far.meta["cautions"] == {}


@pytest.mark.parametrize("family, base", [("eagle3", HEAD3), ("eagle", HEAD1)])
def test_a_head_config_gives_its_own_positions(tmp_path, family, base):
    target = get_model("llama-3.1-8b")
    short = parse_mechanism(f"{family}:config={_config(tmp_path, base, 4096)}", target)
    assert short.drafter_positions() == (4096, f"the head config {_config(tmp_path, base, 4096)}")
    result = sweep(mechanisms=[f"{family}:config={_config(tmp_path, base, 4096)}"], batches=[1], draft_lens=[0, 4],
                   contexts=[8192])
    assert "holds 4,096 positions (the head config" in result.meta["cautions"][family]
    # a head config of 131,072 positions (Llama-3.1's own) holds the sweep: the published head's 2,048 no longer apply
    long = f"{family}:config={_config(tmp_path, base, 131072)}"
    assert sweep(mechanisms=[long], batches=[1], draft_lens=[0, 4], contexts=[8192]).meta["cautions"] == {}


def test_drafters_without_positions_of_their_own_say_none():
    target = get_model("llama-3.1-8b")
    for spec in ("ngram", "medusa"):
        assert parse_mechanism(spec, target).drafter_positions() is None
    assert parse_mechanism("draft-model:llama-3.2-1b", target).drafter_positions()[0] == 131072


def test_grouped_puts_mechanisms_that_share_a_note_on_one_line():
    assert grouped({"a": "x", "b": "y", "c": "x"}) == [("a, c", "x"), ("b", "y")]
    assert grouped(None) == [] and grouped({}) == []


# ---- vLLM prices a step past the drafter's positions at AL 1, without drafting ---------------------
def _rows(result, mech: str):
    f = result.frame
    return f[(f["mechanism"] == mech) & (f["draft_len"] > 0)].set_index(["batch", "draft_len", "context"])


def test_vllm_gains_nothing_past_the_heads_positions_and_sglangs_drafter_runs_on_for_nothing():
    vllm = sweep(mechanisms=["eagle3"], batches=[1, 64], draft_lens=[0, 3, 8], contexts=[4096])
    sglang = sweep(mechanisms=["eagle3"], batches=[1, 64], draft_lens=[0, 3, 8], contexts=[4096], engine="sglang")
    trtllm = sweep(mechanisms=["eagle3"], batches=[1, 64], draft_lens=[0, 3, 8], contexts=[4096], engine="trtllm")
    dead, wasted, alive = _rows(vllm, "eagle3"), _rows(sglang, "eagle3"), _rows(trtllm, "eagle3")
    assert (dead["acceptance_length"] == 1).all() and (dead["t_draft_s"] == 0).all() and (dead["speedup"] < 1).all()
    # sglang issue #6783: slower than plain decoding past 2k, the drafter still running
    assert (wasted["acceptance_length"] == 1).all() and (wasted["t_draft_s"] > 0).all()
    assert (wasted["speedup"] < 1).all()
    assert (alive["acceptance_length"] > 2).all() and (alive["t_draft_s"] > 0).all()  # TensorRT-LLM: not stated
    # the step still verifies 1 + D tokens: dearer than plain decoding, cheaper than drafting as well
    f = vllm.frame
    plain = f[f["mechanism"] == "none"].set_index("batch")["t_step_s"]
    for (b, d, _), row in dead.iterrows():
        assert row["t_step_s"] > plain[b] and row["verify_tokens"] == d + 1


def test_the_boundary_is_the_verified_sequence_plus_the_next_drafts_against_the_positions():
    # vLLM's gate: max_seq_len (KV length + the 1 + D tokens the step verifies) + num_speculative_tokens D.
    # 2,031 + 1 + 8 + 8 = 2,048 fits; 2,032 + 17 does not, 2,032 + 1 + 7 + 7 does
    rows = _rows(sweep(mechanisms=["eagle3"], batches=[1], draft_lens=[0, 7, 8], contexts=[2031, 2032]), "eagle3")
    assert rows.loc[(1, 8, 2031), "acceptance_length"] > 2 and rows.loc[(1, 7, 2032), "acceptance_length"] > 2
    assert rows.loc[(1, 8, 2032), "acceptance_length"] == 1
    assert positions_needed(8, 2031) == 2048 and positions_needed([0, 3], 10).tolist() == [11, 17]


def test_the_default_vllm_plan_leaves_the_heads_at_4096_and_takes_eagle3_within_their_positions():
    from speedplan.plan.engine_plan import plan_engines

    long = plan_engines(sweep(batches=[1, 8, 64]))
    assert not long["vllm"].mechanism.startswith("eagle") and not long["sglang"].mechanism.startswith("eagle")
    assert long["trtllm"].mechanism.startswith("eagle3")  # TensorRT-LLM past the positions: not stated
    short = plan_engines(sweep(batches=[1, 8, 64], contexts=[2000]))
    assert short["vllm"].mechanism == "eagle3" and short["sglang"].mechanism.startswith("eagle3")


def test_the_rule_follows_the_engine_family_not_the_profile_name():
    from speedplan.engine.profile import get_engine

    copy = get_engine("vllm").with_terms({"host_step_us": 500.0}, "a calibrated copy")
    for engine, drops in ((copy, True), ("vllm-async", True), ("trtllm", False), ("speedplan-runtime", False)):
        rows = _rows(sweep(mechanisms=["eagle3"], batches=[1], draft_lens=[0, 3], contexts=[4096], engine=engine),
                     "eagle3")
        assert (rows["acceptance_length"] == 1).all() == drops, engine


def test_a_draft_configs_positions_apply_on_vllm_with_ones_own_acceptance_too(tmp_path):
    """The user's acceptance says nothing of the drafter's positions: vLLM's rule still applies, and the caution
    says so without the words on published figures."""
    config = tmp_path / "draft.json"
    config.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
                                  "num_hidden_layers": 16, "intermediate_size": 8192, "num_attention_heads": 32,
                                  "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 2048,
                                  "tie_word_embeddings": True}))
    r = sweep(mechanisms=[f"draft-model:{config}"], batches=[1], draft_lens=[0, 4], contexts=[4096],
              acceptance={"draft-model": "alpha=0.7"})
    assert (_rows(r, "draft-model:draft")["acceptance_length"] == 1).all()
    caution = r.meta["cautions"]["draft-model:draft"]
    assert "published" not in caution and "draft-model:PATH" in caution and "--acceptance" not in caution


def test_without_drafting_drops_the_drafters_work_and_keeps_the_verify():
    import numpy as np

    from speedplan.engine.profile import get_engine
    from speedplan.engine.step import step_cost, without_drafting

    r = sweep(mechanisms=["eagle3"], batches=[1, 64], draft_lens=[3], contexts=[1024])
    parts = next(p for p in r.pricing[0] if p.mech is not None).parts
    dropped = np.array([True, False])
    cut = without_drafting(parts, dropped)
    assert cut.ops_s[0] == parts.ops_s[0] - parts.draft_ops_s[0] and cut.ops_s[1] == parts.ops_s[1]
    assert cut.forwards[0] == 0 and cut.draft_tokens[0] == 0 and cut.forwards[1] == parts.forwards[1] > 0
    assert (cut.tokens == parts.tokens).all() and cut.speculative.all()
    terms = get_engine("vllm").values()
    full, less = step_cost(terms, parts), step_cost(terms, cut)
    assert less.total_s[0] < full.total_s[0] and less.draft_s[0] == 0 and less.total_s[1] == full.total_s[1]


def test_the_serving_files_of_a_plan_past_its_heads_positions_carry_the_caution(tmp_path):
    assert run(["sweep", "--batch", "1,8", "--out", str(tmp_path / "o")]) == 0
    assert "caution: its drafter holds 2,048 positions" in (tmp_path / "o" / "trtllm_serve.sh").read_text()
    for name in ("vllm_serve.sh", "sglang_launch.sh"):  # their plans are not a head's
        assert "caution:" not in (tmp_path / "o" / name).read_text()


def test_drafters_without_positions_are_never_dropped_on_vllm():
    r = sweep(mechanisms=["ngram", "medusa"], batches=[1, 64], draft_lens=[0, 3], contexts=[32768])
    for mech in ("ngram", "medusa"):
        rows = _rows(r, mech)
        assert (rows["acceptance_length"] > 1).all(), mech
    assert (_rows(r, "medusa")["t_draft_s"] > 0).all()


def test_a_tree_is_checked_with_its_nodes_as_vllm_counts_speculative_tokens():
    # depth 4 at context 2,030: 4 nodes need 2,030 + 1 + 8 and fit 2,048; 16 nodes need 2,030 + 1 + 32 and do not
    r = sweep(mechanisms=["eagle3-tree"], batches=[1], draft_lens=[0, 4], contexts=[2030], tree_nodes=[4, 16])
    rows = r.frame[(r.frame["mechanism"] == "eagle3-tree") & (r.frame["draft_len"] == 4)].set_index("verify_tokens")
    assert rows.loc[5, "acceptance_length"] > 1 and rows.loc[17, "acceptance_length"] == 1


def test_the_launch_files_say_what_each_engine_does_past_the_drafters_positions(tmp_path):
    """Within the positions at the planned context (2000), a request may still pass them: every file whose plan
    loads the 2,048-position head says so, each with its engine's behaviour."""
    assert run(["sweep", "--context", "2000", "--batch", "1,8", "--out", str(tmp_path / "o")]) == 0
    vllm = (tmp_path / "o" / "vllm_serve.sh").read_text()
    assert "# Note: the drafter holds 2,048 positions" in vllm and "_input_fits_in_drafter" in vllm
    # vLLM 0.33's Model Runner V2 gives a head whose RoPE type allows it the target's positions (a review, stop 62)
    note = " ".join(line.lstrip("# ") for line in vllm.splitlines())
    assert "Model Runner V2, vLLM 0.33's default, raises an EAGLE or MTP head's positions to max_model_len" in note
    assert "otherwise (a draft model, another RoPE type) lowers max_model_len to the drafter's" in note
    assert "sglang issue #6783" in (tmp_path / "o" / "sglang_launch.sh").read_text()
    assert "what TensorRT-LLM does past them is not stated" in (tmp_path / "o" / "trtllm_serve.sh").read_text()
    # a draft model of 131,072 positions, Llama-3.1's own: nothing to say
    assert run(["sweep", "--mechanism", "draft-model", "--batch", "1,8", "--out", str(tmp_path / "d")]) == 0
    assert "drafter holds" not in (tmp_path / "d" / "vllm_serve.sh").read_text()


def test_speedplan_mechanisms_lists_what_each_drafter_holds():
    from speedplan.report.catalog import mechanism_rows

    rows = {r["mechanism"]: r["positions"] for r in mechanism_rows("llama-3.1-8b")}
    assert rows["eagle3"] == rows["eagle"] == "2,048" and rows["draft-model:llama-3.2-1b"] == "131,072"
    assert rows["ngram"] == "-" and rows["medusa"] == "-"
    assert "positions" not in mechanism_rows()[0]  # without a model nothing is built


def test_sglang_counts_its_drafters_steps_not_a_trees_nodes():
    # SGLang's drafter runs D steps past the accepted tokens: depth 4 at 2,030 needs 2,030 + 1 + 8 whatever the
    # nodes (vLLM would count 16 nodes: 2,063); depth 8 at 2,032 needs 2,049
    r = sweep(mechanisms=["eagle3-tree"], batches=[1], draft_lens=[0, 4], contexts=[2030], tree_nodes=[4, 16],
              engine="sglang")
    assert (_rows(r, "eagle3-tree")["acceptance_length"] > 1).all()
    r = sweep(mechanisms=["eagle3"], batches=[1], draft_lens=[0, 8], contexts=[2031, 2032], engine="sglang")
    rows = _rows(r, "eagle3")
    assert rows.loc[(1, 8, 2031), "acceptance_length"] > 2 and rows.loc[(1, 8, 2032), "acceptance_length"] == 1

