"""Plain and speculative generation for a batch of ragged prompts, with per-step timings.

`speculative_step` is the whole algorithm: draft, verify, accept, roll back. Plain decoding
is the same step with no drafter (D = 0), so both paths share every line of overhead.
`generate` runs prompts in waves of `batch` sequences and returns a `RunResult`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from speedplan.runtime.drafters.base import DraftRequest, Drafter, TreeDraft
from speedplan.runtime.drafters.tree import tree_masks
from speedplan.runtime.transformer import KVCache, Transformer
from speedplan.runtime.accept import SamplingParams, probs_from_logits, verify_greedy, verify_sampling
from speedplan.runtime.accept import verify_tree


@dataclass
class StepRecord:
    """One step of one wave; lists run over the sequences active in that step."""

    step: int
    batch: int
    context: list[int]  # target KV length of each sequence before the step (tokens)
    accepted: list[int]  # drafts accepted per sequence (bonus token not counted)
    t_draft_s: float
    t_verify_s: float
    t_accept_s: float
    t_overhead_s: float
    t_step_s: float
    draft_len: int = 0
    accepted_ranks: list[list[int]] | None = None  # tree: 1-based sibling ranks along the path
    offered_ranks: list[list[list[int]]] | None = None  # tree: ranks offered at each path node with children


@dataclass
class RunResult:
    texts: list[str]
    token_ids: list[list[int]]  # generated tokens per prompt (prompt excluded)
    steps: list[StepRecord]
    prefill_s: float  # seconds spent in prefill, all waves
    decode_s: float  # seconds spent in steps, all waves (sum of t_step_s)
    meta: dict = field(default_factory=dict)

    @property
    def generated_tokens(self) -> int:
        return sum(len(t) for t in self.token_ids)

    @property
    def acceptance_length(self) -> float:
        """Mean tokens the verifier accepted per sequence-step, bonus included (1.0 for plain
        decoding): the acceptance statistic the planner prices, counted before a sequence's output
        is cut at its end of text or max_new_tokens (`emitted_per_step` counts after)."""
        seq_steps = sum(s.batch for s in self.steps)
        return sum(sum(a) + len(a) for a in (s.accepted for s in self.steps)) / max(seq_steps, 1)

    @property
    def emitted_per_step(self) -> float:
        """Tokens kept per sequence-step: below `acceptance_length` where the last steps ran past the end."""
        return self.generated_tokens / max(sum(s.batch for s in self.steps), 1)

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second of decode steps (prefill excluded)."""
        return self.generated_tokens / self.decode_s if self.decode_s > 0 else 0.0

    @property
    def end_to_end_tokens_per_s(self) -> float:
        total = self.prefill_s + self.decode_s
        return self.generated_tokens / total if total > 0 else 0.0


@dataclass
class WaveState:
    """Sequences of one wave: tokens (last one pending), outputs, which rows are active."""

    tokens: list[list[int]]
    out: list[list[int]]
    active: list[int]
    hidden: Tensor | None  # [B, hidden] target state at each row's last KV position
    max_new: int
    eos_ids: frozenset[int]

    def emit(self, row: int, new_tokens: list[int]) -> None:
        room = self.max_new - len(self.out[row])
        new_tokens = new_tokens[:room]
        for i, tok in enumerate(new_tokens):
            if tok in self.eos_ids:
                new_tokens = new_tokens[: i + 1]
                break
        self.out[row].extend(new_tokens)
        self.tokens[row].extend(new_tokens)
        if len(self.out[row]) >= self.max_new or (new_tokens and new_tokens[-1] in self.eos_ids):
            self.active.remove(row)


def _now(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def speculative_step(target: Transformer, cache: KVCache, drafter: Drafter | None, state: WaveState,
                     draft_len: int, sampling: SamplingParams, generator: torch.Generator | None,
                     step_index: int) -> StepRecord:
    """One step for every active sequence: draft, verify in one target pass, accept, roll back."""
    device = cache.lengths.device
    t0 = _now(device)
    rows = torch.tensor(state.active, device=device)
    context = cache.lengths[rows].tolist()
    request = DraftRequest(rows, [state.tokens[r] for r in state.active],
                           state.hidden[rows] if (drafter and drafter.needs_hidden) else None,
                           draft_len, sampling, generator)
    pending = torch.tensor([t[-1] for t in request.tokens], device=device)[:, None]  # [b, 1]
    t1 = _now(device)
    draft = drafter.propose(request) if (drafter and draft_len) else None
    t2 = _now(device)
    if isinstance(draft, TreeDraft):
        ancestors, depth = tree_masks(torch.cat([torch.full_like(pending, -1), draft.parents], 1))
        hidden = target(torch.cat([pending, draft.tokens], 1), cache, rows, ancestors, depth)  # [b, 1+N, H]
    else:
        inputs = pending if draft is None else torch.cat([pending, draft.tokens], 1)
        hidden = target(inputs, cache, rows)  # [b, 1+D, H]
    logits = target.logits(hidden)  # [b, 1+D or 1+N, V]
    t3 = _now(device)
    ranks = offered = None
    if isinstance(draft, TreeDraft):
        verdict, path, ranks, offered = verify_tree(logits, draft, sampling, generator)  # path [b, depth]
        cache.move(rows, path, 1)  # pack the accepted nodes' K/V right after the pending token
    else:
        d = 0 if draft is None else draft.tokens.shape[1]
        drafts = draft.tokens if draft else torch.zeros(len(rows), 0, dtype=torch.long, device=device)
        valid = draft.num_valid if draft else torch.zeros(len(rows), dtype=torch.long, device=device)
        if sampling.greedy:
            verdict = verify_greedy(logits, drafts, valid)
        else:
            verdict = verify_sampling(probs_from_logits(logits, sampling), drafts, valid,
                                      draft.p_draft if draft else None, generator)
        path = torch.arange(1, d + 1, device=device).expand(len(rows), d)  # chain: inputs 1..D
    cache.commit(rows, 1 + verdict.num_accepted)  # rollback = not committing rejected slots
    kept = torch.cat([torch.zeros_like(pending), path], 1)  # [b, 1+depth] committed input indices
    hidden_kept = hidden.gather(1, kept[:, :, None].expand(-1, -1, hidden.shape[-1]))
    if drafter is not None:
        drafter.accepted(rows, verdict.num_accepted, hidden_kept)
    t4 = _now(device)
    num_acc = verdict.num_accepted.tolist()
    next_tok = verdict.next_token.tolist()
    draft_tok = [] if draft is None else torch.cat([pending, draft.tokens], 1).gather(1, path).tolist()
    if state.hidden is not None:
        state.hidden[rows] = hidden_kept[torch.arange(len(rows)), verdict.num_accepted]
    for i, row in enumerate(list(state.active)):
        state.emit(row, (draft_tok[i][: num_acc[i]] if draft is not None else []) + [next_tok[i]])
    t5 = _now(device)
    return StepRecord(step_index, len(num_acc), context, num_acc, t2 - t1, t3 - t2, t4 - t3,
                      (t1 - t0) + (t5 - t4), t5 - t0, draft_len if draft is not None else 0,
                      [r[: n] for r, n in zip(ranks.tolist(), num_acc)] if ranks is not None else None,
                      offered)


def prefill(target: Transformer, prompts: list[list[int]], max_new: int, extra: int) -> tuple[KVCache, Tensor]:
    """Fill a fresh cache with each prompt but its last token (which becomes pending).
    Returns the cache and hidden [B, T, H] of the fed positions."""
    device = target.embed.device
    lengths = torch.tensor([len(p) - 1 for p in prompts], device=device)
    cache = target.new_cache(len(prompts), max(len(p) for p in prompts) + max_new + extra + 1)
    width = int(lengths.max())
    if width == 0:
        return cache, torch.zeros(len(prompts), 1, target.cfg.hidden, device=device, dtype=target.embed.dtype)
    x = torch.zeros(len(prompts), width, dtype=torch.long, device=device)
    for i, p in enumerate(prompts):
        x[i, : len(p) - 1] = torch.tensor(p[:-1], dtype=torch.long)
    hidden = target(x, cache)  # [B, T, H]; padded tail slots are overwritten later
    cache.commit(torch.arange(len(prompts), device=device), lengths)
    return cache, hidden


class PrefillCache:
    """The target's prefill of each wave of prompts, kept for later runs on the same prompts.

    `speedplan validate` times hundreds of runs on a few sets of prompts, and prefill is not
    what it times: at B = 16 it took 12.4 s of a 16.5 s run (2026-12-02, 16 evaluation prompts,
    32 new tokens). A hit gives a copy resized to the run's slots (`KVCache.resized`), the same
    K/V a fresh prefill computes, so runs never share state. Holds about 46 KB per prompt token
    for SmolLM2-135M; one cache belongs to one target model."""

    def __init__(self) -> None:
        self._store: dict[tuple, tuple[KVCache, Tensor]] = {}
        self.hits = 0

    def __call__(self, target: Transformer, prompts: list[list[int]], max_new: int, extra: int) -> tuple[KVCache, Tensor]:
        key = tuple(tuple(p) for p in prompts)
        if key not in self._store:
            cache, hidden = prefill(target, prompts, 0, 0)
            self._store[key] = (cache, hidden)
        else:
            self.hits += 1
        cache, hidden = self._store[key]
        return cache.resized(max(len(p) for p in prompts) + max_new + extra + 1), hidden.clone()


def run_wave(target: Transformer, prompts: list[list[int]], drafter: Drafter | None, draft_len: int,
             sampling: SamplingParams, max_new_tokens: int, eos_ids: frozenset[int],
             generator: torch.Generator | None, prefills: PrefillCache | None = None
             ) -> tuple[list[list[int]], list[StepRecord], float]:
    """Generate for one batch of prompts; returns outputs, step records, prefill seconds
    (`prefills`: earlier prefills of the same prompts to copy instead of computing again)."""
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    device = target.embed.device
    t0 = _now(device)
    tree_extra = drafter.nodes if (drafter is not None and drafter.is_tree) else 0
    cache, hidden = (prefills or prefill)(target, prompts, max_new_tokens, max(draft_len, tree_extra))
    rows = torch.arange(len(prompts), device=device)
    last = (cache.lengths - 1).clamp_min(0)
    state = WaveState([list(p) for p in prompts], [[] for _ in prompts], list(range(len(prompts))),
                      hidden[rows, last].clone(), max_new_tokens, eos_ids)
    if drafter is not None:
        drafter.start(prompts, hidden if drafter.needs_hidden else None, rows)
    prefill_s = _now(device) - t0
    steps: list[StepRecord] = []
    while state.active:
        steps.append(speculative_step(target, cache, drafter, state, draft_len, sampling, generator, len(steps)))
    return state.out, steps, prefill_s


def generate(target: Transformer, prompts: list[list[int]], drafter: Drafter | None = None, draft_len: int = 0,
             batch: int = 1, sampling: SamplingParams = SamplingParams(), max_new_tokens: int = 128,
             eos_ids: list[int] = (), seed: int = 0, decode=None, prefills: PrefillCache | None = None) -> RunResult:
    """Generate for token-id prompts in waves of `batch`; `decode(ids) -> str` fills texts;
    `prefills` reuses earlier prefills of the same waves (their prefill_s is then a copy's)."""
    if batch < 1 or max_new_tokens < 1 or draft_len < 0:
        raise ValueError("batch and max_new_tokens must be >= 1, draft_len >= 0")
    generator = torch.Generator(device=target.embed.device).manual_seed(seed)
    outputs, steps, prefill_s = [], [], 0.0
    with torch.inference_mode():
        for start in range(0, len(prompts), batch):
            out, wave_steps, wave_prefill_s = run_wave(target, prompts[start : start + batch], drafter, draft_len,
                                                       sampling, max_new_tokens, frozenset(eos_ids), generator,
                                                       prefills)
            outputs += out
            for s in wave_steps:
                s.step = len(steps)
                steps.append(s)
            prefill_s += wave_prefill_s
    texts = [decode(o) for o in outputs] if decode else ["" for _ in outputs]
    return RunResult(texts, outputs, steps, prefill_s, sum(s.t_step_s for s in steps))
