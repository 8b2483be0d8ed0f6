"""SGLang's serving benchmark (`python -m sglang.bench_serving ... --output-file out.jsonl`) is
read as SGLang's, not as vLLM's `vllm bench serve` whose keys it shares: its acceptance length from
`accept_length`, its mechanism, draft length, running-request cap and TP from `server_info` (or
the line's `tag`), its batch from `max_concurrency`.

The lines here are made by hand for these tests (no SGLang run wrote them), shaped as SGLang's
`benchmark` writes its result dict (python/sglang/benchmark/serving.py, sglang commit
00f9ec472ffef82714c0407b842ccb5bd254d130; `server_info` holds the server's ServerArgs, of which
only the fields speedplan reads are given). `sglang_line` also writes the file of the docs'
`speedplan calibrate --engine sglang` example."""

import json

import pytest

from speedplan.cli.app import run as cli
from speedplan.engine.readers.measurements import read_measurements
from speedplan.errors import SpeedplanInputError

# A `vllm bench serve --save-result` run with --metadata (as tests/engine's other vLLM runs).
VLLM_RUN = {"date": "20261201-101010", "model_id": "meta-llama/Llama-3.1-8B-Instruct", "max_concurrency": 16,
            "num_prompts": 320, "output_throughput": 2210.5, "mean_tpot_ms": 6.9, "median_tpot_ms": 6.8,
            "spec_decode_acceptance_length": 2.71, "spec_decode_num_drafts": 1000,
            "mechanism": "eagle3", "draft_len": 3, "context": 1500}

DRAFTER = "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B"


def server_info(algorithm="EAGLE3", steps=3, topk=1, tokens=4, cap=48, tp=1, draft=DRAFTER):
    """The part of SGLang's GET /server_info speedplan reads (a server launched without
    --max-running-requests: SGLang sets 48 for a speculative one, None for a plain one)."""
    spec = algorithm is not None
    return {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "served_model_name": None, "tp_size": tp, "dp_size": 1,
            "max_running_requests": cap if spec else None, "speculative_algorithm": algorithm,
            "speculative_draft_model_path": draft if spec else None, "speculative_num_steps": steps if spec else None,
            "speculative_eagle_topk": topk if spec else None, "speculative_num_draft_tokens": tokens if spec else None,
            "internal_states": [{"avg_spec_accept_length": 2.8} if spec else {}], "version": "0.5.4"}


def sglang_line(batch=16, tpot=3.4, spec=True, al=2.8, prompt=1024, output=1024, info=..., **change):
    """One run as SGLang's bench_serving writes it, every request `prompt` tokens in and `output`
    out, its output_throughput 95% of what min(batch, 48) running requests emit at `tpot`."""
    n = 20 * batch
    running = min(batch, 48) if spec else batch
    line = {"tag": None, "backend": "sglang", "dataset_name": "random", "request_rate": float("inf"),
            "max_concurrency": batch, "sharegpt_output_len": None, "random_input_len": prompt,
            "random_output_len": output, "random_range_ratio": 1.0,
            "server_info": server_info() if info is ... and spec else server_info(None) if info is ... else info,
            "duration": 100.0, "completed": n, "total_input_tokens": n * prompt, "total_input_text_tokens": n * prompt,
            "total_input_vision_tokens": 0, "total_output_tokens": n * output,
            "total_output_tokens_retokenized": n * output - 7, "request_throughput": n / 100.0,
            "input_throughput": n * prompt / 100.0, "output_throughput": round(0.95 * running * 1000 / tpot, 2),
            "total_throughput": 2.0 * n * prompt / 100.0, "mean_e2e_latency_ms": output * tpot,
            "median_e2e_latency_ms": output * tpot, "mean_ttft_ms": 60.0, "median_ttft_ms": 55.0,
            "mean_tpot_ms": tpot, "median_tpot_ms": tpot, "p99_tpot_ms": 1.2 * tpot,
            "mean_itl_ms": tpot * (al if spec else 1), "concurrency": 0.97 * running,
            "accept_length": al if spec else None, "max_output_tokens_per_s": running * 1000 / tpot,
            "max_concurrent_requests": batch}
    line.update(change)
    return line


def _write(tmp_path, *lines, name="out.jsonl"):
    f = tmp_path / name
    f.write_text("".join(json.dumps(line) + "\n" for line in lines))  # float("inf") is written as Infinity, as SGLang's
    return f


def test_a_bench_serving_line_is_read_as_sglangs_from_its_own_fields(tmp_path):
    f = _write(tmp_path, sglang_line(batch=1, tpot=6.3, spec=False), sglang_line())
    plain, spec = read_measurements(f)
    assert (plain.mechanism, plain.batch, plain.draft_len, plain.max_running, plain.acceptance_length) == (
        "none", 1, 0, None, None)
    assert (spec.mechanism, spec.batch, spec.draft_len, spec.quantity, spec.value) == ("eagle3", 16, 3, "tpot_ms", 3.4)
    assert (spec.acceptance_length, spec.max_running, spec.tp, spec.context) == (2.8, 48, 1, 1024 + 512)
    assert spec.model == "meta-llama/Llama-3.1-8B-Instruct" and spec.where == f"{f}:2"
    assert [spec._f(k) for k in ("acceptance_length", "draft_len", "max_running_requests", "tpot_ms")] == [
        "'accept_length'", "'server_info.speculative_num_steps'", "'server_info.max_running_requests'",
        "'mean_tpot_ms'"]
    assert any("since it started or last flushed its cache" in n for n in spec.notes)


def test_a_file_of_one_sglang_line_is_not_read_as_a_vllm_result(tmp_path):
    """Before, one line parsed as one JSON object with output_throughput, vLLM's, and was refused
    for want of --metadata mechanism=..."""
    (m,) = read_measurements(_write(tmp_path, sglang_line()))
    assert (m.mechanism, m.where) == ("eagle3", f"{tmp_path / 'out.jsonl'}:1")


def test_a_line_without_server_info_takes_mechanism_and_draft_len_from_its_tag(tmp_path):
    """Older bench_serving (sglang commit 0033168f0f58) writes no server_info and no tag; a run
    states what ran with --tag, or keys added to its line."""
    old = {k: v for k, v in sglang_line().items() if k not in ("server_info", "tag")}
    f = _write(tmp_path, old)
    with pytest.raises(SpeedplanInputError, match=rf"^{f}:1: field 'mechanism' missing: .*--tag \"mechanism=NAME "
                                                  r"draft_len=K\""):
        read_measurements(f)
    (m,) = read_measurements(_write(tmp_path, old | {"tag": "llama8b mechanism=eagle3 draft_len=3"}))
    assert (m.mechanism, m.draft_len, m.max_running, m._f("draft_len")) == ("eagle3", 3, None, "'tag draft_len'")
    (m,) = read_measurements(_write(tmp_path, old | {"mechanism": "EAGLE-3", "draft_len": 3, "tag": "draft_len=5"}))
    assert (m.mechanism, m.draft_len) == ("eagle3", 3)  # the line's own keys before its tag
    (m,) = read_measurements(_write(tmp_path, old | {"tag": "mechanism=none", "accept_length": None}))
    assert (m.mechanism, m.draft_len, m.acceptance_length) == ("none", 0, None)


def test_server_info_says_trees_mtp_and_the_cap_the_server_ran(tmp_path):
    tree = sglang_line(info=server_info(steps=5, topk=4, tokens=8))
    mtp = sglang_line(info=server_info("EAGLE", draft=None), batch=8)  # SGLang runs NEXTN as EAGLE, no drafter
    capped = sglang_line(info=server_info(cap=128), batch=64)
    (t,) = read_measurements(_write(tmp_path, tree))
    (n,) = read_measurements(_write(tmp_path, mtp))
    (c,) = read_measurements(_write(tmp_path, capped))
    assert (t.mechanism, t.draft_len, t.tree_nodes, t._f("tree_nodes")) == (
        "eagle3-tree:topk=4", 5, 7, "'server_info.speculative_num_draft_tokens'")
    assert (n.mechanism, n.draft_len) == ("mtp", 3)
    assert (c.max_running, c.running(48)) == (128, 64)


@pytest.mark.parametrize("change, word", [
    ({"max_concurrency": None}, "field 'max_concurrency' missing: run bench_serving with --max-concurrency B"),
    ({"request_rate": 8.0}, "field 'request_rate' 8.0: requests arrived over time"),
    ({"request_rate": "trace"}, "field 'request_rate' 'trace': requests arrived over time"),
    ({"accept_length": None}, "field 'accept_length' is null: bench_serving reads it from the server's /server_info "
                              "only with a --backend sglang*"),
    ({"accept_length": 4.5}, "field 'accept_length' 4.5 is outside 1..1+draft_len (4)"),
    ({"tag": "draft_len=5"}, "field 'tag draft_len' 5 disagrees with server_info.speculative_num_steps 3"),
    ({"tag": "mechanism=none"}, "field 'tag mechanism' 'none', but server_info says the server ran with EAGLE3"),
    ({"tag": "max_running_requests=64"}, "field 'tag max_running_requests' 64 disagrees with "
                                         "server_info.max_running_requests 48"),
    ({"server_info": server_info() | {"dp_size": 2}}, "field 'server_info.dp_size' 2: the requests were split"),
    ({"server_info": server_info() | {"tp_size": "two"}}, "field 'server_info.tp_size' must be a number"),
    ({"server_info": "EAGLE3"}, "field 'server_info' must be an object"),
    ({"server_info": server_info("DFLASH")}, "field 'server_info.speculative_algorithm': unknown mechanism 'dflash'"),
    ({"tag": 3}, "field 'tag' must be text"),
    ({"mean_tpot_ms": 0}, "field 'mean_tpot_ms' is 0: SGLang's bench_serving writes 0 where no request produced"),
    ({"errors": [""] * 300 + ["timeout"] * 20, "completed": 300}, "20 of 320 requests failed ('errors')"),
    ({"completed": 0}, "field 'completed' is 0: no request finished decoding"),  # a review, stop 62
    ({"total_output_tokens": 0}, "field 'total_output_tokens' is 0: no request finished decoding"),
    ({"errors": ["timeout"] * 16, "completed": 0}, "16 of 16 requests failed ('errors')"),  # said first
])
def test_a_bad_bench_serving_line_is_exit_2_naming_file_line_and_field(tmp_path, capsys, change, word):
    f = _write(tmp_path, sglang_line(batch=1, tpot=6.3, spec=False), sglang_line(**change))
    code = cli(["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "sglang",
                "--measurements", str(f), "--out", str(tmp_path / "mine.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"error: {f}:2: " in err and word in err, err
    assert not (tmp_path / "mine.json").exists()


def test_a_plain_run_whose_server_drafted_is_refused(tmp_path):
    f = _write(tmp_path, sglang_line(spec=False, accept_length=2.4, tag="mechanism=none", server_info=None))
    with pytest.raises(SpeedplanInputError, match=rf"^{f}:1: mechanism none, but the server reported accept_length 2.4"):
        read_measurements(f)


def test_the_batch_is_the_requests_sent_where_fewer_than_max_concurrency(tmp_path):
    """SGLang writes no num_prompts: `completed` (and the failed requests --output-details lists) is
    what was sent; a default --request-rate inf is written as JSON Infinity."""
    (m,) = read_measurements(_write(tmp_path, sglang_line(batch=64, completed=40)))
    assert (m.batch, m._f("batch")) == (40, "'completed'")
    assert "Infinity" in (tmp_path / "out.jsonl").read_text()


def test_keys_of_both_benchmarks_are_refused_naming_file_and_line(tmp_path):
    f = _write(tmp_path, sglang_line(num_prompts=320))
    with pytest.raises(SpeedplanInputError, match=rf"^{f}:1: has 'num_prompts', which only vLLM's `vllm bench serve` "
                                                  r"writes, and 'accept_length', which only SGLang's bench_serving "
                                                  r"writes: cannot tell"):
        read_measurements(f)
    f = _write(tmp_path, VLLM_RUN, sglang_line())
    with pytest.raises(SpeedplanInputError, match=rf"^{f}:2: a result of SGLang's bench_serving in a file whose line 1 "
                                                  r"is one of vLLM's"):
        read_measurements(f)


def test_a_vllm_result_is_read_as_before_whatever_server_it_measured(tmp_path):
    """`vllm bench serve --backend sglang` measures an SGLang server with vLLM's client: vLLM's
    keys, read by the vLLM reader as always."""
    f = tmp_path / "run.json"
    f.write_text(json.dumps(VLLM_RUN | {"backend": "sglang", "endpoint_type": "sglang"}))
    (m,) = read_measurements(f)
    assert (m.mechanism, m.batch, m.acceptance_length, m.where) == ("eagle3", 16, 2.71, f"{f}:run 1")
    f = _write(tmp_path, VLLM_RUN, VLLM_RUN | {"max_concurrency": 8})  # --append-result
    assert [m.where.rpartition(":")[2] for m in read_measurements(f)] == ["run 1", "run 2"]


def test_calibrate_fits_sglang_bench_serving_runs(tmp_path, capsys):
    f = _write(tmp_path, sglang_line(batch=1, tpot=6.3, spec=False), sglang_line(batch=16, tpot=8.0, spec=False),
               sglang_line(batch=64, tpot=11.6, spec=False), sglang_line(batch=1, tpot=2.9),
               sglang_line(batch=16, tpot=3.8), sglang_line(batch=64, tpot=5.3))
    code = cli(["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "sglang",
                "--measurements", str(f), "--out", str(tmp_path / "mine.json")])
    out = capsys.readouterr().out
    assert code == 0 and (tmp_path / "mine.json").exists(), out
    assert "eagle3 B=64 D=3" in out and "mean_tpot_ms" in out
    assert f"{f} lines 4-6: accept_length is the server's average" in out
