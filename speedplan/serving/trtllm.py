"""TensorRT-LLM (`trtllm-serve` with `speculative_config` YAML): the speculative-decoding options of one `ServingPlan`.

Files: `trtllm_extra_llm_api_options.yaml` and `trtllm_serve.sh`. Checked against the GitHub
index copies of tensorrt_llm/llmapi/llm_args.py @ 0004396 and _torch/speculative/utils.py @
011d093 (no release wheel could be read; docs/serving.md says what is uncertain).

`draft_len_schedule` keys are read as the LAST batch size of each range (utils.py
get_draft_len_for_batch_size: the first key >= batch; above the largest key speculation is
off). Its validator wants the smallest key's D to be max_draft_len (> 0) and no D above it, so
the planner plans D(B) <= D(smallest B) for this engine ("first-max").
"""

from __future__ import annotations

from speedplan.errors import SpeedplanInputError
from speedplan.serving.plan import (NGRAM_LOOKUP_MAX, OFF, OPEN_END_BATCH, Mode, ServingPlan, Support, check_engine,
                                    eagle_head, hf_repo, mtp_layers, segments)
from speedplan.serving.text import header, shell, unsupported, yaml

NAME = "trtllm"
PLATFORMS = ("cuda",)  # NVIDIA GPUs only: TensorRT-LLM is built on CUDA and TensorRT
YAML_FILE = "trtllm_extra_llm_api_options.yaml"
VERSION = (
    "TensorRT-LLM main (GitHub index), tensorrt_llm/llmapi/llm_args.py @ 0004396 "
    "(DecodingBaseConfig.draft_len_schedule, keys = last batch of a range) and "
    "tensorrt_llm/_torch/speculative/utils.py @ 011d093"
)
# Every name this file writes, checked on 2026-12-04 against tensorrt_llm/llmapi/llm_args.py @
# 0004396720054fd8e205cbf616f21f0b57c6b412 (GitHub index copy of main; the largest copy held):
# - DecodingBaseConfig: max_draft_len, max_total_draft_tokens, speculative_model (validation_alias
#   AliasChoices("speculative_model", "speculative_model_dir"): the old name still loads),
#   draft_len_schedule: dict[int, int] (validate_draft_len_schedule_and_sort: keys >= 1, values >= 0,
#   the smallest key's value == max_draft_len, none above it; its description: "Batch sizes 33+: use
#   draft_len=0 (implicit, speculation disabled)").
# - Eagle3DecodingConfig(EagleDecodingConfig): decoding_type Literal["Eagle3"]; max_draft_len must be > 0;
#   eagle3_one_model defaults to True and False "is ignored and falls back to True" (not written);
#   use_dynamic_tree / dynamic_tree_max_topK / max_total_draft_tokens in [max_draft_len, topK*max_draft_len].
#   validate_speculative_config converts a plain "Eagle" to Eagle3 with a warning.
# - MTPDecodingConfig: decoding_type "MTP"; num_nextn_predict_layers is init=False, "auto-populated ...
#   Do not set manually"; _remap_deprecated_num_nextn_predict_layers (mode="before") warns that it is
#   deprecated and, where max_draft_len is given too, drops it (max_draft_len wins). Older releases read D
#   from it instead: their MTPDecodingConfig has num_nextn_predict_layers: PositiveInt = 1 and
#   set_max_total_draft_tokens sets max_draft_len = num_nextn_predict_layers (index copy of llm_args.py,
#   blob 7019226376), and update_spec_config_from_model_config does it again at load (_torch/speculative/
#   utils.py, index blobs 2435382921 and 40163558784). The split came with PR #12341 (TRTLLM-11508, merged
#   2026-05-08; the 1.3.0rc27 API reference already has the new field). So both are written, equal: old
#   releases run D, not 1, and new ones read max_draft_len. NGramDecodingConfig: "NGram", max_matching_ngram_size.
# - DraftTargetDecodingConfig: decoding_type Literal["Draft_Target"]. SpeculativeConfig is a union
#   discriminated on decoding_type and update_llm_args_with_extra_dict passes the YAML through, so the
#   docs' (@ 04c8822) "DraftTarget" spelling has no mapping in this copy: follow the code.
# - TorchLlmArgs.cuda_graph_config: default_factory CudaGraphConfig, whose validator makes
#   max_batch_size 128 when none is given; a batch above it runs without a graph (cuda_graph_runner
#   _get_padded_batch returns 0 when new_batch_size > max_supported_batch_size). With a
#   draft_len_schedule, validate_speculative_config turns enable_padding on and merges the schedule's
#   keys <= max_batch_size into batch_sizes (DecodeCudaGraphConfig._merge_schedule_keys).
#   disable_overlap_scheduler defaults to False (the trtllm engine profile's overlap) and is not written;
#   BaseLlmArgs.max_batch_size defaults to 2048; KvCacheConfig.free_gpu_memory_fraction to 0.9 of the
#   memory free after the weights (trtllm-serve --kv_cache_free_gpu_memory_fraction, same default).
# - trtllm-serve takes the file with --extra_llm_api_options (tensorrt_llm/commands/serve.py @
#   4c05a74891e4df8066f08ed4ce14b0972abe4e25; newer CLIs also accept --config as an alias) and reads it
#   with yaml.safe_load (integer keys stay integers).
# get_draft_len_for_batch_size (_torch/speculative/utils.py @ 011d093, and the newest index copy): the
# first key >= batch, above every key 0; keep_drafter_warm / min_runtime_draft_len per mode: 2026 unit
# tests in the index (Eagle3 and MTP-Eagle warm at 0, Draft_Target floored at 1).
# Draft_Target at D = 0: @ 011d093 get_draft_len_for_batch_size returns max(schedule[key], min_draft_len)
# (min_draft_len above the largest key), DecodingBaseConfig.min_runtime_draft_len is 1 where
# spec_dec_mode.use_one_engine() (llm_args.py @ 011d093), and tests/unittest/_torch/speculative/
# hw_agnostic/test_min_runtime_draft_len.py @ 011d093 asserts 1 for DraftTargetDecodingConfig ({4: 4, 8: 0}
# runs 1 at batch 8); the keep-warm variant of that test (index blob 69637569920) keeps Draft_Target at 1.
# The trtllm engine profile describes that build (zero_draft_forward: keep-warm Eagle3/MTP, Draft_Target
# floored at 1), so a Draft_Target plan never has D = 0 (`_DRAFT_TARGET`: off=False) and a hand-made 0 is
# written as the 1 it runs (older builds, @ 0004396, honour 0 and skip drafting).
DECODING_TYPES = {"ngram": "NGram", "draft-model": "Draft_Target", "eagle3": "Eagle3", "eagle3-tree": "Eagle3",
                  "mtp": "MTP"}

_SCHEDULE = Mode("schedule", "first-max", off=True, how=(
    "speculative_config.draft_len_schedule {last_batch_of_range: D}; max_draft_len = the smallest batch's D "
    "(> 0), no D above it"))
_DRAFT_TARGET = Mode("schedule", "first-max", off=False, how=(
    "speculative_config.draft_len_schedule {last_batch_of_range: D}, D >= 1 (Draft_Target floors a 0 at 1: "
    "min_runtime_draft_len); max_draft_len = the smallest batch's D, no D above it"))
_FIXED = Mode("fixed", "fixed", off=False, how="max_draft_len, the same at every batch size")
_FIXED_TREE = Mode("fixed", "fixed", off=False, trees=True, how=(
    "use_dynamic_tree with max_draft_len = depth, dynamic_tree_max_topK = topk, max_total_draft_tokens = nodes"))


def support(mechanism: str, mtp_layers: int = 0) -> Support | None:
    """The PyTorch backend (trtllm-serve's default): EAGLE-3 heads only ("Eagle" is read as
    Eagle3; EAGLE-1/2 checkpoints do not load), no Medusa. draft_len_schedule is honoured by the
    one-model paths that `support_dynamic_draft_len()` lists (Eagle3, DraftTarget, MTP-Eagle);
    NGram is not listed, and vanilla MTP (checkpoints with more than one MTP layer) ignores it
    and clips max_draft_len to the layers (utils.py update_spec_config_from_model_config). At
    draft length 0 only the Eagle3 and MTP-Eagle one-model paths keep the drafter warm
    (keep_drafter_warm); Draft_Target skips drafting in older builds and drafts one token in the
    builds the trtllm profile describes (min_runtime_draft_len 1), so its plans keep D >= 1."""
    if mechanism not in DECODING_TYPES:
        return None
    if mechanism == "eagle3-tree":
        return Support((_FIXED_TREE,))
    if mechanism == "ngram":
        return Support((_FIXED,))
    if mechanism == "mtp" and mtp_layers > 1:
        return Support((Mode("fixed", "fixed", off=False, max_draft_len=mtp_layers,
                             how=f"max_draft_len <= {mtp_layers} (vanilla MTP: one module per draft token)"),))
    if mechanism == "draft-model":
        return Support((_DRAFT_TARGET,), drafter_runs_at_zero=False)
    return Support((_SCHEDULE,))


def draft_tp_options(mechanism: str, tp: int) -> set[int]:
    """The one-model DraftTarget path runs the draft inside the target's model, on its mapping
    (`_draft_target_one_model = True`; no draft TP field in DecodingBaseConfig)."""
    return {tp}


def trtllm_speculative_config(plan: ServingPlan) -> tuple[dict, list[str]]:
    """`speculative_config` for trtllm-serve (llm_args.py field names) and notes on what was changed."""
    notes: list[str] = []
    segs = segments(plan)
    d_max = plan.draft_len
    schedule: dict[int, int] | None = None
    layers = mtp_layers(plan.model)
    sup = support(plan.mechanism, layers or 1)
    varying = len({d for _, _, d in segs}) > 1
    if varying and sup is not None and sup.modes[0].shape != "first-max" and not plan.mechanism.endswith("-tree"):
        notes.append(f"{plan.mechanism} does not follow draft_len_schedule here ({sup.modes[0].how}); "
                     f"fixed D = {plan.draft_len}.")
    if plan.mechanism == "mtp" and layers and layers > 1 and d_max > layers:
        notes.append(f"vanilla MTP clips max_draft_len to the model's {layers} MTP layers.")
        d_max = layers
    if varying and sup is not None and sup.modes[0].shape == "first-max":
        first = segs[0][2]
        if first == 0:
            notes.append("the plan turns speculation off at batch 1, which draft_len_schedule cannot express "
                         f"(its smallest key must map to max_draft_len > 0); fixed D = {plan.draft_len}.")
        else:
            if any(d > first for _, _, d in segs):
                notes.append(f"TensorRT-LLM needs the smallest batch's D to be the largest, so D is capped at "
                             f"{first} where the plan had more.")
            # each range keyed by its last batch, the open last one by OPEN_END_BATCH: above the largest key
            # the engine runs D = 0 (1 for Draft_Target), so a key at the last planned batch turned
            # speculation off past it (an audit of 2026-12-04); keys above the largest CUDA-graph size
            # add no graph (DecodeCudaGraphConfig._merge_schedule_keys keeps keys <= max_batch_size)
            keyed = {1: first}  # key 1 as well: older validators require it (and it reads the same)
            keyed.update({hi: min(d, first) for _, hi, d in segs})
            if plan.mechanism == "draft-model" and 0 in keyed.values():  # a hand-made plan: planned ones are >= 1
                notes.append("the plan's D = 0 ranges are written as D = 1, which the Draft_Target builds the trtllm "
                             "profile describes would run there anyway (min_runtime_draft_len) and older builds "
                             "now run too; the tables above show the plan's 0, not the 1 written.")
                keyed = {k: max(d, 1) for k, d in keyed.items()}
            keys = sorted(keyed)  # a key whose next key has the same D adds nothing
            schedule = {k: keyed[k] for i, k in enumerate(keys)
                        if k == 1 or i + 1 == len(keys) or keyed[keys[i + 1]] != keyed[k]}
            d_max = first
    if plan.mechanism not in DECODING_TYPES:
        raise SpeedplanInputError(f"TensorRT-LLM cannot serve mechanism {plan.mechanism}")
    cfg: dict = {"decoding_type": DECODING_TYPES[plan.mechanism], "max_draft_len": d_max}
    if plan.mechanism == "mtp":  # releases before PR #12341 take D from here (default 1); newer drop it
        cfg["num_nextn_predict_layers"] = d_max
    if plan.mechanism == "ngram":
        cfg["max_matching_ngram_size"] = NGRAM_LOOKUP_MAX
    elif plan.mechanism == "draft-model":
        cfg["speculative_model"] = hf_repo(plan.draft_model or "")
    elif plan.mechanism.startswith("eagle3"):
        cfg["speculative_model"] = eagle_head(plan, NAME)
    if plan.mechanism == "eagle3-tree":
        t = plan.tree
        cfg.update(max_draft_len=t["depth"], use_dynamic_tree=True, dynamic_tree_max_topK=t["topk"],
                   max_total_draft_tokens=t["nodes"])
    if schedule is not None and len(schedule) > 1:
        cfg["draft_len_schedule"] = schedule
    return cfg, notes


# TorchLlmArgs defaults (llm_args.py @ 0004396, see above): CUDA graphs up to batch 128, at most 2048 requests.
CUDA_GRAPH_MAX_BATCH = 128
MAX_BATCH = 2048
# BaseLlmArgs.max_num_tokens (llm_args.py, GitHub index copies; trtllm-serve's --max_num_tokens defaults to
# BuildConfig's 8192): tokens a step schedules, each generation request charged 1 + its draft tokens
# (_torch/pyexecutor/scheduler, beam_width + get_draft_token_length(req)).
MAX_NUM_TOKENS = 8192


def _held_rows(plan: ServingPlan) -> list[tuple[int, int]]:
    """(requests a step runs, D) per batch size: the planner's rows (what each batch size holds,
    runs_at_batch where given; rows where nothing fits left out), else a hand-made schedule's
    listed batches."""
    rows = [(min(row[0], row[4]) if len(row) > 4 else row[0], row[1]) for row in plan.per_batch]
    rows = [(int(b), int(d)) for b, d in rows if b > 0]
    return rows or [(b, d) for b, d in plan.schedule if b < OPEN_END_BATCH]


def _largest_batch(plan: ServingPlan) -> int:
    """The most sequences the plan runs in one step (`_held_rows`; 1 where it lists none)."""
    return max((b for b, _ in _held_rows(plan)), default=1)


def _largest_step_tokens(plan: ServingPlan) -> int:
    """The most tokens one step of the plan schedules: each running request's 1 + its draft tokens
    (a chain's D at that batch size; a tree's nodes wherever it drafts), over `_held_rows`."""
    nodes = int((plan.tree or {}).get("nodes") or 0)
    return max((b * (1 + (nodes if nodes and d else d)) for b, d in _held_rows(plan)), default=0)


def launch_options(plan: ServingPlan) -> tuple[dict, list[str]]:
    """Top-level LLM API options beside speculative_config that the plan's pricing needs, and notes:
    CUDA graphs up to the largest batch planned (the trtllm engine profile prices every decode step
    as a graph replay, layer_launches 0; TensorRT-LLM captures none above batch 128 by default),
    max_batch_size above TensorRT-LLM's 2048 and max_num_tokens above its 8192 tokens a step."""
    largest, options, notes = _largest_batch(plan), {}, []
    if largest > CUDA_GRAPH_MAX_BATCH:
        options["cuda_graph_config"] = {"max_batch_size": largest}
        notes.append(f"cuda_graph_config.max_batch_size = {largest}, the largest batch planned: TensorRT-LLM captures "
                     f"decode CUDA graphs up to batch {CUDA_GRAPH_MAX_BATCH} by default and runs larger batches without "
                     "one, while the plan prices every step as a graph replay; each graph costs some GPU memory, which "
                     "speedplan's memory model leaves out.")
    if largest > MAX_BATCH:
        options["max_batch_size"] = largest
        notes.append(f"max_batch_size = {largest}: TensorRT-LLM schedules at most {MAX_BATCH} requests by default.")
    tokens = _largest_step_tokens(plan)
    if tokens > MAX_NUM_TOKENS:
        options["max_num_tokens"] = tokens
        notes.append(f"max_num_tokens = {tokens}: a step of the plan schedules up to {tokens} tokens (each request 1 + "
                     f"its draft tokens), above TensorRT-LLM's default budget of {MAX_NUM_TOKENS} a step; new requests' "
                     "context chunks share that budget and get only what the running requests leave of it: raise it for "
                     "that headroom.")
    if any(len(row) > 4 and row[4] < row[0] for row in plan.per_batch):
        notes.append("where fewer sequences run than offered, the count follows the pricing engine profile's memory rule (the "
                     "shipped trtllm profile: the weights plus kv_cache_config.free_gpu_memory_fraction, 0.9, of the memory "
                     "left free after them); TensorRT-LLM measures that free memory after activations and CUDA graphs "
                     "have taken theirs, which speedplan leaves out, so this launch may hold somewhat fewer sequences "
                     "than the rows above say.")
    return options, notes


# TensorRT-LLM's PyTorch backend when the full context does not fit (GitHub index copies): BaseLlmArgs.max_seq_len
# defaults to None (tensorrt_llm/llmapi/llm_args.py @ 0004396720054fd8e205cbf616f21f0b57c6b412; trtllm-serve
# --max_seq_len, "If unspecified, the value is deduced from the model config", commands/serve.py @ 4c05a748),
# which PyTorchModelEngine._init_max_seq_len replaces by the model's infer_max_seq_len, max_position_embeddings
# with the rope factor (_torch/pyexecutor/model_engine.py @ 1a0dc5f70054f66d892df6a964996fc5ead6f81e). The KV
# cache manager then lowers it to what its pool holds: KVCacheManager.__init__ compares each attention window
# (max_seq_len by default) with get_max_atten_window_upper_bound (the pool's blocks x tokens_per_block) and
# _validate_and_adjust_attention_windows reduces it with warnings ("Attention window size ... exceeds upper
# bound ... Reducing", "Adjusted max_seq_len to ...") (_torch/pyexecutor/resource_manager.py @
# d2a5560abdadfbdf496ce057696103e0509a71ed); create_py_executor takes the lowered value (max_seq_len =
# kv_cache_creator._max_seq_len, _torch/pyexecutor/py_executor_creator.py @ bab0f2e6eea19bcce16c805101420ef7d9d62d75)
# and the worker caps each request's max_tokens to it with a warning (_deduce_max_tokens,
# executor/base_worker.py @ 7b437aaa73bf5a44b1102aee5c631074da763b8f). Only with
# --fail_fast_on_attention_window_too_large (default off, serve.py) does it exit instead. The engine handles it
# itself, so nothing is written: a note says so and what max_seq_len would set it in advance.
def max_seq_len_note(plan: ServingPlan) -> list[str]:
    """A note where one sequence of the model's full context does not fit the KV cache the launch leaves
    (`ServingPlan.context_fit`); nothing where it fits. No option: TensorRT-LLM lowers max_seq_len itself."""
    fit = plan.context_fit
    if fit is None or fit.limit is None:
        return []
    return [f"{fit.why()}. No max_seq_len is written: TensorRT-LLM's PyTorch backend starts anyway, lowers "
            "max_seq_len (default: the full context) to what its KV pool holds with a warning (KVCacheManager, "
            "_torch/pyexecutor/resource_manager.py) and caps each request's max_tokens to it with a warning "
            f"(executor/base_worker.py). To fix the limit in advance add max_seq_len: {fit.limit} to {YAML_FILE} "
            f"(or --max_seq_len {fit.limit}); {fit.chosen()}."]


def _notes(plan: ServingPlan, cfg: dict) -> list[str]:
    notes = []
    if "draft_len_schedule" in cfg:
        last = max(cfg["draft_len_schedule"])
        notes += [f"the largest key, {last}, stands for every larger batch: above it TensorRT-LLM would run "
                  "D = 0 (1 for Draft_Target); keys above the largest CUDA-graph batch size add no graph.",
                  "older builds required key 1 (added here, it reads the same either way); builds that read the "
                  "keys as lower bounds would apply each D one range late."]
        if plan.drafter_kept_warm:
            notes.append("at draft length 0 (above the largest key, or a key set to 0) 2026 builds still run a "
                         "keep-warm draft forward for Eagle3 and MTP-Eagle (keep_drafter_warm), which the speedup and "
                         "loss columns include; older builds skipped drafting and left the drafter's KV cache stale.")
        elif plan.mechanism == "draft-model" and all(d > 0 for _, _, d in segments(plan)):
            notes.append("Draft_Target never runs D = 0 here: the builds the trtllm profile describes floor it at 1 "
                         "(min_runtime_draft_len, also above the largest key), so speedplan plans D >= 1 for it at "
                         "every batch size; where plain decoding without the draft model is faster, the loss "
                         "column says by how much.")
    older = {"Eagle3": "Eagle", "Draft_Target": "DraftTarget"}.get(DECODING_TYPES.get(plan.mechanism, ""))
    if older:
        notes.append(f"decoding_type {DECODING_TYPES[plan.mechanism]}" + (" and draft_len_schedule follow" if
                     "draft_len_schedule" in cfg else " follows") + " TensorRT-LLM main (the commits above). "
                     "Releases that read speculative_config through DecodingBaseConfig.from_dict know only MTP, "
                     "Medusa, Eagle, Lookahead, NGram, DraftTarget, SaveState, UserProvided and AUTO (index copy of "
                     "llm_args.py, blob 1090804222) and stop with \"Invalid decoding type: "
                     f"{DECODING_TYPES[plan.mechanism]}\": there write decoding_type {older}"
                     + (" and, if the build rejects draft_len_schedule, drop it: D is then max_draft_len at every "
                        "batch size." if "draft_len_schedule" in cfg else "."))
    if plan.mechanism == "mtp":
        notes.append(f"num_nextn_predict_layers = max_draft_len = {cfg['max_draft_len']}: releases before the split "
                     "of the two (PR #12341, 2026) set max_draft_len from num_nextn_predict_layers (default 1), so "
                     "without it they would run D = 1; newer releases warn that it is deprecated and use "
                     "max_draft_len.")
        notes.append("with one MTP layer (DeepSeek-V3) the MTP-Eagle path replays it max_draft_len times (any D); "
                     "with more layers vanilla MTP clips max_draft_len to them and ignores draft_len_schedule "
                     "(utils.py @ 011d093; the docs still say the two must match).")
    if str(cfg.get("speculative_model", "")).startswith("<"):
        notes.append("replace the <...> placeholder with an EAGLE-3 head trained for this target.")
    if plan.mechanism == "ngram":
        notes.append(f"max_matching_ngram_size = {NGRAM_LOOKUP_MAX} is not planned by speedplan; NGram is not among "
                     "the modes that follow draft_len_schedule, so its D is fixed.")
    return notes


def render(plan: ServingPlan) -> dict[str, str]:
    """`trtllm_extra_llm_api_options.yaml` (speculative_config) and `trtllm_serve.sh`."""
    check_engine(plan, NAME, f"{NAME} render")
    command = ["trtllm-serve", hf_repo(plan.model), "--backend", "pytorch", "--tp_size", str(plan.tp)]
    if plan.mechanism == OFF:
        options, launch_notes = launch_options(plan)  # plain steps are priced as graph replays too
        text = header(plan, VERSION, "no speculative_config: plain decoding at every batch size.",
                      launch_notes + max_seq_len_note(plan))
        return _with_options(text, command, options) if options else {"trtllm_serve.sh": "#!/bin/sh\n" + text + shell(command)}
    if plan.mechanism not in DECODING_TYPES:
        reason = ("TensorRT-LLM's PyTorch backend (the trtllm-serve default) has no Medusa: releases that had "
                  "MedusaDecodingConfig ran it on the TensorRT-engine backend only, and main (llm_args.py @ 0004396) "
                  "has no Medusa config in its SpeculativeConfig union." if plan.mechanism == "medusa" else
                  "TensorRT-LLM's PyTorch backend runs EAGLE-3 heads only: decoding_type Eagle is read as Eagle3 "
                  "and EAGLE-1/2 checkpoints do not load; plan eagle3 instead.")
        return {"trtllm_serve.sh": unsupported(plan, NAME, VERSION, reason)}
    cfg, notes = trtllm_speculative_config(plan)
    if "draft_len_schedule" in cfg:
        expressed = ("speculative_config.draft_len_schedule, keys = the LAST batch size of each range (batch <= key "
                     f"uses that D); max_draft_len = {cfg['max_draft_len']} is the batch-1 D.")
    elif plan.mechanism == "eagle3-tree":
        expressed = ("it is not emitted: draft_len_schedule varies a chain's draft length and its use with "
                     "use_dynamic_tree is not documented, so the tree is fixed at every batch size.")
    elif len({d for _, _, d in segments(plan)}) > 1:
        expressed = f"it cannot here (see the notes), so a fixed max_draft_len = {cfg['max_draft_len']}."
    else:
        expressed = f"one fixed setting: max_draft_len = {cfg['max_draft_len']} at every batch size."
    options, launch_notes = launch_options(plan)
    top = header(plan, VERSION, expressed, notes + _notes(plan, cfg) + launch_notes + max_seq_len_note(plan))
    return _with_options(top, command, {"speculative_config": cfg, **options})


def _with_options(text: str, command: list[str], options: dict) -> dict[str, str]:
    """The YAML of LLM API `options` and the trtllm-serve command that passes it, both under `text`."""
    return {
        YAML_FILE: text + yaml(options),
        "trtllm_serve.sh": "#!/bin/sh\n" + text + f"# Run from the folder holding {YAML_FILE}.\n"
        + shell(command + ["--extra_llm_api_options", YAML_FILE]),
    }
