"""speedplan.runtime: the reference speculative-decoding runtime (PyTorch).

Names are imported lazily so that `speedplan.runtime.options` (run options, checked before any
heavy import) stays torch-free; everything else imports torch. See docs/runtime.md.

    from speedplan.runtime import RunOptions, run
    report = run(RunOptions(prompts=("Write a haiku about caches.",), mechanism="ngram", draft_len=4))
    report.result.texts, report.result.acceptance_length, report.speedup
"""

from importlib import import_module

_EXPORTS = {
    "DrafterOptions": "options", "RunOptions": "options",
    "RunReport": "api", "Target": "api", "encode_prompts": "api", "load_target": "api", "make_drafter": "api",
    "run": "api",
    # not `generate` itself: the submodule of that name shadows it once imported (use
    # `from speedplan.runtime.generate import generate`)
    "RunResult": "generate", "StepRecord": "generate", "speculative_step": "generate",
    "SamplingParams": "accept",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'speedplan.runtime' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
