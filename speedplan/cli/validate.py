"""`speedplan validate`: predictions against the reference runtime on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def validate(
    device: str = typer.Option("cpu", help="Device the runtime runs on: cpu, the only one validate takes (on a GPU run microbench/campaign.sh instead)."),
    quick: bool = typer.Option(False, "--quick", help="A small grid (ngram, eagle; B 1,2; D 0,1,3; one timing round a point, then two more for each batch size's pick and measured best): a few minutes on 2 idle cores, no machine-noise figure."),
    hardware: Optional[str] = typer.Option(
        None, help="Profile folder or preset the planner prices ops with (default cpu-local: the shipped profile "
                   "measured on this CPU when there is one, e.g. cpu-local-xeon, else on a full run one it measures "
                   "first: see --measure-cpu; with --reprice, the profile the stored run was priced with)."),
    out: Optional[Path] = typer.Option(None, help="Output folder (default reports/validation-cpu[-quick])."),
    reprice: Optional[Path] = typer.Option(
        None, help="A validation folder: price its measured verify steps with --hardware, run nothing."),
    measure_cpu: Optional[bool] = typer.Option(
        None, "--measure-cpu/--no-measure-cpu",
        help="Measure this CPU's profile first (speedplan bench --grid quick, 1-2 minutes) and price with it; it is "
             "kept in the output folder as profile/. Default: on for a full run with --hardware left out when no "
             "shipped profile was measured on this CPU, off otherwise."),
) -> None:
    """Predict t_step, AL and speedup, measure them with speedplan.runtime, compare.

    Example: speedplan validate --device cpu --out reports/validation

    On a CPU no shipped profile was measured on, a full run measures one first (--measure-cpu).

    Compare two profiles on the same measurements (no drift between runs):
    speedplan validate --reprice reports/validation-cpu --hardware profiles/new
    """
    from speedplan.cli.options import check_output
    from speedplan.errors import SpeedplanInputError
    from speedplan.outputs import (VALIDATION, check_replaceable, discard, move_into_place, probe_writable,
                                   staging_folder, target)
    from speedplan.validate.device_profile import PROFILE_FOLDER, measure_this_cpu, should_measure
    from speedplan.validate.run import FULL, QUICK, run_validation, write_validation

    if hardware is not None and not hardware.strip():  # "" had read as left out: a full run on cpu-local began
        raise SpeedplanInputError("--hardware is empty; give a profile folder or preset, or leave the option out "
                                  "for its default")
    if reprice is not None:
        if out is not None or quick or device != "cpu" or measure_cpu is not None:
            raise SpeedplanInputError("--reprice runs nothing and writes nothing: --out, --quick, --device and "
                                      "--measure-cpu do not apply to it")
        _print_reprice(reprice, hardware)
        return
    if device not in ("cpu", "cuda"):
        raise SpeedplanInputError(f"--device {device!r:.60}: unknown device; validate runs on cpu")
    if device != "cpu":
        raise SpeedplanInputError("validate runs on --device cpu here; on a GPU run microbench/campaign.sh from a "
                                  "checkout of speedplan's repository (a wheel does not ship it), or time the verify "
                                  "step with python -m speedplan.validate.gpu_timing")
    measure = should_measure(measure_cpu, quick, hardware)
    hardware = hardware or "cpu-local"
    out = out or Path("reports") / ("validation-cpu-quick" if quick else "validation-cpu")
    check_output(out)
    check_replaceable(out, VALIDATION)  # before the run: never over a folder of the user's own
    probe_writable(target(out), "--out")  # --out /proc/x failed after the whole run (a fuzzing run of 2026-12-05)
    say = lambda m: typer.echo(m, err=True)
    # all or nothing: the folder appears when every file is in it; its staging folder is made
    # after the hour-long run, or before it where the run measures its profile into it
    staging = staging_folder(out) if measure else None
    try:
        if measure:  # DESIGN.md's validation step 1: profile the device the runtime runs on
            hardware = str(measure_this_cpu(staging / PROFILE_FOLDER, say, shown_as=str(out / PROFILE_FOLDER)))
        table, summary = run_validation(QUICK if quick else FULL, hardware, progress=say)
        if measure:  # the folder's own profile, named as `stored_hardware` finds it once the folder moves
            summary.update(hardware=PROFILE_FOLDER, profile_measured=True)
        staging = staging or staging_folder(out)
        write_validation(table, summary, staging)
        move_into_place(staging, out)
    except BaseException:
        if staging is not None:
            discard(staging)
        raise
    for line in summary_lines(summary):
        typer.echo(line)
    typer.echo(f"report: {out / 'report.html'}")


def summary_lines(summary: dict) -> list[str]:
    """What `validate` prints after a run: errors |pred - meas| / meas, the regret, and how noisy
    the machine was. With one round a point (--quick) no spread between rounds was measured, and
    the points re-timed to confirm each batch's pick (the progress lines' "again:") are not the
    ones re-timed until two rounds agreed ("settle:")."""
    pct = lambda x: f"{100 * x:.1f}%"
    lines = [
        f"step time error: median {pct(summary['step_time_median_error'])}, p90 {pct(summary['step_time_p90_error'])} "
        "(|predicted - measured| / measured)",
        f"AL error: median {pct(summary['al_median_error'])}; speedup error: median {pct(summary['speedup_median_error'])}",
        f"max regret: {pct(summary['max_regret'])}, the measured speedup the planner's pick loses against the best "
        f"measured at its batch size ({summary['points']} points, {summary['wall_s']} s)",
    ]
    confirmed = len(summary.get("timed_again") or [])
    again = (f"; {confirmed} point{'s' * (confirmed != 1)} (each batch's pick and measured best) timed in two more "
             "rounds before regret was read" if confirmed else "")
    if summary.get("rounds", summary["grid"]["rounds"]) < 2:
        lines.append("machine noise: not measured (one round a point, as --quick times)" + again)
    else:
        lines.append(f"machine noise: a point's first two rounds {pct(summary['round_spread_median'])} apart (median); "
                     f"{summary['settled_again']} timed again until two rounds agreed within "
                     f"{pct(summary['grid']['settle_tolerance'])}, {pct(summary['settle_spread_median'])} apart after"
                     + again)
    odd = summary.get("implausible_points") or []
    if odd:
        shown = "; ".join(f"{m} B={b} D={d}: {sp:.2f}x at AL {al:.2f}" for m, b, d, sp, al in odd[:4])
        lines.append(f"warning: {len(odd)} point{'s' * (len(odd) != 1)} measured a speedup more than 10% above "
                     f"the acceptance length ({shown}{'; ...' if len(odd) > 4 else ''}): no speculative step is "
                     "faster than a plain one in this runtime, so the machine's speed moved between the paired "
                     "timings; the errors and regret above carry that noise: run again on an idle machine")
    return lines


def _print_reprice(folder: Path, hardware: str | None) -> None:
    from speedplan.validate.reprice import load_validation, profile_lines, reprice_verify, verify_errors

    from speedplan.validate.device_profile import stored_hardware

    table, summary = load_validation(folder)
    hardware = hardware or stored_hardware(folder, summary)
    repriced = reprice_verify(table, summary, hardware)
    for line in profile_lines(summary, repriced, hardware):
        typer.echo(line)
    pct = lambda x: f"{100 * x:.1f}%"
    for label, t, overhead in ((f"as run ({summary.get('hardware')})", table, summary["layer_overhead_us_measured"]),
                               (f"repriced ({hardware})", repriced, repriced.attrs["layer_overhead_us"])):
        e = verify_errors(t)
        typer.echo(f"{label}: verify-step error median {pct(e['verify_median_error'])}, p90 {pct(e['verify_p90_error'])}, "
                   f"median pred/meas {e['verify_median_ratio']:.3f} over {e['points']} points; "
                   f"host overhead {overhead:.0f} us/layer" + (
                       " (held at 0: the profile prices the calibration's plain B = 1 verify step above its measured "
                       "time)" if t.attrs.get("overhead_clamped") else ""))
    typer.echo("(as run: the host overhead fitted by least squares over every calibration run; repriced: anchored "
               "at the calibration's plain B = 1 verify step, one constant, so the same profile can give two figures)")
