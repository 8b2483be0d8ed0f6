"""The benchmark outputs of two engines as `Measurement` records (docs/engine.md, "Inputs";
field names checked in the engines' own sources):

- vLLM `vllm/benchmarks/serve.py` (v0.33.0, commit 4ba787ec9): `max_concurrency` and
  `num_prompts` (the batch: at most that many requests run at once), `mean_tpot_ms` (each
  completed request's (e2e latency - TTFT) / (output tokens - 1), averaged over those with more
  than one output token; 0 where none had: `calculate_metrics`, commit 009e6d4a1cd6), `output_throughput`
  (aggregate output tokens/s of the completed requests over the run), `completed`, `failed`,
  `total_input_tokens` and `total_output_tokens` (the mean context), and the server's
  speculative counters over the run: `spec_decode_acceptance_length` (1 + accepted / drafts),
  `spec_decode_per_position_acceptance_rates` (AL = 1 + their sum, read where the former is
  missing and checked against it: `readers.vllm_positions`), `spec_decode_num_drafts`,
  `spec_decode_draft_tokens`. `--metadata KEY=VALUE` pairs are written as top-level keys, which
  is how a run says its mechanism and draft length. The result records no sampling parameter
  (`main_async` puts --temperature in each request's body only, commit 009e6d4a1cd6; without it,
  since vLLM PR #32723, the server's default applies), so a run says its temperature with
  `--metadata temperature=T`; none: taken as greedy. (SGLang's `bench_serving`, whose JSON lines
  look alike, is `readers.sglang_serving`.)
- SGLang `scripts/playground/bench_speculative.py`: one JSON object per line with `batch_size`,
  `steps`, `topk`, `num_draft_tokens`, `acc_length`, `step_time` (seconds per decode step,
  20th percentile), `speed` (tokens/s per request). The script launches each server with
  `--max-running-requests` and `--cuda-graph-max-bs` equal to the batch size (sglang commit
  01d2a3d0d57b, `main`), so its rows run every request of the batch: speculative steps are not
  capped at SGLang's default 48. Its requests are greedy: it passes `extra_request_body={}` and
  bench_serving's request sets temperature 0.0; a line's own `temperature` field (added by hand) is read.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from speedplan.engine.readers.measurement import (DEFAULT_CONTEXT, MAX_TREE_NODES, Measurement, canonical_mechanism,
                                                  check_decoded, drafts_ran_short, no_acceptance, number_field,
                                                  parse_number, scraped, shown)
from speedplan.engine.readers.vllm_positions import POSITIONS, position_acceptance
from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanisms.base import MAX_TOPK
from speedplan.specs.files import parse_json


def read_vllm_bench(path: Path, data, acceptance=no_acceptance) -> list[Measurement]:
    """One `vllm bench serve --save-result` run (or several, with --append-result). The run's
    mechanism and draft length come from `--metadata mechanism=NAME draft_len=K [context=L]
    [max_running_requests=N] [tree_nodes=N] [temperature=T]` (max_running_requests: the server's
    --max-num-seqs, where it capped the batch; tree_nodes: a token tree's draft nodes, as in a CSV;
    temperature: the run's --temperature, which the result does not record; none: greedy).
    Without `context`, the run's mean decode context is read from its token totals: mean prompt
    + half the mean output (a request's KV grows from its prompt to prompt + output)."""
    runs = data if isinstance(data, list) else [data]
    out = []
    for i, run in enumerate(runs, start=1):
        where = f"{path}:run {i}"
        if not isinstance(run, dict) or "output_throughput" not in run:
            raise SpeedplanInputError(f"{where}: not a vllm bench serve result (no 'output_throughput')")
        run = _vllm_names(run)
        mech = run.get("mechanism")
        if mech is not None and not isinstance(mech, str):
            raise SpeedplanInputError(f"{where}: field 'mechanism' must be text (a mechanism name), got {mech!r}")
        mech = canonical_mechanism(mech or "")  # --metadata mechanism=draft_model or EAGLE-3: speedplan's name
        if not mech:
            raise SpeedplanInputError(f"{where}: field 'mechanism' missing: run vllm bench serve with --metadata "
                                      f"mechanism=NAME draft_len=K, or add them to the file's top level "
                                      f"({_guess(run)})")
        if mech != "none" and run.get("draft_len") is None:
            raise SpeedplanInputError(f"{where}: field 'draft_len' missing: give --metadata draft_len=K, or add it to "
                                      f"the file's top level ({_guess(run)})")
        if run.get("max_concurrency") is None:
            raise SpeedplanInputError(f"{where}: field 'max_concurrency' missing: run with --max-concurrency B")
        _check_counts(run, where)
        _check_held(run, where)
        batch, batch_field = _vllm_batch(run, where)
        _check_completed(run, where)
        check_decoded(run, where)
        draft_len = number_field(run, "draft_len", where, True, required=mech != "none") or 0
        drafts = number_field(run, "spec_decode_num_drafts", where, required=False)
        if mech == "none" and drafts:
            raise SpeedplanInputError(f"{where}: mechanism none, but the server drafted during the run "
                                      f"('spec_decode_num_drafts' {drafts:g}): measure plain decoding on a server "
                                      "started without --speculative-config")
        tree_nodes = number_field(run, "tree_nodes", where, True, required=False)
        if mech.split(":")[0] not in ("none", "ngram") and drafts:  # a tree drafts its nodes per step, not its depth
            _check_draft_length(number_field(run, "spec_decode_draft_tokens", where, required=False), drafts,
                                tree_nodes or draft_len, where)
        al, al_field = None, "acceptance_length"
        if mech != "none":
            from_positions = position_acceptance(run, where)  # 1 + Σ rates, checked against the AL it has
            for key in ("spec_decode_acceptance_length", "acceptance_length"):
                al = number_field(run, key, where, required=False)
                if al is not None:
                    al_field = key
                    break
            if al is None and from_positions is not None:
                al, al_field = from_positions, POSITIONS
            if al is None:
                al = scraped(acceptance, mech, draft_len, where)
            if al is None:
                raise SpeedplanInputError(f"{where}: field 'acceptance_length' is needed for a speculative row: the "
                                          "file has no spec_decode_acceptance_length; give --metadata "
                                          "acceptance_length=AL, a /metrics scrape of that server beside it, or calibrate "
                                          "--fit-acceptance with runs at two or more draft lengths")
        context, context_field = _vllm_context(run, where)
        quantity, value, value_field, throughput = vllm_decode(run, where)
        m = Measurement(
            mechanism=mech, batch=batch, draft_len=draft_len, context=context, quantity=quantity, value=value,
            acceptance_length=al if mech != "none" else None, where=where,
            max_running=number_field(run, "max_running_requests", where, True, required=False),
            tree_nodes=tree_nodes, model=run["model_id"] if isinstance(run.get("model_id"), str) else None,
            temperature=number_field(run, "temperature", where, required=False) or 0.0,  # --metadata temperature=T
            names=(("batch", batch_field), (quantity, value_field), ("acceptance_length", al_field),
                   ("context", context_field)))
        said = None if run.get("context") is not None else CONTEXT_SAID[
            "total_input_tokens" if context_field == "total_input_tokens" else "default"]
        out.append(replace(m, notes=tuple(n for n in (said, throughput_note(throughput, m)) if n)))
    return out


def vllm_decode(run: dict, where: str, writer: str = "vLLM") -> tuple[str, float, str, float]:
    """What a run measured of decoding, as (quantity, value, field, output_throughput): `mean_tpot_ms` as a tpot_ms
    row where the file has it (decode alone: a request's steps at the batch held, each AL tokens,
    without its TTFT), else `output_throughput` as a tokens_per_s row (the whole run: prefill,
    queueing and the ramp-down where fewer than max_concurrency requests ran count in it)."""
    throughput = number_field(run, "output_throughput", where)  # checked even where the row is the TPOT
    if not throughput > 0:
        raise SpeedplanInputError(f"{where}: field 'output_throughput' must be a positive number of tokens/s, "
                                  f"got {shown(run['output_throughput'])}")
    if run.get("mean_tpot_ms") is None:  # written only with a tokenizer and tpot in --percentile-metrics
        return "tokens_per_s", throughput, "output_throughput", throughput
    tpot = number_field(run, "mean_tpot_ms", where)
    if tpot == 0:  # np.mean(tpots or 0): no request had a second token
        raise SpeedplanInputError(f"{where}: field 'mean_tpot_ms' is 0: {writer} writes 0 where no request produced "
                                  "more than one output token, so the run timed no decode step; rerun with "
                                  "--random-output-len (or --output-len) of 128 or more")
    if tpot < 0:
        raise SpeedplanInputError(f"{where}: field 'mean_tpot_ms' must be a positive number of milliseconds, "
                                  f"got {shown(run['mean_tpot_ms'])}")
    return "tpot_ms", tpot, "mean_tpot_ms", throughput


# output_throughput further than this factor from what the run's batch emits at its mean_tpot_ms
# (running x 1000 / mean_tpot_ms): a note, not a refusal. Prefill, queueing and the ramp-down
# lower output_throughput; a few percent is usual with long outputs, 0.7x with short ones.
THROUGHPUT_SPREAD = 1.5


def throughput_note(thr: float, m: Measurement, cap: str = "--max-num-seqs was below {running}, give --metadata "
                    "max_running_requests=N") -> str | None:
    """A note where the tpot_ms row `m` and its run's output_throughput `thr` (tokens/s, checked by
    `vllm_decode`) are more than THROUGHPUT_SPREAD apart (the R = m.running() requests of a step each
    emitting 1000 / mean_tpot_ms a second); None where they agree or the row is not a TPOT."""
    if m.quantity != "tpot_ms":
        return None
    running = m.running()
    implied = running * 1000.0 / m.value
    ratio = thr / implied
    if 1 / THROUGHPUT_SPREAD <= ratio <= THROUGHPUT_SPREAD:
        return None
    head = (f"output_throughput {thr:.4g} tokens/s is {ratio:.2f}x the {implied:.4g} that {running} "
            f"requests emit at mean_tpot_ms {m.value:.4g}")
    if ratio > 1:
        return head + ": more than they can; check that mean_tpot_ms is this run's, in ms (the row is fitted to it)"
    return (head + ": much of the run was prefill, queueing or ramp-down, which the row (mean_tpot_ms) leaves out"
            + (f"; if the server's {cap.format(running=running)}" if m.max_running is None else ""))


# vLLM's own names for what the metadata gives (SpeculativeConfig: method, num_speculative_tokens)
_VLLM_METHODS = {"draft_model": "draft-model"}


def _vllm_names(run: dict) -> dict:
    """`run` with --metadata given in vLLM's --speculative-config names (method=eagle3
    num_speculative_tokens=3) read as mechanism and draft_len, where those are not given."""
    extra = {}
    if run.get("mechanism") is None and isinstance(run.get("method"), str):
        extra["mechanism"] = _VLLM_METHODS.get(run["method"].strip().lower(), run["method"])
    if run.get("draft_len") is None and run.get("num_speculative_tokens") is not None:
        extra["draft_len"] = run["num_speculative_tokens"]
    return {**run, **extra} if extra else run


def _guess(run: dict) -> str:
    """What the file's own counters say of the run: drafting, and tokens per draft."""
    drafts, tokens = run.get("spec_decode_num_drafts"), run.get("spec_decode_draft_tokens")
    if drafts is None and tokens is None:
        return "it holds no spec_decode counters: mechanism none, if the server ran without --speculative-config"
    if isinstance(drafts, (int, float)) and isinstance(tokens, (int, float)) and drafts > 0:
        return f"its spec_decode counters give {tokens / drafts:.2f} draft tokens a draft: draft_len {tokens / drafts:.0f}"
    return "it holds spec_decode counters: the server drafted"


FAILED_SHARE = 0.01  # failed requests a run may have: output_throughput leaves out their tokens


# Counts a vllm bench serve result holds (requests, tokens, the server's draft counters): none is
# negative, and a run sent at least one prompt.
_COUNTS = {"num_prompts": 1, "completed": 0, "failed": 0, "total_input_tokens": 0, "total_output_tokens": 0,
           "spec_decode_num_drafts": 0, "spec_decode_draft_tokens": 0}


def _check_counts(run: dict, where: str) -> None:
    for key, low in _COUNTS.items():
        value = number_field(run, key, where, required=False)
        if value is not None and value < low:
            raise SpeedplanInputError(f"{where}: field {key!r} must be a count >= {low}, got {shown(run[key])}")


def _vllm_batch(run: dict, where: str) -> tuple[int, str]:
    """The most requests the run had in flight: --max-concurrency, or --num-prompts where fewer."""
    batch = number_field(run, "max_concurrency", where, True)
    prompts = number_field(run, "num_prompts", where, True, required=False)
    if prompts is not None and 1 <= prompts < batch:
        return prompts, "num_prompts"
    return batch, "max_concurrency"


def _check_held(run: dict, where: str) -> None:
    """The batch is max_concurrency only where every request was sent at once and the client
    kept that many in flight: `vllm bench serve` writes `request_rate` as the number it was given,
    or "inf" (vllm/benchmarks/serve.py, commit 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1,
    `main_async`), and `ramp_up_strategy` when the rate ramped. At a finite rate requests arrive
    as a Poisson process and fewer are in flight between arrivals; `max_concurrent_requests` is
    the run's peak (a sweep over the requests' start and end times, `calculate_metrics`), not a
    batch it held, so no batch size describes the run."""
    rate, ramp = run.get("request_rate"), run.get("ramp_up_strategy")
    held = rate is None or (isinstance(rate, str) and rate.strip().lower() in ("inf", "infinity"))
    if not held and not isinstance(rate, bool):
        try:
            held = parse_number(rate) == float("inf")
        except (TypeError, ValueError):
            held = False
    if not held or ramp is not None:
        field_name, value = ("request_rate", rate) if not held else ("ramp_up_strategy", ramp)
        raise SpeedplanInputError(f"{where}: field {field_name!r} {shown(value)}: requests arrived over time, so the "
                                  "batch was not held at max_concurrency (max_concurrent_requests is the run's peak); "
                                  "rerun with --request-rate inf --max-concurrency B")


def _check_completed(run: dict, where: str) -> None:
    failed = number_field(run, "failed", where, True, required=False) or 0
    done = number_field(run, "completed", where, True, required=False) or 0
    if failed > FAILED_SHARE * max(failed + done, 1):
        raise SpeedplanInputError(f"{where}: {failed} of {failed + done} requests failed ('failed'); a failed request "
                                  "leaves the batch short of max_concurrency, and output_throughput and mean_tpot_ms "
                                  "count only the completed ones: rerun without failures")


def _check_draft_length(draft_tokens: float | None, drafts: float, draft_len: int, where: str) -> None:
    """The server's own counters say how long its drafts were: more than draft_len, or all of
    them (within SHORT_DRAFTS) a shorter whole length, means the metadata names the wrong D; a
    mean between whole lengths, that D varied (dynamic speculative decoding)."""
    if draft_tokens is None or drafts <= 0:
        return
    mean = draft_tokens / drafts
    ran = math.ceil(mean - 1e-6)  # the server's K where its drafts were all (nearly) full length
    if 1 <= ran < draft_len and drafts_ran_short(mean, ran) is None:  # every draft ran, at another length
        raise SpeedplanInputError(f"{where}: the metadata's draft length {draft_len} disagrees with the {mean:.2f} tokens "
                                  "per draft the server drafted ('spec_decode_draft_tokens' / 'spec_decode_num_drafts'): "
                                  f"it ran {ran} a draft; give the length it ran in --metadata")
    if mean > draft_len + 1e-6:
        raise SpeedplanInputError(f"{where}: the server drafted {mean:.2f} tokens per draft "
                                  f"('spec_decode_draft_tokens' / 'spec_decode_num_drafts'), more than draft_len "
                                  f"{draft_len}: the metadata names the wrong draft length")
    if drafts_ran_short(mean, draft_len) is not None:
        raise SpeedplanInputError(f"{where}: the server drafted {mean:.2f} tokens per draft "
                                  f"('spec_decode_draft_tokens' / 'spec_decode_num_drafts') against draft_len "
                                  f"{draft_len}: its draft length varied (a per-batch-size schedule), so this run "
                                  "is not one draft length; measure with a fixed num_speculative_tokens")


# What a row's note says where the file did not state the context (calibrate prints it, once per file).
CONTEXT_SAID = {
    "total_input_tokens": "context is the run's mean prompt + half its mean output (total_input_tokens, "
                          "total_output_tokens, completed): --metadata context=L sets it",
    "default": f"no context and no token totals: priced at {DEFAULT_CONTEXT} tokens of context; "
               "--metadata context=L sets it",
    "completion_tokens": "context is bench_speculative.py's {prompt}-token mean prompt + half the line's "
                         "completion_tokens ({output} without it); a context field sets it",
}


def _vllm_context(run: dict, where: str) -> tuple[int, str]:
    """Tokens of KV per sequence in an average decode step: --metadata context=L, else the
    run's mean prompt plus half its mean output, else DEFAULT_CONTEXT."""
    context = number_field(run, "context", where, True, required=False)
    if context is not None:
        return context, "context"
    done = number_field(run, "completed", where, True, required=False)
    prompt = number_field(run, "total_input_tokens", where, required=False)
    output = number_field(run, "total_output_tokens", where, required=False)
    if done and done > 0 and prompt is not None and output is not None and prompt + output > 0:
        if prompt + output / 2 < done:  # less than a token of context per request: the totals are not this run's
            raise SpeedplanInputError(f"{where}: fields 'total_input_tokens' and 'total_output_tokens' give less than "
                                      f"one token of context for each of the {done:g} 'completed' requests")
        return round((prompt + output / 2) / done), "total_input_tokens"
    return DEFAULT_CONTEXT, "context"


# the fields of a bench_speculative.py line speedplan needs (acc_length: speculative rows only)
SGLANG_KEYS = ("batch_size", "steps", "acc_length", "step_time")


def read_sglang_bench(path: Path, lines: list[str], mechanism: str) -> list[Measurement]:
    """JSON lines of SGLang's bench_speculative.py; steps = 0 rows are plain decoding. The
    file does not say which drafter ran: `mechanism` (eagle or eagle3) does, and a row with
    topk > 1 (or more draft tokens than steps + 1) is that head's tree (eagle3-tree:topk=K)."""
    out = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{i}"
        rec = parse_json(line, where)
        if not isinstance(rec, dict):
            raise SpeedplanInputError(f"{where}: expected a JSON object")
        for key in SGLANG_KEYS:
            if key not in rec and (key != "acc_length" or rec.get("steps")):  # a plain row's is not read
                raise SpeedplanInputError(f"{where}: field {key!r} missing (an SGLang bench_speculative.py line has "
                                          f"{', '.join(SGLANG_KEYS)})")
        steps = number_field(rec, "steps", where, True)
        topk = number_field(rec, "topk", where, True, required=False)
        topk = 1 if topk is None else topk
        draft_tokens = number_field(rec, "num_draft_tokens", where, True, required=False)
        draft_tokens = steps + 1 if draft_tokens is None else draft_tokens
        if topk > MAX_TOPK:  # had been refused as field 'mechanism' (the tree it built), which the file has not
            raise SpeedplanInputError(f"{where}: field 'topk' must be in 1..{MAX_TOPK}, got {rec['topk']!r}")
        if steps < 0 or (steps > 0 and (topk < 1 or draft_tokens < 1)):  # a plain row (steps 0) writes topk 0
            bad = "steps" if steps < 0 else "topk" if topk < 1 else "num_draft_tokens"
            raise SpeedplanInputError(f"{where}: field {bad!r} must be " + ("0 or more" if bad == "steps" else "1 or more")
                                      + f", got {rec[bad]!r}")
        if steps == 0:
            mech, nodes = "none", None
        elif topk > 1 or draft_tokens > steps + 1:  # the tree of the head `mechanism` names
            if draft_tokens > MAX_TREE_NODES + 1:  # it counts the root: the nodes are one fewer
                raise SpeedplanInputError(f"{where}: field 'num_draft_tokens' {draft_tokens} must be in "
                                          f"2..{MAX_TREE_NODES + 1}")
            if draft_tokens < 2:
                raise SpeedplanInputError(f"{where}: field 'num_draft_tokens' {draft_tokens} leaves a tree of topk "
                                          f"{topk} no draft node (it counts the root)")
            head = mechanism.split(":")[0].removesuffix("-tree")
            if head not in ("eagle", "eagle3"):
                raise SpeedplanInputError(f"{where}: a tree (topk {topk}, num_draft_tokens {draft_tokens}) of "
                                          f"{head}: speedplan prices trees of EAGLE heads only (--mechanism eagle3)")
            mech, nodes = f"{head}-tree:topk={topk}", draft_tokens - 1
        else:
            mech, nodes = mechanism, None
        if steps and number_field(rec, "acc_length", where) == 1.0:  # sglang commit 01d2a3d0d57b, send_one_batch
            raise SpeedplanInputError(f"{where}: field 'acc_length' is 1.0 on a speculative row (steps {steps}): "
                                      "bench_speculative.py writes `accept_length or 1.0`, so 1.0 means the server "
                                      "reported no accept length; rerun it, or give the row as a CSV with its "
                                      "acceptance_length")
        if number_field(rec, "step_time", where) <= 0:
            raise SpeedplanInputError(f"{where}: field 'step_time' must be a positive number of seconds, "
                                      f"got {rec['step_time']!r}")
        context, context_field = _sglang_context(rec, where)
        out.append(Measurement(
            mechanism=mech, batch=number_field(rec, "batch_size", where, True), draft_len=steps, context=context,
            quantity="step_ms", value=number_field(rec, "step_time", where) * 1e3,
            acceptance_length=number_field(rec, "acc_length", where) if steps else None, where=where, tree_nodes=nodes,
            temperature=number_field(rec, "temperature", where, required=False) or 0.0,  # the script's: greedy
            max_running=number_field(rec, "batch_size", where, True), engine="sglang",  # it launches SGLang servers
            names=(("batch", "batch_size"), ("max_running_requests", "batch_size"), ("draft_len", "steps"),
                   ("step_ms", "step_time"), ("acceptance_length", "acc_length"), ("tree_nodes", "num_draft_tokens"),
                   ("context", context_field)),
            notes=((CONTEXT_SAID["completion_tokens"].format(prompt=BENCH_SPECULATIVE_PROMPT_TOKENS,
                                                            output=BENCH_SPECULATIVE_OUTPUT_TOKENS),)
                   if context_field == "completion_tokens" else ()) + ((drafter_said(mechanism),) if steps else ())))
    return out


def drafter_said(mechanism: str) -> str:
    """The note on a speculative bench_speculative.py row: the file does not record its drafter."""
    return (f"the file does not record which drafter ran: priced as {mechanism.split(':')[0]} (--mechanism names it; "
            "the script at sglang commit 01d2a3d0d57b launched --speculative-algorithm EAGLE, an EAGLE-1/2 head: "
            "--mechanism eagle; later versions pass your own --speculative-algorithm)")


# bench_speculative.py sends its eight fixed prompts, cycled, each asking for 512 output tokens
# with EOS ignored (sglang commit 01d2a3d0d57b): 61 tokens on average (26, 108, 15, 129, 134, 29,
# 19, 25 under the SmolLM2 tokenizer speedplan's runtime ships; Llama-family tokenizers count
# alike), and it records `completion_tokens`, the mean output per request.
BENCH_SPECULATIVE_PROMPT_TOKENS = 61
BENCH_SPECULATIVE_OUTPUT_TOKENS = 512


def _sglang_context(rec: dict, where: str) -> tuple[int, str]:
    """Tokens of KV per sequence in an average decode step: a `context` field where the line
    has one, else the script's mean prompt plus half the row's mean output."""
    context = number_field(rec, "context", where, True, required=False)
    if context is not None:
        return context, "context"
    output = number_field(rec, "completion_tokens", where, required=False)
    if output is not None and not output >= 1:
        raise SpeedplanInputError(f"{where}: field 'completion_tokens' must be at least 1 token, got {rec['completion_tokens']!r}")
    if output is None:
        output = BENCH_SPECULATIVE_OUTPUT_TOKENS
    return round(BENCH_SPECULATIVE_PROMPT_TOKENS + output / 2), "completion_tokens"
