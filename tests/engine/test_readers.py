"""Reading what engines write: vLLM bench serve results and SGLang bench_speculative output,
with the field names of the engines' own sources."""

import json

import pytest

from speedplan.engine.readers.measurements import read_measurements
from speedplan.errors import SpeedplanInputError
from tests.engine._readers_helpers import SGLANG, VLLM_RUN  # VLLM_RUN: also imported from here by other tests


def test_vllm_bench_result_with_metadata(tmp_path):
    f = tmp_path / "run.json"
    f.write_text(json.dumps(VLLM_RUN))
    (m,) = read_measurements(f)
    assert (m.mechanism, m.batch, m.draft_len, m.context, m.quantity) == ("eagle3", 16, 3, 1500, "tpot_ms")
    assert m.value == 6.9 and m.acceptance_length == 2.71  # mean_tpot_ms; output_throughput only without it


def test_vllm_appended_results_are_json_lines(tmp_path):
    plain = {**VLLM_RUN, "mechanism": "none", "output_throughput": 1500.0}
    for k in ("spec_decode_acceptance_length", "spec_decode_num_drafts", "draft_len"):
        plain.pop(k)
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(VLLM_RUN) + "\n" + json.dumps(plain) + "\n")
    rows = read_measurements(f)
    assert [m.mechanism for m in rows] == ["eagle3", "none"] and rows[1].draft_len == 0


def test_vllm_result_without_mechanism_says_how_to_tag_it(tmp_path):
    run = {k: v for k, v in VLLM_RUN.items() if k != "mechanism"}
    f = tmp_path / "run.json"
    f.write_text(json.dumps(run))
    with pytest.raises(SpeedplanInputError, match="--metadata mechanism="):
        read_measurements(f)


def test_a_vllm_result_says_what_its_own_counters_give_where_metadata_is_missing(tmp_path):
    f = tmp_path / "run.json"
    drafted = {**VLLM_RUN, "spec_decode_draft_tokens": 3000}
    f.write_text(json.dumps({k: v for k, v in drafted.items() if k not in ("mechanism", "draft_len")}))
    with pytest.raises(SpeedplanInputError, match=r"or add them to the file's top level \(its spec_decode counters "
                       r"give 3.00 draft tokens a draft: draft_len 3\)$"):
        read_measurements(f)
    f.write_text(json.dumps({k: v for k, v in drafted.items() if k != "draft_len"}))
    with pytest.raises(SpeedplanInputError, match=r"field 'draft_len' missing: give --metadata draft_len=K, .*draft_len 3"):
        read_measurements(f)
    plain = {k: v for k, v in VLLM_RUN.items() if not k.startswith("spec_decode") and k not in ("mechanism", "draft_len")}
    f.write_text(json.dumps(plain))
    with pytest.raises(SpeedplanInputError, match="no spec_decode counters: mechanism none"):
        read_measurements(f)


def test_vllm_speculative_config_names_stand_for_mechanism_and_draft_len(tmp_path):
    """--metadata method=eagle3 num_speculative_tokens=3, as vLLM's --speculative-config spells them."""
    f = tmp_path / "run.json"
    run = {k: v for k, v in VLLM_RUN.items() if k not in ("mechanism", "draft_len")}
    f.write_text(json.dumps({**run, "method": "eagle3", "num_speculative_tokens": "3"}))
    (m,) = read_measurements(f)
    assert (m.mechanism, m.draft_len) == ("eagle3", 3)
    f.write_text(json.dumps({**run, "method": "draft_model", "num_speculative_tokens": 3}))
    assert read_measurements(f)[0].mechanism == "draft-model"


def test_a_speculative_vllm_run_without_acceptance_says_how_to_give_it(tmp_path):
    f = tmp_path / "run.json"
    f.write_text(json.dumps({k: v for k, v in VLLM_RUN.items() if k != "spec_decode_acceptance_length"}))
    with pytest.raises(SpeedplanInputError, match=r"field 'acceptance_length' is needed for a speculative row: the "
                       r"file has no spec_decode_acceptance_length; give --metadata acceptance_length=AL"):
        read_measurements(f)


def test_sglang_bench_speculative_lines(tmp_path):
    lines = [{"batch_size": 4, "steps": 0, "topk": 0, "num_draft_tokens": 0, "acc_length": 1.0, "step_time": 0.0071,
              "speed": 140.8, "completion_tokens": 256},
             {"batch_size": 4, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.6, "step_time": 0.0093,
              "speed": 279.5, "completion_tokens": 256},
             {"batch_size": 4, "steps": 5, "topk": 4, "num_draft_tokens": 16, "acc_length": 3.4, "step_time": 0.0121,
              "speed": 281.0, "completion_tokens": 256}]
    f = tmp_path / "output.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in lines))
    plain, chain, tree = read_measurements(f, mechanism="eagle3")
    assert plain.mechanism == "none" and plain.value == pytest.approx(7.1) and plain.quantity == "step_ms"
    assert chain.mechanism == "eagle3" and chain.draft_len == 3 and chain.acceptance_length == 2.6
    assert tree.mechanism == "eagle3-tree:topk=4" and tree.tree_nodes == 15  # the tree of the head named
    assert read_measurements(f, mechanism="eagle")[2].mechanism == "eagle-tree:topk=4"
    # the script launches each server with --max-running-requests equal to the batch size
    assert {m.max_running for m in (plain, chain, tree)} == {4}


def test_sglang_line_missing_a_field_names_it(tmp_path):
    f = tmp_path / "output.jsonl"
    f.write_text(json.dumps({"batch_size": 4, "steps": 3, "topk": 1, "num_draft_tokens": 4, "step_time": 0.01}) + "\n")
    with pytest.raises(SpeedplanInputError, match=r"output.jsonl:1: field 'acc_length' missing"):
        read_measurements(f)


def test_sglang_rows_of_an_mtp_draft_are_a_chain_and_their_trees_are_refused(tmp_path):
    f = tmp_path / "mtp.jsonl"
    f.write_text(json.dumps(SGLANG) + "\n")
    (m,) = read_measurements(f, mechanism="mtp")
    assert (m.mechanism, m.draft_len) == ("mtp", 3)
    f.write_text(json.dumps({**SGLANG, "topk": 4, "num_draft_tokens": 8}) + "\n")
    with pytest.raises(SpeedplanInputError, match="trees of EAGLE heads only"):
        read_measurements(f, mechanism="mtp")


def test_a_vllm_run_reads_its_batch_and_context_from_what_the_benchmark_did(tmp_path):
    """An audit of 2026-12-04 found a run of 8 prompts at --max-concurrency 64 read as batch 64
    (it never ran more than 8) and every run without --metadata context= priced at 1024 tokens;
    the result's own token totals say the mean decode context: prompt + half the output."""
    run = {k: v for k, v in VLLM_RUN.items() if k != "context"}
    run.update(max_concurrency=64, num_prompts=8, completed=8, failed=0, total_input_tokens=8 * 8000,
               total_output_tokens=8 * 256)
    f = tmp_path / "run.json"
    f.write_text(json.dumps(run))
    (m,) = read_measurements(f)
    assert (m.batch, m.context) == (8, 8000 + 128)
    f.write_text(json.dumps({**run, "num_prompts": 640, "context": 1500}))  # the metadata wins; more prompts: the cap
    (m,) = read_measurements(f)
    assert (m.batch, m.context, m.tree_nodes) == (64, 1500, None)
    f.write_text(json.dumps({**run, "mechanism": "eagle3-tree:topk=2", "tree_nodes": 6}))
    assert read_measurements(f)[0].tree_nodes == 6


@pytest.mark.parametrize("change, word", [
    ({"failed": 20, "completed": 140}, r"20 of 160 requests failed \('failed'\)"),
    ({"mechanism": "none", "draft_len": None}, r"mechanism none, but the server drafted .*'spec_decode_num_drafts' 1000"),
    ({"spec_decode_draft_tokens": 5000}, r"drafted 5\.00 tokens per draft .* more than draft_len 3: the metadata"),
    ({"spec_decode_draft_tokens": 2500}, r"drafted 2\.50 tokens per draft .* its draft length varied"),
    # every draft 2 long against draft_len 3: the metadata is wrong, not the length varying (audit 2026-12-04)
    ({"spec_decode_draft_tokens": 2000}, r"the metadata's draft length 3 disagrees with the 2\.00 tokens per draft "
                                         r".*: it ran 2 a draft"),
])
def test_a_vllm_run_whose_own_counters_contradict_it_is_refused(tmp_path, change, word):
    run = {**VLLM_RUN, "completed": 320, "failed": 0, "spec_decode_draft_tokens": 3000, **change}
    f = tmp_path / "run.json"
    f.write_text(json.dumps({k: v for k, v in run.items() if v is not None}))
    with pytest.raises(SpeedplanInputError, match=word) as e:
        read_measurements(f)
    assert str(e.value).startswith(f"{f}:run 1: ")


def test_a_vllm_run_that_lost_a_few_requests_or_drafts_is_read(tmp_path):
    """Under 1% failed, drafts truncated at requests' last tokens, and an n-gram drafter's
    shorter proposals (its matches run out) are what such runs look like."""
    f = tmp_path / "run.json"
    f.write_text(json.dumps({**VLLM_RUN, "completed": 999, "failed": 1, "spec_decode_draft_tokens": 2970}))
    assert read_measurements(f)[0].acceptance_length == 2.71
    f.write_text(json.dumps({**VLLM_RUN, "mechanism": "ngram", "spec_decode_draft_tokens": 1800,
                             "spec_decode_acceptance_length": 1.9}))
    assert read_measurements(f)[0].mechanism == "ngram"


def test_sglang_rows_take_the_scripts_prompts_and_their_output_as_context(tmp_path):
    """bench_speculative.py sends eight fixed prompts (61 tokens on average) for 512 tokens each
    and records completion_tokens; they were priced at 1024 tokens of context until 2026-12-04."""
    f = tmp_path / "output.jsonl"
    f.write_text(json.dumps({**SGLANG, "completion_tokens": 512.0}) + "\n" + json.dumps(SGLANG) + "\n"
                 + json.dumps({**SGLANG, "context": 4000}) + "\n")
    assert [m.context for m in read_measurements(f)] == [61 + 256, 61 + 256, 4000]


def test_a_vllm_tree_run_drafts_its_nodes_per_step(tmp_path):
    """A tree's server drafts tree_nodes tokens per draft, more than its depth (draft_len): the
    check against the metadata takes the nodes (a review of 2026-12-04 found tree runs refused)."""
    f = tmp_path / "tree.json"
    f.write_text(json.dumps({**VLLM_RUN, "mechanism": "eagle3-tree:topk=2", "tree_nodes": 6,
                             "spec_decode_draft_tokens": 6000}))
    assert read_measurements(f)[0].tree_nodes == 6
