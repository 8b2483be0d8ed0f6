"""Does an attention kernel's utilisation depend on batch × KV heads, or on batch alone?
Checked on the shipped measured tables before `speedplan.profile.attention` transfers a
query across KV heads.

    python benchmarks/bench_attention_kv_heads.py

For each shipped GPU profile (h100-sxm, h200-sxm, b200; AIConfigurator's measurements) and
each table (decode `attention.csv`, causal prefill `prefill.csv`), it takes every ordered
pair of measured configurations with the same dtype, head_dim and group size G = heads / KV
heads but different KV heads (source kvh_s, target kvh_t, r = kvh_t / kvh_s), and predicts
each measured target point (batch b, kv_len or seq_len L) from the source:

- equal batch (the rule before): the source's latency per KV head at the same b and L,
  times kvh_t / kvh_s (its utilisation at the same batch);
- equivalent batch (the hypothesis): the source's latency at batch b · r and the same L
  (its utilisation at the same batch × KV heads; with G, head_dim and L equal the roofline
  time is the same, so the prediction is that latency as measured).

Only points where the source measured both b and b · r are scored, so both rules answer the
same set. The error of one point is max(pred / meas, meas / pred) − 1; the script prints its
median, 90th percentile and maximum per GPU and table, and by ranges of b · r; then, for
the points whose equivalent batch lies below the source's smallest measured batch (b · r < 1:
one sequence with fewer KV heads than the source), three ways to extrapolate below batch 1
(`below_one`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

PROFILES = Path(__file__).resolve().parents[1] / "speedplan" / "data" / "profiles"
GPUS = ("h100-sxm", "h200-sxm", "b200")
TABLES = (("attention.csv", "kv_len", "decode"), ("prefill.csv", "seq_len", "prefill"))


def pair_errors(df: pd.DataFrame, length: str) -> pd.DataFrame:
    """One row per scored target point: the equal-batch and equivalent-batch predictions'
    log errors, with the pair's r."""
    df = df[df.get("q_len", 1) == 1] if "q_len" in df else df
    df = df.assign(group=df.num_heads / df.num_kv_heads)
    out = []
    for (_, hd, g), sub in df.groupby(["dtype", "head_dim", "group"]):
        kvhs = sorted(sub.num_kv_heads.unique())
        lat = {k: sub[sub.num_kv_heads == k].set_index(["batch", length]).latency_us for k in kvhs}
        for ks in kvhs:
            src = lat[ks]
            for kt in kvhs:
                if kt == ks:
                    continue
                r = kt / ks
                tgt = lat[kt]
                b, L = (tgt.index.get_level_values(i).to_numpy() for i in (0, 1))
                same = src.reindex(list(zip(b, L))).to_numpy()
                equiv = src.reindex(list(zip(b * r, L))).to_numpy()
                ok = np.isfinite(same) & np.isfinite(equiv)
                meas = tgt.to_numpy()[ok]
                out.append(pd.DataFrame({
                    "r": r, "head_dim": hd, "group": g, "batch": b[ok], "L": L[ok],
                    "equal": np.log(same[ok] * r / meas),
                    "equivalent": np.log(equiv[ok] / meas),
                }))
    return pd.concat(out, ignore_index=True)


def below_one(df: pd.DataFrame, length: str) -> dict[str, np.ndarray]:
    """Points with b · r < 1: one sequence of a configuration with fewer KV heads than the
    source, which no source batch matches. Log errors of three extrapolations below the
    source's batch 1: its utilisation held (what equal batch answers), its latency held, and
    log utilisation continued with the slope of its batch 1 → 2 interval clipped to [0, 1]."""
    df = df.assign(group=df.num_heads / df.num_kv_heads)
    out = {"utilisation held": [], "latency held": [], "first-interval slope": []}
    for _, sub in df.groupby(["dtype", "head_dim", "group"]):
        one = {k: s[s.batch == 1].set_index(length).latency_us for k, s in sub.groupby("num_kv_heads")}
        two = {k: s[s.batch == 2].set_index(length).latency_us for k, s in sub.groupby("num_kv_heads")}
        for ks in one:
            for kt in one:
                if kt < ks:
                    r = kt / ks
                    common = one[ks].index.intersection(one[kt].index).intersection(two[ks].index)
                    s1, s2, meas = (t[common].to_numpy() for t in (one[ks], two[ks], one[kt]))
                    slope = np.clip(np.log(2 * s1 / s2) / np.log(2), 0.0, 1.0)  # d log u / d log b
                    out["utilisation held"].append(np.log(s1 * r / meas))
                    out["latency held"].append(np.log(s1 / meas))
                    out["first-interval slope"].append(np.log(s1 * r ** (1 - slope) / meas))
    return {k: np.concatenate(v) for k, v in out.items()}


def summary(log_err: np.ndarray) -> str:
    e = np.exp(np.abs(log_err)) - 1
    return f"median {np.median(e):6.1%}  p90 {np.quantile(e, 0.9):7.1%}  max {e.max():7.1%}"


def main() -> None:
    for gpu in GPUS:
        for fname, length, label in TABLES:
            df = pd.read_csv(PROFILES / gpu / fname)
            err = pair_errors(df, length)
            print(f"{gpu:9s} {label:7s} {len(err):5d} points")
            print(f"    equal batch      {summary(err.equal.to_numpy())}")
            print(f"    equivalent batch {summary(err.equivalent.to_numpy())}")
            for lo, hi in ((1, 16), (16, 256), (256, 1e9)):
                sel = err[(err.batch * err.r >= lo) & (err.batch * err.r < hi)] if "r" in err else err
                if len(sel):
                    print(f"      b·r in [{lo}, {hi:g}) {len(sel):5d} pts: equal {summary(sel.equal.to_numpy())}"
                          f" | equivalent {summary(sel.equivalent.to_numpy())}")
            for rule, e in below_one(df, length).items():
                print(f"    b·r < 1, {rule:20s} {len(e):4d} pts: {summary(e)}")


if __name__ == "__main__":
    main()
