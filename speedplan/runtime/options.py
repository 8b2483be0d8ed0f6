"""Options of a runtime run, checked before torch is imported (so bad input fails fast)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from speedplan.errors import SpeedplanInputError
from speedplan.specs.files import parse_json, refuse_device

MECHANISMS = ("none", "ngram", "draft-model", "eagle", "eagle-tree", "truncated", "truncated-tree")
MAX_NEW_TOKENS = 65536  # the longest context of a model the runtime loads is checked once it is loaded
MIN_SAMPLING = 1e-6  # the smallest non-zero --temperature and --top-p (float32 logits and probabilities)
MATMULS = ("fp32", "q4_1")  # CPU matmul path: fp32 oneDNN (default) or the GGUF's Q4_1 blocks (kernels/q4.py)


@dataclass(frozen=True)
class DrafterOptions:
    ngram_min: int = 1  # n-gram lookup: shortest suffix n-gram tried (tokens)
    ngram_max: int = 3
    tree_topk: int = 4  # tree mechanisms: children per frontier node
    tree_depth: int = 4  # expansion rounds (the most drafts a step can accept)
    tree_nodes: int = 16  # nodes verified per sequence (root excluded)
    draft_layers: int = 4  # truncated*: the target's first k layers draft
    drafter_weights: str | None = None  # draft-model / eagle: weights file or folder (their modules' default if None)


@dataclass(frozen=True)
class RunOptions:
    prompts: tuple  # strings or message lists
    weights: str = "smollm2"
    mechanism: str = "ngram"
    draft_len: int = 4
    batch: int = 1
    max_new_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    chat: bool = True
    compare_plain: bool = True
    trace: str | None = None
    device: str = "auto"
    options: DrafterOptions = field(default_factory=DrafterOptions)
    matmul: str = "fp32"

    def check(self) -> None:
        if not self.prompts:
            raise SpeedplanInputError("no prompts: pass --prompt or --prompts")
        if self.batch < 1 or self.batch > 64:
            raise SpeedplanInputError(f"--batch must be in 1..64, got {self.batch}")
        if not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise SpeedplanInputError(f"--max-new-tokens must be in 1..{MAX_NEW_TOKENS}, got {self.max_new_tokens}")
        if any(isinstance(p, str) and not p.strip() for p in self.prompts):
            raise SpeedplanInputError("--prompt: an empty prompt (give it some text)")
        if not 0 <= self.draft_len <= 16:
            raise SpeedplanInputError(f"--draft-len must be in 0..16, got {self.draft_len}")
        if self.mechanism not in ("none",) and self.draft_len == 0 and not self.mechanism.endswith("-tree"):
            raise SpeedplanInputError(f"--draft-len must be >= 1 for mechanism {self.mechanism}")
        # logits / 1e-300 overflow to inf and a top-p of 1e-300 is 0 in float32: both ended in torch's
        # "probability tensor contains inf, nan" traceback (a fuzzing run of 2026-12-05)
        if not (self.temperature == 0 or MIN_SAMPLING <= self.temperature < float("inf")):
            raise SpeedplanInputError(f"--temperature must be a finite number, 0 (greedy) or at least {MIN_SAMPLING:g}, "
                                      f"got {self.temperature}")
        if not MIN_SAMPLING <= self.top_p <= 1:
            raise SpeedplanInputError(f"--top-p must be in [{MIN_SAMPLING:g}, 1], got {self.top_p}")
        if self.mechanism not in MECHANISMS:
            raise SpeedplanInputError(f"unknown mechanism {self.mechanism!r}; choose from {', '.join(MECHANISMS)}")
        o = self.options
        for option, value in (("--tree-topk", o.tree_topk), ("--tree-depth", o.tree_depth),
                              ("--tree-nodes", o.tree_nodes), ("--draft-layers", o.draft_layers),
                              ("--ngram-max", o.ngram_max), ("n-gram minimum", o.ngram_min)):
            if value < 1:
                raise SpeedplanInputError(f"{option} must be >= 1, got {value}")
        if self.mechanism.endswith("-tree") and o.tree_depth > o.tree_nodes:  # each level adds at least one node
            raise SpeedplanInputError(f"--tree-depth {o.tree_depth} is more than --tree-nodes {o.tree_nodes}: a tree of "
                                      f"{o.tree_nodes} drafted nodes is at most {o.tree_nodes} deep")
        if o.ngram_min > o.ngram_max:
            raise SpeedplanInputError(f"--ngram-max {o.ngram_max} is below the n-gram minimum {o.ngram_min}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise SpeedplanInputError(f"--device must be auto, cpu or cuda, got {self.device!r}")
        if self.matmul not in MATMULS:
            raise SpeedplanInputError(f"--matmul must be one of {', '.join(MATMULS)}, got {self.matmul!r}")
        if self.matmul == "q4_1" and self.device == "cuda":
            raise SpeedplanInputError("--matmul q4_1 is a CPU kernel; use --device cpu")


def read_prompts(path: str | Path) -> list[str | list[dict]]:
    """prompts.jsonl: one JSON object per line with "prompt" (or "text") or "messages"."""
    path = Path(path)
    if not path.exists():
        raise SpeedplanInputError(f"prompts file not found: {path}")
    refuse_device(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise SpeedplanInputError(f"{path}: cannot read prompts ({getattr(e, 'strerror', None) or e.reason})") from None
    prompts = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        obj = parse_json(line, f"{path}:{i}")
        value = obj.get("messages") or obj.get("prompt") or obj.get("text") if isinstance(obj, dict) else None
        if not value:
            raise SpeedplanInputError(f"{path}:{i}: needs a \"prompt\", \"text\" or \"messages\" field")
        if isinstance(value, list):
            bad = [m for m in value if not (isinstance(m, dict) and isinstance(m.get("role"), str)
                                            and isinstance(m.get("content"), str))]
            if bad:
                raise SpeedplanInputError(f"{path}:{i}: each message needs a \"role\" and a \"content\" text, "
                                          f"got {bad[0]!r}")
        elif not isinstance(value, str) or not value.strip():
            raise SpeedplanInputError(f"{path}:{i}: the prompt must be non-empty text, got {value!r}")
        prompts.append(value)
    if not prompts:
        raise SpeedplanInputError(f"{path}: no prompts")
    return prompts
