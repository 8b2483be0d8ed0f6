"""The benchmark outputs of two engines as `Measurement` records (docs/engine.md, "Inputs";
field names checked in the engines' own sources):

- vLLM `vllm/benchmarks/serve.py` (v0.33.0, commit 4ba787ec9): `max_concurrency`,
  `output_throughput` (aggregate output tokens/s), `mean_tpot_ms`, `median_tpot_ms`,
  `spec_decode_acceptance_length` (1 + accepted / drafts); `--metadata KEY=VALUE` pairs are
  written as top-level keys, which is how a run says its mechanism and draft length.
- SGLang `scripts/playground/bench_speculative.py`: one JSON object per line with `batch_size`,
  `steps`, `topk`, `num_draft_tokens`, `acc_length`, `step_time` (seconds per decode step,
  20th percentile), `speed` (tokens/s per request). The script launches each server with
  `--max-running-requests` and `--cuda-graph-max-bs` equal to the batch size (sglang commit
  01d2a3d0d57b, `main`), so its rows run every request of the batch: speculative steps are not
  capped at SGLang's default 48.
"""

from __future__ import annotations

from pathlib import Path

from speedplan.engine.readers.measurement import DEFAULT_CONTEXT, Measurement, no_acceptance, number_field, scraped
from speedplan.errors import SpeedplanInputError
from speedplan.specs.files import parse_json


def read_vllm_bench(path: Path, data, acceptance=no_acceptance) -> list[Measurement]:
    """One `vllm bench serve --save-result` run (or several, with --append-result). The run's
    mechanism and draft length come from `--metadata mechanism=NAME draft_len=K [context=L]
    [max_running_requests=N]` (the last: the server's --max-num-seqs, where it capped the batch)."""
    runs = data if isinstance(data, list) else [data]
    out = []
    for i, run in enumerate(runs, start=1):
        where = f"{path}:run {i}"
        if not isinstance(run, dict) or "output_throughput" not in run:
            raise SpeedplanInputError(f"{where}: not a vllm bench serve result (no 'output_throughput')")
        mech = run.get("mechanism")
        if mech is not None and not isinstance(mech, str):
            raise SpeedplanInputError(f"{where}: field 'mechanism' must be text (a mechanism name), got {mech!r}")
        mech = (mech or "").strip().lower()
        if not mech:
            raise SpeedplanInputError(f"{where}: field 'mechanism' missing: run vllm bench serve with "
                                      "--metadata mechanism=NAME draft_len=K (mechanism=none for plain decoding)")
        batch = run.get("max_concurrency")
        if batch is None:
            raise SpeedplanInputError(f"{where}: field 'max_concurrency' missing: run with --max-concurrency B")
        draft_len = number_field(run, "draft_len", where, True, required=mech != "none") or 0
        al = number_field(run, "spec_decode_acceptance_length", where, required=False)
        if mech != "none" and al is None:
            al = number_field(run, "acceptance_length", where, required=False)
        if mech != "none" and al is None:
            al = scraped(acceptance, mech, draft_len, where)
        context = number_field(run, "context", where, True, required=False)
        out.append(Measurement(
            mechanism=mech, batch=number_field(run, "max_concurrency", where, True), draft_len=draft_len,
            context=DEFAULT_CONTEXT if context is None else context,
            quantity="tokens_per_s", value=number_field(run, "output_throughput", where),
            acceptance_length=al if mech != "none" else None, where=where,
            max_running=number_field(run, "max_running_requests", where, True, required=False),
            names=(("batch", "max_concurrency"), ("tokens_per_s", "output_throughput"),
                   ("acceptance_length", "spec_decode_acceptance_length"))))
    return out


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
        steps = number_field(rec, "steps", where, True)
        topk = number_field(rec, "topk", where, True, required=False)
        topk = 1 if topk is None else topk
        draft_tokens = number_field(rec, "num_draft_tokens", where, True, required=False)
        draft_tokens = steps + 1 if draft_tokens is None else draft_tokens
        if steps < 0 or (steps > 0 and (topk < 1 or draft_tokens < 1)):  # a plain row (steps 0) writes topk 0
            bad = "steps" if steps < 0 else "topk" if topk < 1 else "num_draft_tokens"
            raise SpeedplanInputError(f"{where}: field {bad!r} must be " + ("0 or more" if bad == "steps" else "1 or more")
                                      + f", got {rec[bad]!r}")
        if steps == 0:
            mech, nodes = "none", None
        elif topk > 1 or draft_tokens > steps + 1:  # the tree of the head `mechanism` names
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
        if number_field(rec, "step_time", where) <= 0:
            raise SpeedplanInputError(f"{where}: field 'step_time' must be a positive number of seconds, "
                                      f"got {rec['step_time']!r}")
        context = number_field(rec, "context", where, True, required=False)
        out.append(Measurement(
            mechanism=mech, batch=number_field(rec, "batch_size", where, True), draft_len=steps,
            context=DEFAULT_CONTEXT if context is None else context,
            quantity="step_ms", value=number_field(rec, "step_time", where) * 1e3,
            acceptance_length=number_field(rec, "acc_length", where) if steps else None, where=where, tree_nodes=nodes,
            max_running=number_field(rec, "batch_size", where, True),
            names=(("batch", "batch_size"), ("max_running_requests", "batch_size"), ("draft_len", "steps"),
                   ("step_ms", "step_time"), ("acceptance_length", "acc_length"), ("tree_nodes", "num_draft_tokens"))))
    return out
