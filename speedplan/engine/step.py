"""The engine step model: what one decode step costs in a serving engine, on top of the op cost
model (DESIGN.md, "Engine step model"). Pure functions of an `EngineProfile`, a `CostModel` and
the priced forward passes; seconds, numpy arrays over the sweep grid.

Per target step:

    t_gpu  = s · (t_ops(verify, T) + t_ops(draft) + t_sample)         # drafting priced as emitted;
                                                                     # the sampler's passes over the logits
           + launch_us · (layer_launches · (layers + draft forwards · draft layers)
                          + draft_step_launches · draft forwards)
           + draft_token_us · drafted tokens + host n-gram lookup    # the drafting loop's host work, in
           + tree_level_us · tree levels                             # the step's path: never overlapped
                                                                     # (tree levels: D for a top-k tree, else 0)
    t_sample = (sample_passes_plain or _spec [+ sample_passes_random where requests sample at T > 0])
               · one pass over the target's logits + sample_passes_plain · one over the drafter's
    t_host = host_step_us + (host_seq_us [+ host_spec_seq_us]) · B + host_token_us · T
    t      = t_gpu + t_host − min(overlap · t_host, t_gpu)   # overlap_spec × host_draft_overlap for n-gram

with s = kernel_scale (this machine's kernels now over the profile's, 1 unless fitted),
T = B tokens for a plain step and B·(1+D) (or B·(N+1)) for a speculative one, and
`overlap` = overlap_plain or overlap_spec: the share of host work the engine runs while the GPU
computes. With overlap 1 the step is max(t_gpu, t_host); with 0 it is their sum. Plain decoding
goes through the same model, so a speedup compares two steps of one engine.

Worked example (B = 1, made-up terms): t_gpu = 7.0 ms, t_host = 1.0 ms. A plain step with
overlap_plain = 1 takes max(7.0, 1.0) = 7.0 ms; a speculative step with overlap_spec = 0 takes
7.0 + 1.0 = 8.0 ms: the sync point exposes the host work that plain decoding hides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from speedplan.cost.forward import ForwardCost
from speedplan.engine.profile import EngineProfile
from speedplan.specs.model import ModelSpec

LOGIT_BYTES = 4  # samplers work on fp32 logits; a pass reads and writes each once


@dataclass(frozen=True)
class StepParts:
    """What one step is made of, before any engine term: arrays over the grid.

    ops_s: the forward passes' kernels (verify or plain, plus drafting), seconds;
    batch: sequences B; tokens: tokens the target verifies, T;
    layers: target decoder layers; forwards: sequential draft forwards; draft_layers: layers in one;
    logits_pass_s / draft_pass_s: one read-and-write pass over the verify logits / the drafter's;
    draft_tokens: positions the drafter proposes or scores per step (B·D for a chain);
    host_draft_s: drafting done on the host (n-gram lookup), seconds;
    speculative: whether the step drafts (it then takes overlap_spec and sample_passes_spec);
    host_drafted: whether its drafter runs on the host (n-gram lookup: overlap_spec x host_draft_overlap);
    draft_ops_s: the drafting kernels alone (part of ops_s), seconds;
    temperature: the sampling temperature served (above 0 the sampler takes sample_passes_random
    more passes over the target's logits; 0: greedy)."""

    ops_s: np.ndarray
    batch: np.ndarray
    tokens: np.ndarray
    layers: np.ndarray
    forwards: np.ndarray
    draft_layers: np.ndarray
    logits_pass_s: np.ndarray
    draft_pass_s: np.ndarray
    draft_tokens: np.ndarray
    host_draft_s: np.ndarray
    speculative: np.ndarray
    draft_ops_s: np.ndarray
    temperature: np.ndarray | float = 0.0  # an array where calibrate gathers rows of several steps
    host_drafted: np.ndarray | bool = False  # the drafter runs on the host (n-gram lookup): host_draft_overlap applies
    tree_levels: np.ndarray | float = 0.0  # levels a dynamic tree's drafting grows (D; 0 for a chain)


@dataclass(frozen=True)
class StepCost:
    """One engine step split by kind (seconds, arrays over the grid)."""

    ops_s: np.ndarray  # the forward passes' kernels: verify (or plain) and drafting
    sample_s: np.ndarray  # sampling and rejection over the logits
    launch_s: np.ndarray  # kernels launched outside CUDA graphs
    draft_host_s: np.ndarray  # host work inside the drafting loop (per drafted token, per tree level, n-gram lookup)
    host_s: np.ndarray  # host work of the step before overlap
    overlap: np.ndarray  # share of host work the engine can hide behind the GPU
    verify_s: np.ndarray  # of the above, the target's forward pass with its launches (a profiler's "model forward")
    draft_s: np.ndarray  # of the above, drafting: its kernels, its sampler, its launches, its host loop

    @property
    def gpu_s(self) -> np.ndarray:
        """Work the step waits for in sequence: kernels, sampling, launches, the drafting loop's
        host work (each draft forward needs the previous one's token)."""
        return self.ops_s + self.sample_s + self.launch_s + self.draft_host_s

    @property
    def hidden_host_s(self) -> np.ndarray:
        return np.minimum(self.overlap * self.host_s, self.gpu_s)

    @property
    def exposed_host_s(self) -> np.ndarray:
        return self.host_s - self.hidden_host_s

    @property
    def total_s(self) -> np.ndarray:
        return self.gpu_s + self.exposed_host_s

    @property
    def overhead_s(self) -> np.ndarray:
        """The step outside the target's forward and the drafting: the sampler's passes over the
        target's logits and the exposed host work (what calibrate's overhead_ms rows measure)."""
        return self.total_s - self.verify_s - self.draft_s


def step_cost(terms: dict, parts: StepParts) -> StepCost:
    """The engine model of the module docstring: `terms` maps each term of
    `speedplan.engine.profile.TERMS` to its value (EngineProfile.values())."""
    spec = parts.speculative
    passes = (np.where(spec, terms["sample_passes_spec"], terms["sample_passes_plain"])
              + np.where(np.asarray(parts.temperature) > 0, terms["sample_passes_random"], 0.0))
    sample = passes * parts.logits_pass_s + terms["sample_passes_plain"] * parts.draft_pass_s
    launches = (terms["layer_launches"] * (parts.layers + parts.forwards * parts.draft_layers)
                + terms["draft_step_launches"] * parts.forwards)
    seq_us = terms["host_seq_us"] + np.where(spec, terms["host_spec_seq_us"], 0.0)
    host = (terms["host_step_us"] + seq_us * parts.batch + terms["host_token_us"] * parts.tokens) * 1e-6
    draft_host = (terms["draft_token_us"] * parts.draft_tokens + terms["tree_level_us"] * parts.tree_levels) * 1e-6 \
        + parts.host_draft_s
    scale = terms["kernel_scale"]
    verify_launch_s = terms["launch_us"] * terms["layer_launches"] * parts.layers * 1e-6
    launch_s = terms["launch_us"] * launches * 1e-6
    verify_s = scale * (parts.ops_s - parts.draft_ops_s) + verify_launch_s
    draft_s = (scale * (parts.draft_ops_s + terms["sample_passes_plain"] * parts.draft_pass_s)
               + (launch_s - verify_launch_s) + draft_host)
    return StepCost(scale * parts.ops_s, scale * sample, launch_s, draft_host, host,
                    np.where(spec, terms["overlap_spec"] * np.where(parts.host_drafted, terms["host_draft_overlap"], 1.0),
                             terms["overlap_plain"]), verify_s, draft_s)


def without_drafting(parts: StepParts, dropped) -> StepParts:
    """The speculative step where `dropped` (a bool array over the grid) with the drafter not run: the
    target verifies the same tokens and the sampler rejects them, but no draft kernel, launch, sampler
    pass or drafting host work is paid (vLLM past a drafter's positions verifies D zero tokens per
    sequence: `plan.drafter_positions`)."""
    keep = ~np.asarray(dropped, dtype=bool)
    return replace(parts, ops_s=parts.ops_s - np.where(keep, 0.0, parts.draft_ops_s), forwards=parts.forwards * keep,
                   draft_layers=parts.draft_layers * keep, draft_pass_s=parts.draft_pass_s * keep,
                   draft_tokens=parts.draft_tokens * keep, host_draft_s=parts.host_draft_s * keep,
                   draft_ops_s=parts.draft_ops_s * keep, tree_levels=parts.tree_levels * keep)


def logits_pass_s(cost, logits) -> np.ndarray:
    """One read-and-write pass over `logits` fp32 values (seconds); 0 where there are none."""
    logits = np.asarray(logits, dtype=float)
    op = cost.elementwise(2.0 * LOGIT_BYTES * np.maximum(logits, 1.0), "fp32")
    return np.where(logits > 0, op.latency_us * 1e-6, 0.0)


def plain_parts(cost, target: ModelSpec, batch, forward: ForwardCost, temperature=0.0) -> StepParts:
    """A plain decoding step of `batch` sequences whose target forward is `forward`, sampled at
    `temperature` (a number, or an array over `batch` where calibrate prices rows of several)."""
    batch = np.asarray(batch, dtype=float)
    zero = np.zeros_like(batch)
    return StepParts(np.broadcast_to(forward.total_s, batch.shape) + zero, batch, batch, zero + target.layers, zero,
                     zero, logits_pass_s(cost, batch * target.vocab), zero, zero, zero, zero.astype(bool), zero,
                     temperature)


def speculative_parts(cost, target: ModelSpec, mech, batch, draft_len, nodes, verify_tokens,
                      verify: ForwardCost, draft: ForwardCost, temperature=0.0) -> StepParts:
    """One speculative step: draft with `mech`, verify `verify_tokens` tokens per sequence, sampled
    at `temperature` (a number, or an array over `batch`).

    `verify` and `draft` are the priced target verify pass and drafting kernels; the mechanism
    says how many sequential draft forwards it runs (each pays the engine's un-captured
    launches), how many logits its drafter samples, and what drafting costs on the host."""
    batch, draft_len, nodes, verify_tokens = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (batch, draft_len, nodes, verify_tokens)))
    tokens = batch * verify_tokens
    return StepParts(verify.total_s + draft.total_s, batch, tokens, np.full(batch.shape, float(target.layers)),
                     mech.draft_forwards(draft_len, nodes), np.full(batch.shape, float(mech.draft_layers())),
                     logits_pass_s(cost, tokens * target.vocab),
                     logits_pass_s(cost, mech.draft_logits(batch, draft_len, nodes)),
                     mech.draft_rows(batch, draft_len, nodes), mech.host_draft_s(batch, draft_len),
                     np.ones(batch.shape, dtype=bool), np.broadcast_to(draft.total_s, batch.shape) + 0.0,
                     temperature, np.full(batch.shape, bool(mech.drafts_on_host)), mech.tree_levels(draft_len, nodes))


def zero_draft_parts(cost, target: ModelSpec, mech, batch, forward: ForwardCost, upkeep: ForwardCost,
                     terms: dict, temperature: float = 0.0) -> StepParts:
    """A step with draft length 0 in a launch that loads `mech`'s drafter: the plain forward of
    `batch` sequences, plus the drafter's `upkeep` forward (`Mechanism.upkeep_cost`, already
    scaled by zero_draft_forward) with the launches of one draft forward and its logits pass where
    zero_draft_logits is 1; a plain step's host terms (no draft is verified). Worked example
    (vLLM, EAGLE-3 head, B = 64): the target's decode forward plus one head pass (fc and decoder
    layer) over 64 tokens without its lm_head, and one draft forward's launches."""
    batch = np.asarray(batch, dtype=float)
    plain = plain_parts(cost, target, batch, forward, temperature)
    runs = (upkeep.total_s > 0).astype(float)
    logits = runs * terms["zero_draft_logits"] * batch * mech.draft_shape().vocab if runs.any() else 0 * batch
    return replace(plain, ops_s=plain.ops_s + upkeep.total_s, forwards=runs,
                   draft_layers=runs * (mech.draft_layers() if runs.any() else 0),
                   draft_pass_s=logits_pass_s(cost, logits),
                   draft_ops_s=np.broadcast_to(upkeep.total_s, batch.shape) + 0.0)


def plain_step(engine: EngineProfile, cost, target: ModelSpec, batch, forward: ForwardCost) -> StepCost:
    """One plain decoding step of `batch` sequences priced on `engine`'s terms."""
    return step_cost(engine.values(), plain_parts(cost, target, batch, forward))


def speculative_step(engine: EngineProfile, cost, target: ModelSpec, mech, batch, draft_len, nodes,
                     verify_tokens, verify: ForwardCost, draft: ForwardCost) -> StepCost:
    """One speculative step priced on `engine`'s terms. `batch` is the requests the step runs, so
    for an engine that caps a speculative step (`spec_max_running`) pass
    `engine.running(in_flight, True)`, as the sweep does, with `verify` and `draft` priced for
    that many."""
    return step_cost(engine.values(), speculative_parts(cost, target, mech, batch, draft_len, nodes,
                                                        verify_tokens, verify, draft))
