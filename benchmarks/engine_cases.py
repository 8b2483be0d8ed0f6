"""The rows of ../shared/cases/engine_measurements.csv that an engine fit can use, as
`speedplan.engine` measurements with the setting (model, GPU, TP) each ran on.

A row is used when the source states everything the engine model needs: the engine, a GPU
with a speedplan preset, a model whose architecture a preset has, the tensor-parallel size,
the batch (a batch size or a concurrency), the draft shape, the acceptance length of
speculative rows, and a speedup over the same source's plain decoding (or, with a stated GPU, an
absolute throughput or TPOT). Every other row is listed with the reason it was left out.
Used by benchmarks/fit_engine_profiles.py (the shipped profiles) and bench_calibration.py.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

CASES = Path(__file__).resolve().parents[2] / "shared" / "cases" / "engine_measurements.csv"

ENGINES = {"vLLM": "vllm", "SGLang": "sglang", "TensorRT-LLM": "trtllm"}
GPUS = {"H100": "h100-sxm", "H200": "h200-sxm", "B200": "b200", "A100": "a100-80gb"}
# Hugging Face ids -> the preset with the same architecture (Llama-3 8B and Llama-3.3 70B share
# Llama-3.1's shapes; DeepSeek-R1 is DeepSeek-V3's architecture).
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b", "Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "NousResearch/Meta-Llama-3.1-8B-Instruct": "llama-3.1-8b", "Llama-3-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Llama-3.3-70B-Instruct": "llama-3.1-70b", "Qwen/Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen3-235B-A22B": "qwen3-235b-a22b", "deepseek-ai/DeepSeek-R1": "deepseek-v3", "DeepSeek-V3": "deepseek-v3",
    "zai-org/GLM-4.7-Flash": "glm-4.7-flash", "openai/gpt-oss-120b": "gpt-oss-120b",
}
DRAFTS = {"meta-llama/Llama-3.2-1B-Instruct": "llama-3.2-1b"}
DEFAULT_CONTEXT = 1024  # tokens, where a source gives no input/output lengths (MT-Bench-like chat)
# Settings a source leaves out, assumed so that its rows can be used, each with the reason. The
# speedup of a B = 1 step is a ratio of two steps on the same GPU, so the GPU matters less than
# for an absolute time; the assumption is written into the fitted profile with the rows.
ASSUMED = {
    "vllm PR #16035 (V1 EAGLE model loading)": {
        "gpu": "H100", "tp": 1.0,
        "why": "GPU and TP not stated in the PR comment: H100 (the GPU of most threads here) and TP 1 (an 8B model "
               "on one GPU, the offline eagle.py default) assumed",
    },
    "vllm PR #17202 (MTBench in serving benchmark)": {
        "gpu": "H100", "tp": 1.0,
        "why": "GPU and TP not stated in the comment: H100 and TP 1 (an 8B model on one GPU) assumed",
    },
}

# Server settings a source's benchmark script fixes, read from the script itself. SpecForge's
# benchmarks/bench_eagle3.py (launch_sglang_server, SpecForge commit 1d666725eff3) launches each
# SGLang server with --max-running-requests and --cuda-graph-max-bs equal to the batch size, so a
# speculative step runs every request of the batch, not SGLang's default 48.
RUNS_WHOLE_BATCH = frozenset({
    "Tencent/AngelSlim issue #163 (Qwen3-30B-A3B EAGLE3 reproduction)",  # "benchmark via SpecForge code"
    "SpecForge issue #339 (Qwen3-30B-A3B EAGLE3 throughput degradation)",  # "SpecForge bench_eagle3.py"
})


# Usable rows kept out of the shipped fit and printed as an out-of-sample check, each with why.
HELD_OUT = {
    "SafeAILab/EAGLE PR #330 (GLM-4.7-Flash EAGLE-3 community model)":
        "a later SGLang (it serves GLM-4.7-Flash, released 2026; FlashInfer backend) than the fitted rows' 2025 "
        "runs: its speculative step at B = 1 costs AL / speedup = 1.7x its plain step where the fitted H100 MoE "
        "rows' cost 2.1-2.8x at trees of up to 8 tokens; fitted together, the SGLang fit's |residual| goes from "
        "median 6.9% / max 18.4% to 8.0% / 31.0%. Host terms cannot close the B = 1 gap: calibrated on these rows "
        "alone with host_step_us and host_spec_seq_us free, B = 1 stays near its prediction (fit_engine_profiles.py "
        "prints both), as the verify pass's extra expert reads alone are priced nearly what the source's whole "
        "speculative step took over its plain step",
}


@dataclass
class Case:
    engine: str
    source: str
    row: int  # 0-based row of the CSV (+2 is its line in a spreadsheet)
    model: str
    hardware: str
    tp: int
    mechanism: str
    batch: int
    draft_len: int
    tree_nodes: int | None
    context: int
    quantity: str
    value: float
    acceptance_length: float | None
    sweep: str  # groups rows of one source and setting that vary only B and D
    assumed: str = ""  # what the source did not state and was assumed (ASSUMED)
    max_running: int | None = None  # the server's --max-running-requests (RUNS_WHOLE_BATCH), else the default


def _num(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _context(text) -> int:
    """ISL/OSL like "1024/256" → the mean context while decoding, isl + osl/2."""
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s*[Kk]?\s*/\s*(\d+(?:\.\d+)?)\s*([Kk]?)", str(text))
    if not m:
        return DEFAULT_CONTEXT
    scale = 1024 if "K" in str(text).upper() else 1
    isl, osl = float(m.group(1)) * scale, float(m.group(2)) * scale
    return int(isl + osl / 2)


def _max_running(r, batch: float) -> int | None:
    """The running-request cap the source's server ran with, where its script fixes one."""
    return int(batch) if str(r.source) in RUNS_WHOLE_BATCH else None


def _mechanism(r, draft_len: int) -> tuple[str | None, int | None, str]:
    mech = str(r.mechanism)
    topk = _num(r.topk) or 1
    tokens = _num(r.num_draft_tokens)
    if mech in ("eagle", "eagle3"):
        if topk > 1 and tokens and tokens > draft_len + 1:
            return f"eagle-tree:topk={int(topk)}", int(tokens) - 1, ""
        # EAGLE-3 heads: 3h→h fuse and a 32k draft vocabulary (speedplan prices an eagle3 mechanism
        # where it has one; before that, an EAGLE head with the 32k vocabulary)
        return ("eagle3" if _has_eagle3() else "eagle:vocab=32000") if mech == "eagle3" else "eagle", None, ""
    if mech == "mtp":
        return "mtp", None, ""
    if mech == "ngram":
        return "ngram", None, ""
    if mech == "draft_model":
        draft = DRAFTS.get(str(r.draft_model))
        return (f"draft-model:{draft}", None, "") if draft else (None, None, f"draft {r.draft_model} has no preset")
    return None, None, f"mechanism {mech}"


def _has_eagle3() -> bool:
    from speedplan.plan.mechanisms import REGISTRY

    return "eagle3" in REGISTRY


def _plain_cases(r, i: int, engine: str, gpu: str, model: str, tp: float, assumed: list) -> list[Case]:
    """The source's own plain-decoding run, from its baseline columns: a TPOT, or the output
    throughput of a single sequence (B = 1, where it is one sequence's decode speed; at larger
    batches a benchmark's throughput also holds prefill and queueing, so those are left out)."""
    batch = _num(r.batch_or_concurrency)
    if batch is None and "--cuda-graph-max-bs 1" in str(r.notes):
        batch = 1.0
    if batch is None:
        return []
    out = []
    for column, quantity in (("baseline_tokens_per_s", "tokens_per_s"), ("baseline_tpot_ms", "tpot_ms")):
        value = _num(getattr(r, column))
        if value is not None and (quantity == "tpot_ms" or batch == 1):
            out.append(Case(engine, str(r.source), i, model, gpu, int(tp), "none", int(batch), 0, None,
                            _context(r.context_or_isl_osl), quantity, value, None,
                            f"{r.source} | {model} {gpu} TP{int(tp)} none", "; ".join(assumed),
                            _max_running(r, batch)))
    return out


def load_cases(path: Path = CASES, held_out: bool = False) -> tuple[list[Case], list[tuple[int, str, str]]]:
    """(usable cases, [(row, source, why left out)]): speculative rows with a speedup, and the
    plain-decoding runs their sources state (one per source, setting, batch and value). The
    cases of HELD_OUT sources only with `held_out` (fit_engine_profiles prints them apart)."""
    frame = pd.read_csv(path)
    cases, skipped, plain = [], [], {}
    for i, r in enumerate(frame.itertuples(index=False)):
        why = None
        engine = ENGINES.get(str(r.engine))
        assumption = ASSUMED.get(str(r.source), {})
        gpu_text = r.gpu if isinstance(r.gpu, str) else assumption.get("gpu")
        gpu = GPUS.get(str(gpu_text).split()[0]) if isinstance(gpu_text, str) else None
        if isinstance(r.gpu, str) and "40GB" in r.gpu:
            gpu = None  # A100 40GB: no preset (the a100-80gb preset has other bandwidth and memory)
        model = MODELS.get(str(r.target_model))
        tp = _num(r.tp) if _num(r.tp) is not None else assumption.get("tp")
        batch = _num(r.batch_or_concurrency)
        assumed = [assumption["why"]] if assumption else []
        if batch is None and "--cuda-graph-max-bs 1" in str(r.notes):
            batch = 1.0
            assumed.append("batch 1 (the server ran with --cuda-graph-max-bs 1)")
        draft_len = int(_num(r.draft_len) or 0)
        al = _num(r.acceptance_length)
        speedup = _num(r.speedup)
        if speedup is None and _num(r.tokens_per_s) and _num(r.baseline_tokens_per_s):
            speedup = _num(r.tokens_per_s) / _num(r.baseline_tokens_per_s)
        if engine is None:
            why = f"engine {r.engine}"
        elif gpu is None:
            why = f"GPU not stated or without a preset ({r.gpu})"
        elif model is None:
            why = f"model {r.target_model} has no preset"
        elif tp is None:
            why = "tensor-parallel size not stated"
        elif batch is None or (str(r.batch_kind) not in ("batch", "concurrency") and "--cuda-graph-max-bs 1" not in str(r.notes)):
            why = f"batch not stated ({r.batch_kind})"
        elif draft_len < 1:
            why = "draft length not stated"
        elif al is None:
            why = "acceptance length not stated"
        elif speedup is None:
            why = "no speedup over the same source's plain decoding"
        if engine and gpu and model and tp is not None:
            for c in _plain_cases(r, i, engine, gpu, model, tp, assumed):
                plain.setdefault((c.source, c.model, c.hardware, c.tp, c.batch, c.quantity, c.value), c)
        mech, nodes, reason = _mechanism(r, draft_len) if why is None else (None, None, "")
        if why is None and mech is None:
            why = reason
        if why is not None:
            skipped.append((i, str(r.source), why))
            continue
        sweep = f"{r.source} | {model} {gpu} TP{int(tp)} {mech}"
        cases.append(Case(engine, str(r.source), i, model, gpu, int(tp), mech, int(batch), draft_len, nodes,
                          _context(r.context_or_isl_osl), "speedup", speedup, al, sweep, "; ".join(assumed),
                          _max_running(r, batch)))
    return [c for c in cases + list(plain.values()) if held_out or c.source not in HELD_OUT], skipped


def as_pairs(cases: list[Case]):
    """(Measurement, Setting) pairs for speedplan.engine.calibrate, one cost model per hardware."""
    from speedplan.cost.ops import load_cost_model
    from speedplan.engine.calibrate import Setting
    from speedplan.engine.readers.measurements import Measurement
    from speedplan.specs.model import get_model

    costs: dict = {}
    pairs = []
    for c in cases:
        cost = costs.setdefault(c.hardware, load_cost_model(c.hardware))
        setting = Setting(get_model(c.model), cost, c.tp, f"{c.model} on {c.hardware}, TP={c.tp}")
        where = f"{CASES.name} line {c.row + 2} ({c.source}{'; assumed: ' + c.assumed if c.assumed else ''})"
        m = Measurement(c.mechanism, c.batch, c.draft_len, c.context, c.quantity, c.value, c.acceptance_length,
                        where, c.tree_nodes, c.max_running)
        pairs.append((m, setting))
    return pairs
