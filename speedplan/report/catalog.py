"""What speedplan ships, as rows a notebook or the CLI shows: model presets with their key
numbers, hardware presets and shipped profiles with their datasheet numbers and where their op
latencies come from, engine profiles with what they describe and how their terms were set.

    >>> import speedplan
    >>> speedplan.list_hardware(["h100-sxm"])["bf16_tflops"].iloc[0]
    989.4

Each function returns a pandas DataFrame (one row per entry, full source texts; the CLI cuts
long ones); a name it does not know is a SpeedplanInputError.
"""

from __future__ import annotations

import json
import numbers
import os

import pandas as pd

from speedplan.errors import SpeedplanInputError


def model_rows(configs=None) -> list[dict]:
    """One row per model preset (or per config.json file or folder in `configs`): parameters,
    layers, widths, experts, attention kind, dtype and where it was read from."""
    from speedplan.specs.model import attention_label, get_model, preset_names

    models = [get_model(name) for name in configs or preset_names()]
    variants = ("sliding_window", "linear_attention", "sparse_attention")  # one "attention" column instead
    header = {"experts": "experts_active/total"}  # "8/256": 8 routed experts of 256 run per token
    return [{**{header.get(k, k): v for k, v in m.summary().items() if k not in variants},
             "attention": "; ".join(filter(None, [_latent(m), attention_label(m.summary()) or "full"])),
             "dtype": m.dtype, "source": m.source}
            for m in models]


def _latent(model) -> str:
    """"MLA latent 512+64" for a model whose KV cache is DeepSeek's latent (its kv_heads read 1), else ""."""
    return f"MLA latent {model.mla.kv_lora_rank}+{model.mla.qk_rope_head_dim}" if model.mla else ""


def _hardware_row(h, latency: str | None = None) -> dict:
    """A hardware's row; `latency` (a file's or folder's cost origin) instead of the preset's, which a
    hardware file of a name no preset has cannot look up (it had ended in "unknown hardware")."""
    from speedplan.cost.ops import latency_origin

    peak = lambda dtype: round(h.peak_flops_per_s[dtype] / 1e12, 2) if h.peak_flops_per_s.get(dtype) else "-"  # noqa: E731
    return {"hardware": h.name, "bf16_tflops": peak("bf16"), "fp8_tflops": peak("fp8"),
            "mem_tb_s": round(h.hbm_bytes_per_s / 1e12, 3), "mem_gb": round(h.memory_bytes / 1e9, 1),
            "link_gb_s": round(h.link_bytes_per_s / 1e9, 1), "sms": str(h.sm_count or "-"),
            "latency": latency if latency is not None else latency_origin(h.name), "source": h.source}


def hardware_rows(names=None) -> list[dict]:
    """One row per hardware preset and per shipped profile of a machine without a preset of its
    own (datasheet numbers: TFLOP/s, TB/s, GB as the driver reports memory, link GB/s), or the
    rows of `names`: presets, shipped profiles, hardware JSON files or profile folders."""
    from speedplan.cost.ops import PROFILE_DIR, latency_label, load_cost_model
    from speedplan.profile.load import origin_label
    from speedplan.specs.fallback import describe_fit
    from speedplan.specs.hardware import PRESETS

    rows = [_hardware_row(h) for h in PRESETS.values()]
    for folder in sorted(PROFILE_DIR.iterdir()):  # shipped profiles of a machine that has no preset of its own
        meta_path = folder / "meta.json"
        if folder.name in PRESETS or not meta_path.is_file():
            continue
        meta = json.loads(meta_path.read_text())
        base = next((r for r in rows if r["hardware"] == meta.get("hardware_preset")), None)
        if base is not None:
            rows.append({**base, "hardware": folder.name,
                         "latency": f"{origin_label(meta)} (preset {base['hardware']}'s other facts)",
                         "source": str(meta.get("device_name") or base["source"])})
    if not names:
        return rows
    known = {r["hardware"]: r for r in rows}
    out = []
    for name in names:  # a listed row by name, else a hardware file or profile folder (unknown: an input error)
        if name not in known:
            cost = load_cost_model(name)
            label = latency_label(cost.origin, "", describe_fit(cost.hardware.roofline_fit))  # as the sweep says it
            known[name] = {**_hardware_row(cost.hardware, label), "hardware": str(name)}
        out.append(known[name])
    return out


def engine_rows() -> list[dict]:
    """One row per shipped engine profile: the engine and version it describes, its memory rule
    and how many of its terms were fitted, to what."""
    from speedplan.engine.profile import get_engine, preset_names

    rows = []
    for name in preset_names():
        e = get_engine(name)
        fit = e.fit or {}
        ever = sum(t.source.startswith("fitted") for t in e.terms.values())
        # this fit's terms; a calibrated copy's base terms fitted earlier are not "fitted to" its rows
        fitted = len(fit["fitted"]) if isinstance(fit.get("fitted"), list) else ever
        to = (f" to {len(fit.get('rows', []))} rows{e.fitted_at()} ({fit['described']}), |residual| median "
              f"{fit['median_abs_residual']:.1%}" if fitted and fit.get("described") else "")
        earlier = f"; {ever - fitted} more fitted earlier" if ever > fitted else ""
        rows.append({"engine": e.name, "describes": f"{e.engine} {e.version}", "memory": e.memory.summary(),
                     "terms fitted": f"{fitted} of {len(e.terms)}{to}{earlier}"})
    return rows


def mechanism_rows(model: str | None = None, tp: int = 1, draft_len: int = 3, nodes: int = 16,
                   names: tuple[str, str, str] = ("tp", "draft_len", "model")) -> list[dict]:
    """One row per registered mechanism: the spec `speedplan sweep --mechanism` reads, what the
    target verifies and how it drafts (its module's first sentence). With `model` (a preset's name
    or a config.json): whether a sweep of it at TP `tp` that names no mechanism prices it (else
    why not), the acceptance length its published default gives at `draft_len` (an integer in
    1..16; trees: `nodes` verified nodes, or the topk·D a shallower tree holds: the "nodes"
    column), the positions its drafter holds where its config or the published head states them, and
    where that default comes from. `tp` and `draft_len` are refused without a model;
    `names`: what errors call tp, draft_len and model (the CLI's --tp, --draft-len, --model)."""
    import sys

    from speedplan.plan.mechanisms import REGISTRY

    _check_mechanism_args(model, tp, draft_len, *names)

    rows = []
    for name, cls in REGISTRY.items():
        doc = " ".join((sys.modules[cls.__module__].__doc__ or "").split())
        rows.append({"mechanism": name, "spec": cls.usage or name,
                     "verifies": "tree of N nodes" if cls.is_tree else "chain of 1+D",
                     "drafting": doc.split(". ")[0].rstrip(".")})
    if model is None:
        return rows
    from speedplan.plan.sweep import default_mechanisms
    from speedplan.specs.model import get_model

    target = get_model(model)
    target.check_tp(tp)
    built, skipped = default_mechanisms(target, tp)
    by_name: dict[str, list] = {}
    for mech in built:
        by_name.setdefault(mech.name, []).append(mech)
    out = []
    for row in rows:
        for mech in by_name.get(row["mechanism"], [None]):
            # a tree verifies D to topk·D nodes (plan.grid): `nodes` where the depth holds them, else the most it holds
            held = min(nodes, mech.topk * draft_len) if mech is not None and mech.is_tree else nodes
            al = None if mech is None else float(mech.acceptance_length(draft_len, held))
            out.append({"mechanism": mech.label if mech else row["mechanism"], "spec": row["spec"],
                        "verifies": row["verifies"],
                        "swept": "yes" if mech else f"no: {skipped.get(row['mechanism'], 'not swept by default')}",
                        f"AL at D={draft_len}": "-" if al is None else round(al, 2),
                        "nodes": held if mech is not None and mech.is_tree else "-",
                        # what the drafter holds (plan/drafter_positions.py: AL 1 on vLLM past it)
                        "positions": f"{p[0]:,}" if mech is not None and (p := mech.drafter_positions()) else "-",
                        "acceptance source": mech.acceptance_source if mech else "-"})
    return out


def _check_mechanism_args(model, tp, draft_len, tp_name: str, draft_len_name: str, model_name: str) -> None:
    """`mechanism_rows`' refusals: a draft length that is no integer in 1..16, a TP that is no
    integer >= 1, either given without a model."""
    for value, name, top in ((draft_len, draft_len_name, 16), (tp, tp_name, None)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise SpeedplanInputError(f"{name} {value!r}: must be an integer")
        if value < 1 or (top is not None and value > top):
            raise SpeedplanInputError(f"{name} {value}: must be in 1..{top}" if top else f"{name} {value}: must be >= 1")
    if model is None and (tp != 1 or draft_len != 3):
        raise SpeedplanInputError(f"{tp_name} and {draft_len_name} apply with {model_name} (which mechanisms a sweep of "
                                  f"it prices, and their acceptance length): give {model_name}, or leave them out")


def _names(given, what: str) -> list | None:
    """A list of names or files from one name or path, any iterable of them (a list, a set, a
    numpy array, a Series), or None (every shipped one)."""
    if given is None or isinstance(given, (str, os.PathLike)):
        return None if given is None else [given]
    try:
        names = list(given)  # (numpy's and pandas' strings are str)
    except TypeError:
        names = None
    if names is None or not all(isinstance(g, (str, os.PathLike)) for g in names):
        raise SpeedplanInputError(f"{what}: give a name, a file, or a list of them (or nothing: every shipped one), "
                                  f"got {given!r}")
    return names


def list_mechanisms(model: str | None = None, tp: int = 1, draft_len: int = 3) -> pd.DataFrame:
    """`mechanism_rows` as a DataFrame: every registered mechanism, and with `model` (a preset's
    name or a config.json) which a sweep of it at TP `tp` prices and their acceptance length at
    D = `draft_len` (1..16)."""
    return pd.DataFrame(mechanism_rows(model, tp, draft_len))


def list_models(configs=None) -> pd.DataFrame:
    """`model_rows` as a DataFrame: every model preset, or the models `configs` names (a preset's
    name, a config.json file or folder, or a list of them)."""
    return pd.DataFrame(model_rows(_names(configs, "list_models")))


def list_hardware(names=None) -> pd.DataFrame:
    """`hardware_rows` as a DataFrame: every hardware preset and shipped profile, or those `names`
    names (a preset, a shipped profile, a hardware JSON file or a profile folder, or a list of them)."""
    return pd.DataFrame(hardware_rows(_names(names, "list_hardware")))


def list_engines() -> pd.DataFrame:
    """`engine_rows` as a DataFrame."""
    return pd.DataFrame(engine_rows())
