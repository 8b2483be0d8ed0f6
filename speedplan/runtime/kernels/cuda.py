"""CUDA path: bf16 weights and graph-captured decode/verify steps.

Untested on the CPU-only development machine this was written on; it is kept small on
purpose. `static_span` makes every forward attend over the whole preallocated cache under the
mask, so a step's shapes depend only on (active batch, tokens per sequence) and
torch.compile(mode="reduce-overhead") can capture it as a CUDA graph (one per shape).
"""

from __future__ import annotations

import torch

from speedplan.runtime.transformer import Transformer


def prepare_cuda(model: Transformer, dtype: torch.dtype = torch.bfloat16, compile_steps: bool = True) -> Transformer:
    """Move to the GPU in `dtype` and wrap the forward for graph capture."""
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    model = model.to(device="cuda", dtype=dtype)
    if compile_steps:
        model.static_span = True
        model.forward = torch.compile(model.forward, mode="reduce-overhead", dynamic=False)
    return model
