"""vLLM (`vllm serve --speculative-config`): the speculative-decoding options of one `ServingPlan`.

Files: `vllm_speculative_config.json` (pure JSON) and `vllm_serve.sh`.
"""

from __future__ import annotations

import json

from speedplan.errors import SpeedplanInputError
from speedplan.serving.plan import (NGRAM_LOOKUP_MAX, NGRAM_LOOKUP_MIN, ServingPlan, eagle_head, hf_repo,
                                    medusa_head, segments)
from speedplan.serving.text import header, json_one_key_per_line, shell, unsupported

NAME = "vllm"
VERSION = (
    "vLLM main, vllm/config/speculative.py @ 002e77c "
    "(num_speculative_tokens_per_batch_size: vLLM PR #32374, released from v0.25; "
    "speculative_token_tree removed by PR #42121)"
)


def vllm_speculative_config(plan: ServingPlan) -> dict:
    """The dict for `vllm serve --speculative-config` (vllm/config/speculative.py field names)."""
    segs = segments(plan)
    k_max = max([plan.draft_len] + [d for _, _, d in segs])
    if plan.mechanism == "ngram":
        cfg = {"method": "ngram", "num_speculative_tokens": k_max,
               "prompt_lookup_max": NGRAM_LOOKUP_MAX, "prompt_lookup_min": NGRAM_LOOKUP_MIN}
    elif plan.mechanism == "draft-model":
        cfg = {"method": "draft_model", "model": hf_repo(plan.draft_model),
               "num_speculative_tokens": k_max, "draft_tensor_parallel_size": plan.tp}
    elif plan.mechanism == "eagle":
        cfg = {"method": "eagle3", "model": eagle_head(plan, "vllm"), "num_speculative_tokens": k_max}
    elif plan.mechanism == "mtp":
        cfg = {"method": "mtp", "num_speculative_tokens": k_max}
    elif plan.mechanism == "medusa":
        cfg = {"method": "medusa", "model": medusa_head(plan), "num_speculative_tokens": k_max}
    else:
        raise SpeedplanInputError(f"vLLM cannot serve mechanism {plan.mechanism}")
    if segs and any(d != k_max for _, _, d in segs):
        cfg["num_speculative_tokens_per_batch_size"] = [[lo, hi, d] for lo, hi, d in segs]
    return cfg


def render(plan: ServingPlan) -> dict[str, str]:
    """`vllm_speculative_config.json` (pure JSON) and `vllm_serve.sh` (command with comments)."""
    if plan.mechanism == "eagle-tree":
        return {"vllm_serve.sh": unsupported(plan, NAME, VERSION, (
            "vLLM has no token-tree speculation at this version: speculative_token_tree and the "
            "tree attention backend were removed (vLLM PR #42121). The nearest vLLM setup is "
            "mechanism eagle (a chain) at D = tree depth; plan that with speedplan instead."))}
    cfg = vllm_speculative_config(plan)
    notes = []
    if "num_speculative_tokens_per_batch_size" in cfg:
        expressed = ("num_speculative_tokens_per_batch_size, inclusive [first_batch, last_batch, D] "
                     f"ranges; num_speculative_tokens = {cfg['num_speculative_tokens']} is the maximum "
                     "(buffer sizing), and vLLM clips every range to it.")
        notes += ["vLLM's dynamic speculative decoding is documented as tested with EAGLE, EAGLE-3 "
                  "and DFlash; other methods may or may not follow the schedule.",
                  "vLLM turns the schedule off (static num_speculative_tokens) when "
                  "--data-parallel-size > 1."]
    elif plan.schedule:
        expressed = f"the schedule is flat: fixed num_speculative_tokens = {cfg['num_speculative_tokens']}."
    else:
        expressed = f"fixed num_speculative_tokens = {cfg['num_speculative_tokens']}."
    if plan.mechanism == "ngram":
        notes.append(f"prompt_lookup_min/max = {NGRAM_LOOKUP_MIN}/{NGRAM_LOOKUP_MAX} are not planned by "
                     "speedplan; tune them for your workload.")
    if plan.mechanism == "medusa":
        notes.append("vLLM's Medusa proposes one token per head (a chain); a Medusa tree cannot be "
                     "expressed, so D = number of heads used.")
    if plan.mechanism in ("eagle", "medusa") and cfg["model"].startswith("<"):
        notes.append("replace the <...> placeholder with a trained head for this target.")
    if plan.mechanism == "draft-model":
        notes.append("draft_tensor_parallel_size may be 1 or the target's tensor parallel size.")
    body = json.dumps(cfg, separators=(", ", ": "))
    command = shell(["vllm serve", hf_repo(plan.model), "--tensor-parallel-size", str(plan.tp),
                      "--speculative-config", body])
    return {
        "vllm_speculative_config.json": json_one_key_per_line(cfg),
        "vllm_serve.sh": "#!/bin/sh\n" + header(plan, VERSION, expressed, notes) + command,
    }
