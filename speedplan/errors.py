"""The one input-error type: the CLI turns it into one line on stderr and exit code 2."""


class SpeedplanInputError(ValueError):
    """Bad user input: unknown model or hardware, malformed file, out-of-range number."""


def did_you_mean(name: str, choices) -> str:
    """" (did you mean 'x'?)" for the choice closest to a mistyped `name`, or "" where none is close
    (difflib's ratio of at least 0.75: "llama-3.1-8" finds llama-3.1-8b, "vlm" vllm, "eagel3" eagle3)."""
    import difflib

    close = difflib.get_close_matches(str(name).strip().lower(), [str(c) for c in choices], n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
