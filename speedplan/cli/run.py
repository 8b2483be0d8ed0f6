"""`speedplan run`: the reference speculative runtime on real (or random) weights.

torch is imported inside the command body, so importing the command line never loads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer


def render_run(report, as_json: bool) -> None:
    """Print the texts and the numbers (or one JSON object); a speedup that cannot be trusted
    (`RunReport.speedup_warning`) gets a `warning:` line on stderr either way."""
    data = report.to_json()
    if as_json:
        typer.echo(json.dumps(data))
        _warn(data)
        return
    texts = data["text"] if isinstance(data["text"], list) else [data["text"]]
    for i, text in enumerate(texts):
        if len(texts) > 1:
            typer.echo(f"--- prompt {i}")
        typer.echo(text)
    typer.echo("---")
    compared = (f" (plain {data['plain_tokens_per_s']:.1f} tok/s), speedup {data['speedup']:.2f}x"
                if data["speedup"] is not None and data["plain_tokens_per_s"] else " (no plain run: --no-compare)")
    rounds = data["speedup_rounds"] or []
    if len(rounds) > 1:
        kept = f"; kept round {report.kept_round + 1}" if report.kept_round is not None else ""
        compared += f" (rounds: {', '.join(f'{x:.2f}x' for x in rounds)}{kept})"
    cut = (f" ({data['emitted_per_step']:.2f} a step kept: the last steps accepted past the end of the text or "
           "--max-new-tokens)" if data["emitted_per_step"] < 0.98 * data["acceptance_length"] else "")
    typer.echo(f"{data['mechanism']} D={data['draft_len']} B={data['batch']}: AL {data['acceptance_length']:.2f}{cut}, "
               f"{data['tokens_per_s']:.1f} tok/s{compared}, {data['generated_tokens']} tokens in {data['steps']} steps")
    if data["identical_to_plain"] is not None and data["mechanism"] != "none":
        typer.echo("greedy check: same tokens as plain greedy decoding" if data["identical_to_plain"] else
                   "greedy check: the tokens differ from plain greedy decoding (a near-tie argmax can round "
                   "differently in a verify pass; docs/runtime.md, Known limits)")
    _warn(data)


def _warn(data: dict) -> None:
    if data["speedup_warning"]:
        typer.echo(f"warning: {data['speedup_warning']}", err=True)


def batch_note(prompts: int, batch: int) -> str | None:
    """A line for stderr when --batch asks for more sequences than there are prompts: the runtime
    decodes the prompts in waves of --batch, so every step then runs fewer sequences than the B
    the result line names."""
    if 0 < prompts < batch:
        return (f"note: --batch {batch} with {prompts} prompt{'s' * (prompts != 1)}: each step decodes {prompts} "
                f"sequence{'s' * (prompts != 1)}, not {batch} (give at least {batch} prompts, e.g. --prompts FILE.jsonl)")
    return None


def run(
    prompt: Optional[List[str]] = typer.Option(None, help="A prompt (repeatable)."),
    prompts: Optional[Path] = typer.Option(None, help="JSONL file: one {\"prompt\": ...} (or {\"text\": ...}) or {\"messages\": [...]} per line."),
    mechanism: str = typer.Option("ngram", help="The runtime's own drafters for SmolLM2 (not sweep's list: no eagle3, mtp or medusa here): none (plain decoding), ngram (prompt lookup), draft-model (a distilled student of SmolLM2), eagle (an EAGLE-1 head trained for it), eagle-tree (that head as a tree), truncated, truncated-tree (test drafters: the target's first --draft-layers layers)."),
    draft_len: int = typer.Option(4, help="Draft length D, tokens drafted per step (tree mechanisms use --tree-depth)."),
    batch: int = typer.Option(1, help="Sequences decoded together (the prompts are split into waves of this many)."),
    max_new_tokens: int = typer.Option(128, help="New tokens per prompt."),
    temperature: float = typer.Option(0.0, help="0 = greedy; > 0 = exact speculative sampling."),
    top_p: float = typer.Option(1.0, help="Nucleus sampling, applied to draft and target alike."),
    weights: str = typer.Option("smollm2", help="smollm2, a .gguf file, a Hugging Face folder, or random:PRESET."),
    trace: Optional[Path] = typer.Option(None, help="Write a speedplan.trace/1 JSONL trace here."),
    raw: bool = typer.Option(False, help="Send prompts as raw text instead of through the chat template."),
    ngram_max: int = typer.Option(3, help="ngram: longest suffix n-gram looked up."),
    tree_topk: int = typer.Option(4, help="Tree mechanisms: children per frontier node."),
    tree_depth: Optional[int] = typer.Option(None, show_default=False, help="Tree mechanisms: expansion depth, at "
                                             "most --tree-nodes (a level adds a node at least). [default: 4, or "
                                             "--tree-nodes where fewer]"),
    tree_nodes: int = typer.Option(16, help="Tree mechanisms: drafted nodes verified per sequence (the root not counted)."),
    draft_layers: int = typer.Option(4, help="truncated*: target layers the drafter keeps."),
    seed: int = typer.Option(0, help="Random seed for sampling."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    matmul: str = typer.Option("fp32", help="CPU matmuls: fp32 (default, what profiles price) or q4_1 "
                               "(decode/verify read the GGUF's Q4_1 blocks via a C kernel built with gcc; same weights)."),
    compare: bool = typer.Option(True, "--compare/--no-compare", help="Also decode plainly, for the speedup "
                                 "(--no-compare skips it: no plain tokens/s, no speedup)."),
    rounds: int = typer.Option(2, help="Rounds of a plain run then a speculative run, for the speedup: the round "
                               "whose pair ran fastest (3 or more: the median round) is reported; 1 = one of each."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Generate with speculative decoding and report AL, tokens/s and speedup over plain decoding.

    Example: speedplan run --prompt "Write a Python function that parses ISO dates." --mechanism eagle-tree --tree-depth 1 --tree-nodes 4 --max-new-tokens 128
    """
    from speedplan.runtime.options import DrafterOptions, RunOptions, read_prompts

    texts = list(prompt or []) + (read_prompts(prompts) if prompts else [])
    depth = tree_depth if tree_depth is not None else max(1, min(4, tree_nodes))  # the default fits the nodes
    options = DrafterOptions(ngram_max=ngram_max, tree_topk=tree_topk, tree_depth=depth,
                             tree_nodes=tree_nodes, draft_layers=draft_layers)
    spec = RunOptions(tuple(texts), weights, mechanism, draft_len, batch, max_new_tokens, temperature, top_p, seed,
                   not raw, compare, str(trace) if trace else None, device, options, matmul, rounds)
    spec.check()  # bad input fails here, before torch is imported
    for note in (batch_note(len(texts), batch), spec.tree_note(), spec.unused_note()):
        if note:
            typer.echo(note, err=True)
    if trace:
        from speedplan.cli.options import check_output
        from speedplan.outputs import probe_writable

        check_output(trace, "--trace", folder=False, inputs=[prompts] if prompts else [], kind="runtime trace")
        probe_writable(trace, "--trace")  # a real file made and removed, before minutes of generation

    from speedplan.runtime.api import run
    from speedplan.validate.timing import paired_ratio

    say = lambda line: typer.echo(f"speedplan run: {line}", err=True)  # noqa: E731 (minutes of work: say what runs)
    render_run(run(spec, pick=paired_ratio, progress=say), as_json)  # the rounds read as `speedplan validate` reads its pairs
    if trace:  # on stderr, beside the progress lines: --json keeps stdout one JSON object
        typer.echo(f"speedplan run: trace written to {trace}", err=True)
