"""An independent draft model with the target's tokenizer: D sequential draft forwards, the
first over the 1 + D verified tokens of each sequence, the others at B tokens each
(base.first_pass_tokens), its own weights and KV cache, at the
tensor-parallel size the serving config gives it (`draft_tp`; None = the target's, which is
what every engine speedplan emits for runs: docs/serving.md), all-reduces included.

Spec: `draft-model[:MODEL][,tp=N]` (MODEL a preset or a config.json; tp=N prices the draft at
N GPUs, e.g. tp=1 beside a TP-4 target)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speedplan.cost.forward import forward_cost
from speedplan.cost.weights import weight_bytes_per_rank
from speedplan.errors import SpeedplanInputError, clipped
from speedplan.plan.defaults import draft_model_default
from speedplan.plan.mechanisms.base import ChainDrafting, Mechanism
from speedplan.plan.mechanisms.heads import chain_passes
from speedplan.specs.model import ModelSpec, get_model
from speedplan.specs.files import is_a
from speedplan.units import billions

# The target's usual small sibling, used when the spec names no draft ("draft-model").
DEFAULT_DRAFT_FOR = {"llama-3.1-8b": "llama-3.2-1b", "llama-3.1-70b": "llama-3.2-1b", "llama-3.1-405b": "llama-3.2-1b",
                     "qwen3-32b": "qwen3-8b", "qwen3-235b-a22b": "qwen3-8b", "gpt-oss-120b": "gpt-oss-20b"}


@dataclass(frozen=True)
class DraftModel(ChainDrafting, Mechanism):
    name = "draft-model"
    usage = "draft-model[:MODEL[,tp=N]]"  # the spec --mechanism reads: any of the options, comma-separated after one colon
    draft: ModelSpec | None = None
    draft_tp: int | None = None  # GPUs the draft is sharded over; None = the target's TP

    @property
    def label(self) -> str:
        return f"draft-model:{self.draft.name}" + (f"@tp{self.draft_tp}" if self.draft_tp is not None else "")

    def _tp(self, tp: int) -> int:
        return self.draft_tp or tp

    def draft_cost(self, cost, target, batch, draft_len, context, nodes, tp):
        batch, draft_len, context = np.broadcast_arrays(*(np.asarray(x, float) for x in (batch, draft_len, context)))
        dtp = self._tp(tp)
        step = lambda b, q, ctx, first: forward_cost(cost, self.draft, b, q, ctx, dtp, lm_head_rows=b)
        return chain_passes(step, batch, draft_len, context)

    def upkeep_cost(self, cost, target, batch, context, tp, logits):
        return forward_cost(cost, self.draft, batch, 1, context, self._tp(tp), lm_head_rows=batch, lm_head=logits)

    def draft_shape(self):
        return self.draft

    def extra_memory_bytes(self, target, batch, context, tp, window_pool=None):
        """Weights and KV on the busiest GPU: sharded over the draft's TP (a TP-1 draft sits
        whole on one of the target's GPUs). `window_pool`: the engine memory rule's; a draft with
        sliding-window layers (gpt-oss-20b) holds r x the tokens there as the target does (SGLang
        counts a hybrid draft's sliding layers in the target's pool at swa_full_tokens_ratio:
        model_runner_components/spec_aux_hidden_state.py:179-182, model_executor/pool_configurator.py:750-758, :781)."""
        batch, context = np.broadcast_arrays(np.asarray(batch, float), np.asarray(context, float))
        dtp = self._tp(tp)
        kv = self.draft.kv_bytes_per_rank(context, dtp, window_pool=window_pool)
        return weight_bytes_per_rank(self.draft, dtp) + batch * kv

    def drafter_positions(self):
        n = self.draft.max_context
        return (n, f"the config of {self.draft.name} (max_position_embeddings)") if n else None

    @classmethod
    def cannot_run(cls, target):
        if target.name not in DEFAULT_DRAFT_FOR:
            return "no preset draft for this model; pass draft-model:MODEL" + _candidates(target)
        return None

    @classmethod
    def default(cls, target, draft=None):
        return draft_model_default(target, draft)

    @classmethod
    def build(cls, arg, target, acceptance, draft_tp: int | None = None):
        name, _, tp_text = arg.rpartition(",tp=") if ",tp=" in arg else (arg, "", "")
        if arg.startswith("tp="):
            name, tp_text = "", arg[3:]
        if "," in name or (name.partition("=")[1] and not is_a(Path(name), "any")):
            raise SpeedplanInputError(f"mechanism draft-model:{clipped(arg)}: its one option is tp (draft-model:MODEL,tp=N)")
        if tp_text:
            try:
                draft_tp = int(tp_text)
            except ValueError:
                raise SpeedplanInputError(f"mechanism draft-model:{clipped(arg)}: tp takes an integer") from None
        if not name:
            if target.name not in DEFAULT_DRAFT_FOR:
                raise SpeedplanInputError(f"draft-model: no preset draft for {target.name}; pass draft-model:MODEL"
                                          + _candidates(target))
            name = DEFAULT_DRAFT_FOR[target.name]
        try:
            draft = get_model(name)
        except SpeedplanInputError as e:  # "unknown model 'x'" did not say it was the draft
            raise SpeedplanInputError(f"mechanism draft-model:{clipped(arg)}: the draft model: {e}") from None
        if draft.vocab != target.vocab:
            raise SpeedplanInputError(
                f"draft {draft.name} has vocab_size {draft.vocab}, target {target.name} has {target.vocab}: the engines "
                "run a draft model of the same vocab_size only (vLLM 0.33: SpeculativeConfig."
                "verify_equal_vocab_size_if_draft_model; padded sizes of one tokenizer differ too)"
            )
        if draft.param_count() >= target.param_count():
            raise SpeedplanInputError(
                f"draft {draft.name} ({billions(draft.param_count())} parameters) is not smaller than the target "
                f"{target.name} ({billions(target.param_count())}): a draft model must be cheaper to run")
        if draft_tp is not None:
            draft.check_tp(draft_tp, option=f"draft-model:{clipped(arg)} tp")
        return cls(*cls.resolve_acceptance(acceptance, target, draft=draft), draft=draft, draft_tp=draft_tp)


# A suggested draft holds at most this share of the target's parameters (the preset pairs hold
# 0.15-0.25: llama-3.2-1b for llama-3.1-8b, qwen3-8b for qwen3-32b, gpt-oss-20b for gpt-oss-120b).
MAX_SUGGESTED_SHARE = 0.5


def _candidates(target: ModelSpec, most: int = 3) -> str:
    """" (presets with its vocabulary, ...: a, b)", smallest first, or "" where no preset
    qualifies: drafts `build` accepts (the same vocabulary, fewer parameters) with at most
    MAX_SUGGESTED_SHARE of the target's parameters and of its active ones (a 32B dense draft for a
    3B-active MoE, DeepSeek-V3 for DeepSeek-V3.2, or Qwen3-30B-A3B (3.3B active) for Qwen3-Next-80B-A3B
    (3.9B) would cost nearly a target step per drafted token)."""
    from speedplan.specs.model import preset_names

    active, total = target.param_count(active=True), target.param_count()
    fits = sorted((m.param_count(active=True), m.name) for m in map(get_model, preset_names())
                  if m.vocab == target.vocab and m.param_count(active=True) <= MAX_SUGGESTED_SHARE * active
                  and m.param_count() <= MAX_SUGGESTED_SHARE * total)
    if not fits:
        return ""
    return (f" (presets with its {target.vocab:,}-token vocabulary and at most half its parameters, active ones too: "
            f"{', '.join(name for _, name in fits[:most])})")


def tp_problem(model, tp: int) -> str | None:
    """Why `model`'s heads or widths do not split over `tp` GPUs as vLLM needs (`ModelSpec.check_tp`), or None."""
    try:
        model.check_tp(tp, option="draft TP")
    except SpeedplanInputError as e:
        return str(e)
    return None
