"""Stop 53's fixes, each with the input that showed it."""

import re

import pytest

import speedplan as sp
from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanisms import REGISTRY, parse_mechanism
from speedplan.specs.model import get_model


def test_mechanisms_lists_every_registered_one_with_a_spec_that_parses():
    # sweep --help's --mechanism list was hand-written: an added mechanism was not listed anywhere. Each usage
    # NAME[:OPTION,...] must parse as written, its options together after one colon (a review: "eagle3-tree
    # [:topk=K][,vocab=N]" had read as if "eagle3-tree,vocab=N" were a spec)
    rows = sp.list_mechanisms()
    assert sorted(rows["mechanism"]) == sorted(REGISTRY)
    target = get_model("llama-3.1-8b")
    values = {"vocab": "32000", "topk": "4", "tp": "1", "MODEL": "llama-3.2-1b"}
    for name, spec in zip(rows["mechanism"], rows["spec"]):
        m = re.fullmatch(re.escape(name) + r"(?:\[:(.*)\])?", spec)
        assert m, spec
        options = re.findall(r"(\w+)=(?:N|K|PATH)|\b(MODEL)\b", m.group(1) or "")
        given = [f"{key}={values[key]}" if key else values[model] for key, model in options if key != "config"]
        if REGISTRY[name].cannot_run(target) is None:
            parse_mechanism(f"{name}:{','.join(given)}" if given else name, target)  # every option at once, as written
        if not m.group(1) and name != "ngram":  # a spec without options: the parser refuses one
            with pytest.raises(SpeedplanInputError):
                parse_mechanism(f"{name}:vocab=32000", get_model("deepseek-v3"))


def test_mechanisms_for_a_model_match_what_its_sweep_prices():
    rows = sp.list_mechanisms("llama-3.1-8b")
    swept = rows[rows["swept"] == "yes"]
    # context 2000: the published heads hold 2,048 positions, past which vLLM prices AL 1 (plan/drafter_positions.py)
    r = sp.sweep(model="llama-3.1-8b", batches=[1], draft_lens=[3], tree_nodes=[16], contexts=[2000])
    priced = r.frame[r.frame["mechanism"] != "none"]
    assert set(swept["mechanism"]) == set(priced["mechanism"])
    for _, row in swept.iterrows():
        al = priced.loc[priced["mechanism"] == row["mechanism"], "acceptance_length"]
        assert abs(al.iloc[0] - row["AL at D=3"]) < 0.01, row["mechanism"]
        assert priced.loc[priced["mechanism"] == row["mechanism"], "acceptance_source"].iloc[0] == \
            row["acceptance source"]
    left = rows[rows["swept"] != "yes"]
    assert "mtp" in set(left["mechanism"]) and left["swept"].str.startswith("no: ").all()


def test_mechanisms_command(cli):
    out = cli("mechanisms")
    assert out.returncode == 0 and "eagle3-tree[:topk=K,vocab=N" in out.stdout
    out = cli("mechanisms", "--model", "deepseek-v3", "--tp", "8")
    assert out.returncode == 0 and re.search(r"^mtp .* yes ", out.stdout, re.M)
    for args, says in ((("--model", "nope"), "unknown model 'nope'"),
                       (("--model", "deepseek-v3", "--tp", "3"), "--tp 3"),
                       (("--draft-len", "0"), "--draft-len 0")):
        out = cli("mechanisms", *args)
        assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr
    assert "speedplan mechanisms" in cli("sweep", "--help").stdout


def test_no_faster_than_plain_note_where_the_engine_cap_shortens_the_step():
    # SGLang runs 48 requests a speculative step at B = 256: its step was compared with plain decoding's
    # over 256, and the note said the speedup exceeded the AL beside a 0.73x at AL 3.56
    from speedplan.report.table_notes import cheaper_than_plain_line

    r = sp.sweep(model="llama-3.1-70b", tp=4, engine="sglang", batches=[1, 64, 256], mechanisms=["eagle3"])
    capped = r.best[(r.best["mechanism"] != "none") & (r.best["running"] < r.best["batch"])]
    assert len(capped) and (capped["t_step_s"] < capped["t_plain_s"]).any()
    assert (r.best["speedup"] <= 1.001 * r.best["acceptance_length"]).all()
    assert cheaper_than_plain_line(r.best) is None


def test_recommendations_say_not_planned_not_off(tmp_path):
    # TensorRT-LLM on an MI300X was written as {"mechanism": "none", "mode": "off"} (a script reads "launch it
    # without speculation") with SGLang's profile named; one whose memory rule holds nothing got a launch script
    import json

    r = sp.sweep(model="mixtral-8x7b", hardware="mi300x", engine="sglang", batches=[1, 8], draft_lens=[0, 2])
    files = sp.write_outputs(r, tmp_path / "a")
    rec = json.loads((tmp_path / "a" / "recommendations.json").read_text())["engines"]
    assert rec["trtllm"]["mechanism"] is None and rec["trtllm"]["mode"] == "not planned"
    assert rec["trtllm"]["engine_profile"] is None and "cuda" in rec["trtllm"]["how"]
    assert rec["vllm"]["mode"] != "not planned" and rec["vllm"]["per_batch"]
    assert not any("trtllm" in str(f) for f in files)
    one = sp.sweep(model="llama-3.1-70b", hardware="h100-sxm", mechanisms=["eagle3"], batches=[1], draft_lens=[0, 2],
                   contexts=[65536], tp=2, engine="trtllm")
    sp.write_outputs(one, tmp_path / "b")
    rec = json.loads((tmp_path / "b" / "recommendations.json").read_text())["engines"]
    assert rec["vllm"]["mode"] == "not planned" and rec["vllm"]["engine_profile"].startswith("vllm")
    assert rec["trtllm"]["mode"] != "not planned"
    written = {p.name for p in (tmp_path / "b").iterdir()}
    assert not any(n.startswith(("vllm", "sglang")) for n in written) and any(n.startswith("trtllm") for n in written)


def test_the_runtime_profile_on_a_gpu_says_what_it_describes():
    # --engine speedplan-runtime on an H100 gave a 4.48x headline priced with eager PyTorch's CPU terms, unflagged
    line = sp.render_summary(sp.sweep(engine="speedplan-runtime", batches=[1, 8]))
    assert "eager PyTorch without CUDA graphs on a CPU" in line
    cpu = sp.render_summary(sp.sweep(model="smollm2-135m", hardware="cpu-local", engine="speedplan-runtime",
                                     batches=[1, 8]))
    assert "not a serving engine on this GPU" not in cpu and "on a CPU its terms describe" not in cpu


def test_replicated_layers_are_held_whole_on_every_rank():
    # DeepSeek-V3's q_a / kv_a projections and router are ReplicatedLinear in vLLM and SGLang (and priced unsplit
    # by linear_shapes): memory divided them by TP, 0.9 GB short per rank at TP 8, and planned it on 8 H100s
    from speedplan.cost.forward import linear_shapes
    from speedplan.cost.weights import replicated_params, weight_bytes_per_rank

    v3 = get_model("deepseek-v3")
    h, m = v3.hidden, v3.mla
    by_hand = v3.layers * h * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim) + v3.moe_layers * h * v3.moe.num_experts
    assert replicated_params(v3) == by_hand
    router = v3.moe_layers * h * v3.moe.num_experts  # held at 16 bits on every rank (stop 54: ROUTER_BITS)
    assert weight_bytes_per_rank(v3, 8) == pytest.approx((v3.weight_bytes() - by_hand) / 8 + by_hand + router)  # fp8: 1 byte
    split = {s.name: s.n * s.k for s in linear_shapes(v3, 8)}
    assert split["q_a"] == m.q_lora_rank * h and split["kv_a"] == (m.kv_lora_rank + m.qk_rope_head_dim) * h
    dense = get_model("llama-3.1-70b")  # nothing replicated: weights / TP as before
    assert weight_bytes_per_rank(dense, 8) == dense.weight_bytes() / 8
    r = sp.sweep(model="deepseek-v3", hardware="h100-sxm", tp=8, engine="trtllm", batches=[1, 2], draft_lens=[0, 1])
    assert r.meta["weight_bytes_per_gpu"] == weight_bytes_per_rank(v3, 8)
    assert not r.frame.loc[r.frame["batch"] == 2, "fits_memory"].any()


def test_a_head_keeps_its_kv_per_rank_as_the_target_does():
    # the MTP head's MLA latent (one per rank, as the target's) was divided by TP: 0.30 GB where 2.4 GB are held
    from speedplan.plan.mechanisms.heads import head_memory_bytes

    v3 = get_model("deepseek-v3")
    mtp = parse_mechanism("mtp", v3)
    kv8 = head_memory_bytes(mtp.draft, v3, None, 256, 8192, 8) - head_memory_bytes(mtp.draft, v3, None, 0, 8192, 8)
    assert kv8 == pytest.approx(256 * 8192 * mtp.draft.kv_bytes_per_token())  # whole on each of the 8 ranks
    llama = get_model("llama-3.1-8b")  # 8 KV heads split over 8 ranks: an eighth each
    head = parse_mechanism("eagle3", llama).head
    from speedplan.plan.mechanisms.heads import eagle3_memory_bytes

    kv = eagle3_memory_bytes(head, 64, 4096, 8) - eagle3_memory_bytes(head, 0, 4096, 8)
    assert kv == pytest.approx(64 * 4096 * head.layer.kv_bytes_per_token() / 8)



def test_a_profile_meta_that_is_no_object_is_one_line_by_absolute_path_too(tmp_path, cli):
    # an absolute --hardware path was looked up as a shipped profile (PROFILE_DIR / "/abs") and its
    # meta.json read with .get(): a 55-line traceback for meta.json = []
    import shutil

    from speedplan.cost.ops import PROFILE_DIR

    folder = tmp_path / "metalist"
    shutil.copytree(PROFILE_DIR / "h100-sxm", folder)
    (folder / "meta.json").write_text("[]")
    for args in (("sweep", "--hardware", str(folder), "--batch", "1", "--out", str(tmp_path / "o")),
                 ("hardware", str(folder))):
        out = cli(*args)
        assert out.returncode == 2 and out.stderr.strip().endswith("meta.json: expected a JSON object"), out.stderr
        assert "Traceback" not in out.stderr
    assert not (tmp_path / "o").exists()


def test_an_fp8_checkpoint_priced_as_bf16_says_so(tmp_path):
    # an fp8 Llama-3.1-8B on an A100 (no fp8 peak) was priced at bf16, 16.1 GB of weights where 9.1 GB, in silence
    import json

    from speedplan.specs.model import PRESET_DIR

    cfg = {k: v for k, v in json.loads((PRESET_DIR / "llama-3.1-8b.json").read_text()).items() if k != "_source"}
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "quantization_config": {"quant_method": "fp8"}}))
    r = sp.sweep(model=str(tmp_path), hardware="a100-80gb", batches=[1], draft_lens=[0, 1])
    assert r.meta["dtype"] == "bf16" and "fp8 checkpoint priced as bf16" in r.meta["dtype_note"]
    assert r.meta["dtype_note"] in sp.render_summary(r).splitlines()[0]
    assert sp.sweep(model=str(tmp_path), hardware="h100-sxm", batches=[1], draft_lens=[0, 1]).meta["dtype_note"] == ""


def test_a_mistyped_name_gets_the_closest_one(cli):
    for args, said in ((("--model", "llama-3.1-8"), "(did you mean 'llama-3.1-8b'?)"),
                       (("--hardware", "h100sxm"), "(did you mean 'h100-sxm'?)"),
                       (("--mechanism", "eagel3"), "(did you mean 'eagle3'?)")):
        out = cli("sweep", *args, "--batch", "1")
        assert out.returncode == 2 and said in out.stderr and out.stderr.count("\n") == 1, out.stderr
    out = cli("sweep", "--model", "zzz", "--batch", "1")
    assert out.returncode == 2 and "did you mean" not in out.stderr


def test_a_trace_of_another_schema_or_without_meta_is_refused(tmp_path):
    # the sweep's reader took schema "speedplan.trace/9" and a trace with no meta line; the runtime's refuses both
    import json

    from speedplan.plan.acceptance_sources import read_trace

    step = {"type": "step", "batch": 1, "accepted": [2]}
    meta = {"type": "meta", "schema": "speedplan.trace/1", "mechanism": "ngram", "draft_len": 3, "batch": 1}
    for name, lines, said in (("other", [{**meta, "schema": "speedplan.trace/9"}, step], "its schema: 'speedplan.trace/9'"),
                              ("nometa", [step], "no speedplan.trace/1 meta line")):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
        with pytest.raises(SpeedplanInputError, match=re.escape(said)):
            read_trace(path)
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps(x) for x in (meta, step)) + "\n")
    assert read_trace(good)[0]["draft_len"] == 3


def test_a_one_panel_heatmap_is_as_wide_as_its_caption(tmp_path):
    # with one mechanism the heatmap was 4.6 in wide: its title and the caption's engine profile were cut off
    import struct

    from speedplan.report.axes import CAPTION_WIDTH_IN, DPI

    r = sp.sweep(mechanisms=["eagle3"], batches=[1, 8], draft_lens=[0, 1, 2])
    sp.write_outputs(r, tmp_path / "o")
    head = (tmp_path / "o" / "speedup_heatmap.png").read_bytes()[16:24]
    width, _ = struct.unpack(">II", head)
    assert width >= CAPTION_WIDTH_IN * DPI


def test_options_a_run_would_ignore_are_refused(cli, tmp_path):
    for args, said in ((("bench", "--tp", "2", "--grid", "tiny"), "--tp 2: it shapes model: grids without their own @TP only"),
                       (("bench", "--cupy", "--device", "cpu", "--grid", "tiny"), "--cupy cross-checks GEMMs on a CUDA"),
                       (("validate", "--device", "tpu"), "--device 'tpu': unknown device")):
        out = cli(*args, "--out", str(tmp_path / "o"))
        assert out.returncode == 2 and said in out.stderr and out.stderr.count("\n") == 1, out.stderr
        assert not (tmp_path / "o").exists()


def test_vllm_async_is_the_vllm_fit_with_speculative_host_work_hidden():
    # vLLM 0.33.0 schedules asynchronously with EAGLE by default (since v0.14), where the vllm profile's rows
    # (2025) did not: the vllm-async profile prices that, every other term the vllm fit's
    import math

    import numpy as np

    from speedplan.engine.profile import get_engine

    vllm, fast = get_engine("vllm"), get_engine("vllm-async")
    differ = {n for n in vllm.terms if not math.isclose(vllm.terms[n].value, fast.terms[n].value, rel_tol=1e-5)}
    assert differ == {"overlap_spec"}  # (to the refit's tolerance: benchmarks/fit_engine_profiles.py TERM_RTOL)
    assert fast.terms["overlap_spec"].value == 1.0 and "async_scheduling" in fast.terms["overlap_spec"].source
    assert fast.engine == vllm.engine and "v0.14" in fast.version and fast.fit["loo_median_error"] is None
    a, b = (sp.sweep(engine=e, mechanisms=["eagle3"], batches=[1, 64], draft_lens=[0, 3]).frame for e in ("vllm", "vllm-async"))
    key = ["mechanism", "batch", "draft_len"]
    a, b = a.set_index(key), b.set_index(key)
    assert np.allclose(a["t_plain_s"], b["t_plain_s"], rtol=1e-4)  # plain steps hid their host work already
    assert (b.loc[("eagle3", 64, 3), "speedup"] > 1.1 * a.loc[("eagle3", 64, 3), "speedup"])


def test_a_config_naming_no_family_is_served_from_its_folder(tmp_path):
    # a note appended to the source of a config naming neither architectures nor model_type made serve_as
    # write `vllm serve noarch` instead of the folder (a review of the stop's diff)
    import json

    from speedplan.specs.model import PRESET_DIR

    cfg = json.loads((PRESET_DIR / "llama-3.1-8b.json").read_text())
    cfg = {k: v for k, v in cfg.items() if k not in ("_source", "architectures", "model_type")}
    folder = tmp_path / "noarch"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    assert get_model(str(folder)).serve_as() == str(folder.resolve())


def test_the_dtype_note_is_a_gpus_and_follows_a_refusal(tmp_path):
    # a CPU sweep said "its bf16 checkpoint priced as fp32 ... Marlin kernels" (the runtime runs fp32), and an fp8
    # 70B refused on an A100 for 141 GB of weights did not say they were priced at 2 bytes
    import json

    from speedplan.specs.model import PRESET_DIR

    assert sp.sweep(model="smollm2-135m", hardware="cpu-local", batches=[1], draft_lens=[0, 1]).meta["dtype_note"] == ""
    cfg = {k: v for k, v in json.loads((PRESET_DIR / "llama-3.1-70b.json").read_text()).items() if k != "_source"}
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "quantization_config": {"quant_method": "fp8"}}))
    r = sp.sweep(model=str(tmp_path), hardware="a100-80gb", batches=[1], draft_lens=[0, 1])
    assert "fp8 checkpoint priced as bf16" in sp.memory_shortfall(r)


def test_mechanisms_options_without_a_model_are_refused(cli):
    out = cli("mechanisms", "--draft-len", "5")
    assert out.returncode == 2 and "apply with --model" in out.stderr


def test_the_vllm_launch_names_vllm_async_where_the_2025_profile_priced_it(tmp_path):
    r = sp.sweep(mechanisms=["eagle3"], batches=[1, 64], draft_lens=[0, 2, 3], contexts=[2000])  # within its positions
    sp.write_outputs(r, tmp_path / "a")
    assert "--engine vllm-async" in (tmp_path / "a" / "vllm_serve.sh").read_text()
    r = sp.sweep(mechanisms=["eagle3"], batches=[1, 64], draft_lens=[0, 2, 3], contexts=[2000], engine="vllm-async")
    sp.write_outputs(r, tmp_path / "b")
    assert "--engine vllm-async" not in (tmp_path / "b" / "vllm_serve.sh").read_text()


def test_a_name_that_begins_one_choice_suggests_it():
    from speedplan.errors import did_you_mean

    assert did_you_mean("h100", ["a100-80gb", "h100-sxm", "h200-sxm"]) == " (did you mean 'h100-sxm'?)"
    assert did_you_mean("llama", ["llama-3.1-8b", "llama-3.1-70b"]) == ""  # two begin with it: no guess
    assert did_you_mean("zz", ["zzz-1"]) == ""  # too short to guess from
