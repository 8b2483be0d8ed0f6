"""The planner: sweep mechanism × D × B × context into one tidy DataFrame, then read off the
Pareto frontier, the best configuration per batch size and the pick under a latency SLO.

Speculation is part of the step, never a multiplier on a finished table:

    t_step = engine step (speedplan.engine.step) of: t_verify(B·(1+D) tokens, or B·(N+1) for a
             tree) + t_draft(B, D) + sampling + un-captured launches + exposed host work
    tokens/s/user = AL / t_step     tokens/s/GPU = R·AL / (t_step · gpus)
    speedup = (R·AL / t_step) / (B / t_plain), with t_plain the plain decoding step of the same engine

B is the requests in flight; R = B requests run in a step, except that an engine with a
speculative cap (`spec_max_running`: SGLang runs at most 48 by default) runs R = min(B, cap)
in a speculative step, priced at R, while the others wait.

Times are seconds, throughputs tokens per second.
"""

from __future__ import annotations

import datetime as _dt
import numbers
import os
import uuid
from dataclasses import replace
from pathlib import Path

import pandas as pd

from speedplan import __version__
from speedplan.plan.acceptance import Acceptance
from speedplan.specs.trace_records import MAX_DRAFT
from speedplan.cost.ops import CostModel, load_cost_model, profile_name
from speedplan.cost.weights import weight_bytes_per_rank
from speedplan.errors import SpeedplanInputError
from speedplan.engine.profile import DEFAULT_ENGINE, EngineProfile, get_engine
from speedplan.plan.mechanisms import REGISTRY, Mechanism, parse_mechanism
from speedplan.plan.mechanisms.draft_model import tp_problem
from speedplan.plan.mechanisms.heads import Eagle3Head
from speedplan.plan.api_checks import sweep_result
from speedplan.plan.pricing import price_grid, priced_frame
from speedplan.plan.acceptance_notes import measured_elsewhere, planned_name
from speedplan.plan.drafter_positions import drafter_context_cautions
from speedplan.plan.grid import drop_pointless, mechanism_grid
from speedplan.plan.result import SweepResult  # noqa: F401 (the library's name for it)
from speedplan.plan.temperature import at_temperature, check_temperature
from speedplan.plan.sweep_inputs import acceptance_arg, axis, check_grid_size, integer, mechanism_specs
from speedplan.specs.model import ModelSpec, get_model
from speedplan.specs.fallback import describe_fit

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_DRAFT_LENS = tuple(range(0, 9))
DEFAULT_TREE_NODES = (8, 16, 32, 64)


def reprice(result: SweepResult, engine: str | EngineProfile) -> SweepResult:
    """The same sweep priced through another engine profile: the kernels, acceptance and
    memory per row are reused (they do not depend on the engine); the step model and what fits
    (the profile's memory rule) are applied again. Frontier, best per batch and SLO pick are read
    off the new frame."""
    sweep_result(result, "reprice")
    engine = get_engine(engine)
    if result.engine is not None and engine.prices_like(result.engine):
        return result
    if result.pricing is None:
        raise SpeedplanInputError("reprice needs a SweepResult made by sweep() in this process (one rebuilt from "
                                  "its tables has no pricing to reuse)")
    pricings, hw, target, tp, cost = result.pricing
    sliding = target.local_layers or any(getattr(getattr(p.mech, "draft", None), "local_layers", 0) for p in pricings)
    if sliding and any(p.window_pool != engine.memory.window_pool for p in pricings):
        # another sliding-window pool: every step's memory changes (`ModelSpec.kv_bytes_per_rank`)
        pricings = [price_grid(p.mech, p.grid, cost, target, tp, engine, p.temperature) for p in pricings]
    elif any(p.mech is not None and p.spec_cap != engine.terms["spec_max_running"].value for p in pricings):
        # another speculative cap: speculative steps run another number of requests
        pricings = [p if p.mech is None else price_grid(p.mech, p.grid, cost, target, tp, engine, p.temperature)
                    for p in pricings]
    frame = same_rows(priced_frame(pricings, engine, hw, target, tp), result.frame)
    return SweepResult(frame, None, None, None, {**result.meta, **engine.meta()}, result.pricing, engine).read_tables()


def same_rows(full: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """`full` (a repricing of every point the sweep priced) cut to the rows a caller kept in
    `kept`, the sweep's frame filtered by its index; refused where the index no longer names them."""
    if len(kept) == len(full) and kept.index.equals(full.index):
        return full
    keys = ["mechanism", "draft_len", "batch", "context"]
    if not kept.index.isin(full.index).all() or not (
            full.loc[kept.index, keys].to_numpy() == kept[keys].to_numpy()).all():
        raise SpeedplanInputError("the SweepResult's frame was filtered and re-indexed: keep the index speedplan.sweep "
                                  "gave its rows (filter with a mask; no reset_index) so that other engines' plans "
                                  "price the same rows")
    return full.loc[kept.index]


def _one_drafter(acceptance) -> bool:
    """Whether `acceptance` came from a source that measured one drafter (a scrape, a log, a trace)."""
    from speedplan.plan.acceptance_sources import ONE_DRAFTER_SOURCES

    return acceptance.source.startswith(ONE_DRAFTER_SOURCES)


def _narrower_checkpoint(checkpoint: str, priced: str, hw) -> str:
    """"" or, where a GPU prices a checkpoint in a wider dtype than its own (fp8 on an A100, which has
    no fp8 peak), what that does to the figures. (A CPU prices bf16 as fp32: the runtime runs fp32.)"""
    from speedplan.specs.hardware import DTYPE_BYTES

    if DTYPE_BYTES[checkpoint] >= DTYPE_BYTES[priced] or hw.platform == "cpu":
        return ""
    return (f"its {checkpoint} checkpoint priced as {priced}: {hw.name} has no {checkpoint} peak; engines may keep {checkpoint} "
            f"weights there (vLLM's weight-only Marlin kernels), so weight memory and memory-bound steps are priced high")


def default_mechanisms(target: ModelSpec, tp: int = 1) -> tuple[list[Mechanism], dict[str, str]]:
    """What a sweep of `target` at `tp` that names no mechanism prices, each with its published
    default acceptance, and those it leaves out with the reason (`speedplan mechanisms --model`)."""
    return _mechanisms(None, target, None, tp)


def _mechanisms(specs, target: ModelSpec, acceptance, tp: int = 1) -> tuple[list[Mechanism], dict[str, str]]:
    """The mechanisms to sweep and, when none were named, those skipped with the reason. A
    mechanism named explicitly that cannot run is an error (its `build` says why).

    User acceptance is looked up by label, then mechanism name, then head family (so
    `eagle3:...` reaches eagle3-tree too), then "*". A draft model whose TP the spec does not
    fix is swept at every draft TP some serving engine runs it at (`serving.draft_tp_choices`;
    the target's TP always), each priced with its own all-reduces."""
    from speedplan.serving import draft_tp_choices  # serving imports no planner module but mechanisms

    skipped: dict[str, str] = {}
    defaulted = specs is None  # not named: one that cannot run is skipped with its reason, not refused
    if specs is None:
        specs = []
        for name, cls in REGISTRY.items():
            reason = cls.skip_by_default(target)
            if reason:
                skipped[name] = reason
            else:
                specs.append(name)
        skipped.update(_borrowed_heads(specs, target, acceptance))
        specs = [s for s in specs if s not in skipped]
    mechs: list[Mechanism] = []
    used: set[str] = set()
    bare: list[str] = []  # the mechanisms the bare --acceptance (key "*") applies to
    for spec in specs:
        if isinstance(spec, Mechanism):  # built by the caller (e.g. validation's fitted drafters)
            mechs.append(spec)
            continue
        name = spec.split(":")[0].strip().lower()
        if isinstance(acceptance, dict):
            keys = _acceptance_keys(acceptance, spec)
            used.update(keys)
            bare += [spec.strip().lower()] if keys[:1] == ["*"] else []
            user_acc = acceptance[keys[0]] if keys else None
        else:
            user_acc = acceptance
        mech = parse_mechanism(spec, target, user_acc)
        label = mech.label.lower()
        if isinstance(acceptance, dict) and label in acceptance and label not in keys:
            used.add(label)  # a bare `draft-model` resolves to its default draft, which the key names
            mech = parse_mechanism(spec, target, acceptance[label])
        if (getattr(mech, "draft_tp", None) or 0) > tp:
            raise SpeedplanInputError(f"mechanism {spec}: draft TP {mech.draft_tp} above the target's TP {tp}: the "
                                      "engines run the drafter on the target's GPUs (its TP or fewer)")
        if getattr(mech, "draft_tp", None) == tp:
            mech = replace(mech, draft_tp=None)  # the target's TP is the unmarked default
        head = _configured_head(mech, spec)
        if head is not None and tp_problem(head, tp):
            # vLLM runs an EAGLE head at the target's TP unless told otherwise (vllm/config/speculative.py
            # _verify_and_get_draft_tp: speculative_draft_tensor_parallel_size unset -> the target's)
            try:
                head.check_tp(tp, option="TP")
            except SpeedplanInputError as e:
                raise SpeedplanInputError(f"mechanism {spec}: {e}; the engines run an EAGLE head at the target's "
                                          "TP") from None
        if name == "draft-model" and mech.draft_tp is None:  # each draft TP an engine runs it at that its shapes split over
            runs = [t for t in [tp, *sorted(draft_tp_choices(name, tp) - {tp})] if not tp_problem(mech.draft, t)]
            why = f"the draft {mech.draft.name} does not split over the TP the engines run it at ({tp_problem(mech.draft, tp)})"
            if not runs and defaulted:
                skipped[name] = why
            elif not runs:
                raise SpeedplanInputError(f"mechanism {spec}: {why}")
            mechs += [replace(mech, draft_tp=None if t == tp else t) for t in runs]
        else:
            mechs.append(mech)
    measured = acceptance.get("*") if isinstance(acceptance, dict) else None
    if len(bare) > 1 and measured is not None and _one_drafter(measured):
        # a server's counters (or a trace) measured the drafter it ran, not every mechanism swept
        kind, _, path = measured.source.split(" (")[0].partition(": ")
        ran = planned_name(measured.measured_by[0]) if measured.measured_by else None  # the trace's own drafter
        example = ran if ran in bare else "eagle3" if "eagle3" in bare else bare[0]
        raise SpeedplanInputError(f"--acceptance {path}: a {kind} file measures the one drafter that ran; {len(bare)} "
                                  f"mechanisms are swept ({', '.join(bare)}): prefix it with that one's name "
                                  f"({example}:{path}), or sweep that mechanism alone")
    unused = sorted(set(acceptance) - used - {"*"}) if isinstance(acceptance, dict) else []
    if unused and all(isinstance(s, str) for s in specs):
        why = "; ".join(f"{k}: {skipped[k]}" for k in unused if k in skipped)
        raise SpeedplanInputError(
            f"--acceptance {unused[0]}:...: no swept mechanism uses it (swept: {', '.join(m.label for m in mechs)})"
            + (f"; {why}" if why else ""))
    return mechs, skipped


def _acceptance_keys(acceptance: dict, spec: str) -> list[str]:
    """The keys of a user's {key: Acceptance} that reach mechanism `spec`, most specific first: the
    spec itself, without its ",tp=N" (acceptance is the draft's, at any TP), its mechanism's name, its
    head family (`eagle3:` reaches eagle3-tree), then "*"."""
    name, spec = spec.split(":")[0].strip().lower(), spec.strip().lower()
    family = REGISTRY[name].family_name() if name in REGISTRY else name
    return [k for k in dict.fromkeys((spec, spec.split(",")[0].strip(), name, family, "*")) if k in acceptance]


def _borrowed_heads(names: list[str], target: ModelSpec, acceptance) -> dict[str, str]:
    """Trained-drafter mechanisms (EAGLE, EAGLE-3, their trees, MTP) a default sweep leaves out, with why, comparing
    like with like by how near their published acceptance is to this target:

    2. a row measured on this target (qwen3-30b-a3b's EAGLE-3, deepseek-v3's MTP);
    1. MTP on a model that ships MTP layers, with DeepSeek-V3's rows (deepseek-v3.2, glm-4.7-flash): the model's
       own drafter, measured on a sibling;
    0. a head whose only row is another target's (Llama-3.1-8B's EAGLE-3, Vicuna-7B's EAGLE-1/2): no such head is
       published for this target, and its acceptance is another model's.

    A family below the best level present is left out, unless --acceptance reaches it or it is named. Where every
    family is at one level, every one keeps its fallback."""
    from speedplan.plan.defaults import HEADS, MTP_ROW, head_row_for, mtp_row_for

    levels = {f: 2 if head_row_for(f, target.name) else 0
              for f in {REGISTRY[n].family_name() for n in names} & {"eagle", "eagle3"}}
    if "mtp" in names and target.mtp_layers > 0:
        levels["mtp"] = 2 if mtp_row_for(target.name) else 1
    best = max(levels.values(), default=0)
    above = {2: "has its own", 1: "runs the model's own MTP layers (on DeepSeek-V3's rows)"}
    out = {}
    for name in names:
        family = REGISTRY[name].family_name()
        given = acceptance is not None and (not isinstance(acceptance, dict) or bool(_acceptance_keys(acceptance, name)))
        if family not in levels or levels[family] >= best or given:
            continue
        if family == "mtp":
            whose = f"the mtp rows are DeepSeek-V3's, {MTP_ROW}"
        else:
            row = next(p.row for p in HEADS if p.family == family and p.target is None)
            whose = f"the {family} family's row is another target's: {row.split(': ', 1)[-1]}"
        better = sorted(f for f, v in levels.items() if v == best)
        out[name] = (f"no published acceptance for {target.name} ({whose}), while {', '.join(better)} "
                     f"{above[best]}; name it (--mechanism {name}) or give its acceptance (--acceptance {name}:...) to "
                     "price it")
    return out


def _configured_head(mech: Mechanism, spec) -> ModelSpec | None:
    """The layer shape of an EAGLE or EAGLE-3 head read from its own config.json (None for a
    head of the target's dimensions, which splits wherever the target does)."""
    head = getattr(mech, "head", None)
    if isinstance(head, Eagle3Head):
        return head.layer if head.source.startswith("config") else None
    if mech.name in ("eagle", "eagle-tree") and isinstance(spec, str) and "config=" in spec:
        return mech.draft_shape()
    return None


def _mechanism_meta(mechs: list[Mechanism], tp: int) -> dict:
    """What the planner and the report need to know about each swept label beyond its rows."""
    return {
        "families": {m.label: m.family_name() for m in mechs},
        "published_acceptance": [m.label for m in mechs if str(m.acceptance_source).startswith("published")],
        "draft_models": {m.label: {"model": m.draft.name, "serve_as": m.draft.serve_as(), "tp": m.draft_tp or tp}
                         for m in mechs if m.name == "draft-model"},
        "heads": {m.label: m.head.describe() for m in mechs if getattr(m, "head", None) is not None},
    }


def sweep(
    model: str | ModelSpec = "llama-3.1-8b",
    hardware: str | CostModel = "h100-sxm",
    mechanisms=None,
    batches=DEFAULT_BATCHES,
    draft_lens=DEFAULT_DRAFT_LENS,
    contexts=(4096,),
    tp: int = 1,
    acceptance: Acceptance | dict[str, Acceptance] | None = None,
    tree_nodes=DEFAULT_TREE_NODES,
    min_tokens_per_user: float | None = None,
    command: str = "",
    engine: str | EngineProfile = DEFAULT_ENGINE,
    temperature: float = 0.0,
) -> SweepResult:
    """Price every (mechanism, D, B, context) point and rank them (times in seconds, rates in tokens/s).

    batches: concurrent requests B; draft_lens: drafted tokens D (a tree's depth); contexts: tokens
    of KV per sequence; tree_nodes: draft nodes N a tree verifies (root excluded); tp: GPUs per
    replica; min_tokens_per_user: an SLO, tokens/s per user; engine: the profile that prices each
    step (a name, a calibrate JSON or an EngineProfile). `mechanisms`: specs such as "eagle" or
    "draft-model:llama-3.2-1b" ("draft-model" alone takes the target's usual small sibling); None
    sweeps every one that applies (the others, with why, in `meta["skipped"]`). `acceptance`: one
    Acceptance for every mechanism, or a dict per mechanism name (key "*" for the rest).
    `temperature`: the sampling temperature served; above 0 the published defaults move to it
    (`speedplan.plan.temperature`), an acceptance given here is taken as measured at it, and every
    step's sampler takes the engine profile's sample_passes_random more passes over the logits.

    >>> r = sweep("llama-3.1-8b", "h100-sxm", ["eagle"], [1, 64], range(0, 5))
    >>> sorted(r.frame.mechanism.unique())
    ['eagle', 'none']
    """
    if not isinstance(model, (str, os.PathLike, ModelSpec)):
        raise SpeedplanInputError(f"model: expected a preset name, a config.json path or a ModelSpec, got "
                                  f"{type(model).__name__} {str(model)[:60]!r}")
    if not (isinstance(hardware, (str, Path)) or hasattr(hardware, "hardware")):  # a CostModel, or one like it
        named = f" (give its name, {hardware.name!r})" if isinstance(getattr(hardware, "name", None), str) else ""
        raise SpeedplanInputError(f"hardware: expected a preset name, a profile folder or a CostModel, got "
                                  f"{type(hardware).__name__} {str(hardware)[:60]!r}{named}")
    target = model if isinstance(model, ModelSpec) else get_model(os.fspath(model))
    tp = integer(tp)  # np.int64 from a notebook: the plain int meta.json and the plans record
    target.check_tp(tp)
    cost = load_cost_model(hardware) if isinstance(hardware, (str, Path)) else hardware  # or a CostModel
    hw = cost.hardware
    hw.check_tp(tp)  # all-reduce priced within one node
    engine = get_engine(engine)
    from speedplan.serving import check_runs_on

    check_runs_on(engine, hw)  # TensorRT-LLM's profile does not price an MI300X
    batches = axis("batches (--batch)", batches, 1, 65536)
    draft_lens = axis("draft_lens (--draft-len)", draft_lens, 0, MAX_DRAFT)
    contexts = axis("contexts (--context)", contexts, 1, 10_000_000)
    target.check_context(contexts)
    tree_nodes = axis("tree_nodes (--tree-nodes)", tree_nodes, 1, 1024)
    if min_tokens_per_user is not None and not (isinstance(min_tokens_per_user, numbers.Real)
                                                and not isinstance(min_tokens_per_user, bool)
                                                and 0 < min_tokens_per_user < float("inf")):
        raise SpeedplanInputError(f"min_tokens_per_user (--min-tokens-per-user) must be a finite number > 0, got {min_tokens_per_user!r}")
    if min_tokens_per_user is not None:
        min_tokens_per_user = float(min_tokens_per_user)  # np.int64(50) would be the text "50" in meta.json

    acceptance = acceptance_arg(acceptance, tuple(REGISTRY))
    temperature = check_temperature(temperature)
    specs = mechanism_specs(mechanisms)
    mechs, skipped = _mechanisms(specs, target, acceptance, tp)
    mechs = [measured_elsewhere(at_temperature(m, target, temperature), target)  # published defaults are greedy rows
             for m in mechs]
    checkpoint = target.dtype
    target = target.priced_on(hw)  # e.g. a bf16 checkpoint priced on an fp32-only CPU
    mechs = [m if getattr(m, "draft", None) is None else replace(m, draft=m.draft.priced_on(hw)) for m in mechs]
    labels = [m.label for m in mechs]
    twice = next((label for i, label in enumerate(labels) if label in labels[:i]), None)
    if twice is not None:
        raise SpeedplanInputError(f"mechanism {twice!r} is listed twice (a tree's topk variants are one mechanism: "
                                  "sweep them one at a time)" if mechs[labels.index(twice)].is_tree else
                                  f"mechanism {twice!r} is listed twice")

    mechs = drop_pointless(mechs, draft_lens, tree_nodes, specs is not None, skipped)
    check_grid_size([len(mechanism_grid(m, [1], draft_lens, [1], tree_nodes)["batch"]) for m in [None, *mechs]],
                    batches, contexts)
    grids = [(mech, mechanism_grid(mech, batches, draft_lens, contexts, tree_nodes)) for mech in [None, *mechs]]
    pricings = [price_grid(mech, g, cost, target, tp, engine, temperature) for mech, g in grids if len(g["batch"])]
    frame = priced_frame(pricings, engine, hw, target, tp)

    result = SweepResult(frame, None, None, None, pricing=(pricings, hw, target, tp, cost), engine=engine)
    result.meta = {
        "model": {**target.summary(), "serve_as": target.serve_as()},
        "hardware": hw.name,
        "hardware_file": getattr(cost, "hardware_file", ""),  # a hardware JSON of one's own; "" for a preset or a profile folder
        "hardware_description": hw.description,
        "hardware_source": hw.source,
        "platform": "cpu" if hw.is_cpu else (hw.platform or "cuda"),  # what the engines run on (serving.PLATFORMS)
        "cost_origin": cost.origin,
        "roofline_fit": describe_fit(hw.roofline_fit),  # what the roofline fallback was fitted to
        # the profile folder's name, which reports print: cpu-local-xeon prices the cpu-local preset
        "profile": profile_name(cost),
        "profile_tables": sorted(getattr(getattr(cost, "profile", None), "tables", {}) or {}),
        **engine.meta(),
        "tp": tp,
        "dtype": target.dtype,
        "dtype_note": _narrower_checkpoint(checkpoint, target.dtype, hw),
        "temperature": temperature,  # sampling temperature served (0: greedy); the defaults moved to it
        "acceptance": {m.label: m.acceptance_source for m in mechs},
        "ridge_flops_per_byte": hw.ridge_flops_per_byte(target.dtype),
        "roofline_basis": hw.roofline_basis(target.dtype),  # the roof reports draw, and where it comes from
        "peak_flops_per_s": hw.roof_flops_per_s(target.dtype),  # the roof reports draw (Hardware.roof_flops_per_s)
        "bytes_per_s": hw.bytes_per_s,
        "memory_bytes": hw.memory_bytes,  # per GPU; how much weights + KV may use: engine_memory (the profile's rule)
        "weight_bytes_per_gpu": weight_bytes_per_rank(target, tp),
        "min_tokens_per_user": min_tokens_per_user,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "sweep_id": uuid.uuid4().hex,  # what a plan records of the sweep it was planned on (plan.api_checks)
        "version": __version__,
        "command": command,
        "mechanisms": [m.label for m in mechs],
        "skipped": skipped,
        "cautions": drafter_context_cautions(mechs, target, contexts, draft_lens, tree_nodes),
        # drafters that hold fewer positions than the target (serving files note what engines do past them)
        "drafter_positions": {m.label: held[0] for m in mechs if (held := m.drafter_positions())
                              and (not target.max_context or held[0] < target.max_context)},
        "topk": {m.label: m.topk for m in mechs if m.is_tree},
        **_mechanism_meta(mechs, tp),
    }
    return result.read_tables()  # the SLO pick among what the engine runs (a vLLM user gets no tree to serve)
