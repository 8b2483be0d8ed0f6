"""SGLang (`python -m sglang.launch_server --speculative-*`): the speculative-decoding options of one `ServingPlan`.

Files: `sglang_launch.sh`. `--speculative-num-draft-tokens` counts the root token too
(it is `num_steps + 1` for a chain, sglang docs), so it gets nodes + 1.
"""

from __future__ import annotations

from speedplan.serving.plan import ServingPlan, eagle_head, hf_repo
from speedplan.serving.text import header, shell, unsupported

NAME = "sglang"
VERSION = (
    "SGLang main, python/sglang/srt/arg_groups/fields/spec.py @ 7e997c6 "
    "and docs/advanced_features/speculative_decoding.md @ fc6d465"
)


def sglang_args(plan: ServingPlan) -> list[str]:
    """`python -m sglang.launch_server` arguments (names from sglang arg_groups/fields/spec.py)."""
    d = plan.draft_len
    args = ["python -m sglang.launch_server", "--model-path", hf_repo(plan.model), "--tp-size", str(plan.tp)]
    if plan.mechanism == "ngram":
        # max BFS breadth 1 keeps the n-gram draft a chain of D tokens (the default breadth 10 is a tree).
        return args + ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", str(d + 1),
                       "--speculative-ngram-max-bfs-breadth", "1"]
    if plan.mechanism == "eagle-tree":
        t = plan.tree
        return args + ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                       eagle_head(plan, "sglang"), "--speculative-num-steps", str(t["depth"]),
                       "--speculative-eagle-topk", str(t["topk"]),
                       "--speculative-num-draft-tokens", str(t["nodes"] + 1)]
    algorithm, draft = {
        "draft-model": ("STANDALONE", hf_repo(plan.draft_model or "")),
        "eagle": ("EAGLE3", eagle_head(plan, "sglang")),
        "mtp": ("NEXTN", None),
    }[plan.mechanism]
    args += ["--speculative-algorithm", algorithm]
    if draft is not None:
        args += ["--speculative-draft-model-path", draft]
    return args + ["--speculative-num-steps", str(d), "--speculative-eagle-topk", "1",
                   "--speculative-num-draft-tokens", str(d + 1)]


def render(plan: ServingPlan) -> dict[str, str]:
    """`sglang_launch.sh`: one launch command; SGLang has no per-batch draft-length schedule."""
    if plan.mechanism == "medusa":
        return {"sglang_launch.sh": unsupported(plan, NAME, VERSION, (
            "SGLang has no Medusa: its speculative algorithms are EAGLE, EAGLE3, NEXTN, STANDALONE, "
            "NGRAM, DFLASH, DSPARK, UNO (--speculative-algorithm help text)."))}
    used = plan.tree["depth"] if plan.mechanism == "eagle-tree" else plan.draft_len
    expressed = (f"it cannot: SGLang has no per-batch-size draft-length option, so D = {used} "
                 "(the reference batch size's D) at every batch size.")
    notes = ["--speculative-adaptive (EAGLE/EAGLE3, topk 1) changes num_steps from measured acceptance, "
             "not from a batch-size schedule, so speedplan does not emit it.",
             "the draft runs with the target's tensor parallel size (SGLang has no draft TP option)."]
    if plan.mechanism == "mtp":
        notes.append("NEXTN reads the MTP layers from the target checkpoint; no draft path is needed "
                     "for DeepSeek-style models.")
    if plan.mechanism in ("eagle", "eagle-tree") and eagle_head(plan, "sglang").startswith("<"):
        notes.append("replace the <...> placeholder with an EAGLE-3 head trained for this target.")
    if plan.mechanism == "eagle-tree":
        notes.append("--speculative-num-draft-tokens counts the root token, so it is tree nodes + 1.")
    text = header(plan, VERSION, expressed, notes) + shell(sglang_args(plan))
    return {"sglang_launch.sh": "#!/bin/sh\n" + text}
