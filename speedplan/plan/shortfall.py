"""Why a sweep serves nothing, or not every batch size: what plain decoding needs per GPU
against the memory that is usable under the engine profile's memory rule (`engine.memory_rule`).
The CLI prints these; a library caller can too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from speedplan.engine.memory_rule import DEFAULT_MEMORY, MemoryRule, memory_rule, usable_bytes
from speedplan.units import gigabytes

if TYPE_CHECKING:
    from speedplan.plan.sweep import SweepResult


def _rule(result: SweepResult) -> MemoryRule:
    """The memory rule of the profile that priced `result` (its meta's, so a result rebuilt from
    its files has it too; a meta written before profiles had one: the default)."""
    engine = getattr(result, "engine", None)
    if engine is not None:
        return engine.memory
    recorded = result.meta.get("engine_memory")
    return DEFAULT_MEMORY if recorded is None else memory_rule(recorded, "meta.json engine_memory")


def _launch(result: SweepResult) -> dict:
    """What a memory rule reads of the launch besides the GPU's memory and the weights: the TP size
    (meta's), the hardware's platform and the target (its context length), from the sweep's
    pricing; a result without pricing (built by hand) is taken for a CUDA launch of a model of no
    stated context."""
    from speedplan.plan.memory import launch_inputs

    if result.pricing is None:
        return {"tp": result.meta["tp"]}
    _, hw, target, _, _ = result.pricing
    return launch_inputs(hw.platform, target, result.meta["tp"])


def _usable(result: SweepResult) -> tuple[float, MemoryRule]:
    """Bytes per GPU plain decoding may hold (its weights: the target's), and the rule that says so."""
    rule, meta = _rule(result), result.meta
    return float(usable_bytes(rule, meta["memory_bytes"], meta["weight_bytes_per_gpu"], **_launch(result))), rule


def memory_shortfall(result: SweepResult) -> str | None:
    """Why nothing can be served, when plain decoding fits in memory at no swept (batch,
    context): the smallest such configuration's bytes per GPU against the usable memory. None
    when some plain configuration fits. The CLI makes this an input error (a TP or a context
    the model cannot run), and so does `write_outputs` (`api_checks.plain_fits`)."""
    from speedplan.plan.api_checks import sweep_result

    plain = sweep_result(result, "memory_shortfall").frame
    plain = plain[plain["mechanism"] == "none"]
    if plain.empty or plain["fits_memory"].any():
        return None
    meta = result.meta
    weights, (usable, _) = meta["weight_bytes_per_gpu"], _usable(result)
    more = _more_memory(result)
    return (f"{meta['model']['model']} on {meta['hardware']} at TP {meta['tp']} fits in memory at no swept batch "
            f"and context: {plain_memory_need(result)}; "
            + (f"the weights alone do not fit: try {more}" if weights >= usable
               else f"try smaller --batch, a shorter --context or {more}")
            + (f" ({meta['dtype_note']})" if meta.get("dtype_note") else ""))  # an fp8 checkpoint priced as bf16


def _more_memory(result: SweepResult) -> str:
    """Where more memory can come from: a larger --tp while one node holds it; past the node's
    GPUs (TP is priced within one node) a GPU with more memory; on a CPU, a machine with more."""
    hw = result.pricing[1] if result.pricing else None
    if result.meta.get("platform") == "cpu":
        return "a machine with more memory, or a smaller model"
    if hw is not None and hw.gpus_per_node and 2 * int(result.meta["tp"]) > hw.gpus_per_node:
        return (f"a GPU with more memory (--hardware; --tp stops at the {hw.gpus_per_node} GPUs one "
                f"{hw.name} node links)")
    return "a larger --tp"


def plain_memory_need(result: SweepResult, batch: int | None = None) -> str:
    """What the smallest plain-decoding configuration (at `batch`, if given) needs per GPU
    against what is usable, with enough digits to show a shortfall, e.g. "plain decoding at
    B=128, context 4096 needs 84.8 GB per GPU (weights 16.1 GB) and 77.0 GB are usable (90% of
    85.5 GB, engine profile vllm's memory rule)"."""
    plain = result.frame[result.frame["mechanism"] == "none"]
    if batch is not None:
        plain = plain[plain["batch"] == batch]
    row = plain.loc[plain["memory_bytes"].idxmin()]
    meta = result.meta
    need, weights = row["memory_bytes"], meta["weight_bytes_per_gpu"]
    usable, rule = _usable(result)
    digits = 1 if round(need / 1e9, 1) > round(usable / 1e9, 1) else 3
    per = "of memory" if meta.get("platform") == "cpu" else "per GPU"
    return (f"plain decoding at B={int(row['batch'])}, context {int(row['context'])} needs {gigabytes(need, digits)} {per} "
            f"(weights {gigabytes(weights)}) and {gigabytes(usable, digits)} are usable "
            f"({rule.describe(meta['memory_bytes'], meta['weight_bytes_per_gpu'], **_launch(result))}, {_whose(rule, meta)})")


def _whose(rule: MemoryRule, meta: dict) -> str:
    """Whose rule: the engine profile's, or the default where the profile sets none."""
    name = meta.get("engine", "?")
    if rule == DEFAULT_MEMORY:
        return f"vLLM's default gpu_memory_utilization: engine profile {name} sets no memory rule"
    return f"engine profile {name}'s memory rule"


def held_elsewhere(result: SweepResult, batches: list, engines=None) -> list[tuple[str, str, list[int]]]:
    """The serving engines (`engines`, all where None) whose shipped profile's memory rule holds
    plain decoding at some of `batches` (batch sizes the sweep's profile holds at no context):
    (engine, its rule in words, those batch sizes). Every engine's plan covers only the batch sizes
    the sweep's own profile holds. None for a sweep of the reference runtime (a CPU, no engine)."""
    from speedplan.engine.profile import get_engine
    from speedplan.serving import ENGINES, runs_on

    meta = result.meta
    if meta.get("engine") == "speedplan-runtime":
        return []
    plain = result.frame[result.frame["mechanism"] == "none"]
    plain = plain[plain["batch"].isin(batches)]
    device, weights, launch = meta["memory_bytes"], meta["weight_bytes_per_gpu"], _launch(result)
    out = []
    platform = launch.get("platform", "cuda")
    for name in [e for e in ENGINES if (engines is None or e in engines) and runs_on(e, platform)]:
        rule = get_engine(name).memory
        need = _plain_need(result, plain, rule)  # at the shortest context
        held = [int(b) for b, m in need.items() if m <= usable_bytes(rule, device, weights, **launch)]
        if held:
            out.append((name, rule.describe(device, weights, **launch), held))
    return out


def _plain_need(result: SweepResult, plain, rule: MemoryRule):
    """Bytes per GPU of the plain rows `plain` by batch, at the shortest context, as `rule`'s engine
    holds them: the frame's, or, where that engine pools sliding-window layers otherwise than the
    sweep's profile (SGLang's window_pool against vLLM's window), the same rows' memory again."""
    from speedplan.plan.memory import memory_bytes

    memory = plain["memory_bytes"]
    if result.pricing is not None and rule.window_pool != _rule(result).window_pool:
        _, _, target, tp, _ = result.pricing
        batch, context = plain["batch"].to_numpy(float), plain["context"].to_numpy(float)
        memory = memory.copy()
        memory[:] = memory_bytes(None, target, batch, 0, context, 1, tp, rule.window_pool)
    return memory.groupby(plain["batch"]).min()
