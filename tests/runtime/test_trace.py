"""Trace files follow docs/trace.md, and `speedplan run` behaves as a CLI (JSON, exit 2)."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from speedplan.runtime.drafters.lm import LMDrafter, truncated_target  # noqa: E402
from speedplan.runtime.drafters.ngram import NgramDrafter  # noqa: E402
from speedplan.runtime.drafters.tree import TreeDrafter  # noqa: E402
from speedplan.runtime.generate import generate  # noqa: E402
from speedplan.runtime.io.trace import SCHEMA, TraceMeta, read_trace, write_trace  # noqa: E402

from tests.runtime.tiny import ragged_prompts, tiny_target  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_torch_thread")

META_KEYS = {"type", "schema", "model", "mechanism", "draft_len", "tree", "batch", "device", "dtype",
             "temperature", "top_p", "created"}
STEP_KEYS = {"type", "step", "batch", "context", "accepted", "t_draft_s", "t_verify_s", "t_accept_s",
             "t_overhead_s", "t_step_s"}


@pytest.mark.parametrize("mechanism", ["none", "ngram", "truncated-tree"])
def test_trace_schema(tmp_path, mechanism):
    model = tiny_target()
    drafter, d = {"none": (None, 0), "ngram": (NgramDrafter(), 3),
                  "truncated-tree": (TreeDrafter(LMDrafter(truncated_target(model, 2)), 2, 3, 6), 3)}[mechanism]
    result = generate(model, ragged_prompts(5), drafter, d, batch=4, max_new_tokens=10)
    meta = TraceMeta("tiny", mechanism, d, drafter.tree_shape() if drafter else None, 4, "cpu", "float32", 0.0, 1.0)
    path = write_trace(tmp_path / "t.jsonl", meta, result)
    lines = [json.loads(s) for s in path.read_text().splitlines()]
    assert set(lines[0]) == META_KEYS and lines[0]["schema"] == SCHEMA
    steps = [s for s in lines if s["type"] == "step"]
    for s in steps:
        extra = set(s) - STEP_KEYS
        assert extra == ({"accepted_ranks", "offered_ranks"} if mechanism.endswith("tree") else set())
        assert len(s["accepted"]) == len(s["context"]) == s["batch"] <= 4
        assert all(0 <= a <= d for a in s["accepted"])
        assert abs(s["t_step_s"] - (s["t_draft_s"] + s["t_verify_s"] + s["t_accept_s"] + s["t_overhead_s"])) < 1e-6
        if "accepted_ranks" in s:
            assert [len(r) for r in s["accepted_ranks"]] == s["accepted"]
            assert all(1 <= k <= 2 for r in s["accepted_ranks"] for k in r)
            for a, taken, offered in zip(s["accepted"], s["accepted_ranks"], s["offered_ranks"]):
                assert len(offered) in (a, a + 1)  # the last accepted node offers children unless a leaf
                assert all(r in node for r, node in zip(taken, offered))  # each taken rank was offered
    if mechanism == "none":
        assert all(a == 0 for s in steps for a in s["accepted"])
    summary = lines[-1]
    assert summary["type"] == "summary" and summary["steps"] == len(steps)
    emitted = sum(sum(s["accepted"]) + s["batch"] for s in steps) / sum(s["batch"] for s in steps)
    assert summary["acceptance_length"] == pytest.approx(emitted)
    meta_r, steps_r, summary_r = read_trace(path)
    assert len(steps_r) == len(steps) and summary_r == summary


def test_read_trace_rejects_bad_files(tmp_path):
    """The runtime's reader is the planner's (specs.trace_records) asking for every field the runtime writes."""
    meta = {"type": "meta", "schema": SCHEMA, "draft_len": 2, "batch": 2}
    step = {"type": "step", "step": 0, "batch": 2, "context": [5, 6], "accepted": [1, 2], "t_draft_s": 0.1,
            "t_verify_s": 0.2, "t_accept_s": 0.0, "t_overhead_s": 0.0, "t_step_s": 0.3}
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps(r) for r in (meta, step, {"type": "summary", "steps": 1})) + "\n")
    assert read_trace(good)[1] == [step] and read_trace(good)[2] == {"type": "summary", "steps": 1}
    for n, (lines, says) in enumerate((
            ([step], "no speedplan.trace/1 meta line"),
            ([meta, step | {"accepted": [1, 3]}], "exceeds the meta's draft_len"),
            ([meta, {k: v for k, v in step.items() if k != "t_step_s"}], "lacks t_step_s"),
            ([meta, step | {"context": [5]}], "one length per sequence"),
            ([meta, step, meta, step], "a second meta line"))):
        bad = tmp_path / f"bad{n}.jsonl"
        bad.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
        with pytest.raises(ValueError, match=says):
            read_trace(bad)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "speedplan.cli", "run", *args], capture_output=True, text=True, timeout=300)


def test_cli_bad_input_exits_2():
    for args in (["--prompt", "hi", "--batch", "0"], ["--prompt", "hi", "--mechanism", "medusa"], []):
        r = cli(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def tiny_hf_folder(folder):
    """A Llama-family HF folder with a byte-level BPE tokenizer.json (256 bytes + 2 specials)."""
    from speedplan.runtime.transformer import LlamaConfig
    from speedplan.runtime.io.tokenizer import bytes_to_unicode
    from speedplan.runtime.io.weights import write_safetensors

    vocab = {c: b for b, c in bytes_to_unicode().items()}
    specials = [{"id": 256, "content": "<|im_start|>", "special": True}, {"id": 257, "content": "<|im_end|>", "special": True}]
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab, "merges": []},
                                                       "added_tokens": specials}))
    template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "chat_template": template}))
    cfg = LlamaConfig(hidden=32, layers=2, heads=4, kv_heads=2, head_dim=8, intermediate=64, vocab=258, name="t")
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64, "vocab_size": 258,
        "tie_word_embeddings": True}))
    model = tiny_target(cfg)
    sd = {"model.embed_tokens.weight": model.embed, "model.norm.weight": model.norm}
    for i, b in enumerate(model.blocks):
        p = f"model.layers.{i}."
        wq, wk, wv = b.attn.wqkv.split([32, 16, 16])
        gate, up = b.mlp.w_gate_up.chunk(2)
        sd |= {p + "self_attn.q_proj.weight": wq, p + "self_attn.k_proj.weight": wk, p + "self_attn.v_proj.weight": wv,
               p + "self_attn.o_proj.weight": b.attn.wo, p + "mlp.gate_proj.weight": gate, p + "mlp.up_proj.weight": up,
               p + "mlp.down_proj.weight": b.mlp.w_down, p + "input_layernorm.weight": b.attn_norm,
               p + "post_attention_layernorm.weight": b.mlp_norm}
    write_safetensors(folder / "model.safetensors", {k: v.contiguous() for k, v in sd.items()})
    return folder


def test_cli_json_hf_folder(tmp_path):
    folder = tiny_hf_folder(tmp_path)
    trace = tmp_path / "trace.jsonl"
    r = cli("--prompt", "def add(a, b): return a + b", "--prompt", "x = 1; x = 1; x = 1", "--weights", str(folder),
            "--batch", "2", "--mechanism", "ngram", "--draft-len", "2", "--max-new-tokens", "8", "--json",
            "--trace", str(trace))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {"text", "acceptance_length", "tokens_per_s", "speedup"} <= set(out)
    assert len(out["text"]) == 2 and out["acceptance_length"] >= 1.0 and out["tokens_per_s"] > 0 and out["speedup"] > 0
    assert out["identical_to_plain"] is True
    meta, steps, _ = read_trace(trace)
    assert meta["mechanism"] == "ngram" and meta["batch"] == 2 and steps


def test_hf_tokenizer_roundtrip(tmp_path):
    from speedplan.runtime.io.tokenizer import BPETokenizer

    tok = BPETokenizer.from_hf_folder(tiny_hf_folder(tmp_path))
    text = "héllo <|im_end|> wörld\n\t12"
    ids = tok.encode(text)
    assert 257 in ids and tok.decode(ids, skip_special=False) == text
    assert tok.eos_ids == [257]


def test_unreadable_weights_and_prompts_exit_2(tmp_path):
    """A file gguf cannot parse, and a prompts file that is not text: one line, not gguf's or
    Python's traceback (2026-12-03: ValueError 'GGUF magic invalid', UnicodeDecodeError)."""
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(bytes(range(256)) * 4)
    for args, word in ((["--prompt", "hi", "--weights", str(junk)], "not a readable GGUF file"),
                       (["--prompts", str(junk)], "cannot read prompts")):
        r = cli(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert word in r.stderr


def test_malformed_hf_folders_exit_2(tmp_path):
    """--weights FOLDER: malformed config.json, a file that is not safetensors, tensors of other
    shapes than the config gives: one line each (were JSONDecodeError, UnicodeDecodeError and
    torch's RuntimeError tracebacks)."""
    import torch

    from speedplan.runtime.io.weights import write_safetensors

    cfg = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 64, "vocab_size": 258}
    cases = []
    for name, config, weights in (
            ("json", "{bad", None),
            ("junk", json.dumps(cfg), b"\xf5" * 64),
            ("shape", json.dumps(cfg), {"model.embed_tokens.weight": torch.zeros(258, 33)})):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(config)
        if isinstance(weights, bytes):
            (folder / "model.safetensors").write_bytes(weights)
        elif weights is not None:
            write_safetensors(folder / "model.safetensors", weights)
        cases.append(folder)
    for folder, word in zip(cases, ("malformed JSON", "not a readable safetensors file", "do not match the config")):
        r = cli("--prompt", "hi", "--weights", str(folder))
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert word in r.stderr


def test_a_trace_path_that_cannot_be_written_fails_before_generating(tmp_path):
    """--trace inside a file, or on /proc: one line and exit 2 before any weights load (until
    2026-12-03 the /proc case generated first, then died with a traceback)."""
    import os

    from speedplan.cli.app import run

    (tmp_path / "f").write_text("")
    assert run(["run", "--prompt", "hi", "--trace", str(tmp_path / "f" / "t.jsonl")]) == 2
    if os.path.isdir("/proc/self"):
        assert run(["run", "--prompt", "hi", "--trace", "/proc/speedplan-trace.jsonl"]) == 2


def test_the_trace_probe_touches_nothing_of_the_users(tmp_path):
    """The probe makes and removes a uniquely named file; a user's t.jsonl.tmp stays, and a run
    that fails on another option leaves no folder behind."""
    from speedplan.cli.app import run

    (tmp_path / "t.jsonl.tmp").write_text("notes")
    assert run(["run", "--prompt", "hi", "--weights", str(tmp_path / "none.gguf"), "--trace",
                str(tmp_path / "new" / "t.jsonl")]) == 2
    assert (tmp_path / "t.jsonl.tmp").read_text() == "notes" and not (tmp_path / "new").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl.tmp"]
