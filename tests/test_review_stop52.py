"""Stop 52's fixes, each with the input that showed it."""

import dataclasses

import pytest

import speedplan as sp
from speedplan.errors import SpeedplanInputError


@pytest.fixture(scope="module")
def result():
    return sp.sweep(batches=[1, 2, 4, 8, 16], draft_lens=[0, 1, 2, 3])


def test_assigning_frame_refreshes_tables(result):
    # r.best had kept B = 16 after r.frame = r.frame[batch <= 4] until an entry point re-read it
    r = dataclasses.replace(result)
    r.frame = r.frame[r.frame["batch"] <= 4]
    assert r.best["batch"].max() == 4 and r.pareto["batch"].max() <= 4
    assert r.tables_of is r.frame
    r2 = dataclasses.replace(r, frame=r.frame[r.frame["batch"] <= 2])  # tables as given, until read again
    assert r2.read_tables().best["batch"].max() == 2 and r.best["batch"].max() == 4


def test_refused_frame_leaves_result_as_it_was(result):
    r = dataclasses.replace(result)
    before = r.frame
    with pytest.raises(SpeedplanInputError, match="no plain-decoding row"):
        r.frame = r.frame[r.frame["mechanism"] != "none"]
    assert r.frame is before and r.best["batch"].max() == 16


def _adaptive_plan():
    from speedplan.serving.plan import ServingPlan

    return ServingPlan(model="deepseek-v3", mechanism="mtp", draft_len=3, tp=8, mode="adaptive", engine="sglang",
                       schedule=((1, 3), (2, 2), (4, 2), (8, 2), (16, 2), (32, 5), (64, 4), (128, 4), (256, 4)))


def test_sglang_adaptive_falls_back_to_the_reference_d():
    # --speculative-num-steps was the largest candidate (5): where SGLang turns adaptive off with only a
    # warning (attention DP), every batch size ran D = 5, where the plan wanted 3 at B = 1 and 2 at B = 2-16
    from speedplan.serving.sglang import render

    plan = _adaptive_plan()
    launch = render(plan)["sglang_launch.sh"]
    assert "--speculative-num-steps 3 " in launch.replace("\\\n", " ") + " "
    assert "--speculative-num-draft-tokens 4" in launch and "Falling back to static" in launch


def test_sglang_offered_ranges_follow_the_launch():
    # recommendations.json had said D = 5 at B = 32-63; a step of B >= 48 runs 48 requests, the bucket keyed 48
    from speedplan.serving.sglang import adaptive_config, launch_ranges, route

    plan = _adaptive_plan()
    ranges = launch_ranges(plan.schedule, "adaptive", 48)
    assert ranges == [(1, 1, 3), (2, 31, 2), (32, 47, 5), (48, 65536, 4)]
    config = adaptive_config(plan)
    keys = sorted(int(k) for k in config)
    for lo, hi, d in ranges:
        for b in {lo, hi, (lo + hi) // 2} if hi < 1000 else {lo, lo + 100}:
            assert config[str(route(keys, min(b, 48)))]["candidate_steps"] == [d]


def test_recommendations_write_the_launch_ranges():
    from speedplan.plan.engine_outputs import engine_records
    from speedplan.serving.sglang import adaptive_config, route

    r = sp.sweep(model="deepseek-v3", hardware="h200-sxm", tp=8, mechanisms=["mtp"], contexts=[2048])  # adaptive there
    plans = sp.plan_engines(r)
    assert plans["sglang"].mode == "adaptive"
    ranges = engine_records(r, plans)["sglang"]["schedule"]
    config = adaptive_config(sp.serving_plans(r, plans)["sglang"])
    keys = sorted(int(k) for k in config)
    cap = int(plans["sglang"].spec_max_running)
    for lo, hi, d in ranges:  # every offered batch size of each range reaches a bucket holding its D
        for b in range(lo, min(hi, 300) + 1):
            assert config[str(route(keys, min(b, cap)))]["candidate_steps"] == [d], (b, d)


def test_busy_points_are_named_by_check_and_by_the_latency_label(tmp_path):
    # a profile measured while other processes ran (30 of 39 points) was checked and priced without a word
    import csv
    import json
    import shutil

    from speedplan.cost.ops import PROFILE_DIR
    from speedplan.profile.load import load_profile
    from speedplan.profile.tools import busy_points, leave_one_out

    folder = tmp_path / "prof"
    shutil.copytree(PROFILE_DIR / "cpu-local", folder)
    with (folder / "gemm.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows[:10]:
        r["other_cpu"] = "1.4"
    with (folder / "gemm.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    busy, timed = busy_points(folder)
    assert busy >= 10 and timed >= len(rows)
    assert f"{busy} of {timed} points were timed while other processes used" in leave_one_out(folder)["note"]
    meta = json.loads((folder / "meta.json").read_text())
    meta.pop("origin_label", None)
    (folder / "meta.json").write_text(json.dumps({**meta, "busy_points": busy}))
    total = sum(meta["points"].values())
    assert f"{busy} of {total} points timed while the CPU was busy" in load_profile(folder).origin_label


def _profile_copy(tmp_path, name="cpu-local"):
    import shutil

    from speedplan.cost.ops import PROFILE_DIR

    folder = tmp_path / "prof"
    shutil.copytree(PROFILE_DIR / name, folder)
    return folder


def _edit_line(path, line: int, column: str, value: str) -> None:
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[line - 1].split(",")
    cells[header.index(column)] = value
    lines[line - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


def test_profile_rows_refused_with_their_file_line(tmp_path):
    from speedplan.profile.load import load_profile

    folder = _profile_copy(tmp_path)
    gemm = folder / "gemm.csv"
    _edit_line(gemm, 5, "latency_us", "0.001")  # 4x576x576 in 1 ns: 15,000x cpu-local's peak
    with pytest.raises(SpeedplanInputError, match=r"gemm.csv: column 'latency_us' line 5: .*peak"):
        load_profile(folder)
    text = gemm.read_text().splitlines()
    gemm.write_text("\n".join(text[:3] + [""] + text[3:]) + "\n")  # a blank line 4: the bad row is now line 6
    with pytest.raises(SpeedplanInputError, match="line 6:"):
        load_profile(folder)

    folder = _profile_copy(tmp_path / "b")
    _edit_line(folder / "attention.csv", 2, "q_len", "100000")
    with pytest.raises(SpeedplanInputError, match=r"attention.csv: column 'q_len' line 2: 100000 is more than kv_len"):
        load_profile(folder)

    folder = _profile_copy(tmp_path / "c")
    (folder / "attention.csv").rename(folder / "attention.CSV")
    with pytest.raises(SpeedplanInputError, match="only as attention.csv"):
        load_profile(folder)


def test_predict_reads_loose_headers_and_refuses_q_above_kv(tmp_path):
    from speedplan.cost.ops import load_cost_model
    from speedplan.cost.predict import predict_ops_file

    cost = load_cost_model("h100-sxm")
    ops = tmp_path / "ops.csv"
    ops.write_text("OP, Dtype ,m,n,k\ngemm,bf16,1,4096,4096\n")
    assert predict_ops_file(cost, ops, tmp_path / "out.csv") == 1
    ops.write_text("op,dtype,batch,q_len,kv_len,num_heads,num_kv_heads,head_dim,mask\n"
                   "attention,bf16,1,1024,4,32,8,128,causal\n")
    with pytest.raises(SpeedplanInputError, match="row 2: q_len 1024 is more than kv_len 4"):
        predict_ops_file(cost, ops, tmp_path / "out2.csv")
    ops.write_text("Op;dtype\ngemm;bf16\n")
    with pytest.raises(SpeedplanInputError, match=r"found 'Op;dtype'"):
        predict_ops_file(cost, ops, tmp_path / "out3.csv")


def test_a_profile_folder_of_ones_own_is_named_in_the_header(tmp_path, monkeypatch):
    folder = _profile_copy(tmp_path, "cpu-local-xeon")
    monkeypatch.chdir(tmp_path)
    r = sp.sweep(model="smollm2-135m", hardware="prof", batches=[1, 2], draft_lens=[0, 1])
    assert r.meta["profile"] == str(folder.resolve())
    assert f"(profile {folder.resolve()})" in sp.render_summary(r).splitlines()[0]


def test_validate_warns_of_speedups_above_their_al():
    # eagle B=2 D=3 measured 3.41x at AL 1.39 (the machine's speed moved) was printed as a result
    import pandas as pd

    from speedplan.cli.validate import summary_lines
    from speedplan.validate.run import summarize

    row = dict(mechanism="eagle", batch=2, draft_len=3, pred_t_step=0.1, meas_t_step=0.1, pred_acceptance_length=1.4,
               meas_acceptance_length=1.39, pred_speedup=1.2, meas_speedup=3.41, pred_tokens_per_s=10.0,
               meas_tokens_per_s=10.0, verify_tokens=4, context=100)
    plain = {**row, "mechanism": "none", "draft_len": 0, "meas_acceptance_length": 1.0, "meas_speedup": 1.0,
             "verify_tokens": 1}
    fine = {**row, "draft_len": 1, "meas_speedup": 1.3, "verify_tokens": 2}
    summary = summarize(pd.DataFrame([plain, row, fine]))
    assert summary["implausible_points"] == [["eagle", 2, 3, 3.41, 1.39]]
    summary.update(wall_s=1.0, grid={"rounds": 1}, rounds=1)
    warning = summary_lines(summary)[-1]
    assert warning.startswith("warning: 1 point measured a speedup more than 10% above the acceptance length "
                              "(eagle B=2 D=3: 3.41x at AL 1.39)")


def test_run_names_options_its_mechanism_does_not_use():
    from speedplan.runtime.options import DrafterOptions, RunOptions

    assert RunOptions(("hi",), mechanism="eagle-tree", draft_len=3).unused_note() == (
        "note: eagle-tree does not use --draft-len (a tree's D is --tree-depth, 4)")
    assert RunOptions(("hi",), mechanism="ngram", options=DrafterOptions(tree_topk=2, draft_layers=2)).unused_note() == (
        "note: ngram does not use --tree-topk, --draft-layers")
    assert RunOptions(("hi",), mechanism="ngram", draft_len=6).unused_note() is None


def test_prompt_files_name_the_empty_field_and_the_odd_role(tmp_path):
    from speedplan.runtime.options import read_prompts

    f = tmp_path / "p.jsonl"
    f.write_text('{"messages": []}\n')
    with pytest.raises(SpeedplanInputError, match="field 'messages' is empty"):
        read_prompts(f)
    f.write_text('{"messages": [{"role": "wizard", "content": "hi"}]}\n')
    with pytest.raises(SpeedplanInputError, match="role 'wizard' is not one of system, user, assistant"):
        read_prompts(f)


def test_emitted_per_step_counts_what_was_kept():
    from types import SimpleNamespace

    from speedplan.runtime.generate import RunResult

    # two steps each accepting 8 drafts (AL 9), but the text ended after 11 tokens
    r = RunResult(["x"], [[1] * 11], [SimpleNamespace(batch=1, accepted=[8])] * 2, 0.0, 1.0)
    assert r.acceptance_length == 9.0 and r.emitted_per_step == 5.5


def test_hardware_lists_a_file_of_a_new_name(tmp_path):
    # `speedplan hardware FILE.json` had said "unknown hardware 'h100-pcie-like'" (sweep --hardware took the file)
    import json

    from speedplan.report.catalog import hardware_rows
    from speedplan.specs.hardware import PRESET_DIR as HW_DIR

    data = json.loads((HW_DIR / "h100-sxm.json").read_text())
    data["name"] = "h100-pcie-like"
    data["hbm_bytes_per_s"]["value"] = 2.0e12
    f = tmp_path / "h100-pcie-like.json"
    f.write_text(json.dumps(data))
    (row,) = hardware_rows([str(f)])
    assert row["hardware"] == str(f) and row["mem_tb_s"] == 2.0 and row["latency"].startswith("datasheet roofline (roofline efficiencies fitted to ")


def test_a_config_named_like_a_preset_but_of_another_model_is_refused(tmp_path):
    import json
    import shutil

    from speedplan.specs.model import PRESET_DIR, get_model

    folder = tmp_path / "llama-3.1-8b"
    folder.mkdir()
    cfg = json.loads((PRESET_DIR / "qwen3-8b.json").read_text())
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(SpeedplanInputError, match="named like the preset llama-3.1-8b .* but another model"):
        get_model(str(folder))
    shutil.copy(PRESET_DIR / "llama-3.1-8b.json", folder / "config.json")  # the preset's own config: the preset
    assert get_model(str(folder)).name == "llama-3.1-8b"


def test_engine_profiles_refuse_unknown_keys_and_edited_units(tmp_path):
    import json

    from speedplan.engine.profile import get_engine

    data = get_engine("vllm").to_json()
    for change, message in ((lambda d: d.update(memmory={"share": 0.5}), "unknown field 'memmory'"),
                            (lambda d: d["terms"]["host_step_us"].update(unit="ms per step"),
                             "terms.host_step_us.unit is 'ms per step'"),
                            (lambda d: d["terms"]["host_step_us"].update(vlaue=3), "unknown field 'vlaue'")):
        d = json.loads(json.dumps(data))
        change(d)
        f = tmp_path / "e.json"
        f.write_text(json.dumps(d))
        with pytest.raises(SpeedplanInputError, match=message):
            get_engine(str(f))
    d = json.loads(json.dumps(data))
    d["_comment"] = "mine"
    f.write_text(json.dumps(d))
    assert get_engine(str(f)).name == "vllm"


def _config(name: str, **change) -> dict:
    import json

    from speedplan.specs.model import PRESET_DIR

    cfg = json.loads((PRESET_DIR / f"{name}.json").read_text())
    cfg.update(change)
    return cfg


def test_moe_layer_spacing_and_qwen_window_layers_are_read():
    from speedplan.specs.hf_config import from_hf_config

    every = from_hf_config(_config("qwen3-30b-a3b"), "a")
    half = from_hf_config(_config("qwen3-30b-a3b", decoder_sparse_step=2), "b")  # MoE on layers 1, 3, 5, ...
    assert (every.moe_layers, half.moe_layers) == (48, 24) and half.param_count() < 0.6 * every.param_count()
    dsv3 = from_hf_config(_config("deepseek-v3"), "c")
    freq = from_hf_config(_config("deepseek-v3", moe_layer_freq=2), "d")  # i >= 3 and i % 2 == 0
    assert freq.moe_layers == len([i for i in range(61) if i >= 3 and i % 2 == 0]) < dsv3.moe_layers == 58
    swa = from_hf_config(_config("qwen3-8b", use_sliding_window=True, sliding_window=4096, max_window_layers=14), "e")
    assert (swa.window, swa.window_layers) == (4096, 36 - 14)  # layers 14.. attend within the window


def test_config_errors_name_the_file(tmp_path):
    import json

    from speedplan.specs.model import get_model

    for change, message in ((dict(num_key_value_heads=5), r"config.json: model .*kv_heads \(5\).*num_key_value_heads"),
                            (dict(hidden_size=4097, head_dim=None), "'hidden_size' 4097 is not a multiple of "
                                                                    "'num_attention_heads' 32")):
        folder = tmp_path / f"m{len(message)}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(_config("qwen3-8b", **change)))
        with pytest.raises(SpeedplanInputError, match=message):
            get_model(str(folder))


def test_a_json_of_another_name_is_served_as_a_placeholder(tmp_path):
    import json

    from speedplan.specs.model import get_model

    cfg = _config("qwen3-8b")
    cfg.pop("_source")
    f = tmp_path / "fp8q.json"
    f.write_text(json.dumps(cfg))
    assert get_model(str(f)).serve_as() == "<checkpoint folder of fp8q.json>"  # was "fp8q", a bare repo id


def test_memory_typed_in_gb_is_refused_and_new_mechanisms_get_a_colour(tmp_path):
    import json

    from speedplan.report.figures import MECHANISM_COLORS, color as mechanism_color
    from speedplan.cost.ops import load_cost_model
    from speedplan.specs.hardware import PRESET_DIR as HW_DIR

    data = json.loads((HW_DIR / "h100-sxm.json").read_text())
    data["name"], data["memory_bytes"]["value"] = "mine", 80  # GB typed where bytes are meant
    f = tmp_path / "mine.json"
    f.write_text(json.dumps(data))
    with pytest.raises(SpeedplanInputError, match="memory_bytes must be at least 1e8 bytes .*not GB"):
        load_cost_model(str(f))
    colour = mechanism_color("lookahead:alpha=0.7")  # a mechanism added as one file had been drawn black
    assert colour != "#000000" and colour not in MECHANISM_COLORS.values() and colour == mechanism_color("lookahead")


def test_profile_check_names_gemm_spikes():
    from speedplan.cost.ops import PROFILE_DIR
    from speedplan.profile.load import load_profile
    from speedplan.profile.tools import gemm_spikes

    spikes = gemm_spikes(load_profile(PROFILE_DIR / "h100-sxm").tables["gemm"])
    assert spikes[0][:4] == (17.0, 2048.0, 768.0, "fp8") and spikes[0][4] > 2 * spikes[0][5]
    assert gemm_spikes(load_profile(PROFILE_DIR / "cpu-local").tables["gemm"]) == []


def test_a_step_priced_faster_than_plain_decoding_is_noted():
    # DeepSeek-V3 on B200 (TRT-LLM): the fp8 GEMM table is faster at M = 3 than at M = 1, so verifying
    # was priced cheaper than a plain step and the speedup above the AL, without a word (1,452 such rows)
    from speedplan.report.table_notes import cheaper_than_plain_line

    r = sp.sweep(model="deepseek-v3", hardware="b200", tp=8, engine="trtllm", batches=[1, 2, 64])
    odd = r.best[(r.best["mechanism"] != "none") & (r.best["t_step_s"] < 0.999 * r.best["t_plain_s"])]
    assert len(odd) and (odd["speedup"] > odd["acceptance_length"]).all()
    line = cheaper_than_plain_line(r.best)
    assert line.startswith(f"note: at B = {int(odd['batch'].min())}") and line in sp.render_summary(r)
    assert cheaper_than_plain_line(sp.sweep(batches=[1, 8], draft_lens=[0, 2]).best) is None


def test_a_plan_slower_than_plain_decoding_says_so_and_why():
    # SGLang's fixed eagle3-tree plan for GLM-4.7-Flash ran 0.80x of plain decoding at B = 1 with only "worst loss".
    # That plan has since become adaptive (D = 0 where it loses), so the case is a fixed draft-model plan whose
    # one D serves every batch size: at alpha 0.7 it gains up to B = 16 and loses at B = 32 (below SGLang's cap of 48)
    from speedplan.plan.acceptance import Acceptance
    from speedplan.report.plan_lines import engine_plan_lines

    r = sp.sweep(model="llama-3.1-8b", hardware="h100-sxm", engine="sglang", batches=[1, 2, 4, 8, 16, 32],
                 mechanisms=["draft-model:llama-3.2-1b"], acceptance=Acceptance.iid(0.7, "test: alpha 0.7"))
    plans = sp.plan_engines(r, engines=["sglang"])
    assert plans["sglang"].mode == "fixed"
    rows = plans["sglang"].rows
    slow = sorted(int(b) for b, d, s in zip(rows["batch"], rows["draft_len"], rows["speedup"]) if d > 0 and s < 0.9995)
    assert slow == [32] and (rows["speedup"] > 1).sum() == 5, "the case gains at B = 1-16 and loses at B = 32"
    line = next(x for x in engine_plan_lines(plans) if x.lstrip().startswith("sglang"))
    assert f"at B = {', '.join(map(str, slow))} it is slower than plain decoding" in line
    assert "speculation cannot be turned off for some" in line
