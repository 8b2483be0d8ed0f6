"""Serving configs for a chosen plan: vLLM, SGLang and TensorRT-LLM speculative-decoding options.

`render_vllm`, `render_sglang` and `render_trtllm` turn one `ServingPlan` into `{filename: text}`;
`write_serving_configs` writes all three engines' files. Every option name emitted here was
checked against the engine's own source or docs at the version in `ENGINE_VERSIONS`; where each
name was found is listed in docs/serving.md. A mechanism an engine cannot run gives a file that
says so instead of a command that would fail.

Conventions shared by all engines:

- The plan's schedule `((batch, D), ...)` is read as "D from this batch up to the next listed
  batch"; the first range starts at batch 1 and the last one is open (`OPEN_END_BATCH`, which
  both engines clip to their own max batch size). D = 0 means speculation off.
- A tree `{"topk", "depth", "nodes"}` counts draft nodes without the root: a chain of D drafts is
  depth D and D nodes. SGLang's `--speculative-num-draft-tokens` counts the root too (it is
  `num_steps + 1` for a chain, sglang docs), so it gets nodes + 1.
"""

from __future__ import annotations

import json
import numbers
import shlex
from dataclasses import dataclass
from pathlib import Path

from speedplan.errors import SpeedplanInputError

MECHANISMS = ("ngram", "draft-model", "eagle", "eagle-tree", "mtp", "medusa")

ENGINE_VERSIONS: dict[str, str] = {
    "vllm": (
        "vLLM main, vllm/config/speculative.py @ 002e77c "
        "(num_speculative_tokens_per_batch_size: vLLM PR #32374, released from v0.25; "
        "speculative_token_tree removed by PR #42121)"
    ),
    "sglang": (
        "SGLang main, python/sglang/srt/arg_groups/fields/spec.py @ 7e997c6 "
        "and docs/advanced_features/speculative_decoding.md @ fc6d465"
    ),
    "trtllm": (
        "TensorRT-LLM main, tensorrt_llm/llmapi/llm_args.py @ 0004396 "
        "(DecodingBaseConfig.draft_len_schedule, upper-bound keys) "
        "and docs/source/features/speculative-decoding.md @ 04c8822"
    ),
}

# Batch size that stands for "and every larger batch": vLLM and TensorRT-LLM both clip schedule
# ranges to their configured max batch size, so a large end changes nothing else.
OPEN_END_BATCH = 65536

# n-gram lookup window; speedplan does not plan it (acceptance is workload-bound), so these are
# fixed, stated defaults: vLLM's own docs example uses prompt_lookup_max=4.
NGRAM_LOOKUP_MAX = 4
NGRAM_LOOKUP_MIN = 2

# speedplan preset -> Hugging Face repo served (instruct variants of the preset architectures).
HF_REPOS: dict[str, str] = {
    "smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "llama-3.2-1b": "meta-llama/Llama-3.2-1B-Instruct",
    "llama-3.2-3b": "meta-llama/Llama-3.2-3B-Instruct",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3.1-405b": "meta-llama/Llama-3.1-405B-Instruct",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
}

# Public EAGLE-3 heads per engine, only where that engine's own docs/tests use the head for that
# target (checkpoint formats differ between engines). Anything else gets a placeholder.
EAGLE3_HEADS: dict[str, dict[str, str]] = {
    "vllm": {
        "llama-3.1-8b": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "qwen3-8b": "RedHatAI/Qwen3-8B-speculator.eagle3",
        "qwen3-32b": "RedHatAI/Qwen3-32B-speculator.eagle3",
    },
    "sglang": {"llama-3.1-8b": "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"},
    "trtllm": {"llama-3.1-8b": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
}


@dataclass(frozen=True)
class ServingPlan:
    """The plan to serve: mechanism, draft length D at the reference batch, per-batch schedule."""

    model: str  # target: speedplan preset name (e.g. "llama-3.1-70b") or a path
    mechanism: str  # one of MECHANISMS
    draft_len: int  # D at the reference batch size (>= 1)
    schedule: tuple[tuple[int, int], ...]  # ((batch, draft_len), ...) sorted by batch; 0 = off
    tp: int = 1
    draft_model: str | None = None  # for draft-model: preset name or path of the draft
    tree: dict | None = None  # for eagle-tree / medusa: {"topk": int, "depth": int, "nodes": int}
    hardware: str = ""  # for comments only

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise SpeedplanInputError(
                f"unknown mechanism {self.mechanism!r}; expected one of {', '.join(MECHANISMS)}"
            )
        if not _is_int(self.draft_len) or self.draft_len < 1:
            raise SpeedplanInputError(f"draft_len must be an integer >= 1, got {self.draft_len!r}")
        if not _is_int(self.tp) or self.tp < 1:
            raise SpeedplanInputError(f"tp must be an integer >= 1, got {self.tp!r}")
        if not str(self.model).strip():
            raise SpeedplanInputError("serving plan needs a target model")
        schedule = tuple(tuple(entry) for entry in self.schedule)
        for entry in schedule:
            if len(entry) != 2 or not all(_is_int(x) for x in entry) or entry[0] < 1 or entry[1] < 0:
                raise SpeedplanInputError(
                    f"schedule entries must be (batch >= 1, draft_len >= 0) integers, got {entry!r}"
                )
        batches = [b for b, _ in schedule]
        if batches != sorted(set(batches)):
            raise SpeedplanInputError(f"schedule batches must be strictly increasing, got {batches}")
        object.__setattr__(self, "schedule", tuple((int(b), int(d)) for b, d in schedule))
        object.__setattr__(self, "draft_len", int(self.draft_len))
        object.__setattr__(self, "tp", int(self.tp))
        if self.mechanism == "draft-model" and not self.draft_model:
            raise SpeedplanInputError("mechanism draft-model needs draft_model (preset name or path)")
        if self.mechanism == "eagle-tree" and self.tree is None:
            raise SpeedplanInputError("mechanism eagle-tree needs tree={'topk', 'depth', 'nodes'}")
        if self.tree is not None:
            _check_tree(self.tree, self.mechanism)
            object.__setattr__(self, "tree", {k: int(self.tree[k]) for k in ("topk", "depth", "nodes")})
        if self.mechanism == "mtp":
            _check_has_mtp(self.model)


def _is_int(x: object) -> bool:
    """Python or numpy integers (planner schedules come out of DataFrames), never bools."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check_tree(tree: dict, mechanism: str) -> None:
    for key in ("topk", "depth", "nodes"):
        if not _is_int(tree.get(key)) or tree[key] < 1:
            raise SpeedplanInputError(f"tree[{key!r}] must be an integer >= 1, got {tree.get(key)!r}")
    # EAGLE-2 keeps at most topk nodes per level, so a dynamic tree holds depth..topk*depth nodes
    # (TensorRT-LLM enforces the same bounds on max_total_draft_tokens).
    if mechanism == "eagle-tree" and not tree["depth"] <= tree["nodes"] <= tree["topk"] * tree["depth"]:
        raise SpeedplanInputError(
            f"tree nodes must lie in [depth, topk*depth] = [{tree['depth']}, "
            f"{tree['topk'] * tree['depth']}], got {tree['nodes']}"
        )


def _check_has_mtp(model: str) -> None:
    """A preset without MTP layers cannot serve mechanism mtp; paths are left to the engine."""
    key = str(model).strip().lower()
    if key not in HF_REPOS:
        return
    from speedplan.specs.model import get_model

    if get_model(key).mtp_layers == 0:
        raise SpeedplanInputError(f"model {model} has no MTP layers; mechanism mtp needs one that does")


# ---- shared pieces ---------------------------------------------------------------------------
def hf_repo(model: str) -> str:
    """Hugging Face repo id for a speedplan preset; anything else (a path or repo id) as given."""
    return HF_REPOS.get(str(model).strip().lower(), str(model))


def _preset(model: str) -> str:
    return str(model).strip().lower()


def _eagle_head(plan: ServingPlan, engine: str) -> str:
    return EAGLE3_HEADS[engine].get(_preset(plan.model), f"<path-to-eagle3-head-for-{plan.model}>")


def _medusa_head(plan: ServingPlan) -> str:
    return f"<path-to-medusa-heads-for-{plan.model}>"


def segments(plan: ServingPlan) -> list[tuple[int, int, int]]:
    """Inclusive (first_batch, last_batch, D) ranges covering 1..OPEN_END_BATCH; equal neighbours merged."""
    if not plan.schedule:
        return []
    points = list(plan.schedule)
    out: list[tuple[int, int, int]] = []
    for i, (batch, d) in enumerate(points):
        lo = 1 if i == 0 else batch
        hi = points[i + 1][0] - 1 if i + 1 < len(points) else max(OPEN_END_BATCH, batch)
        if out and out[-1][2] == d:
            out[-1] = (out[-1][0], hi, d)
        else:
            out.append((lo, hi, d))
    return out


def _header(plan: ServingPlan, engine: str, expressed: str, notes: list[str]) -> str:
    """Comment block at the top of every file: provenance, the plan's schedule, engine limits."""
    lines = [
        f"Generated by speedplan for {plan.model} ({hf_repo(plan.model)})"
        + (f" on {plan.hardware}" if plan.hardware else "")
        + f", tensor parallel {plan.tp}.",
        f"Mechanism: {plan.mechanism}; draft length D = {plan.draft_len} at the reference batch size"
        + (f"; tree {json.dumps(plan.tree, sort_keys=True)}" if plan.tree else "")
        + ".",
        f"Engine version checked against: {ENGINE_VERSIONS[engine]}.",
        "Per-batch draft length planned by speedplan:",
        "  batches          D",
    ]
    if plan.schedule:
        lines += [f"  {lo:>5}-{hi:<7}  {d:>3}" + ("  (speculation off)" if d == 0 else "")
                  for lo, hi, d in segments(plan)]
    else:
        lines.append(f"  (no schedule: D = {plan.draft_len} at every batch size)")
    lines.append(f"How this engine gets it: {expressed}")
    lines += [f"Note: {n}" for n in notes]
    return "\n".join("# " + line for line in lines) + "\n"


def _shell(args: list[str]) -> str:
    """Program, then one `--flag value` pair per continued line; every value shell-quoted."""
    lines = [args[0]]
    for arg in args[1:]:
        if lines[-1].startswith("--") and " " not in lines[-1] and not arg.startswith("--"):
            lines[-1] += " " + shlex.quote(arg)
        else:
            lines.append(shlex.quote(arg))
    return " \\\n  ".join(lines) + "\n"


def _unsupported(plan: ServingPlan, engine: str, reason: str) -> str:
    text = _header(plan, engine, "not at all: this engine cannot run this mechanism.", [reason])
    return "#!/bin/sh\n" + text + (
        f'echo "speedplan: {engine} does not support mechanism {plan.mechanism}; '
        'see the comment above." >&2\n'
        "exit 1\n"
    )


# ---- vLLM ------------------------------------------------------------------------------------
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
        cfg = {"method": "eagle3", "model": _eagle_head(plan, "vllm"), "num_speculative_tokens": k_max}
    elif plan.mechanism == "mtp":
        cfg = {"method": "mtp", "num_speculative_tokens": k_max}
    elif plan.mechanism == "medusa":
        cfg = {"method": "medusa", "model": _medusa_head(plan), "num_speculative_tokens": k_max}
    else:
        raise SpeedplanInputError(f"vLLM cannot serve mechanism {plan.mechanism}")
    if segs and any(d != k_max for _, _, d in segs):
        cfg["num_speculative_tokens_per_batch_size"] = [[lo, hi, d] for lo, hi, d in segs]
    return cfg


def _json_one_key_per_line(cfg: dict) -> str:
    return "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in cfg.items()) + "\n}\n"


def render_vllm(plan: ServingPlan) -> dict[str, str]:
    """`vllm_speculative_config.json` (pure JSON) and `vllm_serve.sh` (command with comments)."""
    if plan.mechanism == "eagle-tree":
        return {"vllm_serve.sh": _unsupported(plan, "vllm", (
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
    command = _shell(["vllm serve", hf_repo(plan.model), "--tensor-parallel-size", str(plan.tp),
                      "--speculative-config", body])
    return {
        "vllm_speculative_config.json": _json_one_key_per_line(cfg),
        "vllm_serve.sh": "#!/bin/sh\n" + _header(plan, "vllm", expressed, notes) + command,
    }


# ---- SGLang ----------------------------------------------------------------------------------
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
                       _eagle_head(plan, "sglang"), "--speculative-num-steps", str(t["depth"]),
                       "--speculative-eagle-topk", str(t["topk"]),
                       "--speculative-num-draft-tokens", str(t["nodes"] + 1)]
    algorithm, draft = {
        "draft-model": ("STANDALONE", hf_repo(plan.draft_model or "")),
        "eagle": ("EAGLE3", _eagle_head(plan, "sglang")),
        "mtp": ("NEXTN", None),
    }[plan.mechanism]
    args += ["--speculative-algorithm", algorithm]
    if draft is not None:
        args += ["--speculative-draft-model-path", draft]
    return args + ["--speculative-num-steps", str(d), "--speculative-eagle-topk", "1",
                   "--speculative-num-draft-tokens", str(d + 1)]


def render_sglang(plan: ServingPlan) -> dict[str, str]:
    """`sglang_launch.sh`: one launch command; SGLang has no per-batch draft-length schedule."""
    if plan.mechanism == "medusa":
        return {"sglang_launch.sh": _unsupported(plan, "sglang", (
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
    if plan.mechanism in ("eagle", "eagle-tree") and _eagle_head(plan, "sglang").startswith("<"):
        notes.append("replace the <...> placeholder with an EAGLE-3 head trained for this target.")
    if plan.mechanism == "eagle-tree":
        notes.append("--speculative-num-draft-tokens counts the root token, so it is tree nodes + 1.")
    text = _header(plan, "sglang", expressed, notes) + _shell(sglang_args(plan))
    return {"sglang_launch.sh": "#!/bin/sh\n" + text}


# ---- TensorRT-LLM ----------------------------------------------------------------------------
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
               "speculative_model": _eagle_head(plan, "trtllm")}
    elif plan.mechanism == "eagle-tree":
        t = plan.tree
        cfg = {"decoding_type": "Eagle3", "max_draft_len": t["depth"],
               "speculative_model": _eagle_head(plan, "trtllm"), "use_dynamic_tree": True,
               "dynamic_tree_max_topK": t["topk"], "max_total_draft_tokens": t["nodes"]}
    elif plan.mechanism == "mtp":
        cfg = {"decoding_type": "MTP", "max_draft_len": d_max}
    else:
        raise SpeedplanInputError(f"TensorRT-LLM cannot serve mechanism {plan.mechanism}")
    if schedule is not None and len(schedule) > 1:
        cfg["draft_len_schedule"] = schedule
    return cfg, notes


def _yaml(value: object, indent: int = 0) -> str:
    """The small YAML subset these configs need: nested mappings of scalars."""
    pad = "  " * indent
    out = ""
    for key, v in value.items():  # type: ignore[union-attr]
        if isinstance(v, dict):
            out += f"{pad}{key}:\n" + _yaml(v, indent + 1)
        elif isinstance(v, bool):
            out += f"{pad}{key}: {'true' if v else 'false'}\n"
        elif isinstance(v, int):
            out += f"{pad}{key}: {v}\n"
        else:
            out += f"{pad}{key}: {json.dumps(str(v))}\n"
    return out


def render_trtllm(plan: ServingPlan) -> dict[str, str]:
    """`trtllm_extra_llm_api_options.yaml` (speculative_config) and `trtllm_serve.sh`."""
    if plan.mechanism == "medusa":
        return {"trtllm_serve.sh": _unsupported(plan, "trtllm", (
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
    header = _header(plan, "trtllm", expressed, notes)
    yaml_text = header + _yaml({"speculative_config": cfg})
    command = _shell(["trtllm-serve", hf_repo(plan.model), "--backend", "pytorch", "--tp_size", str(plan.tp),
                      "--extra_llm_api_options", "trtllm_extra_llm_api_options.yaml"])
    return {
        "trtllm_extra_llm_api_options.yaml": yaml_text,
        "trtllm_serve.sh": "#!/bin/sh\n" + header
        + "# Run from the folder holding trtllm_extra_llm_api_options.yaml.\n" + command,
    }


# ---- all engines -----------------------------------------------------------------------------
def write_serving_configs(plan: ServingPlan, out_dir: Path) -> list[Path]:
    """Render every engine first (bad input fails before anything is written), then write the files."""
    files: dict[str, str] = {}
    for render in (render_vllm, render_sglang, render_trtllm):
        files.update(render(plan))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        path = out_dir / name
        path.write_text(text)
        if name.endswith(".sh"):
            path.chmod(0o755)
        paths.append(path)
    return paths
