"""The serving files bound the longest sequence where one sequence of the model's full context does not
fit the KV cache the launch leaves: vLLM refuses to start then (--max-model-len N), SGLang cuts requests
silently (--context-length N), TensorRT-LLM lowers its limit itself (a note, no option). N is the longest
context one sequence fits, rounded down to a multiple of 1,024 tokens, never below the planned context.

The expected N is worked out here from the models' config.json numbers (layers, KV heads, head size,
sliding window, max_position_embeddings) and the engine profile's memory rule, not by calling
`serving.context.context_fit`."""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest
import yaml

import speedplan
from speedplan.engine.memory_rule import usable_bytes
from speedplan.engine.profile import get_engine
from speedplan.errors import SpeedplanInputError
from speedplan.plan.engine_outputs import serving_plans
from speedplan.serving import ServingPlan, render_serving_configs
from speedplan.serving.context import ContextFit
from speedplan.serving.sglang import render as render_sglang
from speedplan.serving.trtllm import YAML_FILE
from speedplan.serving.trtllm import render as render_trtllm
from speedplan.serving.vllm import render as render_vllm
from speedplan.specs.hardware import get_hardware
from speedplan.specs.model import get_model

BF16 = 2  # bytes per KV element
H100 = 81559 * 2 ** 20  # bytes: an H100 SXM's memory as the driver reports it (81,559 MiB, 85.5 GB), the preset's


def plans(model: str, tp: int = 1, contexts=(4096,), mechanisms=("ngram",)) -> dict[str, ServingPlan]:
    result = speedplan.sweep(model=model, hardware="h100-sxm", tp=tp, contexts=contexts, mechanisms=list(mechanisms))
    return serving_plans(result, speedplan.plan_engines(result))


def argv(script: str) -> list[str]:
    """The command of a generated .sh file as argv (comment lines dropped, continuations joined)."""
    body = "\n".join(line for line in script.splitlines() if not line.startswith("#"))
    return shlex.split(body.replace("\\\n", " "))


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def kv_left(engine: str, weights: float, tp: int = 1) -> float:
    """Bytes the engine profile's memory rule leaves for KV cache after `weights` on one H100."""
    device = get_hardware("h100-sxm").memory_bytes
    assert device == H100
    return float(usable_bytes(get_engine(engine).memory, device, weights, tp=tp)) - weights


def longest(left: float, per_token: float, window_per_token: float = 0.0, window: int = 0) -> int:
    """Most tokens L with per_token * L + window_per_token * min(L, window) <= left (L past the window)."""
    return int((left - window_per_token * window) // per_token)


def test_vllm_tight_case_writes_max_model_len():
    """Llama-3.1-70B bf16 at TP 2 on H100s: 70.6 GB of weights per GPU leave 6.4 GB under vLLM's 90% of
    85.5 GB, and its 131,072-token context needs 21.5 GB per GPU for one sequence: vLLM would refuse
    to start. (Qwen3-32B on one H100, the case before the presets stated the driver's 85.5 GB rather
    than the datasheet's 80, now fits: 11.4 GB left, 10.7 GB needed.)"""
    target = get_model("llama-3.1-70b")
    # config.json: num_hidden_layers 80, num_key_value_heads 8, head_dim 128, max_position_embeddings 131072
    assert (target.layers, target.kv_heads, target.head_dim, target.max_context) == (80, 8, 128, 131072)
    per_token = 80 * 2 * (8 // 2) * 128 * BF16  # KV heads split over 2 ranks
    rule = get_engine("vllm").memory
    assert rule.of == "device"
    left = rule.share * H100 - target.weight_bytes() / 2  # ngram loads no drafter
    assert 131072 * per_token > left  # the full context does not fit
    expected = longest(left, per_token) // 1024 * 1024

    p = plans("llama-3.1-70b", tp=2)["vllm"]
    assert p.mechanism == "ngram" and p.context_fit is not None and not p.context_fit.fits
    text = render_vllm(p)["vllm_serve.sh"]
    assert flag(argv(text), "--max-model-len") == str(expected)
    assert expected == 38912 and expected >= max(p.contexts)
    note = [line for line in text.splitlines() if line.startswith("# Note: --max-model-len")]
    assert len(note) == 1 and "131,072 tokens" in note[0] and "refuses to start" in note[0]


def test_sglang_tight_case_writes_context_length():
    """Qwen3-32B bf16 on one H100 under SGLang's default memory (0.830 of the 85.5 GB the driver reports,
    71.0 GB): 65.5 GB of weights leave 5.5 GB, and its 40,960-token context needs 10.7 GB for one
    sequence, so SGLang would cut requests without a word. (gpt-oss-120b, the case while the preset said
    80 GB, now fits: `test_a_windowed_model_needs_only_its_window_on_windowed_layers`.)"""
    target = get_model("qwen3-32b")
    # config.json: num_hidden_layers 64, num_key_value_heads 8, head_dim 128, max_position_embeddings 40960
    assert (target.layers, target.kv_heads, target.head_dim, target.max_context) == (64, 8, 128, 40960)
    per_token = 64 * 2 * 8 * 128 * BF16
    left = kv_left("sglang", target.weight_bytes())  # ngram loads no drafter
    assert 40960 * per_token > left  # the full context does not fit
    expected = longest(left, per_token) // 1024 * 1024

    p = plans("qwen3-32b")["sglang"]
    assert p.context_fit is not None and not p.context_fit.fits
    text = render_sglang(p)["sglang_launch.sh"]
    assert flag(argv(text), "--context-length") == str(expected)
    assert expected == 20480 and expected >= max(p.contexts)
    assert any(line.startswith(f"# Note: --context-length {expected}:") for line in text.splitlines())


def test_a_windowed_model_needs_only_its_window_on_windowed_layers():
    """gpt-oss-120b on one H100: half its layers keep a 128-token window, the rest every token. Under
    vLLM's and TensorRT-LLM's rules a sliding layer holds its window, so the 131,072-token context needs
    4.84 GB, not twice that, and fits. SGLang sizes its sliding-window pool at 0.8 of the full layers'
    tokens (swa_full_tokens_ratio; the profile's window_pool), so there a sequence costs 1.8 x a full
    layer set: 8.7 GB against the 5.8 GB its default leaves after the 65.2 GB of weights, and its file
    bounds the context."""
    target = get_model("gpt-oss-120b")
    # config.json: 36 layers, 8 KV heads of 64, sliding_window 128 on alternate layers, 131072 positions
    assert (target.layers, target.kv_heads, target.head_dim) == (36, 8, 64)
    assert (target.window, target.window_layers, target.max_context) == (128, 18, 131072)
    per_layer_token = 2 * 8 * 64 * BF16
    full = 18 * per_layer_token * 131072 + 18 * per_layer_token * 128
    assert 18 * per_layer_token * 2 * 131072 > kv_left("sglang", target.weight_bytes()) >= full
    assert get_engine("sglang").memory.window_pool == 0.8
    pooled = 18 * per_layer_token * 1.8  # bytes a token of the sequence costs under SGLang's pool
    left = kv_left("sglang", target.weight_bytes())
    assert 131072 * pooled > left
    expected = longest(left, pooled) // 1024 * 1024

    own = plans("gpt-oss-120b")
    for name, p in own.items():
        assert p.context_fit is not None, name
        if name == "sglang":
            assert p.context_fit.full_kv_bytes == pytest.approx(131072 * pooled) and p.context_fit.limit == expected
            continue
        assert p.context_fit.fits and p.context_fit.limit is None, name
        assert p.context_fit.full_kv_bytes == full, name  # ngram and plain decoding load no drafter
    text = "\n".join(render_serving_configs({n: p for n, p in own.items() if n != "sglang"}).values())
    assert "--max-model-len" not in text and "max_seq_len" not in text
    assert flag(argv(render_serving_configs({"sglang": own["sglang"]})["sglang_launch.sh"]), "--context-length") == str(expected)


def test_trtllm_tight_case_writes_only_a_note():
    """Llama-3.1-70B at TP 2: TensorRT-LLM lowers max_seq_len to its pool itself, so no option is written,
    only the note with the value that would fix it."""
    target = get_model("llama-3.1-70b")
    assert (target.layers, target.kv_heads, target.head_dim, target.max_context) == (80, 8, 128, 131072)
    per_token = 80 * 2 * (8 // 2) * 128 * BF16  # KV heads split over 2 ranks
    rule = get_engine("trtllm").memory
    assert rule.of == "free after weights"
    weights = target.weight_bytes() / 2
    left = rule.share * (H100 - weights)
    assert 131072 * per_token > left
    expected = longest(left, per_token) // 1024 * 1024

    p = plans("llama-3.1-70b", tp=2)["trtllm"]
    assert p.context_fit is not None and p.context_fit.limit == expected
    files = render_trtllm(p)
    assert "max_seq_len" not in yaml.safe_load(files[YAML_FILE]) and "--max_seq_len" not in argv(files["trtllm_serve.sh"])
    notes = [line for line in files["trtllm_serve.sh"].splitlines() if "No max_seq_len is written" in line]
    assert len(notes) == 1 and f"max_seq_len: {expected} to {YAML_FILE}" in notes[0]


def test_the_limit_is_never_below_the_planned_context():
    p = plans("llama-3.1-70b", tp=2, contexts=(4096, 16384))["vllm"]
    n = int(flag(argv(render_vllm(p)["vllm_serve.sh"]), "--max-model-len"))
    assert n % 1024 == 0 and n >= 16384 == max(p.contexts)
    # rounding down to 1,024 would fall below a planned context that is no multiple of it: the plan wins
    fit = ContextFit(max_context=40960, full_kv_bytes=10e9, kv_left_bytes=6e9, weight_bytes=66e9,
                     fits_context=24900, planned_context=24700, rule="90% of 85.5 GB")
    assert fit.limit == 24700
    assert replace(fit, planned_context=4096).limit == 24576
    assert replace(fit, kv_left_bytes=10e9).limit is None  # it fits: nothing to write


def test_default_sweep_writes_nothing_new():
    """Llama-3.1-8B on one H100 (the default): 131,072 tokens need 17.2 GB, which every engine leaves."""
    target = get_model("llama-3.1-8b")
    full = 131072 * target.layers * 2 * target.kv_heads * target.head_dim * BF16
    result = speedplan.sweep()
    own = serving_plans(result, speedplan.plan_engines(result))
    for name, p in own.items():
        assert p.context_fit is not None and p.context_fit.fits and p.context_fit.limit is None, name
        assert p.context_fit.full_kv_bytes >= full  # the drafter's KV is counted on top
    assert full < kv_left("vllm", target.weight_bytes())
    files = render_serving_configs(own)
    assert files == render_serving_configs({n: replace(p, context_fit=None) for n, p in own.items()})
    text = "\n".join(files.values())
    assert "--max-model-len" not in text and "--context-length" not in text and "max_seq_len" not in text


def test_hand_built_fit_reaches_every_engine_and_plain_launches():
    fit = ContextFit(max_context=131072, full_kv_bytes=21.5e9, kv_left_bytes=1.4e9, weight_bytes=70.6e9,
                     fits_context=8827, planned_context=4096, rule="90% of 85.5 GB")
    for mechanism in ("eagle3", "none"):
        p = ServingPlan(model="llama-3.1-70b", mechanism=mechanism, draft_len=3 if mechanism != "none" else 0,
                        schedule=((1, 3),) if mechanism != "none" else (), tp=2, context_fit=fit)
        assert flag(argv(render_vllm(p)["vllm_serve.sh"]), "--max-model-len") == "8192"
        assert flag(argv(render_sglang(p)["sglang_launch.sh"]), "--context-length") == "8192"
        assert "max_seq_len: 8192" in render_trtllm(p)["trtllm_serve.sh"]


def test_a_context_fit_of_the_wrong_type_is_one_clear_error():
    with pytest.raises(SpeedplanInputError, match=r"^context_fit must be a ContextFit") as e:
        ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=3, schedule=(), context_fit=8192)
    assert "\n" not in str(e.value)


def test_docs_example_is_what_the_sweep_writes():
    """docs/serving.md quoted `--max-model-len 18432` for Qwen3-32B on one H100, a figure of the datasheet's
    80 GB; with the 85.5 GB the driver reports, its default sweep (plans that load an EAGLE-3 head) writes
    36,864 for vLLM and 14,336 for SGLang, and Llama-3.1-70B at TP 2 writes 29,696 for vLLM (review, 2026-12-05)."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text()
    for model, tp, engine, option, file in (("qwen3-32b", 1, "vllm", "--max-model-len", "vllm_serve.sh"),
                                            ("qwen3-32b", 1, "sglang", "--context-length", "sglang_launch.sh"),
                                            ("llama-3.1-70b", 2, "vllm", "--max-model-len", "vllm_serve.sh")):
        result = speedplan.sweep(model=model, hardware="h100-sxm", tp=tp)
        own = serving_plans(result, speedplan.plan_engines(result))
        value = flag(argv(render_serving_configs({engine: own[engine]})[file]), option)
        assert value is not None and f"`{option} {value}`" in doc, (model, engine, value)
    assert "18432" not in doc


def test_a_plain_launch_is_not_said_to_load_a_drafter():
    """A plan that turns speculation off loads no drafter: its note said the KV was "target and drafter"."""
    from speedplan.plan.mechanisms import parse_mechanism
    from speedplan.serving.context import context_fit

    target, rule = get_model("qwen3-32b"), get_engine("sglang").memory
    plain = context_fit(target, None, rule, H100, 1, 0, 1, 4096)
    assert not plain.drafter and not plain.fits
    assert "(the target alone: plain decoding loads no drafter)" in plain.why() and "target and drafter" not in plain.why()
    eagle = context_fit(target, parse_mechanism("eagle3", target), rule, H100, 1, 3, 4, 4096)
    assert eagle.drafter and "(target and drafter)" in eagle.why() and eagle.fits_context < plain.fits_context
