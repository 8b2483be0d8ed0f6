"""SGLang (`python -m sglang.launch_server --speculative-*`): the speculative-decoding options of one `ServingPlan`.

Files: `sglang_launch.sh`, and `sglang_adaptive_config.json` when the plan uses the adaptive
mode. Checked against the SGLang 0.5.23 wheel: python/sglang/srt/arg_groups/fields/spec.py
(flags are field names with dashes, arg_groups/arg_utils.py), speculative/adaptive_spec_params.py
and arg_groups/speculative_hook.py. `--speculative-num-draft-tokens` counts the root token too
(num_steps + 1 for a chain), so a tree gets nodes + 1. Rechecked on SGLang's main branch (GitHub
index): every flag written is a field of arg_groups/fields/spec.py @ 015c872628e3 (or
--model-path, --tp-size, --max-running-requests), and speculative_hook.py @ 004c82e07d87 keeps the
written values (topk 1: num_draft_tokens = num_steps + 1; NGRAM: topk = max BFS breadth; adaptive:
num_steps one of the candidates), which tests/engine/test_sglang_walkthrough.py re-implements.

Two ways to set the draft length: fixed (steps, topk, draft tokens) at every batch size, or for
EAGLE, EAGLE3 and NEXTN (MTP) chains `--speculative-adaptive` with a config whose integer keys are
lower bounds of the *running* batch (the requests a step runs, at most the launch's running cap), each
holding one candidate step count, which pins that bucket's D (an `AdaptiveStepSlot` with a single
candidate never moves; a step of 0 turns drafting off). Offered batch sizes at or above the cap all run
the cap and share its bucket (`buckets`, `plan_groups`; the routing rule is cited above `graph_batch_sizes`).
"""

from __future__ import annotations

import bisect
import json

from speedplan.serving.plan import OFF, OPEN_END_BATCH, Mode, ServingPlan, Support, check_engine, eagle_head, hf_repo, segments
from speedplan.serving.text import header, shell, unsupported
from speedplan.serving.context import limit_flag

NAME = "sglang"
PLATFORMS = ("cuda", "rocm", "cpu")  # SGLang 0.5.23 runs on CUDA, ROCm and CPU (its platform checks: is_cuda, is_hip, is_cpu)
VERSION = (
    "SGLang 0.5.23 (PyPI wheel; no commit embedded): python/sglang/srt/arg_groups/fields/spec.py, "
    "speculative/adaptive_spec_params.py"
)
ADAPTIVE_FILE = "sglang_adaptive_config.json"
SPEC_MAX_RUNNING = 48  # max_running_requests when speculative decoding is on and the flag is not given
ALGORITHMS = {"ngram": "NGRAM", "draft-model": "STANDALONE", "eagle": "EAGLE", "eagle-tree": "EAGLE",
              "eagle3": "EAGLE3", "eagle3-tree": "EAGLE3", "mtp": "NEXTN"}

_FIXED = Mode("fixed", "fixed", off=False, how="--speculative-num-steps / --speculative-eagle-topk / "
              "--speculative-num-draft-tokens, the same at every batch size")
_FIXED_TREE = Mode("fixed", "fixed", off=False, trees=True, how="--speculative-num-steps = depth, "
                   "--speculative-eagle-topk = topk, --speculative-num-draft-tokens = nodes + 1, at every batch size")
_ADAPTIVE = Mode("adaptive", "any", off=True, how="--speculative-adaptive with --speculative-adaptive-config: "
                 "one candidate step count per batch-size bucket (0 = off)")


# Chains SGLang's adaptive mode runs: adaptive_unsupported_reason (speculative/adaptive_spec_params.py,
# 0.5.23 wheel) takes EAGLE and EAGLE3 with topk 1, and handle_speculative_decoding
# (arg_groups/speculative_hook.py, _resolve_speculative_algorithm_alias) has already turned NEXTN into
# EAGLE by then, so MTP chains qualify too (multi-layer EAGLE, which adaptive refuses, is turned on only
# for Step3p5, MiMoV2 and GigaChat3.5: arg_groups/overrides.py _step3p_overrides,
# model_overrides/mimo_v2.py, model_overrides/gigachat35.py; none of them a preset).
ADAPTIVE_CHAINS = ("eagle", "eagle3", "mtp")


def support(mechanism: str, mtp_layers: int = 0) -> Support | None:
    """No Medusa in SGLang; adaptive steps only for EAGLE, EAGLE3 and NEXTN (MTP) chains with topk 1
    (ADAPTIVE_CHAINS)."""
    if mechanism not in ALGORITHMS:
        return None
    if mechanism.endswith("-tree"):
        return Support((_FIXED_TREE,))
    if mechanism in ADAPTIVE_CHAINS:
        return Support((_FIXED, _ADAPTIVE))
    return Support((_FIXED,))


def draft_tp_options(mechanism: str, tp: int) -> set[int]:
    """SGLang has no draft tensor-parallel option: the draft runs at the target's TP."""
    return {tp}


def _adaptive(plan: ServingPlan) -> bool:
    """The plan runs through --speculative-adaptive: the planner chose that mode, or a hand-made
    plan (no mode) of an EAGLE, EAGLE3 or MTP chain (ADAPTIVE_CHAINS) whose D changes with the batch size."""
    chain = plan.mechanism in ADAPTIVE_CHAINS and plan.tree is None and bool(plan.schedule)
    varies = len({d for _, _, d in segments(plan)}) > 1
    return chain and (plan.mode == "adaptive" or (plan.mode == "" and varies))


# How SGLang picks an adaptive bucket. A decode step calls activate_step_by_batch(batch.seq_lens.shape[0]), the
# requests it runs (speculative/eagle_worker_v2.py forward_batch_generation: 0.5.23 wheel line 1445; main @
# 015c872628e3), and _route pads that to the next CUDA-graph batch size (bisect_left; past the largest it stays)
# and takes the slot with the largest key <= it (bisect_right - 1, clamped to the first): 0.5.23 wheel
# speculative/adaptive_spec_params.py _route, _pad_to_cuda_graph_bs, _find_closest_bs (lines 342-359); on main
# @ 015c872628e3 _route calls AdaptiveStepRouter.batch_size_key_for_batch (adaptive_step_router.py @
# a12239f6ac74), the same rule. A step runs at most --max-running-requests, which a speculative launch that leaves
# it unset gets as 48 (arg_groups/speculative_hook.py _handle_eagle_family, `if max_running_requests is None`:
# 0.5.23 wheel lines 1086-1093, main @ d9ccf6a78adc; an explicit value is kept), so a key above the cap is never
# reached. The padding list: main @ 015c872628e3 pads to the resolved decode graph sizes (eagle_worker_v2.py
# _resolve_adaptive_cuda_graph_bs: cuda_graph_config.decode.bs), for speculative decoding 1-8, 10-32 by 2, 40-64
# by 4, 72-256 by 8, then by 16, cut at the graph max_bs, which is appended (arg_groups/cuda_graph_hook.py
# generate_decode_cuda_graph_batch_sizes @ 399499ca159d); a default max_bs is cut to max_running_requests
# (0.5.23 arg_groups/memory_hook.py), and 48 is itself a graph size, so a running 48 stays 48. The 0.5.23 wheel
# pads only to an explicit --cuda-graph-bs-decode (init_states gets get_exec().graph.cuda_graph_bs_decode, None
# by default). `buckets` keys each bucket at the smallest running batch planned among those padded to one graph
# size, which reaches the same bucket padded or not.
def graph_batch_sizes(cap: int) -> list[int]:
    """SGLang's default decode CUDA-graph batch sizes with speculative decoding, for a launch that runs at
    most `cap` requests (generate_decode_cuda_graph_batch_sizes with max_bs = cap)."""
    sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, cap + 1, 16)]
    return sorted({s for s in sizes if s <= cap} | {cap})


def padded(running: int, graphs: list[int] | None) -> int:
    """`running` padded up to the next graph batch size (_pad_to_cuda_graph_bs); above the largest, itself."""
    i = bisect.bisect_left(graphs or [], running)
    return graphs[i] if graphs and i < len(graphs) else running


def route(keys: list[int], running: int, graphs: list[int] | None = None) -> int:
    """The adaptive-config key (sorted `keys`) SGLang's _route takes for a step of `running` requests."""
    return keys[max(0, bisect.bisect_right(keys, padded(running, graphs)) - 1)]


def running_cap(plan: ServingPlan) -> int:
    """The most requests a speculative step of this launch runs: its --max-running-requests
    (`max_running_flag`), else SGLang's default for speculative decoding, 48."""
    flag = max_running_flag(plan)
    return flag if flag is not None else SPEC_MAX_RUNNING


def plan_groups(batches, spec_max_running: float) -> list[int]:
    """For the planner (engine_plan): per planned batch (ascending), the index of the adaptive bucket it
    reaches whatever the keys: batches whose running batches min(B, cap) SGLang pads to one graph batch
    size, every B at or above the cap among them, share one bucket, so one D. `spec_max_running` 0 (no
    cap): the launch sets --max-running-requests to the largest planned batch (`max_running_flag`)."""
    cap = _planned_cap(spec_max_running, batches)
    graphs = graph_batch_sizes(cap)
    pads = [padded(min(int(b), cap), graphs) for b in batches]
    return [sorted(set(pads)).index(g) for g in pads]


def buckets(plan: ServingPlan) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """(key, D) of each adaptive bucket, keyed by running batch: each schedule point (B, D) runs
    min(B, cap) requests (`running_cap`); points SGLang pads to one graph batch size share the bucket
    of the first, keyed at its running batch; neighbours with equal D merge; the first key is 1.
    Also (B, D, D it gets) of each point that bucket overrides (a hand-made plan with two D at or above
    the cap; a planner's plan gives such points one D: `plan_groups`)."""
    return _buckets(plan.schedule, running_cap(plan))


def _buckets(points, cap: int) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """`buckets` of schedule `points` ((B, D), ascending) for a launch running at most `cap` requests."""
    graphs = graph_batch_sizes(cap)
    groups: list[list[int]] = []  # [padded running batch, key, D]
    lost = []
    for b, d in points:
        g = padded(min(b, cap), graphs)
        if groups and groups[-1][0] == g:
            if d != groups[-1][2]:
                lost.append((b, d, groups[-1][2]))
            continue
        groups.append([g, min(b, cap), d])
    out: list[tuple[int, int]] = []
    for _, key, d in groups:
        if not out or out[-1][1] != d:
            out.append((key, d))
    return [(1, out[0][1])] + out[1:] if out else [], lost


def _planned_cap(spec_max_running: float | None, batches) -> int:
    """The running cap a plan's launch gets: the profile's spec_max_running, or for 0 (no cap) the
    largest planned batch, which `max_running_flag` writes as --max-running-requests; None (a
    ServingPlan that names no profile's cap): SGLang's default, 48."""
    if spec_max_running is None:
        return SPEC_MAX_RUNNING
    return int(spec_max_running) if spec_max_running > 0 else int(max(batches))


def launch_ranges(points, mode: str, spec_max_running: float) -> list[tuple[int, int, int]] | None:
    """For recommendations.json (engine_outputs asks each engine module): inclusive (first B, last B,
    D) ranges of the batch size offered as an adaptive launch of schedule `points` ((B, D), ascending)
    runs them; None for a fixed launch (the planned ranges stand). B requests run min(B, cap) a
    step, which takes the bucket of the largest key at or below it (0.5.23 pads no batch unless
    --cuda-graph-bs-decode is given). B = 48-63 of a plan with D = 5 at 32 and D = 4 at 64 run the
    bucket keyed 48, so D = 4: the planned-batch ranges had said 5."""
    if mode != "adaptive" or not points:
        return None
    keyed = _buckets(points, _planned_cap(spec_max_running, [b for b, _ in points]))[0]
    ends = [k - 1 for k, _ in keyed[1:]] + [max(OPEN_END_BATCH, int(points[-1][0]))]
    return [(k, hi, d) for (k, d), hi in zip(keyed, ends)]


def adaptive_config(plan: ServingPlan) -> dict:
    """{"first running batch of each bucket": {"candidate_steps": [D]}}: slot keys are lower bounds (`buckets`)."""
    return {str(key): {"candidate_steps": [d]} for key, d in buckets(plan)[0]}


def cap_loss_note(points, cap: int, default: bool) -> str | None:
    """Where a speculative step's cap leaves the plan slower than plain decoding (which is not capped):
    among `points` (batch, speedup, sequences the launch holds there), those holding more than `cap`, so
    that a step runs only `cap`, with a speedup below 1; a sentence naming them and the way out
    (`default`: the cap is SGLang's, --max-running-requests unset); None where there are none. It says
    what the pricing shows and changes nothing."""
    slow = sorted((int(b), float(sp)) for b, sp, held in points if min(int(held), int(b)) > cap and float(sp) < 0.9995)
    if not slow:
        return None
    at = ", ".join(str(b) for b, _ in slow)
    speed = ", ".join(f"{sp:.2f}x" for _, sp in slow)
    why = ("SGLang's default with --max-running-requests unset" if default else
           f"this launch's --max-running-requests {cap}")
    return (f"at B = {at} this launch is slower than plain decoding ({speed} of it), because a speculative step "
            f"runs at most {cap} of the B requests ({why}) while plain decoding is not capped. SGLang keeps an explicit "
            f"--max-running-requests N (speculative_hook.py sets {SPEC_MAX_RUNNING} only when it is unset): set it to "
            "run more (not priced here), or serve those loads without speculation.")


def max_running_flag(plan: ServingPlan) -> int | None:
    """--max-running-requests for a plan priced with a cap other than SGLang's default of 48
    (the profile's spec_max_running, or the largest planned batch for 0 = no cap); None to
    keep the default."""
    cap = plan.spec_max_running
    if cap is None or cap == SPEC_MAX_RUNNING:
        return None
    return int(cap) if cap > 0 else max((int(b) for b, _ in plan.schedule), default=None)


# SGLang 0.5.23 wheel (no commit embedded), python/sglang/srt: --context-length (arg_groups/fields/model.py:110)
# defaults to None, the model's config (configs/model_config.py:1291 _derive_context_length). A KV pool smaller
# than that does not stop the launch: managers/tp_worker.py:550 get_worker_info only warns ("KV pool holds %d
# tokens, fewer than --context-length %d", line 560) and clamps max_req_len to the pool (line 568); the
# scheduler then aborts prompts at or above it (managers/utils.py:259 validate_input_length) and cuts
# max_new_tokens to it without a word (managers/scheduler.py:2693 init_req_max_new_tokens, line 2714), while the
# tokenizer manager checks requests against the full context (managers/tokenizer_manager.py:1333, with
# validate_total_tokens = True at line 606) and /v1/models advertises it (entrypoints/http_server.py:1993). So
# requests are cut silently: --context-length is written where the full context does not fit (`serving.context`),
# and requests above it are refused up front with an error instead.
def context_length(plan: ServingPlan) -> tuple[list[str], list[str]]:
    """`--context-length N` and its note where one sequence of the model's full context does not fit
    the KV cache the launch leaves (`ServingPlan.context_fit`); nothing where it fits."""
    return limit_flag(plan, "--context-length", lambda n, fit: (
        f"{fit.chosen()}. Without it SGLang 0.5.23 starts anyway (a warning that the KV pool holds fewer tokens than "
        "the context length), keeps advertising the full context, and aborts longer prompts or cuts max_new_tokens "
        "to the pool without a word (managers/tp_worker.py get_worker_info, managers/scheduler.py "
        f"init_req_max_new_tokens); with it, requests above {n:,} tokens are refused up front "
        "(managers/tokenizer_manager.py)."))


def sglang_args(plan: ServingPlan) -> list[str]:
    """`python -m sglang.launch_server` arguments (names from sglang arg_groups/fields/spec.py)."""
    d = plan.draft_len
    args = ["python -m sglang.launch_server", "--model-path", hf_repo(plan.model), "--tp-size", str(plan.tp)]
    args += context_length(plan)[0]
    if plan.mechanism == OFF:
        return args
    algorithm = ALGORITHMS[plan.mechanism]
    if plan.mechanism == "ngram":
        # max BFS breadth 1 keeps the n-gram draft a chain of D tokens (the default breadth 10 is a tree).
        return args + ["--speculative-algorithm", algorithm, "--speculative-num-draft-tokens", str(d + 1),
                       "--speculative-ngram-max-bfs-breadth", "1"]
    args += ["--speculative-algorithm", algorithm]
    if plan.mechanism == "draft-model":
        args += ["--speculative-draft-model-path", hf_repo(plan.draft_model or "")]
    elif plan.mechanism != "mtp":
        args += ["--speculative-draft-model-path", eagle_head(plan, NAME)]
    if plan.mechanism.endswith("-tree"):
        t = plan.tree
        return args + ["--speculative-num-steps", str(t["depth"]), "--speculative-eagle-topk", str(t["topk"]),
                       "--speculative-num-draft-tokens", str(t["nodes"] + 1)]
    if _adaptive(plan):
        # --speculative-num-steps must be one of the candidates (_init_adaptive_speculative_params); buffers are
        # sized for the largest candidate whatever it is (spec_info.py, max(candidate_steps) + 1). Each bucket
        # starts at, and keeps, its one candidate. Where SGLang turns adaptive off with a warning
        # (_maybe_disable_adaptive), this value runs at every batch size: the reference batch size's D, as
        # the fixed launch would run, not the longest draft.
        d = fallback_steps(plan)
        return args + ["--speculative-num-steps", str(d), "--speculative-eagle-topk", "1",
                       "--speculative-num-draft-tokens", str(d + 1), "--speculative-adaptive",
                       "--speculative-adaptive-config", ADAPTIVE_FILE]
    return args + ["--speculative-num-steps", str(d), "--speculative-eagle-topk", "1",
                   "--speculative-num-draft-tokens", str(d + 1)]


def fallback_steps(plan: ServingPlan) -> int:
    """--speculative-num-steps of an adaptive launch: the reference batch size's D where it is one of
    the buckets' candidates (draft_len is >= 1), else the largest candidate."""
    candidates = {x for _, x in buckets(plan)[0]}
    return plan.draft_len if plan.draft_len in candidates else max(candidates)


def _expressed(plan: ServingPlan) -> tuple[str, list[str]]:
    notes: list[str] = []
    if _adaptive(plan):
        cap, (keyed, lost) = running_cap(plan), buckets(plan)
        notes += [f"{ADAPTIVE_FILE}: each key is the first running batch of a bucket (the requests a step runs, at "
                  f"most {cap} here) and holds one candidate step count, so that bucket's D is fixed "
                  "(adaptive_spec_params.py: a slot with one candidate never moves; 0 turns drafting off). Run "
                  "from the folder holding it.",
                  "SGLang pads the running batch up to the next CUDA-graph batch size before picking the bucket "
                  "(main; 0.5.23 with --cuda-graph-bs-decode); each key is the smallest planned running batch of "
                  "its padded size, so the planned sizes get their D either way, and a batch between planned "
                  "sizes can take the next bucket's D.",
                  "adaptive mode needs topk 1 and no attention DP, multi-layer EAGLE, two-batch overlap or pdmux "
                  "(adaptive_unsupported_reason); where one of those is on, SGLang only warns (\"speculative_adaptive "
                  "disabled: ... Falling back to static speculative params\") and runs --speculative-num-steps "
                  f"{fallback_steps(plan)} (the reference batch size's D) at every batch size."]
        over = [b for b, _ in plan.schedule if b >= cap]
        if any(b > cap for b in over):
            key = route([k for k, _ in keyed], cap, graph_batch_sizes(cap))
            notes.append(f"at B >= {cap} a step runs {cap} requests (the rest wait), so every B from {cap} up, the "
                         f"planned B = {', '.join(map(str, over))} among them, takes the bucket keyed {key} "
                         f"(D = {dict(keyed)[key]}).")
        notes += [f"B = {b} was planned at D = {d}, but its step of {min(b, cap)} requests reaches the bucket of a "
                  f"smaller planned batch size, so it runs that bucket's D = {got}." for b, d, got in lost]
        if plan.drafter_kept_warm and any(d == 0 for _, d in keyed):
            notes.append("a bucket at 0 steps still runs the draft extend (with its logits) every step to keep the "
                         "draft KV cache warm (eagle_worker_v2.py), which the speedup and loss columns include; "
                         "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 skips it, and the drafter then restarts cold "
                         "when D rises again (not priced).")
        return "per batch-size bucket, through --speculative-adaptive (see the notes).", notes
    used = plan.tree["depth"] if plan.tree else plan.draft_len
    expressed = f"one fixed setting: D = {used} at every batch size."
    chain = plan.mechanism in ADAPTIVE_CHAINS and plan.tree is None
    varies = len({d for _, _, d in segments(plan)}) > 1
    if varies:
        why = ("this plan is the fixed launch (--speculative-adaptive could vary it per bucket)" if chain else
               "this mechanism has no per-batch-size option in SGLang")
        expressed = f"it cannot here: {why}, so D = {used} (the reference batch size's D) at every batch size."
    if any(d == 0 for _, _, d in segments(plan)):
        notes.append("speculation cannot be turned off for some batch sizes in a fixed launch; the plan's D = 0 "
                     "ranges run with the fixed D instead.")
    if chain and not varies:
        notes.append("--speculative-adaptive (topk 1) could vary D per batch-size bucket; this plan does not need it.")
    return expressed, notes


def render(plan: ServingPlan) -> dict[str, str]:
    """`sglang_launch.sh` (and the adaptive config when the plan uses it)."""
    check_engine(plan, NAME, f"{NAME} render")
    if plan.mechanism == OFF:
        text = header(plan, VERSION, "no --speculative-algorithm: plain decoding at every batch size.",
                      context_length(plan)[1])
        return {"sglang_launch.sh": "#!/bin/sh\n" + text + shell(sglang_args(plan))}
    if plan.mechanism not in ALGORITHMS:
        return {"sglang_launch.sh": unsupported(plan, NAME, VERSION, (
            "SGLang has no Medusa: its speculative algorithms are EAGLE, EAGLE3, NEXTN, STANDALONE, "
            "NGRAM, DFLASH, DSPARK, UNO (--speculative-algorithm help text)."))}
    expressed, notes = _expressed(plan)
    if plan.mechanism != "ngram":  # n-gram lookup loads no draft model
        notes.append("the draft runs with the target's tensor parallel size (SGLang has no draft TP option).")
    if plan.mechanism == "mtp":
        notes.append("NEXTN reads the MTP layers from the target checkpoint (no draft path) and reuses the last "
                     "one past the model's MTP layers.")
    if plan.mechanism not in ("ngram", "draft-model", "mtp") and eagle_head(plan, NAME).startswith("<"):
        notes.append("replace the <...> placeholder with a head trained for this target "
                     + ("(EAGLE-1/2 format)." if plan.mechanism.startswith("eagle-") or plan.mechanism == "eagle"
                        else "(EAGLE-3)."))
    if plan.tree:
        notes.append("--speculative-num-draft-tokens counts the root token, so it is tree nodes + 1.")
    running = max_running_flag(plan)
    if running is not None:
        notes.append(f"--max-running-requests {running}: the engine profile that priced this plan runs "
                     + (f"up to {running} requests in a speculative step (spec_max_running {running})"
                        if plan.spec_max_running else
                        f"every request in a speculative step (spec_max_running 0), so the flag is the largest "
                        f"planned batch size, {running}")
                     + f", where SGLang's default with speculative decoding is {SPEC_MAX_RUNNING}.")
    elif any(b > SPEC_MAX_RUNNING for b, _ in plan.schedule):
        profile = plan.priced_by.split(":")[0].strip()  # the profile that priced it: a calibrated one keeps its name
        priced = (f"the batch sizes above {SPEC_MAX_RUNNING} were priced that way (the others wait, engine profile "
                  f"{profile}: spec_max_running)" if profile else
                  f"the others wait at the batch sizes above {SPEC_MAX_RUNNING}")
        notes.append(f"without --max-running-requests SGLang runs at most {SPEC_MAX_RUNNING} requests at once with "
                     "speculative decoding (speculative_hook.py _handle_eagle_family, _handle_ngram), D = 0 buckets "
                     f"included; {priced}. To run more, add --max-running-requests N and price "
                     "it with a profile whose spec_max_running is N.")
    slow = cap_loss_note([(r[0], r[2], r[4] if len(r) > 4 else r[0]) for r in plan.per_batch],  # (B, speedup, held)
                         running_cap(plan), running is None)
    notes += ([slow] if slow else []) + context_length(plan)[1]
    args = sglang_args(plan) + (["--max-running-requests", str(running)] if running is not None else [])
    text = header(plan, VERSION, expressed, notes) + shell(args)
    files = {"sglang_launch.sh": "#!/bin/sh\n" + text}
    if _adaptive(plan):
        files[ADAPTIVE_FILE] = json.dumps(adaptive_config(plan), indent=1) + "\n"
    return files
