"""Verify-step timing of the reference runtime against the cost model (issue 6).

On a GPU: a random-weight Llama-3.1-8B-shaped model in bf16, the verify forward (1+D tokens
per sequence on a KV cache of `context` tokens, plus the lm_head) captured in a CUDA graph and
replayed, for B × D × context; the cost model predicts the same points from the profile just
measured. On CPU (`--dry-run`): the same code path on a tiny grid, eager, fp32.

    python -m speedplan.validate.gpu_timing --device cuda --hardware h200-sxm --out reports/validation-h200
    python -m speedplan.validate.gpu_timing --reprice reports/validation-h200 --hardware PROFILE [--hardware ...]
    python -m speedplan.validate.gpu_timing --dry-run --out /tmp/vt      # what the tests run

--reprice predicts the measured points again (no GPU needed) from each --hardware: the
first one's predictions are `pred_t_verify` and the summary's errors (the campaign measures
the verify step before its profile, then reprices against that profile); every one's errors
are under the summary's "by_profile". Each file is rendered whole and renamed into place (a
killed run leaves no truncated file); bad input is refused before anything is written, and a
measuring run writes nothing until its first point (then the table after every point: `Writer`).

The summary has the CPU validation's keys: step-time errors are those of the verify step;
"speedup" compares the verify-cost ratio t_verify(1+D)/t_verify(1) predicted and measured;
"AL" is not measured here (random weights) and is reported as null; regret is that of the
best D per (B, context) under a fixed acceptance (α = 0.8), priced with measured times.
Times are seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class TimingGrid:
    model: str
    batches: tuple[int, ...]
    draft_lens: tuple[int, ...]
    contexts: tuple[int, ...]
    dtype: str
    repeats: int


GPU_GRID = TimingGrid("llama-3.1-8b", (1, 4, 16, 64, 256), (0, 1, 3, 7, 15), (1024, 8192), "bf16", 20)
DRY_GRID = TimingGrid("smollm2-135m", (1, 2), (0, 1, 3), (64, 128), "fp32", 3)
ALPHA = 0.8


def _timer(device: str):
    import torch

    def measure(fn, repeats: int) -> float:
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            times = []
            for _ in range(repeats):
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e-3)
            return float(np.median(times))
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    return measure


def time_verify(model, batch: int, q_len: int, context: int, device: str, repeats: int) -> tuple[float, str]:
    """Median seconds of one verify step: forward of q_len tokens per sequence after
    `context` cached ones, then the lm_head; and how it ran ("graph": captured and replayed
    on CUDA; "eager")."""
    import torch

    cache = model.new_cache(batch, context + q_len + 1)
    cache.set_lengths(torch.arange(batch, device=cache.lengths.device),
                      torch.full((batch,), context, dtype=cache.lengths.dtype, device=cache.lengths.device))
    tokens = torch.randint(0, model.cfg.vocab, (batch, q_len), device=model.embed.device)

    def step():
        return model.logits(model(tokens, cache))

    measure = _timer(device)
    with torch.inference_mode():
        if device == "cuda":
            model.static_span = True
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    step()
                graph.replay()
                torch.cuda.synchronize()
            except RuntimeError as e:  # not capturable here: timed eagerly, and the row says so
                print(f"graph capture failed ({str(e).splitlines()[0][:160]}): timed eagerly", flush=True)
                torch.cuda.synchronize()
                return measure(step, repeats), "eager"
            return measure(graph.replay, repeats), "graph"
        step()  # warm-up
        return measure(step, repeats), "eager"


def run(grid: TimingGrid, hardware: str, device: str, progress=print, save=None) -> tuple[pd.DataFrame, dict]:
    """Measure and predict every point of `grid`; `save(table)` is called after each point (a
    run cut short keeps what it measured). A point whose step fails for memory is skipped."""
    import torch

    from speedplan.cost.ops import load_cost_model
    from speedplan.specs.model import get_model
    from speedplan.runtime.transformer import LlamaConfig
    from speedplan.runtime.io.weights import random_model

    spec = replace(get_model(grid.model), dtype=grid.dtype)
    cost = load_cost_model(hardware)  # a bad --hardware fails before any GPU time is spent
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[grid.dtype]
    positions = max(grid.contexts) + max(grid.draft_lens) + 2  # RoPE rows the longest verify reads
    model = random_model(LlamaConfig.from_spec(spec), dtype=dtype, device=device, max_positions=max(8192, positions))
    if device == "cpu":
        model.pack_cpu_weights()
    capacity = (torch.cuda.get_device_properties(0).total_memory if device == "cuda" else 4e9) * 0.85
    rows = []
    for context in grid.contexts:
        for batch in grid.batches:
            for d in grid.draft_lens:
                q = 1 + d
                kv = batch * (context + q + 1) * spec.kv_bytes_per_token(torch.finfo(dtype).bits // 8)
                if spec.weight_bytes(torch.finfo(dtype).bits // 8) + kv > capacity:
                    progress(f"skip B={batch} D={d} L={context}: KV cache does not fit")
                    continue
                try:
                    meas, mode = time_verify(model, batch, q, context, device, grid.repeats)
                except torch.OutOfMemoryError:
                    progress(f"skip B={batch} D={d} L={context}: out of memory")
                    torch.cuda.empty_cache()
                    continue
                rows.append({"batch": batch, "draft_len": d, "context": context, "meas_t_verify": meas, "mode": mode})
                progress(f"B={batch} D={d} L={context}: measured {meas * 1e3:.3f} ms")
                if save is not None:
                    save(pd.DataFrame(rows))
                if device == "cuda":
                    torch.cuda.empty_cache()
    table = pd.DataFrame(rows, columns=["batch", "draft_len", "context", "meas_t_verify", "mode"])
    table.insert(3, "pred_t_verify", predict(table, grid.model, grid.dtype, cost, device)[0])
    return table, summarize(table, [(hardware, cost.origin)], device)


def attended(context: int, q_len: int, device: str) -> int:
    """KV slots the timed step's attention reads: on CUDA the whole cache (`static_span`),
    context + q_len + 1 slots rounded up to the runtime's block; on CPU the prefix and the new
    tokens."""
    if device == "cpu":
        return context + q_len
    from speedplan.runtime.transformer import GPU_SLOT_BLOCK

    return -(-(context + q_len + 1) // GPU_SLOT_BLOCK) * GPU_SLOT_BLOCK


def predict(table: pd.DataFrame, model: str, dtype: str, hardware, device: str = "cuda") -> tuple[np.ndarray, str]:
    """The cost model's verify-step seconds for every (batch, draft_len, context) row of
    `table` under `hardware` (a preset, shipped profile or profile folder, or a CostModel), with
    attention over the slots the step reads on `device`, and the profile's origin."""
    from speedplan.cost.forward import forward_cost
    from speedplan.cost.ops import load_cost_model
    from speedplan.specs.model import get_model

    spec = replace(get_model(model), dtype=dtype)
    cost = load_cost_model(hardware) if isinstance(hardware, (str, Path)) else hardware
    pred = []
    for r in table.itertuples():
        q = int(r.draft_len) + 1
        pred.append(float(forward_cost(cost, spec, int(r.batch), q, attended(int(r.context), q, device) - q).total_s))
    return np.asarray(pred), cost.origin


def _errors(table: pd.DataFrame, pred: np.ndarray) -> dict:
    """Step-time errors, verify-cost-ratio ('speedup') errors and the regret of the best D per
    (B, context) at acceptance ALPHA, of predictions `pred` against `table.meas_t_verify`."""
    t = table.assign(pred=pred)
    err = np.abs(t.pred - t.meas_t_verify) / t.meas_t_verify
    ratios, regrets = [], []
    for _, g in t.groupby(["batch", "context"]):
        base = g[g.draft_len == 0]
        if base.empty:
            continue
        g = g.sort_values("draft_len")
        pred_ratio = g.pred / float(base.pred.iloc[0])
        meas_ratio = g.meas_t_verify / float(base.meas_t_verify.iloc[0])
        ratios += list((np.abs(pred_ratio - meas_ratio) / meas_ratio)[g.draft_len > 0])
        al = (1 - ALPHA ** (g.draft_len + 1)) / (1 - ALPHA)
        meas_tput = al / g.meas_t_verify
        pick = int(np.argmax((al / g.pred).to_numpy()))
        regrets.append(float(1 - meas_tput.iloc[pick] / meas_tput.max()))
    q = lambda x, p: float(np.percentile(x, p)) if len(x) else None
    return {"step_time_median_error": q(err, 50), "step_time_p90_error": q(err, 90),
            "speedup_median_error": q(ratios, 50), "max_regret": max(regrets) if regrets else None}


def summarize(table: pd.DataFrame, profiles: list[tuple[str, str]], device: str) -> dict:
    """The CPU validation's summary keys for the first of `profiles` ((hardware, origin); its
    predictions are `pred_t_verify`), and every profile's errors under "by_profile"."""
    by_profile = {}
    for i, (hardware, origin) in enumerate(profiles):
        column = "pred_t_verify" if i == 0 else f"pred_t_verify_{_column_name(hardware)}"
        by_profile[hardware] = {"cost_origin": origin, **_errors(table, table[column].to_numpy())}
    first = by_profile[profiles[0][0]]
    return {
        "points": int(len(table)), "graph_points": int((table.get("mode", pd.Series(dtype=str)) == "graph").sum()), "device": device, "hardware": profiles[0][0], "cost_origin": profiles[0][1],
        **{k: v for k, v in first.items() if k != "cost_origin"}, "al_median_error": None,
        "by_profile": by_profile,
        "note": "verify step only (random weights): AL not measured; speedup = verify-cost ratio t(1+D)/t(1); "
                f"regret of the best D per (B, context) at alpha={ALPHA} priced with measured times",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _column_name(hardware: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in Path(hardware).name or hardware)


def reprice(folder: Path, hardwares: list[str], device: str = "cuda") -> dict:
    """Predict `folder`/verify_timing.csv's points again from each of `hardwares`; rewrite the
    table (first profile's predictions as `pred_t_verify`, others as extra columns) and
    summary.json (device and grid kept from the measuring run, which writes them before it
    measures; `device` only for a folder without them)."""
    from speedplan.errors import SpeedplanInputError

    path = folder / "verify_timing.csv"
    if not path.is_file():
        raise SpeedplanInputError(f"--reprice {folder}: no verify_timing.csv there (a measuring run writes it)")
    table = pd.read_csv(path)
    missing = [c for c in ("batch", "draft_len", "context", "meas_t_verify") if c not in table]
    if missing:
        raise SpeedplanInputError(f"{path}: no column {missing[0]!r}; is it a verify timing table?")
    summary_path = folder / "summary.json"  # a cut-short measuring run leaves its first, without results
    old = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    model, dtype, device = old.get("model", GPU_GRID.model), old.get("dtype", GPU_GRID.dtype), old.get("device", device)
    table = table[[c for c in ("batch", "draft_len", "context", "meas_t_verify", "mode") if c in table]].copy()
    profiles = []
    for i, hardware in enumerate(hardwares):
        pred, origin = predict(table, model, dtype, hardware, device)
        if i == 0:
            table.insert(3, "pred_t_verify", pred)
        else:
            table[f"pred_t_verify_{_column_name(hardware)}"] = pred
        profiles.append((hardware, origin))
    summary = summarize(table, profiles, device)
    summary.update({k: old[k] for k in ("model", "dtype", "measured") if k in old})
    if old.get("measured_at") or old.get("created"):  # when the GPU measured ("created": when priced)
        summary["measured_at"] = old.get("measured_at") or old["created"]
    write_results(folder, table, summary, "--reprice")
    return summary


def write_results(out: Path, table: pd.DataFrame | None, summary: dict, option: str = "--out") -> None:
    """verify_timing.csv (unless `table` is None), then summary.json, each rendered first and
    renamed into place (`outputs.write_whole`, which makes the folder): a run cut short never
    leaves a truncated file."""
    from speedplan.outputs import write_whole

    if table is not None:
        write_whole(out / "verify_timing.csv", table.to_csv(index=False, float_format="%.6g"), option)
    write_whole(out / "summary.json", json.dumps(summary, indent=1) + "\n", option)


def check_out(out: Path) -> None:
    """Refuse, before any model is built or any file written, an --out that cannot be written:
    a file, a folder below a file, a broken link (`probe_writable`), a folder where no file can be made."""
    from speedplan.errors import SpeedplanInputError
    from speedplan.outputs import probe_writable

    for above in [out, *out.absolute().parents]:
        if above.exists() and not above.is_dir():
            raise SpeedplanInputError(f"--out {out}: " + ("exists and is not a folder" if above == out else
                                                         f"{above} is a file, not a folder"))
    probe_writable(out / "summary.json", "--out")  # also refuses a broken link on the way


class Writer:
    """What a measuring run writes into --out (a folder other stages of the campaign write into
    too: files are replaced, not the folder): nothing until its first point is measured, so a run
    that fails before leaves the folder as it was; after every point the table so far and a
    summary of what measured, without results (a run cut short keeps them, and --reprice prices
    them on that device); at the end the table and the summary."""

    def __init__(self, out: Path, what: dict) -> None:
        self.out, self.what, self.started = out, what, False

    def partial(self, table: pd.DataFrame) -> None:
        if not self.started:  # first the summary that says a run is measuring, then its table
            note = "measuring (a run cut short leaves this; --reprice prices its table)"
            write_results(self.out, None, {**self.what, "points": 0, "note": note})
            self.started = True
        from speedplan.outputs import write_whole

        write_whole(self.out / "verify_timing.csv", table.to_csv(index=False, float_format="%.6g"), "--out")

    def final(self, table: pd.DataFrame, summary: dict) -> None:
        write_results(self.out, table, {**summary, **self.what})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--hardware", action="append", help="profile folder or preset that predicts (repeat with --reprice)")
    parser.add_argument("--out", help="folder for verify_timing.csv and summary.json")
    parser.add_argument("--reprice", metavar="FOLDER", help="predict a measured FOLDER again from each --hardware")
    parser.add_argument("--dry-run", action="store_true", help="tiny CPU grid (what the tests run)")
    args = parser.parse_args(argv)
    if args.reprice:
        summary = reprice(Path(args.reprice), args.hardware or ["h200-sxm"], args.device)
    else:
        if not args.out:
            parser.error("--out is required (or --reprice FOLDER)")
        grid, device, hardware = ((DRY_GRID, "cpu", "cpu-local") if args.dry_run
                                  else (GPU_GRID, args.device, (args.hardware or ["h200-sxm"])[0]))
        out = Path(args.out)
        check_out(out)  # bad input is refused before anything is built or written
        writer = Writer(out, dict(model=grid.model, dtype=grid.dtype, device=device, measured=_device_facts(device)))
        table, summary = run(grid, hardware, device, progress=lambda m: print(m, flush=True), save=writer.partial)
        writer.final(table, summary)
    print(json.dumps({k: summary[k] for k in ("points", "hardware", "step_time_median_error", "step_time_p90_error")}))
    return 0


def _device_facts(device: str) -> dict:
    """What measured: the device's name and the torch / CUDA versions."""
    import platform

    import torch

    facts = {"torch": torch.__version__, "python": platform.python_version()}
    if device == "cuda" and not torch.cuda.is_available():
        from speedplan.errors import SpeedplanInputError

        raise SpeedplanInputError("--device cuda: torch sees no CUDA device here (--dry-run times the tiny grid on CPU)")
    if device == "cuda":
        facts.update(device_name=torch.cuda.get_device_name(0), cuda=torch.version.cuda)
    else:
        facts.update(device_name=platform.processor() or platform.machine())
    return facts


def _main() -> int:
    """main() with input errors as one line and exit 2 (`python -m speedplan.validate.gpu_timing`)."""
    import sys

    from speedplan.errors import SpeedplanInputError

    try:
        return main()
    except SpeedplanInputError as e:
        print(f"gpu_timing: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(_main())
