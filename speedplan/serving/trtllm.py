"""TensorRT-LLM (`trtllm-serve` with `speculative_config` YAML): the speculative-decoding options of one `ServingPlan`.

Files: `trtllm_extra_llm_api_options.yaml` and `trtllm_serve.sh`.
"""

from __future__ import annotations

from speedplan.errors import SpeedplanInputError
from speedplan.serving.plan import NGRAM_LOOKUP_MAX, ServingPlan, eagle_head, hf_repo, segments
from speedplan.serving.text import header, shell, unsupported, yaml

NAME = "trtllm"
VERSION = (
    "TensorRT-LLM main, tensorrt_llm/llmapi/llm_args.py @ 0004396 "
    "(DecodingBaseConfig.draft_len_schedule, upper-bound keys) "
    "and docs/source/features/speculative-decoding.md @ 04c8822"
)


def trtllm_speculative_config(plan: ServingPlan) -> tuple[dict, list[str]]:
    """`speculative_config` for trtllm-serve (llm_args.py field names) and notes on what was changed."""
    notes: list[str] = []
    segs = segments(plan)
    d_max = plan.draft_len
    schedule: dict[int, int] | None = None
    if segs and plan.mechanism != "eagle-tree":
        first = segs[0][2]
        if first == 0:
            notes.append("the plan turns speculation off at batch 1, which draft_len_schedule cannot "
                         "express (its smallest key must map to max_draft_len > 0); "
                         f"fixed D = {plan.draft_len}.")
        else:
            clipped = [(hi, min(d, first)) for _, hi, d in segs]
            if any(d > first for _, _, d in segs):
                notes.append(f"TensorRT-LLM needs the smallest batch's D to be the largest, so D is "
                             f"capped at {first} where the plan had more.")
            schedule = {}
            for hi, d in clipped:  # merge neighbours made equal by the cap
                if schedule and list(schedule.values())[-1] == d:
                    del schedule[list(schedule)[-1]]
                schedule[hi] = d
            d_max = first
    if plan.mechanism == "ngram":
        cfg = {"decoding_type": "NGram", "max_draft_len": d_max, "max_matching_ngram_size": NGRAM_LOOKUP_MAX}
    elif plan.mechanism == "draft-model":
        cfg = {"decoding_type": "DraftTarget", "max_draft_len": d_max,
               "speculative_model": hf_repo(plan.draft_model or "")}
    elif plan.mechanism == "eagle":
        cfg = {"decoding_type": "Eagle3", "max_draft_len": d_max,
               "speculative_model": eagle_head(plan, "trtllm")}
    elif plan.mechanism == "eagle-tree":
        t = plan.tree
        cfg = {"decoding_type": "Eagle3", "max_draft_len": t["depth"],
               "speculative_model": eagle_head(plan, "trtllm"), "use_dynamic_tree": True,
               "dynamic_tree_max_topK": t["topk"], "max_total_draft_tokens": t["nodes"]}
    elif plan.mechanism == "mtp":
        cfg = {"decoding_type": "MTP", "max_draft_len": d_max}
    else:
        raise SpeedplanInputError(f"TensorRT-LLM cannot serve mechanism {plan.mechanism}")
    if schedule is not None and len(schedule) > 1:
        cfg["draft_len_schedule"] = schedule
    return cfg, notes


def render(plan: ServingPlan) -> dict[str, str]:
    """`trtllm_extra_llm_api_options.yaml` (speculative_config) and `trtllm_serve.sh`."""
    if plan.mechanism == "medusa":
        return {"trtllm_serve.sh": unsupported(plan, NAME, VERSION, (
            "TensorRT-LLM's PyTorch backend (the trtllm-serve default) has no Medusa: its "
            "speculative docs list MTP, Eagle3, NGram, DraftTarget, PARD, DFlash and SA, and "
            "MedusaDecodingConfig (TensorRT-engine backend only) is gone from llm_args.py at this version."))}
    cfg, notes = trtllm_speculative_config(plan)
    if "draft_len_schedule" in cfg:
        expressed = ("speculative_config.draft_len_schedule, keys = the LAST batch size of each range "
                     "(batch <= key uses that D; above the largest key speculation is off); "
                     f"max_draft_len = {cfg['max_draft_len']} is the batch-1 D.")
        notes.append("runtime draft-length switching is implemented for the one-model paths "
                     "(Eagle3, MTP, DraftTarget one-model) and the NGram drafter; check your build.")
    elif plan.mechanism == "eagle-tree":
        expressed = ("it is not emitted: draft_len_schedule varies a chain's draft length and its use "
                     "with use_dynamic_tree is not documented, so the tree is fixed at every batch size.")
        notes.append("dynamic tree mode is documented as unsupported for sliding-window and MLA models.")
    elif len({d for _, _, d in segments(plan)}) > 1:
        expressed = f"it cannot here (see the note), so a fixed max_draft_len = {cfg['max_draft_len']}."
    else:
        expressed = f"the schedule is flat or absent, so a fixed max_draft_len = {cfg['max_draft_len']}."
    if str(cfg.get("speculative_model", "")).startswith("<"):
        notes.append("replace the <...> placeholder with an EAGLE-3 head trained for this target.")
    if plan.mechanism == "mtp":
        notes.append("with fewer MTP layers than max_draft_len the MTP head is reused per draft step "
                     "(EAGLE-style MTP unless use_mtp_vanilla is set).")
    if plan.mechanism == "ngram":
        notes.append(f"max_matching_ngram_size = {NGRAM_LOOKUP_MAX} is not planned by speedplan.")
    top = header(plan, VERSION, expressed, notes)
    yaml_text = top + yaml({"speculative_config": cfg})
    command = shell(["trtllm-serve", hf_repo(plan.model), "--backend", "pytorch", "--tp_size", str(plan.tp),
                     "--extra_llm_api_options", "trtllm_extra_llm_api_options.yaml"])
    return {
        "trtllm_extra_llm_api_options.yaml": yaml_text,
        "trtllm_serve.sh": "#!/bin/sh\n" + top
        + "# Run from the folder holding trtllm_extra_llm_api_options.yaml.\n" + command,
    }
