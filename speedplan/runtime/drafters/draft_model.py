"""Draft-model drafter: an independent small LM with the target's tokenizer, here a *student*
of SmolLM2 made from a subset of its layers and distilled on text the target generated
(`python -m speedplan.runtime.training.draft_model`).

The student is a runtime `Transformer` with its own KV cache, so `LMDrafter` drives it
(chain drafting, tree scoring, rollback by moving its own length pointer back). What is
trained and stored is small: low-rank (LoRA, Hu et al. 2021) deltas of the kept layers'
matrices, their RMSNorm weights and the final norm; the rest is rebuilt from the target's
GGUF at load time (embedding and the draft-vocabulary rows of lm_head are shared/sliced).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from speedplan.runtime.transformer import Block, Transformer, linear, pack_weight
from speedplan.runtime.drafters.eagle import WEIGHTS_DIR, masked_logits
from speedplan.runtime.drafters.lm import LMDrafter

DRAFT_WEIGHTS = WEIGHTS_DIR / "draft_smollm2.pt"
LORA_MATRICES = ("wqkv", "wo", "w_gate_up", "w_down")


class StudentLM(Transformer):
    """A Transformer over the target's embedding whose logits cover the draft vocabulary only
    (-inf elsewhere; see `masked_logits`)."""

    def set_vocab(self, lm_head_rows: Tensor, vocab: Tensor, vocab_size: int) -> "StudentLM":
        self.lm_head_rows, self.vocab, self.vocab_size = lm_head_rows, vocab, vocab_size
        self.rows_packed = None
        return self

    def pack_cpu_weights(self) -> "StudentLM":
        for block in self.blocks:
            for mod in (block.attn, block.mlp):
                for name in mod.packed:
                    mod.packed[name] = pack_weight(getattr(mod, name))
        self.rows_packed = pack_weight(self.lm_head_rows)
        return self

    def logits(self, hidden: Tensor) -> Tensor:
        """[..., hidden] -> [..., V] fp32, -inf outside the draft vocabulary."""
        return masked_logits(hidden, self.lm_head_rows, self.vocab, self.vocab_size, self.rows_packed)

    @property
    def draft_token_ids(self) -> Tensor:
        if self.vocab.device != self.embed.device:  # follow the model to its device once
            self.vocab = self.vocab.to(self.embed.device)
        return self.vocab

    def draft_logits(self, hidden: Tensor) -> Tensor:
        """[..., hidden] -> [..., Vd] fp32 logits over the draft vocabulary (token ids `vocab`)."""
        return linear(hidden, self.lm_head_rows, self.rows_packed).float()


def student_from_target(target: Transformer, layers: list[int], vocab: Tensor,
                        deltas: dict[str, Tensor] | None = None, norms: dict[str, Tensor] | None = None) -> StudentLM:
    """Student running target blocks `layers` (copied, plus `deltas["{j}.{name}"]` added to
    matrix `name` of the j-th kept block), the target's embedding (shared), and `norms`
    ("{j}.attn_norm", "{j}.mlp_norm", "norm") replacing the copied RMSNorm weights."""
    deltas, norms = deltas or {}, norms or {}
    cfg = target.cfg.truncated(len(layers))
    small = StudentLM(cfg, max_positions=target.rope_cos.shape[0])
    small.embed = target.embed
    small.lm_head_weight = None
    blocks = []
    with torch.no_grad():
        for j, layer in enumerate(layers):
            block = Block(cfg)
            block.load_state_dict(target.blocks[layer].state_dict())
            for name in LORA_MATRICES:
                mod = block.attn if name in ("wqkv", "wo") else block.mlp
                if f"{j}.{name}" in deltas:
                    getattr(mod, name).add_(deltas[f"{j}.{name}"].to(target.embed.dtype))
            for name in ("attn_norm", "mlp_norm"):
                if f"{j}.{name}" in norms:
                    getattr(block, name).copy_(norms[f"{j}.{name}"])
            blocks.append(block)
        small.blocks = nn.ModuleList(blocks)
        small.norm = nn.Parameter(norms.get("norm", target.norm).to(target.embed.dtype).clone())
    small.set_vocab(target.lm_head[vocab].contiguous(), vocab, target.cfg.vocab)
    return small.to(device=target.embed.device, dtype=target.embed.dtype).eval().requires_grad_(False)


def lora_delta(a: Tensor, b: Tensor, scale: float) -> Tensor:
    """LoRA update B @ A * scale: a [r, in], b [out, r] -> [out, in]."""
    return (b.float() @ a.float()) * scale


def load_student(target: Transformer, path: str | Path = DRAFT_WEIGHTS) -> tuple[StudentLM, dict]:
    """(student, provenance meta) from a file written by `training.draft_model`."""
    from speedplan.runtime.io.weights import load_trained

    saved = load_trained(path, target, "draft-model", "draft_model")
    lora, scale = saved["lora"], saved["alpha"] / saved["rank"]
    deltas = {key[: -len(".A")]: lora_delta(lora[key], lora[key[:-1] + "B"], scale) for key in lora if key.endswith(".A")}
    norms = {k: v.float() for k, v in saved["norms"].items()}
    student = student_from_target(target, saved["layers"], saved["vocab"].long(), deltas, norms)
    return student, saved["meta"]


class DraftModelDrafter(LMDrafter):
    """The distilled student as a chain drafter (and frontier scorer for TreeDrafter)."""

    name = "draft-model"

    def __init__(self, student: StudentLM, max_len: int = 4096):
        super().__init__(student, max_len)

    def draft_vocab_size(self) -> int | None:
        return len(self.model.vocab)


def draft_model_drafter(target: Transformer, path: str | Path = DRAFT_WEIGHTS) -> DraftModelDrafter:
    student, _ = load_student(target, path)
    return DraftModelDrafter(student.pack_cpu_weights() if target.lm_head_packed is not None else student)
