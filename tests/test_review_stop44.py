"""Review of stop 44's commits (d5efff6..edb19fd): what the review found wrong, each test
failing before its fix.

- `hardware_file` named a stray file in the working folder that shares a preset's name
  (a preset priced the sweep, the outputs said a file did), and did not name a hardware
  JSON given with the spaces `load_cost_model` strips (a file of one's own, perhaps with
  a preset's name, read as the preset).
- An FP8 checkpoint's 16-bit lm_head was priced at "bf16" whatever the hardware: a hardware
  file with fp16 and fp8 peaks but no bf16 one (valid: its default dtype fp16) was refused
  "has no bf16 peak" for every FP8 model, which it priced before.
- recommendations.json's per_batch rows gave tokens_per_s_per_user without the requests a
  step ran: the terminal and report.html mark such a rate ^ (a running request's, SGLang's
  cap of 48), the JSON read as every offered request's.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from speedplan.cost.forward import forward_cost
from speedplan.cost.ops import load_cost_model
from speedplan.plan.pick import recommendations
from speedplan.plan.sweep import sweep
from speedplan.specs.hardware import PRESET_DIR
from speedplan.specs.model import get_model
from tests._heads import long_heads


def test_a_stray_file_named_like_a_preset_is_not_the_hardware_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h100-sxm").write_text("my notes on the H100\n")  # not JSON: load_cost_model takes the preset
    assert load_cost_model("h100-sxm").hardware.name == "h100-sxm"
    assert load_cost_model("h100-sxm").hardware_file == ""
    assert sweep("llama-3.1-8b", "h100-sxm", ["ngram"], [1], [0, 1]).meta["hardware_file"] == ""


def test_a_hardware_json_given_with_spaces_is_still_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.json").write_text((PRESET_DIR / "h100-sxm.json").read_text())  # a preset's name, one's own file
    r = sweep("llama-3.1-8b", " mine.json ", ["ngram"], [1], [0, 1])
    assert r.meta["hardware"] == "h100-sxm" and r.meta["hardware_file"] == str((tmp_path / "mine.json").resolve())


def _no_bf16_hardware(tmp_path):
    data = json.loads((PRESET_DIR / "h100-sxm.json").read_text())
    data.update(name="fp16-fp8-gpu", default_dtype="fp16")
    for dtype in ("bf16", "fp32"):
        data["peak_flops_per_s"].pop(dtype)
    f = tmp_path / "fp16-fp8.json"
    f.write_text(json.dumps(data))
    return f


def test_an_fp8_lm_head_is_priced_at_a_16_bit_rate_the_hardware_has(tmp_path):
    cost = load_cost_model(str(_no_bf16_hardware(tmp_path)))
    fp8 = replace(get_model("llama-3.1-8b"), dtype="fp8", embed_bits=16)  # an FP8 checkpoint: lm_head at 16 bits
    narrow = replace(fp8, embed_bits=0)
    wide_s = forward_cost(cost, fp8, np.array([1.0, 64.0]), 1, 4096).total_s  # refused before: no bf16 peak
    narrow_s = forward_cost(cost, narrow, np.array([1.0, 64.0]), 1, 4096).total_s
    assert (wide_s > narrow_s).all()  # the 16-bit lm_head reads twice the bytes of an fp8 one
    r = sweep(fp8, str(_no_bf16_hardware(tmp_path)), ["ngram"], [1], [0, 1])
    assert r.frame["t_step_s"].gt(0).all()


def test_recommendations_per_batch_say_the_requests_a_step_ran():
    r = sweep("llama-3.1-8b", "h100-sxm", long_heads("eagle3"), [1, 64], [0, 3], engine="sglang")
    rows = {p["batch"]: p for p in recommendations(r)["per_batch"]}
    assert rows[1]["running"] == 1 and rows[64]["running"] == 48  # SGLang's cap: the terminal's ^
    per_offered = rows[64]["tokens_per_s_per_user"] * rows[64]["running"] / 64
    assert per_offered == pytest.approx(rows[64]["tokens_per_s_per_gpu"] / 64, rel=1e-3)
