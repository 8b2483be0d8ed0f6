"""Checks of one measured row against what its setting can have run (`speedplan calibrate`,
`engine.calibrate.price`): its context and memory on the setting's GPUs, its tree's nodes."""

from __future__ import annotations

from speedplan.cost.weights import memory_per_rank
from speedplan.engine.readers.measurement import Measurement
from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanisms.base import TopkTree
from speedplan.units import gigabytes


def check_runnable(m: Measurement, s, spec_max_running: float) -> None:
    """Refuse a row its setting cannot have run: a context above the model's, or more KV cache
    and weights than the GPUs hold (all of their memory, no allowance for activations)."""
    s.target.check_context([m.context], f"{m.where}: field {m._f('context')}")
    if s.cost.hardware.is_cpu:  # its preset's memory is not this machine's RAM
        return
    requests = m.running(spec_max_running)
    need = float(memory_per_rank(s.target, requests, m.context + m.draft_len + 1, s.tp))
    have = s.cost.hardware.memory_bytes
    if need > have:
        raise SpeedplanInputError(
            f"{m.where}: {requests} requests of {m.context:,} tokens need {gigabytes(need, 0)} per GPU for weights and "
            f"KV cache, beyond the {gigabytes(have)} of {s.cost.hardware.name} at TP {s.tp}: the server cannot have run "
            "them at once (check the batch, the context, --hardware and --tp; or give max_running_requests, the "
            "requests the server ran)")


def check_nodes(m: Measurement, mech) -> None:
    """A row's tree_nodes must fit its mechanism: a chain verifies its draft_len tokens; a
    depth-D EAGLE tree keeping the top k per level has at most k + (D − 1)·k² candidate nodes,
    a Medusa tree of k choices per position Σ k^i."""
    if m.tree_nodes is None:
        if mech.is_tree and m.draft_len >= 1:  # was priced as D nodes, a chain's verify, without a word
            raise SpeedplanInputError(f"{m.where}: a tree row ({m.mechanism}, depth {m.draft_len}) needs field "
                                      "'tree_nodes', the draft nodes each step verified (SGLang's "
                                      "--speculative-num-draft-tokens minus 1)")
        return
    if not mech.is_tree:
        if m.tree_nodes != m.draft_len:
            raise SpeedplanInputError(f"{m.where}: field 'tree_nodes' {m.tree_nodes} on a chain ({m.mechanism} "
                                      f"verifies its draft_len {m.draft_len} tokens); name a tree mechanism")
        return
    k, d = mech.topk, m.draft_len
    dynamic = isinstance(mech, TopkTree)  # an EAGLE tree keeps k nodes a level; Medusa's is a Cartesian product
    most = k + (d - 1) * k ** 2 if dynamic else sum(k ** i for i in range(1, d + 1))
    if m.tree_nodes > most:
        raise SpeedplanInputError(f"{m.where}: {m.tree_nodes} tree nodes, more than a depth-{d} tree "
                                  + (f"keeping the top {k} per level" if dynamic else f"of {k} choices per position")
                                  + f" can hold ({most})")
