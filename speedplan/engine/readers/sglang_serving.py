"""SGLang's serving benchmark as `Measurement` records (docs/engine.md, "Inputs"), and which
serving benchmark, vLLM's or SGLang's, wrote a JSON result (their results share most keys).

`python -m sglang.bench_serving ... --output-file out.jsonl` (python/sglang/bench_serving.py; in
newer SGLang a deprecated shim over python/sglang/benchmark/serving.py, read at sglang commit
00f9ec472ffef82714c0407b842ccb5bd254d130, `benchmark` and `cli_main`) appends one JSON object a
run, on one line (`open(output_file, "a")`, `json.dumps(result) + "\\n"`), with the keys:
`tag` (--tag TEXT, else null), `backend`, `dataset_name`, `request_rate` (the --request-rate float:
the default inf is JSON `Infinity`; "trace" with --use-trace-timestamps), `max_concurrency` (null
without --max-concurrency), `sharegpt_output_len`, `random_input_len`, `random_output_len`,
`random_range_ratio`, `server_info` (the server's GET /server_info: its ServerArgs, among them
`speculative_algorithm`, `speculative_num_steps`, `speculative_eagle_topk`,
`speculative_num_draft_tokens`, `max_running_requests`, `tp_size`, `dp_size`, `model_path`, and
`internal_states`; null where the request failed), `duration`, `completed` (successful requests),
`total_input_tokens`, `total_input_text_tokens`, `total_input_vision_tokens`, `total_output_tokens`,
`total_output_tokens_retokenized`, `request_throughput`, `input_throughput`, `output_throughput`,
`total_throughput`, the mean/median/std/p90/p95/p99 of `e2e_latency_ms`, `ttft_ms`, `tpot_ms`
and `itl_ms`, `concurrency`, `accept_length`, `max_output_tokens_per_s`,
`max_concurrent_requests`, and with --output-details the per-request lists (`errors` among
them). `mean_tpot_ms` is vLLM's: each successful request's (latency - TTFT) / (output tokens - 1)
over those with more than one token, 0 where none had (`calculate_metrics`). `accept_length` is,
for a backend whose name contains "sglang", `internal_states[0]["avg_spec_accept_length"]` of
/server_info after the run (null otherwise, and for a server without speculative decoding): the
scheduler's accepted tokens, the bonus token included, over its verify steps, summed since the
server started or last flushed its cache (--flush-cache flushes after the warmup), not over this
run alone. It writes no `num_prompts`, no `failed` count and no --metadata. The older
python/sglang/bench_serving.py (sglang commit 0033168f0f58b2bc05aa0273bd475d9c01bafb1c) writes the
same but `tag`, `server_info`, `max_concurrent_requests` and the p90/p95 fields, and reads
`accept_length` from /get_server_info.

A run's mechanism and draft length come from the line's own keys (`mechanism`, `draft_len`, as
a vLLM result's --metadata: added by hand), else KEY=VALUE words of its `tag` (`--tag
"mechanism=eagle3 draft_len=3"`), else `server_info` (SGLang converts --speculative-algorithm
NEXTN to EAGLE there, so an EAGLE run without a draft model of its own, an MTP head, is `mtp`).
Its sampling temperature likewise (`temperature=T`; none: greedy): the line records none. At
00f9ec472ffe the native `--backend sglang` request samples at `--temperature` (default 0.0) and the
OpenAI ones at 0.0 unless `--extra-request-body` sets `temperature`; the older script sends 0.0
unless `--extra-request-body` does (`async_request_sglang_generate`). Neither is in the line.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from speedplan.engine.readers.bench_results import (FAILED_SHARE, _check_counts, _check_held, _vllm_context,
                                                    read_vllm_bench, throughput_note, vllm_decode)
from speedplan.engine.readers.measurement import (MAX_TREE_NODES, Measurement, canonical_mechanism, check_decoded,
                                                  no_acceptance, number_field, scraped, shown)
from speedplan.errors import SpeedplanInputError

# Result keys only one of the two benchmarks writes (not arguments a user might repeat in --metadata).
# Both write `request_goodput`: vLLM always (null without --goodput), SGLang 0.5.23 with --goodput
# (`GoodputMetrics` of sglang/benchmark/goodput.py, merged into the result in benchmark/serving.py),
# beside its goodput_slos_ms, slo_attainment and slo_attainment_by_metric, which only SGLang writes.
SGLANG_ONLY = ("accept_length", "total_output_tokens_retokenized", "concurrency", "mean_e2e_latency_ms",
               "input_throughput", "total_throughput", "server_info", "sharegpt_output_len", "random_range_ratio",
               "goodput_slos_ms", "slo_attainment", "slo_attainment_by_metric")
VLLM_ONLY = ("date", "endpoint_type", "model_id", "tokenizer_id", "num_prompts", "burstiness", "failed",
             "total_token_throughput", "mean_e2el_ms", "rtfx")
# What a user states of a run, on the line or in its tag (the names of a vLLM result's --metadata).
STATED = ("mechanism", "draft_len", "context", "max_running_requests", "tree_nodes", "acceptance_length",
          "temperature")
# SGLang's --speculative-algorithm as speedplan names it (NEXTN reads as EAGLE: `_algorithm`).
ALGORITHMS = {"EAGLE": "eagle", "EAGLE3": "eagle3", "STANDALONE": "draft-model", "NGRAM": "ngram"}
WRITERS = {"sglang": "SGLang's bench_serving", "vllm": "vLLM's `vllm bench serve`"}
HOW = '--tag "mechanism=NAME draft_len=K"'  # how a run states what the file cannot say


def _keys(rec: dict) -> tuple[list[str], list[str]]:
    """The keys of `rec` only SGLang's and only vLLM's serving benchmark writes."""
    return ([k for k in SGLANG_ONLY if k in rec],
            [k for k in rec if k in VLLM_ONLY or str(k).startswith("spec_decode_")])


def read_serving_results(path: Path, records: list[tuple[int, object]], acceptance=no_acceptance) -> list[Measurement]:
    """Serving-benchmark results, (line, object) each: SGLang's bench_serving where they hold keys
    only it writes, else vLLM's `vllm bench serve` (read by `read_vllm_bench`, as always). An object
    with keys of both, or a file of both, is refused: no reader can tell which engine's fields
    they are."""
    first: dict[str, int] = {}  # the line each benchmark's first result is on
    for line, rec in records:
        ours, theirs = _keys(rec) if isinstance(rec, dict) else ([], [])
        if ours and theirs:
            raise SpeedplanInputError(f"{path}:{line}: has {theirs[0]!r}, which only {WRITERS['vllm']} writes, and "
                                      f"{ours[0]!r}, which only {WRITERS['sglang']} writes: cannot tell which engine's "
                                      "benchmark wrote it; give the result as its benchmark wrote it")
        kind, other = ("sglang", "vllm") if ours else ("vllm", "sglang")
        first.setdefault(kind, line)
        if other in first:
            raise SpeedplanInputError(f"{path}:{line}: a result of {WRITERS[kind]} in a file whose line {first[other]} "
                                      f"is one of {WRITERS[other]}: give each benchmark's runs in a file of its own")
    if "sglang" not in first:
        return read_vllm_bench(path, [rec for _, rec in records], acceptance)
    return [read_sglang_serving_run(path, line, rec, acceptance) for line, rec in records]


def _tag(rec: dict, where: str) -> dict[str, str]:
    """The KEY=VALUE words of the run's --tag (the keys of STATED; other words are the user's label)."""
    tag = rec.get("tag")
    if tag is None:
        return {}
    if not isinstance(tag, str):
        raise SpeedplanInputError(f"{where}: field 'tag' must be text (bench_serving's --tag), got {shown(tag)}")
    pairs = (word.split("=", 1) for word in tag.replace(",", " ").split() if "=" in word)
    return {k.strip(): v.strip() for k, v in pairs if k.strip() in STATED}


def _stated(rec: dict, tag: dict, key: str) -> tuple[object, str]:
    """What the run states of `key`: (value, the name errors give it); (None, key) where it does not."""
    if rec.get(key) is not None:
        return rec[key], key
    if key in tag:
        return tag[key], f"tag {key}"
    return None, key


def _number(value, name: str, where: str, integer: bool = False):
    return number_field({name: value}, name, where, integer, required=False)


def _server(rec: dict, where: str) -> dict:
    info = rec.get("server_info")
    if info is None:
        return {}
    if not isinstance(info, dict):
        raise SpeedplanInputError(f"{where}: field 'server_info' must be an object (the server's /server_info), "
                                  f"got {shown(info)}")
    return info


def _algorithm(info: dict, where: str) -> str | None:
    """The mechanism `server_info` says the server ran: none without a speculative algorithm; an
    EAGLE run whose drafter is the target itself (no speculative_draft_model_path, or the model's
    own) is its MTP layers (SGLang runs NEXTN as EAGLE); None where server_info does not say."""
    if "speculative_algorithm" not in info:
        return None
    algo = info["speculative_algorithm"]
    if algo is None:
        return "none"
    if not isinstance(algo, str):
        raise SpeedplanInputError(f"{where}: field 'server_info.speculative_algorithm' must be text, got {shown(algo)}")
    draft = info.get("speculative_draft_model_path")
    if algo.strip().upper() in ("EAGLE", "NEXTN") and (draft is None or draft == info.get("model_path")):
        return "mtp"
    return ALGORITHMS.get(algo.strip().upper(), algo.strip().lower())


def _mechanism(rec: dict, tag: dict, info: dict, where: str) -> tuple[str, str]:
    value, name = _stated(rec, tag, "mechanism")
    served = _algorithm(info, where)
    if value is None:
        if served is None:
            raise SpeedplanInputError(f"{where}: field 'mechanism' missing: the line has no server_info to read the "
                                      f"server's speculative_algorithm from (bench_serving writes it from 2025 on); "
                                      f"run bench_serving with {HOW} (mechanism=none for plain decoding), or add them "
                                      "to the line")
        return served, "server_info.speculative_algorithm"
    if not isinstance(value, str):
        raise SpeedplanInputError(f"{where}: field {name!r} must be text (a mechanism name), got {shown(value)}")
    mech = canonical_mechanism(value)
    if served is not None and (mech == "none") != (served == "none"):
        ran = "without a speculative algorithm" if served == "none" else f"with {info['speculative_algorithm']}"
        raise SpeedplanInputError(f"{where}: field {name!r} {value!r}, but server_info says the server ran {ran} "
                                  "('speculative_algorithm'): give the mechanism that server ran")
    return mech, name


def _draft_len(rec: dict, tag: dict, info: dict, mech: str, where: str) -> tuple[int, str]:
    value, name = _stated(rec, tag, "draft_len")
    steps = _number(info.get("speculative_num_steps"), "server_info.speculative_num_steps", where, True)
    ngram = mech.split(":")[0] == "ngram"  # SGLang's NGRAM has no steps: it verifies a tree of matched tokens
    if value is None:
        if steps is None or ngram:
            raise SpeedplanInputError(f"{where}: field 'draft_len' missing: " + (
                "SGLang's NGRAM verifies a tree of matched tokens, not speculative_num_steps" if ngram else
                "the line has no server_info.speculative_num_steps") + f"; run bench_serving with {HOW}, or add "
                "draft_len to the line")
        return steps, "server_info.speculative_num_steps"
    draft_len = _number(value, name, where, True)
    if steps is not None and not ngram and draft_len != steps:
        raise SpeedplanInputError(f"{where}: field {name!r} {draft_len} disagrees with server_info.speculative_num_steps "
                                  f"{steps}: the server drafted {steps} steps; give the length it ran")
    return draft_len, name


def _tree(info: dict, mech: str, draft_len: int, stated_nodes, nodes_name: str, where: str):
    """(mechanism, tree nodes, their field) of an EAGLE run that drafted a token tree (topk > 1,
    or more draft tokens than steps + 1: server_info), as bench_speculative.py's rows are read."""
    topk = _number(info.get("speculative_eagle_topk"), "server_info.speculative_eagle_topk", where, True)
    tokens = _number(info.get("speculative_num_draft_tokens"), "server_info.speculative_num_draft_tokens", where, True)
    head = mech.split(":")[0]
    nodes = _number(stated_nodes, nodes_name, where, True)
    tree = head.endswith("-tree")  # stated as a tree (eagle3-tree:topk=4)
    if mech == "none" or not (tree or (topk or 1) > 1 or (tokens or 0) > draft_len + 1):
        return mech, nodes, nodes_name
    if head.removesuffix("-tree") not in ("eagle", "eagle3"):
        raise SpeedplanInputError(f"{where}: a tree (server_info.speculative_eagle_topk {topk}, "
                                  f"speculative_num_draft_tokens {tokens}) of {head}: speedplan prices trees of EAGLE "
                                  "heads only")
    if nodes is None and tokens is not None:
        if not 2 <= tokens <= MAX_TREE_NODES + 1:  # it counts the root: the nodes are one fewer
            raise SpeedplanInputError(f"{where}: field 'server_info.speculative_num_draft_tokens' {tokens} must be in "
                                      f"2..{MAX_TREE_NODES + 1}")
        nodes, nodes_name = tokens - 1, "server_info.speculative_num_draft_tokens"
    return mech if tree else f"{head}-tree:topk={topk or 1}", nodes, nodes_name


def _batch(rec: dict, where: str) -> tuple[int, str]:
    """--max-concurrency, or the requests the run sent where fewer: SGLang writes no num_prompts,
    so `completed` and the failed requests its --output-details `errors` list (where present)."""
    if rec.get("max_concurrency") is None:
        raise SpeedplanInputError(f"{where}: field 'max_concurrency' missing: run bench_serving with --max-concurrency "
                                  "B (without it every prompt is sent at once, and no batch was held)")
    _check_counts(rec, where)
    _check_held(rec, where)
    batch = number_field(rec, "max_concurrency", where, True)
    done = number_field(rec, "completed", where, True, required=False)
    errors = rec.get("errors")
    failed = sum(1 for e in errors if e) if isinstance(errors, list) else 0
    if failed > FAILED_SHARE * max(failed + (done or 0), 1):
        raise SpeedplanInputError(f"{where}: {failed} of {failed + (done or 0)} requests failed ('errors'); a failed "
                                  "request leaves the batch short of max_concurrency, and output_throughput and "
                                  "mean_tpot_ms count only the completed ones: rerun without failures")
    check_decoded(rec, where)
    if done is not None and 1 <= done + failed < batch:
        return done + failed, "completed"
    return batch, "max_concurrency"


def _acceptance(rec: dict, tag: dict, mech: str, draft_len: int, acceptance, where: str):
    """(AL, its field, a note) of a speculative run: stated, else `accept_length`, else a scrape."""
    value, name = _stated(rec, tag, "acceptance_length")
    if value is not None:
        return _number(value, name, where), name, None
    al = number_field(rec, "accept_length", where, required=False)
    if al is not None:
        return al, "accept_length", ("accept_length is the server's average over every verify step since it started "
                                     "or last flushed its cache: a server that ran only this benchmark, or "
                                     "bench_serving --flush-cache, makes it this run's")
    al = scraped(acceptance, mech, draft_len, where)
    if al is None:
        raise SpeedplanInputError(f"{where}: field 'accept_length' is null: bench_serving reads it from the server's "
                                  "/server_info only with a --backend sglang*; give acceptance_length=AL in --tag or "
                                  "on the line")
    return al, "acceptance_length", None


def read_sglang_serving_run(path: Path, line: int, rec, acceptance=no_acceptance) -> Measurement:
    """One run of SGLang's bench_serving (its JSON line `line`): a tpot_ms row from `mean_tpot_ms`
    (`output_throughput`, a tokens_per_s row, without it), at the batch --max-concurrency held, its
    acceptance length `accept_length`, the server's cap on running requests and its TP from
    `server_info` (SGLang's max_running_requests after its own default: 48 for a speculative server
    launched without --max-running-requests)."""
    where = f"{path}:{line}"
    if not isinstance(rec, dict) or "output_throughput" not in rec:
        raise SpeedplanInputError(f"{where}: not an SGLang bench_serving result (no 'output_throughput')")
    tag, info = _tag(rec, where), _server(rec, where)
    if _number(info.get("dp_size"), "server_info.dp_size", where, True) not in (None, 1):
        raise SpeedplanInputError(f"{where}: field 'server_info.dp_size' {info['dp_size']}: the requests were split "
                                  "over data-parallel replicas, and accept_length is the first one's; measure with "
                                  "--dp-size 1 (calibrate prices one replica)")
    mech, mech_name = _mechanism(rec, tag, info, where)
    draft_len, draft_name = (0, "draft_len") if mech == "none" else _draft_len(rec, tag, info, mech, where)
    nodes, nodes_name = _stated(rec, tag, "tree_nodes")
    mech, nodes, nodes_name = _tree(info, mech, draft_len, nodes, nodes_name, where)
    batch, batch_field = _batch(rec, where)
    al, al_name, al_note = None, "acceptance_length", None
    if mech != "none":
        al, al_name, al_note = _acceptance(rec, tag, mech, draft_len, acceptance, where)
    elif (number_field(rec, "accept_length", where, required=False) or 0) > 1 + 1e-9:
        raise SpeedplanInputError(f"{where}: mechanism none, but the server reported accept_length "
                                  f"{number_field(rec, 'accept_length', where):g}: it drafted; measure plain decoding "
                                  "on a server started without --speculative-algorithm")
    cap, cap_name = _stated(rec, tag, "max_running_requests")
    cap = _number(cap, cap_name, where, True)
    served_cap = _number(info.get("max_running_requests"), "server_info.max_running_requests", where, True)
    if cap is not None and served_cap is not None and cap != served_cap:
        raise SpeedplanInputError(f"{where}: field {cap_name!r} {cap} disagrees with server_info.max_running_requests "
                                  f"{served_cap}, the cap the server ran with")
    if cap is None and served_cap is not None:
        cap, cap_name = served_cap, "server_info.max_running_requests"
    context_value, context_name = _stated(rec, tag, "context")
    context_value = _number(context_value, context_name, where, True)
    context, context_field = _vllm_context({**rec, "context": context_value}, where)
    if context_value is not None:
        context_field = context_name
    quantity, value, value_field, throughput = vllm_decode(rec, where, writer="SGLang's bench_serving")
    model = info.get("served_model_name") or info.get("model_path")
    temperature, temperature_name = _stated(rec, tag, "temperature")  # the line records none: greedy unless stated
    m = Measurement(
        mechanism=mech, batch=batch, draft_len=draft_len, context=context, quantity=quantity, value=value,
        acceptance_length=al, where=where, tree_nodes=nodes, max_running=cap,
        temperature=_number(temperature, temperature_name, where) or 0.0, engine="sglang" if info else None,
        tp=_number(info.get("tp_size"), "server_info.tp_size", where, True),
        model=model if isinstance(model, str) else None,
        names=(("batch", batch_field), (quantity, value_field), ("acceptance_length", al_name),
               ("context", context_field), ("mechanism", mech_name), ("draft_len", draft_name),
               ("tree_nodes", nodes_name), ("max_running_requests", cap_name), ("tp", "server_info.tp_size"),
               ("temperature", temperature_name)))
    said = None
    if context_value is None:
        said = ("context is the run's mean prompt + half its mean output (total_input_tokens, total_output_tokens, "
                "completed): context=L in --tag sets it" if context_field == "total_input_tokens" else
                f"no context and no token totals: priced at {context} tokens of context; context=L in --tag sets it")
    cap_hint = "--max-running-requests was below {running}, give max_running_requests=N in --tag"
    notes = (said, al_note, throughput_note(throughput, m, cap_hint))
    return replace(m, notes=tuple(n for n in notes if n))
