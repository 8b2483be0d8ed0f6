"""`speedplan sweep`: the planner over mechanism × D × B × context, written as a report folder."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import List, Optional

import typer

from speedplan.cli.options import check_output, parse_int_list

# the shipped engine profiles, one JSON file each (a glob: the CLI's import stays light)
_ENGINES = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "specs" / "presets" / "engines").glob("*.json"))
SAY_WRITING_FROM = 20_000  # rows: from here on, writing the report folder takes seconds (about 30 µs a row)


def sweep(
    model: str = typer.Option("llama-3.1-8b", help="Model preset or path to a Hugging Face config.json (or its folder)."),
    hardware: str = typer.Option("h100-sxm", help="Hardware preset (speedplan hardware lists them), a profile folder (profiles/NAME) or a hardware JSON file of one's own (docs/extending.md)."),
    tp: int = typer.Option(1, help="Tensor-parallel size (GPUs per replica)."),
    engine: str = typer.Option("vllm", help=f"Engine profile that prices every step: {', '.join(_ENGINES)}, or a JSON file from speedplan calibrate."),
    mechanism: Optional[List[str]] = typer.Option(None, help="Repeatable (speedplan mechanisms lists them with their options): ngram, draft-model[:MODEL][,tp=N], eagle[:vocab=N], eagle-tree[:topk=K], eagle3[:config=PATH], eagle3-tree[:topk=K], mtp, medusa; the engines' names are read too (EAGLE-3, draft_model, STANDALONE, NEXTN, deepseek_mtp). Default: every mechanism that applies to the model."),
    batch: str = typer.Option("1,2,4,8,16,32,64,128,256", help="Batch sizes B, the requests in flight per replica (concurrent sequences decoding): a range like 1-256 or a list like 1,2,4."),
    draft_len: str = typer.Option("0-8", help="Draft lengths D, tokens drafted per step (tree depth for trees): a range like 0-8 or a list like 0,2,4 (D = 0, plain decoding, is always priced)."),
    context: str = typer.Option("4096", help="Context (KV) lengths in tokens per sequence: 4096, a list like 1024,8192 or a range."),
    tree_nodes: str = typer.Option("8,16,32,64", help="Tree mechanisms: budgets N of drafted nodes verified per sequence (the root, the last accepted token, not counted), a list like 8,16,32,64."),
    acceptance: Optional[List[str]] = typer.Option(None, help="Repeatable: alpha=0.8 (each drafted token accepted with this probability), positions=0.9,0.8,0.7 (per draft position, given the earlier ones; the last repeats), ranks=0.6,0.2,0.05 (per candidate rank of a tree head), each with an optional ,match=M (share of steps that propose anything: n-gram); al=3.2@4 (a chain's acceptance length measured at D = 4, as engines report it; n-gram: over the steps that drafted, with ,match=M); or a JSON file, a runtime trace (.jsonl), a vLLM /metrics scrape or an SGLang server log (FILE, or FILE@D for a log whose lines give no accept rate: read at draft length D); prefix MECH: for one mechanism or head family (eagle3:alpha=0.8), or one draft model (draft-model:llama-3.2-1b:alpha=0.6)."),
    batch_weights: Optional[str] = typer.Option(None, help="Share of serving time at each batch size for the per-engine plans: 1=4,8=2,64=1 or a .json/.csv file (batch,weight). Only swept batch sizes that fit in memory may be named. Default: uniform over the swept batches that fit. A batch size left out still gets a D (its own best where the engine's schedule allows) but does not count."),
    plan_for: Optional[str] = typer.Option(None, help="Serving engines to plan and write configs for: vllm,sglang,trtllm (default: all)."),
    temperature: float = typer.Option(0.0, help="Sampling temperature served (0 = greedy). Above 0 the published acceptance defaults move to it where a source measured the drafter at T=0 and T=1 (EAGLE heads, draft models); the others say they are greedy rows. An --acceptance you give is taken as measured at it. Each step's sampler then takes the engine profile's sample_passes_random more passes over the logits."),
    min_tokens_per_user: Optional[float] = typer.Option(None, help="SLO in tokens/s per user (one request's decode speed): pick the configuration with the most tokens/s/GPU that keeps at least this, priced with the --engine profile."),
    out: Optional[Path] = typer.Option(None, help="Report folder (default reports/MODEL-HARDWARE-ENGINE under the current folder)."),
) -> None:
    """Sweep mechanism × D × B × context and write a report folder.

    Example: speedplan sweep --model llama-3.1-70b --hardware h100-sxm --tp 4
    --mechanism draft-model:llama-3.2-1b --mechanism eagle3 --batch 1-256 --draft-len 0-8
    """
    from speedplan import entry
    from speedplan.errors import SpeedplanInputError
    from speedplan.plan.acceptance_sources import parse_acceptance_options
    from speedplan.plan.batch_weights import parse_batch_weights
    from speedplan.plan.engine_plan import plan_engines
    from speedplan.plan.mechanisms import MECHANISMS, TREE_MECHANISMS, canonical_spec
    from speedplan.plan.shortfall import memory_shortfall
    from speedplan.plan.sweep import sweep as run_sweep
    from speedplan.report.folder import write_outputs
    from speedplan.report.summary import render_summary

    for option, value in (("--batch-weights", batch_weights), ("--plan-for", plan_for)):
        if value is not None and not value.strip():
            raise SpeedplanInputError(f"{option} is empty; give a value or leave the option out for its default")
    if plan_for is not None and "" in [name.strip() for name in plan_for.split(",")]:  # the library names `engines`
        from speedplan.serving import ENGINES

        raise SpeedplanInputError(f"--plan-for {plan_for!r:.60}: an empty name; name one or more of {', '.join(ENGINES)}")
    if mechanism and tree_nodes != _default("tree_nodes") and not any(
            canonical_spec(m).split(":")[0] in TREE_MECHANISMS for m in mechanism):  # a library caller's are ignored
        raise SpeedplanInputError(f"--tree-nodes {tree_nodes}: no swept mechanism is a tree "
                                  f"({', '.join(sorted(TREE_MECHANISMS))}); it would be ignored")
    draft_lens = parse_int_list(draft_len, "--draft-len")
    if max(draft_lens) == 0:  # the serving files would say speculation loses (a library caller may price plain alone)
        raise SpeedplanInputError("--draft-len 0: no draft length of 1 or more to price speculation at; give e.g. 0-8 "
                                  "(plain decoding, D = 0, is always priced)")
    weights = parse_batch_weights(batch_weights)
    worker = entry.claim()  # the console script's figure worker, importing matplotlib meanwhile
    try:
        result = run_sweep(
            model=model, hardware=hardware, tp=tp, mechanisms=mechanism or None,
            batches=parse_int_list(batch, "--batch"), draft_lens=draft_lens,
            contexts=parse_int_list(context, "--context"), tree_nodes=parse_int_list(tree_nodes, "--tree-nodes"),
            acceptance=parse_acceptance_options(acceptance, MECHANISMS) if acceptance else None,
            min_tokens_per_user=min_tokens_per_user, command=_command(locals()), engine=engine,
            temperature=temperature,
        )
        shortfall = memory_shortfall(result)
        if shortfall:
            raise SpeedplanInputError(shortfall)
        engines = plan_for or None  # "vllm,sglang": plan_engines splits and checks it
        # computed while the figures draw; an unknown engine or bad weights fail with nothing left behind
        plans = functools.cache(lambda: plan_engines(result, weights, engines))
        hardware_file = result.meta.get("hardware_file")  # a file of one's own, even one named like a preset
        hardware_label = Path(hardware_file).stem if hardware_file else result.meta["hardware"]
        out = out or Path("reports") / _folder_name(result.meta["model"]["model"], hardware_label, result.meta["engine"])
        check_output(out)
        if len(result.frame) >= SAY_WRITING_FROM:  # seconds of CSV and figures ahead: say so
            typer.echo(f"speedplan: {len(result.frame):,} configurations priced; writing {out} "
                       "(sweep.csv, plans per engine, figures)...", err=True)
        write_outputs(result, out, worker, plans=plans)
    finally:
        if worker is not None:
            worker.cancel()  # stops and reaps it if the sweep failed; a no-op once it finished
    typer.echo(render_summary(result, plans=plans()))
    typer.echo(f"report: {out / 'report.html'}")


def _command(options: dict) -> str:
    """The command line that reproduces this sweep: every option that differs from its default."""
    import shlex

    defaults = {name: p.default.default for name, p in inspect.signature(sweep).parameters.items()}
    parts = ["speedplan", "sweep"]
    for name, default in defaults.items():
        value = options.get(name)
        if value is None or value == default or name == "out":
            continue
        for v in value if isinstance(value, list) else [value]:
            parts += [f"--{name.replace('_', '-')}", shlex.quote(_absolute(str(v)))]
    return " ".join(parts)


def _absolute(value: str) -> str:
    """A value written as a path (it holds a '/' or starts with '.' or '~') that exists, made absolute,
    so meta.json's command reproduces the sweep from any folder; names and other values as given."""
    from pathlib import Path

    if ("/" in value or value.startswith((".", "~"))) and Path(value).expanduser().exists():
        return str(Path(value).expanduser().resolve())
    return value


def _folder_name(*parts: str) -> str:
    """The default report folder's name: its parts with anything but letters, digits, '.', '_',
    '+' and '-' made '_' (a model or profile folder's name is the user's; it must not climb)."""
    import re

    return "-".join(re.sub(r"[^A-Za-z0-9._+-]", "_", str(p)).lstrip(".") or "_" for p in parts)


def _default(option: str) -> str:
    """The default of one of `sweep`'s options (to tell a value given from the default)."""
    return inspect.signature(sweep).parameters[option].default.default
