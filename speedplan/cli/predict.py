"""`speedplan predict ops`: op latencies in bulk (columns in DESIGN.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from speedplan.errors import SpeedplanInputError

app = typer.Typer(help="Answer op-latency queries in bulk.", no_args_is_help=True, rich_markup_mode=None)


@app.command("ops")
def ops(
    hardware: str = typer.Option(..., help="Hardware preset, profile folder or preset JSON file."),
    input: Path = typer.Option(..., "--in", help="ops.csv with a header: op (gemm or attention) and dtype (fp32, bf16, fp16, fp8) always; gemm rows m,n,k; attention rows batch,q_len,kv_len,num_heads,num_kv_heads,head_dim,mask (causal or tree); other cells may be blank."),
    out: Path = typer.Option(..., help="pred.csv: the input plus latency_us (microseconds), source (profile or roofline), bound (memory or compute) and out_of_range (1 where the profile answered from outside its measured range: an extrapolation, never faster than the device's peak; the terminal line counts them)."),
) -> None:
    """Predict op latencies: speedplan predict ops --hardware h100-sxm --in ops.csv --out pred.csv

    A row the profile answered from outside its measured range has out_of_range = 1 (source
    stays 'profile'); the last line says how many there are."""
    from speedplan.cli.options import check_output
    from speedplan.cost.ops import load_cost_model
    from speedplan.cost.predict import predict_ops_file

    from speedplan.specs.fallback import describe_fit

    for option, path in (("--in", input), ("--out", out)):  # a file of that name had been read or written
        if str(path) == "-":
            raise SpeedplanInputError(f"{option} -: predict reads and writes files, not standard input or output; "
                                      "give a path")
    check_output(out, folder=False, inputs=[input], kind="predictions CSV")
    cost = load_cost_model(hardware)
    n = predict_ops_file(cost, input, out)
    profile = (f"source 'profile': {cost.profile.origin_label} {cost.profile.path.name}; " if cost.profile else "")
    fit = cost.hardware.roofline_fit  # "" is the plain roofline: "peaks with plain datasheet peaks" said it twice
    roofline = (f"the {cost.hardware.name} preset's peaks with {describe_fit(fit)}" if fit else
                f"the {cost.hardware.name} preset's plain datasheet peaks")
    import csv

    with out.open(newline="", encoding="utf-8") as f:
        outside = sum(row.get("out_of_range") == "1" for row in csv.DictReader(f))
    beyond = (f"; {outside} of {n} answered from outside the profile's measured range (out_of_range = 1)"
              if outside else "")
    typer.echo(f"{n} op{'s' * (n != 1)} -> {out} ({profile}source 'roofline': {roofline}{beyond})")
