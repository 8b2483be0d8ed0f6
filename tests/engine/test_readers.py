"""Reading what engines write: vLLM bench serve results and SGLang bench_speculative output,
with the field names of the engines' own sources."""

import json

import pytest

from speedplan.engine.readers.measurements import read_measurements
from speedplan.errors import SpeedplanInputError

VLLM_RUN = {"date": "20261201-101010", "model_id": "meta-llama/Llama-3.1-8B-Instruct", "max_concurrency": 16,
            "num_prompts": 320, "output_throughput": 2210.5, "mean_tpot_ms": 6.9, "median_tpot_ms": 6.8,
            "spec_decode_acceptance_length": 2.71, "spec_decode_num_drafts": 1000,
            "mechanism": "eagle3", "draft_len": 3, "context": 1500}


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


def test_a_csv_may_state_the_servers_running_request_cap(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,speedup,acceptance_length,max_running_requests\n"
                 "eagle3,64,3,1024,1.2,2.5,64\neagle3,32,3,1024,1.3,2.5,\n")
    capped, default = read_measurements(f)
    assert capped.max_running == 64 and default.max_running is None
    f.write_text("mechanism,batch,draft_len,context,speedup,acceptance_length,max_running_requests\n"
                 "eagle3,64,3,1024,1.2,2.5,0\n")
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:2: field 'max_running_requests' must be in 1\.\.65536"):
        read_measurements(f)


def test_sglang_line_missing_a_field_names_it(tmp_path):
    f = tmp_path / "output.jsonl"
    f.write_text(json.dumps({"batch_size": 4, "steps": 3, "topk": 1, "num_draft_tokens": 4, "step_time": 0.01}) + "\n")
    with pytest.raises(SpeedplanInputError, match=r"output.jsonl:1: field 'acc_length' missing"):
        read_measurements(f)


def test_unrecognised_file(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    with pytest.raises(SpeedplanInputError, match="not a measurements CSV"):
        read_measurements(f)


def test_metrics_scrape_gives_acceptance_to_rows_without_it(tmp_path):
    """A CSV of runs without acceptance lengths plus a /metrics scrape of the same server: AL at
    D is 1 + (accepted at positions 0..D-1) / drafts, e.g. D = 2: 1 + (90 + 70) / 100 = 2.6."""
    from speedplan.engine.readers.vllm_metrics import read_vllm_metrics
    from speedplan.engine.run_calibration import _scrape_acceptance, calibrate_files

    scrape = tmp_path / "metrics.txt"
    scrape.write_text(
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 90.0\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 70.0\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 50.0\n')
    runs = tmp_path / "runs.csv"
    runs.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,7.5\neagle3,1,2,1024,5.0\n"
                    "eagle3,1,3,1024,4.6\n")
    rows = read_measurements(runs, acceptance=_scrape_acceptance([read_vllm_metrics(scrape)]))
    assert [m.acceptance_length for m in rows] == [None, pytest.approx(2.6), pytest.approx(3.1)]
    result = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [runs, scrape])
    assert len(result.rows) == 3 and "metrics.txt" in result.profile.fit["described"]
    assert not any("not used" in n for n in result.notes)
    # every row states its acceptance: the scrape goes unused, is said to, and is not named a source of the fit
    stated = tmp_path / "stated.csv"
    stated.write_text(runs.read_text().replace("tpot_ms\n", "tpot_ms,acceptance_length\n").replace("7.5\n", "7.5,\n")
                      .replace("5.0\n", "5.0,2.5\n").replace("4.6\n", "4.6,3.0\n"))
    result = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [stated, scrape])
    assert f"{scrape}: not used: every run states its own acceptance length" in result.notes
    assert "metrics.txt" not in result.profile.fit["described"]
    with pytest.raises(SpeedplanInputError, match="draft positions"):
        _scrape_acceptance([read_vllm_metrics(scrape)])("eagle3", 5)


def test_repeated_rows_that_contradict_each_other_are_refused(tmp_path):
    """The same configuration measured 3x apart is a mislabelled row, not noise: exit 2 naming both
    rows; repeats a few percent apart, or rows with another acceptance length, are kept."""
    from speedplan.engine.readers.measurements import check_consistent, read_measurements

    f = tmp_path / "m.csv"
    f.write_text("mechanism,batch,draft_len,context,speedup,acceptance_length\n"
                 "eagle3,1,3,1024,1.5,2.5\neagle3,1,3,1024,1.4,2.52\neagle3,1,3,1024,0.9,1.4\n")
    check_consistent(read_measurements(f))
    f.write_text(f.read_text() + "eagle3,1,3,1024,0.5,2.5\n")
    with pytest.raises(SpeedplanInputError, match=r"m.csv:5: field 'speedup' 0.5 contradicts .*m.csv:2 \(1.5\)"):
        check_consistent(read_measurements(f))


def test_two_quantities_of_one_configuration_that_imply_other_steps_are_refused(tmp_path):
    """A TPOT in one file and an aggregate tokens/s in another for the same configuration imply
    an engine step each (tpot × AL; batch × AL / tokens/s): 10 ms a token at AL 3 is a 30 ms step,
    2400 tokens/s over 8 sequences at AL 3 a 10 ms one. 3x apart is a contradiction, named with
    both rows; the same figures 1.3x apart, or under another cap on running requests, are not."""
    from speedplan.engine.readers.measurements import check_consistent, implied_step_ms, read_measurements

    a, c = tmp_path / "a.csv", tmp_path / "c.csv"
    a.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\neagle3,8,3,2048,10,3.0\n")
    c.write_text("mechanism,batch,draft_len,context,tokens_per_s,acceptance_length\neagle3,8,3,2048,2400,3.0\n")
    rows = read_measurements(a) + read_measurements(c)
    assert [implied_step_ms(m) for m in rows] == pytest.approx([30.0, 10.0])
    with pytest.raises(SpeedplanInputError, match=r"c.csv:2: field 'tokens_per_s' 2400 contradicts .*a.csv:2 "
                                                  r"\(tpot_ms 10\).*as engine steps: 10 ms here, 30 ms there; "
                                                  r"output throughput also counts prefill"):
        check_consistent(rows)
    c.write_text(c.read_text().replace("2400", "1000"))  # a 24 ms step: within 1.5x
    check_consistent(read_measurements(a) + read_measurements(c))
    # SGLang's cap: 64 in flight, 48 running: 18000 tokens/s at AL 3 is an 8 ms step (10.7 ms if all
    # 64 ran), against a 6 ms step measured: consistent under the cap, not without it
    from speedplan.engine.readers.measurements import Measurement

    both = [Measurement("eagle3", 64, 3, 2048, "step_ms", 6.0, 3.0, "s.csv:2"),
            Measurement("eagle3", 64, 3, 2048, "tokens_per_s", 18000.0, 3.0, "t.csv:2")]
    check_consistent(both, spec_cap=48)
    with pytest.raises(SpeedplanInputError, match="t.csv:2: field 'tokens_per_s' 18000 contradicts s.csv:2"):
        check_consistent(both)
    # the run's own cap decides, above the profile's; one above the batch caps nothing
    own = [both[0], Measurement("eagle3", 64, 3, 2048, "tokens_per_s", 18000.0, 3.0, "u.csv:2", max_running=48)]
    check_consistent(own)
    with pytest.raises(SpeedplanInputError, match="u.csv:2"):  # 64 ran: a 10.7 ms step against 6
        check_consistent([Measurement("eagle3", 64, 3, 2048, "step_ms", 6.0, 3.0, "s.csv:2", max_running=100),
                          Measurement("eagle3", 64, 3, 2048, "tokens_per_s", 18000.0, 3.0, "u.csv:2",
                                      max_running=100)], spec_cap=48)
    # plain steps are not capped: 128 sequences at 21333 tokens/s is a 6 ms step (2.25 ms if 48 ran)
    check_consistent([Measurement("none", 128, 0, 2048, "step_ms", 6.0, None, "p.csv:2"),
                      Measurement("none", 128, 0, 2048, "tokens_per_s", 21333.0, None, "q.csv:2")], spec_cap=48)
    # each row is checked against every earlier row of its configuration, whatever the first one was:
    # steps of 14 and 20 ms agree, and 10 ms agrees with the first, not the second
    rows = [Measurement("eagle3", 8, 3, 2048, "tpot_ms", 7.0, 2.0, "r.csv:2"),
            Measurement("eagle3", 8, 3, 2048, "tpot_ms", 10.0, 2.0, "r.csv:3"),
            Measurement("eagle3", 8, 3, 2048, "tokens_per_s", 2400.0, 3.0, "r.csv:4")]
    with pytest.raises(SpeedplanInputError, match="r.csv:4: .* contradicts r.csv:3"):
        check_consistent(rows)


def test_a_quote_left_open_is_named_at_the_row_it_opens(tmp_path):
    """An unclosed quote swallowed the rest of the file into one cell, and the error named a
    missing field; it now names the row where the quote opens."""
    f = tmp_path / "m.csv"
    f.write_text('mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,7.0\n"eagle3,8,3,1024,5.0\n'
                 "eagle3,8,3,1024,5.0\n")
    with pytest.raises(SpeedplanInputError, match=r"m.csv:3: cannot read \(unexpected end of data; a quote opened there"):
        read_measurements(f)
    f.write_text('mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,"7.0"\n')  # a closed quote is fine
    assert read_measurements(f)[0].value == 7.0


def test_a_folder_given_for_a_file_says_so(tmp_path):
    from speedplan.engine.profile import get_engine

    with pytest.raises(SpeedplanInputError, match="is a folder; give its files"):
        read_measurements(tmp_path)
    with pytest.raises(SpeedplanInputError, match="is a folder; give the engine profile's JSON file"):
        get_engine(str(tmp_path))


GOOD_CSV = "mechanism,batch,draft_len,context,tpot_ms,acceptance_length\nnone,1,0,1024,7.0,\neagle3,1,3,1024,4.0,2.8\n"
SGLANG = {"batch_size": 4, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.6, "step_time": 0.0093}


@pytest.mark.parametrize("name, text, word", [
    ("dup.csv", "mechanism,batch,draft_len,context,tpot_ms,batch\nnone,1,0,1024,7.0,5\n", "column 'batch' appears twice"),
    ("typo.csv", GOOD_CSV.replace("acceptance_length", "acceptance_lenght"), "did you mean 'acceptance_length'"),
    ("extra.csv", GOOD_CSV + "eagle3,1,3,1024,4.0,2.8,extra,more\n", "4: 8 cells for 6 columns"),
    ("huge.csv", GOOD_CSV.replace("7.0", "1e300"), "is not a plausible measurement"),
    ("plain_tree.csv", "mechanism,batch,draft_len,context,tpot_ms,tree_nodes\nnone,1,0,1024,7.0,5\n", "on a plain row"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("empty.json", "[]", "an empty JSON list"),
    ("plain_d.json", json.dumps({**VLLM_RUN, "mechanism": "none", "spec_decode_num_drafts": 0}), "'draft_len' is 3 for mechanism 'none'"),
    ("mech5.json", json.dumps({**VLLM_RUN, "mechanism": 5}), "field 'mechanism' must be text"),
    ("conc0.json", json.dumps({**VLLM_RUN, "max_concurrency": 0}), "field 'max_concurrency' must be in 1..65536"),
    ("true.json", json.dumps({**VLLM_RUN, "max_concurrency": True}), "field 'max_concurrency' must be a number"),
    ("ctx0.jsonl", json.dumps({**SGLANG, "context": 0}), "field 'context' must be in 1.."),
    ("topk0.jsonl", json.dumps({**SGLANG, "topk": 0}), "field 'topk' must be 1 or more"),
    ("bs0.jsonl", json.dumps({**SGLANG, "batch_size": 0}), "field 'batch_size' must be in 1..65536"),
    ("steps.jsonl", json.dumps({**SGLANG, "steps": -2}), "field 'steps' must be 0 or more"),
    ("nodes.jsonl", json.dumps({**SGLANG, "topk": 4, "num_draft_tokens": 1}), "leaves a tree of topk 4 no draft node"),
])
def test_bad_measurement_files_name_the_file_row_and_field_as_the_file_calls_it(tmp_path, name, text, word):
    """Each was read, coerced or a traceback until 2026-12-03 (an audit of calibrate's inputs)."""
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(SpeedplanInputError, match=word) as e:
        read_measurements(f)
    assert str(e.value).startswith(str(f)) and "\n" not in str(e.value)


def test_a_csv_is_told_by_its_content_and_excels_byte_order_mark_is_read(tmp_path):
    for name, text in (("runs.txt", GOOD_CSV), ("runs", GOOD_CSV), ("bom.csv", "\ufeff" + GOOD_CSV)):
        f = tmp_path / name
        f.write_text(text, encoding="utf-8")
        plain, spec = read_measurements(f)
        assert (plain.mechanism, spec.mechanism, spec.acceptance_length) == ("none", "eagle3", 2.8)
    (tmp_path / "bom.json").write_text("\ufeff" + json.dumps(VLLM_RUN), encoding="utf-8")
    assert read_measurements(tmp_path / "bom.json")[0].batch == 16


def test_a_column_beside_the_one_it_resembles_and_empty_trailing_headers_are_the_users(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,step_ms,step_us,,\nnone,1,0,1024,7.0,7000,,\n")
    (m,) = read_measurements(f)
    assert (m.quantity, m.value) == ("step_ms", 7.0)


def test_sglang_rows_of_an_mtp_draft_are_a_chain_and_their_trees_are_refused(tmp_path):
    f = tmp_path / "mtp.jsonl"
    f.write_text(json.dumps(SGLANG) + "\n")
    (m,) = read_measurements(f, mechanism="mtp")
    assert (m.mechanism, m.draft_len) == ("mtp", 3)
    f.write_text(json.dumps({**SGLANG, "topk": 4, "num_draft_tokens": 8}) + "\n")
    with pytest.raises(SpeedplanInputError, match="trees of EAGLE heads only"):
        read_measurements(f, mechanism="mtp")


def test_a_scrape_of_two_models_or_for_a_tree_row_is_refused(tmp_path):
    """Two servers' scrapes in one file were summed, and a chain's per-position counters stood
    in for a tree's acceptance (until 2026-12-03); two engines of one model are summed, rightly."""
    from speedplan.engine.readers.vllm_metrics import read_vllm_metrics
    from speedplan.engine.run_calibration import _scrape_acceptance

    one = ('vllm:spec_decode_num_drafts_total{engine="E",model_name="M"} 100.0\n'
           'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="E",model_name="M",position="0"} 80.0\n')
    scrape = tmp_path / "metrics.txt"
    scrape.write_text(one.replace("E", "0").replace("M", "m") + one.replace("E", "1").replace("M", "m"))
    assert read_vllm_metrics(scrape).position_rates == pytest.approx((0.8,))
    with pytest.raises(SpeedplanInputError, match="rows of eagle3-tree:topk=4 need their own acceptance_length"):
        _scrape_acceptance([read_vllm_metrics(scrape)])("eagle3-tree:topk=4", 3)
    scrape.write_text(one.replace("E", "0").replace("M", "a") + one.replace("E", "0").replace("M", "b"))
    with pytest.raises(SpeedplanInputError, match="series of 2 models \\(a, b\\)"):
        read_vllm_metrics(scrape)


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


def test_a_scrape_whose_drafts_ran_short_or_that_predates_the_counters_says_so(tmp_path):
    from speedplan.engine.readers.vllm_metrics import read_vllm_metrics
    from speedplan.engine.run_calibration import _scrape_acceptance

    scrape = tmp_path / "metrics.txt"
    body = ('vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0\n'
            'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} TOKENS\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 80.0\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 40.0\n')
    scrape.write_text(body.replace("TOKENS", "198.0"))  # two drafts cut short at their requests' ends
    assert _scrape_acceptance([read_vllm_metrics(scrape)])("eagle3", 2) == pytest.approx(2.2)
    scrape.write_text(body.replace("TOKENS", "150.0"))  # K varied with the batch: 1.5 tokens per draft
    acceptance = _scrape_acceptance([read_vllm_metrics(scrape)])
    with pytest.raises(SpeedplanInputError, match=r"drafted 1\.50 tokens per draft .* draft length varied"):
        acceptance("eagle3", 2)
    assert acceptance("ngram", 2) == pytest.approx(2.2)  # an n-gram drafter proposes what it matches
    scrape.write_text("vllm:spec_decode_draft_acceptance_rate 0.6\nvllm:spec_decode_num_emitted_tokens_total 900.0\n")
    with pytest.raises(SpeedplanInputError, match=r"from 0\.8\.5 on \(PR #16665\)"):
        read_vllm_metrics(scrape)


def test_a_json_syntax_error_names_its_line_and_column(tmp_path):
    f = tmp_path / "run.json"
    f.write_text('{"output_throughput": 5, "mechanism": "none\n')
    with pytest.raises(SpeedplanInputError, match=r"malformed JSON \(Unterminated string starting at line 1, column 39\)"):
        read_measurements(f)


def test_a_csv_may_mix_quantities_one_per_row(tmp_path):
    """The README's calibrate_rows example (a TPOT row beside speedup rows) could not be saved as one
    CSV: "needs exactly one of the columns" (audit of 2026-12-04). A row filling two is refused."""
    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,speedup,acceptance_length\n"
                 "none,1,0,1024,7.0,,\neagle3,8,3,1024,,1.6,2.7\n")
    plain, spec = read_measurements(f)
    assert (plain.quantity, spec.quantity, spec.value) == ("tpot_ms", "speedup", 1.6)
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,speedup,acceptance_length\neagle3,8,3,1024,5.0,1.6,2.7\n")
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:2: needs exactly one of the fields .* found tpot_ms, speedup"):
        read_measurements(f)


def test_a_vllm_tree_run_drafts_its_nodes_per_step(tmp_path):
    """A tree's server drafts tree_nodes tokens per draft, more than its depth (draft_len): the
    check against the metadata takes the nodes (a review of 2026-12-04 found tree runs refused)."""
    f = tmp_path / "tree.json"
    f.write_text(json.dumps({**VLLM_RUN, "mechanism": "eagle3-tree:topk=2", "tree_nodes": 6,
                             "spec_decode_draft_tokens": 6000}))
    assert read_measurements(f)[0].tree_nodes == 6


def test_a_scrape_of_a_server_without_speculation_says_so(tmp_path):
    """Its vllm: metrics but no spec_decode counters: it was read as an unknown file."""
    from speedplan.plan.acceptance_sources import parse_acceptance

    f = tmp_path / "metrics.txt"
    f.write_text('# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3.0\n')
    for read in (read_measurements, lambda p: parse_acceptance(str(p))):
        with pytest.raises(SpeedplanInputError, match="no vllm:spec_decode_\\* counters: that server ran without "
                                                      "speculative decoding"):
            read(f)
