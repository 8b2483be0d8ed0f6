"""Plans, option names and the engines' own schedule lookups shared by the serving-config tests."""

from __future__ import annotations

import bisect
import json
import shlex
from pathlib import Path

from speedplan.serving import ServingPlan

SCHEDULE = ((1, 5), (8, 4), (32, 2), (128, 0))
TREE = {"topk": 4, "depth": 5, "nodes": 16}

# Names checked against each engine's source (docs/serving.md says where each was found).
# vLLM 0.33.0: vllm/config/speculative.py SpeculativeConfig fields and SpeculativeMethod literals.
VLLM_KEYS = {"method", "model", "num_speculative_tokens", "draft_tensor_parallel_size",
             "prompt_lookup_max", "prompt_lookup_min", "num_speculative_tokens_per_batch_size"}
VLLM_METHODS = {"ngram", "draft_model", "eagle", "eagle3", "mtp"}
# SGLang 0.5.23: python/sglang/srt/arg_groups/fields/spec.py field names with dashes.
SGLANG_FLAGS = {"--model-path", "--tp-size", "--speculative-algorithm", "--speculative-draft-model-path",
                "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
                "--speculative-ngram-max-bfs-breadth", "--speculative-adaptive", "--speculative-adaptive-config"}
SGLANG_ALGORITHMS = {"NGRAM", "STANDALONE", "EAGLE", "EAGLE3", "NEXTN"}
# TensorRT-LLM llm_args.py @ 0004396: DecodingBaseConfig / Eagle3DecodingConfig / NGram fields and literals,
# and MTPDecodingConfig.num_nextn_predict_layers (deprecated there; older releases read D from it).
TRTLLM_KEYS = {"decoding_type", "max_draft_len", "speculative_model", "max_matching_ngram_size",
               "use_dynamic_tree", "dynamic_tree_max_topK", "max_total_draft_tokens", "draft_len_schedule",
               "num_nextn_predict_layers"}
TRTLLM_TYPES = {"NGram", "Draft_Target", "Eagle3", "MTP"}


def plan(mechanism: str = "eagle", **kw) -> ServingPlan:
    base = dict(model="llama-3.1-8b", mechanism=mechanism, draft_len=4, schedule=SCHEDULE, hardware="h100")
    if mechanism == "draft-model":
        base["draft_model"] = "llama-3.2-1b"
    if mechanism in ("eagle-tree", "eagle3-tree", "medusa"):
        base["tree"] = TREE
    if mechanism == "mtp":
        base["model"] = "deepseek-v3"
    base.update(kw)
    return ServingPlan(**base)


def plan_d(p: ServingPlan, batch: int) -> int:
    """The plan's D at a batch: the last schedule point at or below it (batch 1 uses the first)."""
    points = [b for b, _ in p.schedule]
    return p.schedule[max(bisect.bisect_right(points, batch) - 1, 0)][1]


def vllm_lookup(ranges: list[list[int]], k_max: int, batch: int) -> int:
    """vLLM build_dynamic_sd_schedule_lookup for 3-item entries: range K clipped to k_max."""
    for lo, hi, k in ranges:
        if lo <= batch <= hi:
            return min(k, k_max)
    raise AssertionError(f"batch {batch} not covered by {ranges}")


def trtllm_lookup(schedule: dict[int, int], batch: int) -> int:
    """TensorRT-LLM get_draft_len_for_batch_size: first key >= batch; above every key -> 0."""
    keys = sorted(schedule)
    idx = bisect.bisect_left(keys, batch)
    return schedule[keys[idx]] if idx < len(keys) else 0


def sglang_lookup(config: dict, batch: int, cuda_graph_bs=None) -> int:
    """SGLang 0.5.23 AdaptiveSpeculativeParams._route: pad to the next CUDA-graph batch size,
    then the slot with the largest key <= it (clamped to the first); a one-candidate slot keeps it."""
    keys = sorted(int(k) for k in config if k.isdigit())
    if cuda_graph_bs:
        i = bisect.bisect_left(cuda_graph_bs, batch)
        batch = cuda_graph_bs[i] if i < len(cuda_graph_bs) else batch
    key = keys[max(0, bisect.bisect_right(keys, batch) - 1)]
    (steps,) = config[str(key)]["candidate_steps"]
    return steps


def shell_command(text: str) -> list[str]:
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return shlex.split(body.replace("\\\n", " "))


def flag_values(argv: list[str]) -> dict[str, str]:
    return {a: argv[i + 1] for i, a in enumerate(argv) if a.startswith("--")}


PRESETS = Path(__file__).resolve().parents[2] / "speedplan" / "specs" / "presets" / "models"


def _config_folder(tmp_path: Path, preset: str, name: str, **changes) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    cfg = {k: v for k, v in json.loads((PRESETS / f"{preset}.json").read_text()).items() if k != "_source"}
    (folder / "config.json").write_text(json.dumps({**cfg, **changes}))
    return folder
