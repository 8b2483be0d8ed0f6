"""Planner commands: sweep, predict ops, models, hardware. Thin: parse, call, render."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from .errors import SpeedplanInputError


def parse_int_list(text: str, option: str) -> list[int]:
    """`1-256`, `1,2,4,8` or a mix (`1,2,4-8`) → sorted distinct integers."""
    values: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        try:
            if dash and lo:
                a, b = int(lo), int(hi)
                if a > b:
                    raise SpeedplanInputError(f"{option} {text!r}: range {part} runs backwards")
                values.update(range(a, b + 1))
            else:
                values.add(int(part))
        except ValueError:
            raise SpeedplanInputError(f"{option} {text!r}: expected integers like 1-256 or 1,2,4") from None
    if len(values) > 100_000:
        raise SpeedplanInputError(f"{option} {text!r}: too many values")
    return sorted(values)


def register(app: typer.Typer) -> None:
    @app.command()
    def sweep(
        model: str = typer.Option("llama-3.1-8b", help="Model preset or path to a Hugging Face config.json (or its folder)."),
        hardware: str = typer.Option("h100-sxm", help="Hardware preset or a profile folder (profiles/NAME)."),
        tp: int = typer.Option(1, help="Tensor-parallel size (GPUs per replica)."),
        mechanism: Optional[List[str]] = typer.Option(None, help="Repeatable: ngram, draft-model[:MODEL], eagle[:vocab=N], eagle-tree[:topk=K], mtp, medusa."),
        batch: str = typer.Option("1,2,4,8,16,32,64,128,256", help="Batch sizes: 1-256 or 1,2,4."),
        draft_len: str = typer.Option("0-8", help="Draft lengths D (tree depth for trees): 0-8."),
        context: str = typer.Option("4096", help="Context (KV) lengths in tokens: 4096 or 1024,8192."),
        tree_nodes: str = typer.Option("8,16,32,64", help="Verified node budgets N for tree mechanisms."),
        acceptance: Optional[List[str]] = typer.Option(None, help="Repeatable: alpha=0.8, positions=0.9,0.8,0.7, ranks=..., a JSON file or a runtime trace (.jsonl); prefix MECH: for one mechanism (eagle:alpha=0.8)."),
        min_tokens_per_user: Optional[float] = typer.Option(None, help="SLO: pick the best tokens/s/GPU with at least this many tokens/s per user."),
        out: Optional[Path] = typer.Option(None, help="Report folder (default reports/MODEL-HARDWARE)."),
    ) -> None:
        """Sweep mechanism × D × B × context and write a report folder.

        Example: speedplan sweep --model llama-3.1-70b --hardware h100-sxm --tp 4
        --mechanism draft-model:llama-3.2-1b --mechanism eagle --batch 1-256 --draft-len 0-8
        """
        from . import figure_worker

        worker = figure_worker.claim()  # imports matplotlib on the other core meanwhile
        try:
            _sweep(model, hardware, tp, mechanism, batch, draft_len, context, tree_nodes, acceptance,
                   min_tokens_per_user, out, worker)
        finally:
            if worker is not None:
                worker.cancel()  # stops and reaps it if the sweep failed; a no-op once it finished

    predict = typer.Typer(help="Answer op-latency queries in bulk.", no_args_is_help=True)
    app.add_typer(predict, name="predict")

    @predict.command("ops")
    def predict_ops(
        hardware: str = typer.Option(..., help="Hardware preset or profile folder."),
        input: Path = typer.Option(..., "--in", help="ops.csv: op,m,n,k,batch,q_len,kv_len,num_heads,num_kv_heads,head_dim,mask,dtype."),
        out: Path = typer.Option(..., help="pred.csv: the input plus latency_us, source, bound."),
    ) -> None:
        """Predict op latencies: speedplan predict ops --hardware h100-sxm --in ops.csv --out pred.csv"""
        from .cost import load_cost_model
        from .predict import predict_ops_file

        n = predict_ops_file(load_cost_model(hardware), input, out)
        typer.echo(f"{n} ops -> {out}")

    @app.command()
    def models() -> None:
        """List model presets with their key numbers: speedplan models"""
        from .model import get_model, preset_names

        typer.echo(_table([get_model(n).summary() for n in preset_names()]))

    @app.command("hardware")
    def hardware_list() -> None:
        """List hardware presets with their datasheet numbers and sources: speedplan hardware"""
        from .hardware import PRESETS

        rows = [{
            "hardware": h.name, "bf16_tflops": h.peak_flops_per_s.get("bf16", 0) / 1e12,
            "fp8_tflops": h.peak_flops_per_s.get("fp8", 0) / 1e12, "mem_tb_s": h.hbm_bytes_per_s / 1e12,
            "mem_gb": h.memory_bytes / 1e9, "link_gb_s": h.link_bytes_per_s / 1e9, "source": h.source[:60] + "...",
        } for h in PRESETS.values()]
        typer.echo(_table(rows))


def _sweep(model, hardware, tp, mechanism, batch, draft_len, context, tree_nodes, acceptance,
           min_tokens_per_user, out, worker) -> None:
    """The body of `speedplan sweep`: run the sweep, write the report folder, print the summary."""
    from .acceptance import parse_acceptance_options
    from .mechanisms import MECHANISMS
    from .output import write_outputs
    from .planner import DEFAULT_MECHANISMS, sweep as run_sweep
    from .report import render_summary

    result = run_sweep(
        model=model, hardware=hardware, tp=tp, mechanisms=mechanism or DEFAULT_MECHANISMS,
        batches=parse_int_list(batch, "--batch"), draft_lens=parse_int_list(draft_len, "--draft-len"),
        contexts=parse_int_list(context, "--context"), tree_nodes=parse_int_list(tree_nodes, "--tree-nodes"),
        acceptance=parse_acceptance_options(acceptance, MECHANISMS) if acceptance else None,
        min_tokens_per_user=min_tokens_per_user, command="speedplan " + " ".join(sys.argv[1:]),
    )
    out = out or Path("reports") / f"{result.meta['model']['model']}-{result.meta['hardware']}"
    write_outputs(result, out, worker)
    typer.echo(render_summary(result))
    typer.echo(f"report: {out / 'report.html'}")


def _table(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    cell = lambda v: f"{v:g}" if isinstance(v, float) else str(v)
    widths = {c: max(len(c), *(len(cell(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(cell(r[c]).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)
