"""What every speculative-decoding mechanism tells the planner, and the registry of them.

A mechanism is one module in this package defining one `Mechanism` subclass with a `name`;
`speedplan.plan.mechanisms` finds it on import. Each answers, vectorised over the sweep grid:

- `verify_tokens(D, N)`: tokens per sequence in the target's verify pass;
- `acceptance_length(D, N)`: expected tokens emitted per target step (bonus token included);
- `draft_cost(...)`: the drafter's GPU work per target step, as a `ForwardCost` (seconds);
- `host_draft_s(B, D)`: drafting work on the host (seconds; n-gram lookup);
- `upkeep_cost(...)`: the forward a loaded drafter with a KV cache runs at D = 0 (seconds);
- `extra_memory_bytes(...)`: weights and KV cache the drafter adds on the busiest GPU;
- `build(arg, target, acceptance)`: the mechanism from a spec such as `eagle-tree:topk=8`,
  with its published default acceptance when the user gave none (`default`, from
  speedplan.plan.defaults: keyed by the target, and for draft models by the draft);
- `cannot_run(target)`: why the mechanism does not apply to a model (None if it does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from speedplan.cost.forward import ForwardCost
from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.specs.model import ModelSpec


MAX_TOPK = 64  # children a tree may keep per node

@dataclass(frozen=True)
class Mechanism:
    """One mechanism as the planner sweeps it: its acceptance and where that came from."""

    name: ClassVar[str] = ""
    is_tree: ClassVar[bool] = False
    # Mechanisms of one head share one acceptance vector: a tree and its chain (eagle-tree's
    # family is "eagle"); an `--acceptance FAMILY:...` reaches every member.
    family: ClassVar[str] = ""
    # The spec `speedplan sweep --mechanism` reads, options in brackets ("" : the name alone).
    usage: ClassVar[str] = ""
    # Its drafter runs on the host from the accepted tokens (n-gram lookup): engines may not overlap such steps
    # (EngineProfile term host_draft_overlap).
    drafts_on_host: ClassVar[bool] = False

    acceptance: Acceptance
    acceptance_source: str

    def __post_init__(self) -> None:
        topk = getattr(self, "topk", None)  # trees keep the top-k children per level
        if self.is_tree and topk is not None and not 1 <= topk <= MAX_TOPK:
            raise SpeedplanInputError(f"mechanism {self.name}: topk must be in 1..{MAX_TOPK}")

    @property
    def label(self) -> str:
        """The name rows of the sweep carry (draft models add the draft's name)."""
        return self.name

    @classmethod
    def family_name(cls) -> str:
        return cls.family or cls.name

    # ---- shape of one target step ---------------------------------------------------
    def verify_tokens(self, draft_len, nodes) -> np.ndarray:
        """Tokens per sequence in the verify pass: 1 + D for a chain; a tree's N draft nodes
        plus the root (the last accepted token)."""
        return np.where(self.is_tree, np.asarray(nodes) + 1, np.asarray(draft_len) + 1)

    def acceptance_length(self, draft_len, nodes) -> np.ndarray:
        if self.is_tree:
            return self.acceptance.tree_al(draft_len, nodes, getattr(self, "topk", None))
        return self.acceptance.chain_al(draft_len)

    # ---- drafting ---------------------------------------------------------------------
    def draft_cost(self, cost, target: ModelSpec, batch, draft_len, context, nodes, tp: int) -> ForwardCost:
        """GPU time to draft D tokens (or a depth-D tree) for `batch` sequences (seconds)."""
        return ForwardCost.zeros(np.broadcast_shapes(*(np.shape(x) for x in (batch, draft_len, context, nodes))))

    def upkeep_cost(self, cost, target: ModelSpec, batch, context, tp: int, logits: bool) -> ForwardCost:
        """GPU time of the forward a loaded drafter runs in a step whose draft length is 0, over
        the step's one token per sequence, to keep its KV cache current for when drafting
        resumes (seconds); `logits`: whether that forward also computes the drafter's logits.
        Zero for drafters without a KV cache (n-gram lookup, Medusa heads)."""
        return ForwardCost.zeros(np.broadcast_shapes(np.shape(batch), np.shape(context)))

    def drafter_key(self) -> tuple:
        """What identifies the drafter `upkeep_cost` prices: mechanisms that load the same one
        (a head's chain and its tree) share it."""
        return (self.label,)

    def drafter_positions(self) -> tuple[int, str] | None:
        """(positions, what says so): the sequence length the drafter holds (its config's
        max_position_embeddings, with rope scaling), or None where that is unknown or the drafter
        holds no positions of its own. Past them vLLM drafts nothing and SGLang's drafter runs on for
        nothing (`plan.drafter_positions`: how each counts, and the caution a sweep past them gets)."""
        return None

    def host_draft_s(self, batch, draft_len) -> np.ndarray:
        """Host time of drafting per target step (seconds); zero for GPU drafters."""
        return np.zeros(np.broadcast_shapes(np.shape(batch), np.shape(draft_len)))

    def extra_memory_bytes(self, target: ModelSpec, batch, context, tp: int, window_pool=None) -> np.ndarray:
        """Weights and KV the drafter adds on the most loaded GPU (bytes); `window_pool` the engine
        memory rule's, for a drafter with sliding-window layers (`ModelSpec.kv_bytes_per_rank`)."""
        return np.zeros(np.broadcast_shapes(np.shape(batch), np.shape(context)))

    # ---- what the engine step model needs of drafting ------------------------------------
    def draft_forwards(self, draft_len, nodes) -> np.ndarray:
        """Sequential draft forward passes per target step (each pays the engine's launches)."""
        return np.zeros(np.broadcast_shapes(np.shape(draft_len), np.shape(nodes)))

    def tree_levels(self, draft_len, nodes) -> np.ndarray:
        """Levels a dynamic tree's drafting grows per target step (the engine term tree_level_us):
        D for a top-k tree, 0 for a chain and for Medusa's static tree."""
        return np.zeros(np.broadcast_shapes(np.shape(draft_len), np.shape(nodes)))

    def draft_layers(self) -> int:
        """Decoder layers in one draft forward."""
        return 0

    def draft_rows(self, batch, draft_len, nodes) -> np.ndarray:
        """Positions the drafter proposes or scores per target step (B·D for a chain)."""
        return np.zeros(np.broadcast_shapes(np.shape(batch), np.shape(draft_len), np.shape(nodes)))

    def draft_logits(self, batch, draft_len, nodes) -> np.ndarray:
        """Logits the drafter's sampler reads per target step (rows × vocabulary)."""
        return np.zeros(np.broadcast_shapes(np.shape(batch), np.shape(draft_len), np.shape(nodes)))

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def cannot_run(cls, target: ModelSpec) -> str | None:
        """Why this mechanism does not apply to `target`, or None."""
        return None

    @classmethod
    def skip_by_default(cls, target: ModelSpec) -> str | None:
        """Why a sweep that names no mechanisms leaves this one out (None: it is swept)."""
        return cls.cannot_run(target)

    @classmethod
    def build(cls, arg: str, target: ModelSpec, acceptance: Acceptance | None) -> "Mechanism":
        """From the part of the spec after the colon (`topk=8`, a draft model name, or "")."""
        if arg:
            raise SpeedplanInputError(f"mechanism {cls.name} takes no options, got {arg!r:.60}")
        return cls(*cls.resolve_acceptance(acceptance, target))

    @classmethod
    def default(cls, target: ModelSpec) -> tuple[Acceptance, str]:
        """The published default for this target, with the row it came from."""
        raise NotImplementedError(f"mechanism {cls.name} has no published default; pass --acceptance")

    @classmethod
    def resolve_acceptance(cls, acceptance: Acceptance | None, target: ModelSpec, **context) -> tuple[Acceptance, str]:
        """The user's (or a trace's) acceptance, else the published default with its row."""
        if acceptance is not None:
            extension = acceptance.extension(cls.is_tree)
            return acceptance, acceptance.source + (f" ({extension})" if extension else "")
        return cls.default(target, **context)


def parse_options(spec: str, arg: str, allowed: tuple[str, ...], text: tuple[str, ...] = ()) -> dict:
    """`topk=8,vocab=32000` → {"topk": 8, "vocab": 32000}; only `allowed` keys, integers
    except the `text` keys (e.g. `config=PATH`), kept as strings."""
    options: dict = {}
    for item in filter(None, arg.split(",")):
        key, eq, value = item.partition("=")
        if not eq or key not in allowed + text:
            names = [k + "=N" for k in allowed] + [k + "=PATH" for k in text]
            raise SpeedplanInputError(f"mechanism {spec!r:.60}: options are {', '.join(names) or 'none'}")
        if key in text:
            options[key] = value
            continue
        try:
            options[key] = int(value)
        except ValueError:
            raise SpeedplanInputError(f"mechanism {spec!r:.60}: {key} takes an integer") from None
    return options


class ChainDrafting:
    """What a chain drafter tells the engine model: one forward of `draft_shape()` (a ModelSpec
    whose vocab is the drafter's output vocabulary) per drafted token, B rows of logits each."""

    def draft_shape(self) -> ModelSpec:
        raise NotImplementedError

    def draft_forwards(self, draft_len, nodes) -> np.ndarray:
        return chain_forwards(draft_len, nodes)

    def draft_layers(self) -> int:
        return self.draft_shape().layers

    def draft_rows(self, batch, draft_len, nodes) -> np.ndarray:
        return np.asarray(batch, float) * chain_forwards(draft_len, nodes)

    def draft_logits(self, batch, draft_len, nodes) -> np.ndarray:
        return self.draft_rows(batch, draft_len, nodes) * self.draft_shape().vocab


class TopkTree:
    """A dynamic tree grown from a chain head (EAGLE-2 style): level 1 drafts from one position
    per sequence, in the pass that also runs the verified tokens (1 + D per sequence, as a
    chain's first pass: SGLang's draft extend, the runtime's `score_frontier`;
    first_pass_tokens below), each later level the top-k frontier; the target verifies N nodes
    with a tree mask.
    A subclass gives `one_pass(cost, target, batch, q_len, context, tp, first)`, the head's
    pass over q_len tokens per sequence, and a `topk` field."""

    is_tree = True
    options = ("topk", "vocab")

    def tree_levels(self, draft_len, nodes) -> np.ndarray:
        return np.asarray(draft_len, dtype=float) + 0 * np.asarray(nodes, dtype=float)

    def draft_rows(self, batch, draft_len, nodes) -> np.ndarray:
        return tree_rows(batch, draft_len, self.topk) + 0 * np.asarray(nodes, dtype=float)

    def draft_logits(self, batch, draft_len, nodes) -> np.ndarray:
        return self.draft_rows(batch, draft_len, nodes) * self.draft_shape().vocab

    def draft_cost(self, cost, target, batch, draft_len, context, nodes, tp):
        batch, draft_len, context, nodes = np.broadcast_arrays(
            *(np.asarray(x, float) for x in (batch, draft_len, context, nodes)))
        first = self.one_pass(cost, target, batch, first_pass_tokens(draft_len), context, tp, True)  # a chain's first
        level = self.one_pass(cost, target, batch, self.topk, context + nodes / 2, tp, False)
        return first + level.scaled(np.maximum(draft_len - 1, 0))


# The drafter's first pass after verification runs over every position the target verified,
# 1 + D per sequence, the rejected ones padded in, so that its shapes do not depend on how many
# were accepted; it writes their KV and scores one position per sequence (logits at B rows):
# - vLLM: EagleProposer.propose runs the head over all `target_token_ids` and computes logits
#   at `last_token_indices` (vllm/v1/spec_decode/eagle.py at 008603a3); the padded drafter
#   batch is the default (`disable_padded_drafter_batch: bool = False`, vllm/config/speculative.py
#   at f19b16d9); MTP goes through the same proposer. A draft model writes its KV for every
#   accepted token the same way.
# - SGLang: the draft extend after verification runs `speculative_num_steps + 1` tokens per
#   request (EAGLEDraftExtendCudaGraphRunner.num_tokens_per_bs,
#   python/sglang/srt/speculative/eagle_draft_extend_cuda_graph_runner.py at 212c357a).
# - speedplan's runtime runs each sequence's accepted tokens and pads the batch to the longest
#   (runtime/drafters/eagle.py `_feed_pending`): 1 + D once one sequence of the batch accepts
#   every draft, fewer at B = 1 (AL on average), where the pass is memory-bound.
# A later SGLang (0094505d) pads a tree's draft extend wider, to speculative_num_draft_tokens
# (spec_utils.resolve_num_tokens_per_req); speedplan prices 1 + D (the depth) for trees too.
def first_pass_tokens(draft_len):
    """Tokens per sequence the drafter's first pass after verification runs: the 1 + D
    positions the target verified (the engines' layout, above)."""
    return 1 + np.asarray(draft_len, float)


def chain_forwards(draft_len, nodes) -> np.ndarray:
    """A chain drafter runs one draft forward per drafted token: D forwards per target step."""
    return np.asarray(draft_len, dtype=float) + 0 * np.asarray(nodes, dtype=float)


def tree_rows(batch, draft_len, topk: int) -> np.ndarray:
    """Positions a top-k tree expansion scores per target step: level 1 one per sequence, each
    of the D − 1 later levels the top-k frontier (batch = 2, D = 3, topk = 4 → 2 + 2·4·2 = 18)."""
    batch, draft_len = np.broadcast_arrays(np.asarray(batch, float), np.asarray(draft_len, float))
    return batch * (draft_len > 0) + batch * topk * np.maximum(draft_len - 1, 0)
