"""`speedplan calibrate`: fit an engine profile's terms to your own measurements."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import List, Optional

import typer


def calibrate(
    model: str = typer.Option(..., help="Model preset or Hugging Face config.json the measurements ran."),
    hardware: str = typer.Option(..., help="Hardware preset, profile folder or hardware JSON file they ran on."),
    tp: int = typer.Option(1, help="Tensor-parallel size they ran at."),
    engine: str = typer.Option("vllm", help="Base engine profile (name or JSON): its values stand where the data cannot fit."),
    measurements: List[Path] = typer.Option(..., help="A file, and more after it or repeated (--measurements a.csv b.csv, or runs/*.csv): a CSV (mechanism,batch,draft_len,context,tpot_ms|step_ms|"
                                            "tokens_per_s|speedup|verify_ms|draft_ms|overhead_ms,acceptance_length; optional tree_nodes, "
                                            "max_running_requests, and tp and gpu, which must match --tp and --hardware, and model: one of "
                                            "another size than --model or another shipped preset is refused, another name noted, as a fine-tune's "
                                            "may be), a vllm bench serve --save-result JSON (its mean_tpot_ms; "
                                            "output_throughput where it has none), "
                                            "SGLang bench_serving --output-file JSON lines (the same fields, its "
                                            "accept_length; mechanism and draft length from server_info or "
                                            "--tag \"mechanism=eagle3 draft_len=3\"), "
                                            "SGLang bench_speculative.py output, or a vLLM /metrics scrape (text) giving the "
                                            "acceptance of rows of one mechanism that state none. At most 10,000 rows "
                                            "in all; above 100, 10-fold cross-validation stands for leave-one-out."),
    out: Path = typer.Option(..., help="Engine profile JSON to write (use it with speedplan sweep --engine FILE)."),
    mechanism: str = typer.Option("eagle3", help="The drafter of SGLang bench_speculative chain rows (the file does not say)."),
    fit: Optional[str] = typer.Option(None, help="Comma-separated terms to fit (default: every term the rows identify)."),
    fit_acceptance: bool = typer.Option(False, "--fit-acceptance", help="Runs that measured no acceptance length "
                                        "(throughput or TPOT only): fit each chain mechanism's acceptance with the "
                                        "engine terms (one rate per position at two draft lengths, a rate that "
                                        "decays with depth at three or more); needs each such mechanism's rows at "
                                        "two or more draft lengths. Printed with how far the rows pin it and the "
                                        "sweep command that uses it, not written into the engine's terms."),
    name: Optional[str] = typer.Option(None, help="Name of the fitted profile (default: the output file's stem, "
                                       "with -calibrated added where a shipped profile has that name)."),
    more: Optional[List[Path]] = typer.Argument(None, metavar="[FILE]...", show_default=False,
                                                help="More measurement files (those a shell glob after --measurements gives)."),
) -> None:
    """Fit engine terms to measured step times, TPOT, throughput or speedups (bounded least squares).

    Example: speedplan calibrate --model llama-3.1-8b --hardware h100-sxm --engine vllm
    --measurements runs/*.csv --out my-vllm.json
    """
    from speedplan.cli.options import check_output
    from speedplan.engine.profile import preset_names
    from speedplan.errors import SpeedplanInputError
    from speedplan.engine.calibration_notes import tree_acceptance
    from speedplan.engine.run_calibration import (calibrate_files, check_out, render_calibration, sweep_arguments,
                                                  write_profile)

    files = [*measurements, *(more or [])]
    check_out(out)  # before check_output: a shipped profile is "an engine profile speedplan wrote"
    check_output(out, folder=False, inputs=[*files, engine], kind="engine profile")
    for option, value in (("--fit", fit), ("--name", name)):
        if value is not None and not value.strip():  # '' fell back to the default in silence
            raise SpeedplanInputError(f"{option} is empty; give a value or leave the option out for its default")
    if name is None:  # vllm.json must not read as the shipped vllm profile
        name = out.stem + ("-calibrated" if out.stem.lower() in preset_names() else "")
    result = calibrate_files(model, hardware, tp, engine, files, mechanism, fit.split(",") if fit else None, name,
                             fit_acceptance=fit_acceptance)
    fast = result.too_fast
    if fast is not None and len(fast) and bool(fast.all()) and "kernel_scale" not in result.fitted:
        # every row ran faster than its kernels alone: no term fits any row; a profile of them would mislead
        first = result.rows[0]  # named, so that the line says which file and field
        raise SpeedplanInputError(f"--measurements: every row ran faster than its kernels alone can on {model} on "
                                  f"{hardware} at TP {tp} ({first['where']}: field {first['field']!r} "
                                  f"{first['measured']:g}" + (f" and {len(fast) - 1} more" if len(fast) > 1 else "")
                                  + f"), so no engine term fits them and {out} is not written: "
                                  "check --model, --hardware, --tp and the quantity each column holds, or add "
                                  "--fit kernel_scale if this machine's kernels are faster than the profile's")
    report = [render_calibration(result)]
    args = sweep_arguments(result, model)
    report += [f"  note: {note}" for note in tree_acceptance(result, args)]  # a tree's AL, which no --acceptance takes
    measured = " and acceptance" if "--acceptance" in args else ""
    setting = ["--model", model, "--hardware", hardware] + (["--tp", str(tp)] if tp != 1 else [])
    report.append(f"engine profile: {out} (plan with it, on your runs' setting, at their context{measured}: speedplan "
                  f"sweep {shlex.join(setting)} --engine {shlex.quote(str(out))} {shlex.join(args)}"
                  + ("; without --acceptance the sweep prices published acceptance)" if measured else ")"))
    write_profile(result.profile, out)
    try:  # a report that cannot be printed (a full disk behind stdout) leaves no profile behind its error
        typer.echo("\n".join(report))
        sys.stdout.flush()
    except OSError:
        out.unlink(missing_ok=True)
        raise
