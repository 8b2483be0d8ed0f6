"""Options of a runtime run, checked before torch is imported (so bad input fails fast).

`RunOptions.check()` and `DrafterOptions.check()` refuse every field of the wrong kind or out of
range with one `SpeedplanInputError` line: the Python API let a string prompt run one prompt
per character, a float batch fail inside `generate`, a `Path` fail in `load_target` (audit of
2026-12-05). Paths may be `str` or `os.PathLike`; whole numbers `int` or numpy integers (not
bool, not float); other numbers finite reals. Valid values of another kind (a `Path`, a numpy
integer, a list of prompts) are normalized on construction to `str`, `int`, `float`, `tuple`.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from speedplan.errors import SpeedplanInputError
from speedplan.specs.files import parse_json, refuse_device

IMPLAUSIBLE = 1.10  # a speedup above AL by more than this factor cannot come from speculation: warn (run, validate)

MECHANISMS = ("none", "ngram", "draft-model", "eagle", "eagle-tree", "truncated", "truncated-tree")
MAX_NEW_TOKENS = 65536  # the longest context of a model the runtime loads is checked once it is loaded
MIN_SAMPLING = 1e-6  # the smallest non-zero --temperature and --top-p (float32 logits and probabilities)
MATMULS = ("fp32", "q4_1")  # CPU matmul path: fp32 oneDNN (default) or the GGUF's Q4_1 blocks (kernels/q4.py)
MAX_ROUNDS = 20  # --rounds: plain + speculative pairs timed (api.run)
SEED_RANGE = (-2 ** 63, 2 ** 64 - 1)  # what torch.Generator.manual_seed takes


def tree_capacity(topk: int, depth: int) -> int:
    """The most nodes (root excluded) a top-k tree of this depth holds: `topk` children of the
    root, then `topk` children of each of the `topk` frontier nodes at every later level."""
    return topk + (depth - 1) * topk * topk


def is_whole(value) -> bool:
    """An int or numpy integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value) -> bool:
    """An int, float or numpy number, not a bool (finiteness is checked by each field's range)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def path_text(value, name: str, flag: str, optional: bool = False) -> str | None:
    """A str or os.PathLike path as non-empty text; SpeedplanInputError otherwise."""
    if value is None and optional:
        return None
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str) or not text.strip():
        raise SpeedplanInputError(f"{name} ({flag}) must be a path or name as text or a pathlib.Path"
                                  f"{' (or None)' if optional else ''}, got {value!r}")
    return text


def _normalize(obj, paths: tuple[str, ...]) -> None:
    """In __post_init__ of a frozen dataclass: valid values of another kind to the plain one
    (Path -> str, numpy integer -> int, numpy float -> float); anything else is left for check()."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.name in paths and isinstance(value, os.PathLike) and isinstance(os.fspath(value), str):
            value = os.fspath(value)
        elif is_whole(value) and type(value) is not int:
            value = int(value)
        elif f.type in ("float", float) and is_real(value) and type(value) is not float:
            value = float(value)
        object.__setattr__(obj, f.name, value)


def _whole(value, name: str, flag: str, lo: int, hi: int | None = None, span: str | None = None) -> None:
    span = span or (f"in {lo}..{hi}" if hi is not None else f">= {lo}")
    if not is_whole(value):
        raise SpeedplanInputError(f"{name} ({flag}) must be an integer {span}, got {value!r} ({type(value).__name__})")
    if value < lo or (hi is not None and value > hi):
        raise SpeedplanInputError(f"{flag} must be {span}, got {value}")


def _choice(value, name: str, flag: str, choices: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in choices:
        raise SpeedplanInputError(f"{name} ({flag}) must be one of {', '.join(choices)}, got {value!r}")


def _flag(value, name: str, flag: str) -> None:
    if not isinstance(value, bool) and type(value).__name__ != "bool_":  # numpy's bool too
        raise SpeedplanInputError(f"{name} ({flag}) must be True or False, got {value!r} ({type(value).__name__})")


def check_prompts(prompts) -> None:
    """A list or tuple of prompts, each non-empty text or a list of {"role", "content"} messages."""
    if isinstance(prompts, (str, bytes)):
        raise SpeedplanInputError(f"prompts must be a list of prompts, got one {type(prompts).__name__}: wrap it in "
                                  f"a list, prompts=[{prompts!r:.40}] (a string would run one prompt per character)")
    if not isinstance(prompts, (list, tuple)):
        raise SpeedplanInputError(f"prompts must be a list or tuple of prompts (texts or message lists), got "
                                  f"{type(prompts).__name__}")
    if not prompts:
        raise SpeedplanInputError("no prompts: pass --prompt or --prompts")
    for i, p in enumerate(prompts):
        if isinstance(p, list):
            check_messages(p, f"prompts[{i}]")
        elif not isinstance(p, str):
            raise SpeedplanInputError(f"prompts[{i}] must be text or a list of {{\"role\", \"content\"}} messages, "
                                      f"got {p!r:.60} ({type(p).__name__})")
        elif not p.strip():
            raise SpeedplanInputError("--prompt: an empty prompt (give it some text)")


ROLES = ("system", "user", "assistant")  # the roles SmolLM2's chat template was trained on


def check_messages(messages: list, where: str) -> None:
    bad = [m for m in messages if not (isinstance(m, dict) and isinstance(m.get("role"), str)
                                       and isinstance(m.get("content"), str))]
    if bad or not messages:
        raise SpeedplanInputError(f"{where}: each message needs a \"role\" and a \"content\" text, "
                                  f"got {bad[0] if bad else messages!r}")
    odd = [m["role"] for m in messages if m["role"] not in ROLES]
    if odd:  # the chat template would print any role; a typo ("assistent") is not one the model learned
        raise SpeedplanInputError(f"{where}: role {odd[0]!r} is not one of {', '.join(ROLES)}")


@dataclass(frozen=True)
class DrafterOptions:
    ngram_min: int = 1  # n-gram lookup: shortest suffix n-gram tried (tokens)
    ngram_max: int = 3
    tree_topk: int = 4  # tree mechanisms: children per frontier node
    tree_depth: int = 4  # expansion rounds (the most drafts a step can accept)
    tree_nodes: int = 16  # nodes verified per sequence (root excluded); at most tree_capacity(topk, depth)
    draft_layers: int = 4  # truncated*: the target's first k layers draft
    drafter_weights: str | None = None  # draft-model / eagle: weights file or folder (their modules' default if None)

    def __post_init__(self) -> None:
        _normalize(self, ("drafter_weights",))

    @property
    def nodes_run(self) -> int:
        """The nodes a tree verifies: --tree-nodes, capped at what the tree holds."""
        return min(self.tree_nodes, tree_capacity(self.tree_topk, self.tree_depth))

    def check(self) -> None:
        # a top-k above the drafter's vocabulary ended in torch's "selected index k out of range" traceback, and a
        # tree of 8,100 nodes ran for minutes without a line: the same kind of caps as --draft-len 16, --batch 64
        for name, flag, high in (("tree_topk", "--tree-topk", 64), ("tree_depth", "--tree-depth", 16),
                                 ("tree_nodes", "--tree-nodes", 256), ("draft_layers", "--draft-layers", None),
                                 ("ngram_max", "--ngram-max", None), ("ngram_min", "n-gram minimum", None)):
            _whole(getattr(self, name), name, flag, 1, *([high] if high else []))
        if self.ngram_min > self.ngram_max:
            raise SpeedplanInputError(f"--ngram-max {self.ngram_max} is below the n-gram minimum {self.ngram_min}")
        path_text(self.drafter_weights, "drafter_weights", "trained drafter weights", optional=True)


@dataclass(frozen=True)
class RunOptions:
    prompts: tuple  # strings or message lists (a list is taken as a tuple)
    weights: str = "smollm2"  # or a pathlib.Path
    mechanism: str = "ngram"
    draft_len: int = 4
    batch: int = 1
    max_new_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    chat: bool = True
    compare_plain: bool = True
    trace: str | None = None  # or a pathlib.Path
    device: str = "auto"
    options: DrafterOptions = field(default_factory=DrafterOptions)
    matmul: str = "fp32"
    rounds: int = 2  # plain + speculative pairs timed, alternating; the speedup is read by paired_ratio (api.run)

    def __post_init__(self) -> None:
        _normalize(self, ("weights", "trace"))
        if isinstance(self.prompts, list):
            object.__setattr__(self, "prompts", tuple(self.prompts))

    def check(self) -> None:
        check_prompts(self.prompts)
        path_text(self.weights, "weights", "--weights")
        path_text(self.trace, "trace", "--trace", optional=True)
        if not isinstance(self.mechanism, str) or self.mechanism not in MECHANISMS:
            raise SpeedplanInputError(f"unknown mechanism {self.mechanism!r}; choose from {', '.join(MECHANISMS)}")
        _whole(self.batch, "batch", "--batch", 1, 64)
        _whole(self.max_new_tokens, "max_new_tokens", "--max-new-tokens", 1, MAX_NEW_TOKENS)
        _whole(self.draft_len, "draft_len", "--draft-len", 0, 16)
        _whole(self.seed, "seed", "--seed", *SEED_RANGE, span="in -2**63..2**64-1")
        _whole(self.rounds, "rounds", "--rounds", 1, MAX_ROUNDS)
        if self.mechanism not in ("none",) and self.draft_len == 0 and not self.mechanism.endswith("-tree"):
            raise SpeedplanInputError(f"--draft-len must be >= 1 for mechanism {self.mechanism}")
        # logits / 1e-300 overflow to inf and a top-p of 1e-300 is 0 in float32: both ended in torch's
        # "probability tensor contains inf, nan" traceback (a fuzzing run of 2026-12-05)
        if not is_real(self.temperature):
            raise SpeedplanInputError(f"temperature (--temperature) must be a number, 0 (greedy) or at least "
                                      f"{MIN_SAMPLING:g}, got {self.temperature!r} ({type(self.temperature).__name__})")
        if not (self.temperature == 0 or MIN_SAMPLING <= self.temperature < float("inf")):
            raise SpeedplanInputError(f"--temperature must be a finite number, 0 (greedy) or at least {MIN_SAMPLING:g}, "
                                      f"got {self.temperature}")
        if not is_real(self.top_p):
            raise SpeedplanInputError(f"top_p (--top-p) must be a number in [{MIN_SAMPLING:g}, 1], got {self.top_p!r} "
                                      f"({type(self.top_p).__name__})")
        if not MIN_SAMPLING <= self.top_p <= 1:
            raise SpeedplanInputError(f"--top-p must be in [{MIN_SAMPLING:g}, 1], got {self.top_p}")
        _flag(self.chat, "chat", "False is --raw")
        _flag(self.compare_plain, "compare_plain", "--compare/--no-compare")
        if not isinstance(self.options, DrafterOptions):
            raise SpeedplanInputError(f"options must be a DrafterOptions, e.g. DrafterOptions(tree_topk=2), got "
                                      f"{type(self.options).__name__}")
        o = self.options
        o.check()
        if self.mechanism.endswith("-tree") and o.tree_depth > o.tree_nodes:  # each level adds at least one node
            raise SpeedplanInputError(f"--tree-depth {o.tree_depth} is more than --tree-nodes {o.tree_nodes}: a tree of "
                                      f"{o.tree_nodes} drafted nodes is at most {o.tree_nodes} deep")
        if self.device not in ("auto", "cpu", "cuda"):
            raise SpeedplanInputError(f"--device must be auto, cpu or cuda, got {self.device!r}")
        if self.matmul not in MATMULS:
            raise SpeedplanInputError(f"--matmul must be one of {', '.join(MATMULS)}, got {self.matmul!r}")
        if self.matmul == "q4_1" and self.device == "cuda":
            raise SpeedplanInputError("--matmul q4_1 is a CPU kernel; use --device cpu")

    def unused_note(self) -> str | None:
        """A line for stderr naming options set away from their defaults that this mechanism does not read
        (--mechanism eagle-tree --draft-len 3 ran D = 4, the tree's depth, without a word)."""
        default, o, tree = DrafterOptions(), self.options, self.mechanism.endswith("-tree")
        unused = []
        if self.draft_len != 4 and (tree or self.mechanism == "none"):
            unused.append("--draft-len" + (f" (a tree's D is --tree-depth, {o.tree_depth})" if tree else ""))
        if not tree:
            unused += [flag for name, flag in (("tree_topk", "--tree-topk"), ("tree_depth", "--tree-depth"),
                                               ("tree_nodes", "--tree-nodes")) if getattr(o, name) != getattr(default, name)]
        if self.mechanism != "ngram" and o.ngram_max != default.ngram_max:
            unused.append("--ngram-max")
        if not self.mechanism.startswith("truncated") and o.draft_layers != default.draft_layers:
            unused.append("--draft-layers")
        notes = [f"note: {self.mechanism} does not use {', '.join(unused)}"] if unused else []
        if self.rounds != _DEFAULT_ROUNDS and (not self.compare_plain or self.mechanism == "none"):  # a changed value only
            why = "--mechanism none has no speculative run" if self.mechanism == "none" else "--no-compare runs no plain one"
            notes.append(f"note: --rounds {self.rounds} times plain and speculative runs in pairs; {why}, so one round")
        if self.temperature == 0 and self.top_p != 1:
            notes.append(f"note: --top-p {self.top_p:g} has no effect at --temperature 0 (greedy decoding takes the "
                         "most likely token)")
        return "\n".join(notes) or None

    def tree_note(self) -> str | None:
        """A line for stderr when --tree-nodes asks for more nodes than the tree can hold."""
        o = self.options
        if not self.mechanism.endswith("-tree") or o.nodes_run == o.tree_nodes:
            return None
        return (f"note: --tree-nodes {o.tree_nodes}: a tree of --tree-topk {o.tree_topk} and --tree-depth "
                f"{o.tree_depth} holds at most {o.nodes_run} nodes ({o.tree_topk} + {o.tree_depth - 1}·{o.tree_topk}²), "
                f"so each step verifies {o.nodes_run} (raise --tree-depth or --tree-topk for more)")


_DEFAULT_ROUNDS = next(f.default for f in fields(RunOptions) if f.name == "rounds")


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
        key = next((k for k in ("messages", "prompt", "text") if isinstance(obj, dict) and k in obj), None)
        if key is None:
            raise SpeedplanInputError(f"{path}:{i}: needs a \"prompt\", \"text\" or \"messages\" field")
        value = obj[key]
        if not value:  # {"messages": []} had been told its field was missing
            raise SpeedplanInputError(f"{path}:{i}: field {key!r} is empty")
        if isinstance(value, list):
            check_messages(value, f"{path}:{i}")
        elif key == "messages":  # {"messages": "hi"} had been run as the text prompt "hi", with no chat roles
            raise SpeedplanInputError(f"{path}:{i}: field 'messages' must be a list of {{\"role\", \"content\"}} "
                                      f"messages, got {value!r:.40} (text goes in \"prompt\")")
        elif not isinstance(value, str) or not value.strip():
            raise SpeedplanInputError(f"{path}:{i}: the prompt must be non-empty text, got {value!r}")
        prompts.append(value)
    if not prompts:
        raise SpeedplanInputError(f"{path}: no prompts")
    return prompts
