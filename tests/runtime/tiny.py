"""A tiny random Llama for runtime tests: fast, and scaled so that drafts are sometimes
accepted and sometimes rejected."""

import torch

from speedplan.runtime.io.weights import random_model
from speedplan.runtime.transformer import LlamaConfig

CFG = LlamaConfig(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=97,
                  rope_theta=10000.0, tie_embeddings=True, name="tiny")


def tiny_target(cfg: LlamaConfig = CFG, dtype=torch.float32):
    """Random weights scaled so that each layer matters: a 2-layer truncated drafter then
    agrees with the target often but not always (AL 2.9 chain, 3.2 tree at D=3), and the
    n-gram drafter finds repeats (AL 1.75), so acceptance and rejection paths both run."""
    model = random_model(cfg, seed=1)
    with torch.no_grad():
        model.embed.mul_(10.0)
        for name, p in model.blocks.named_parameters():
            if "norm" not in name:
                p.mul_(5.0)
    return model.to(dtype)


def ragged_prompts(n: int, seed: int = 0) -> list[list[int]]:
    """n prompts of different lengths, each with a repeat for n-gram lookup to find."""
    g = torch.Generator().manual_seed(seed)
    prompts = []
    for i in range(n):
        base = torch.randint(0, CFG.vocab, (3 + (i * 5) % 11,), generator=g).tolist()
        prompts.append(base + base[: 1 + i % 3] + base)
    return prompts
