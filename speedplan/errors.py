"""The one input-error type: the CLI turns it into one line on stderr and exit code 2."""


class SpeedplanInputError(ValueError):
    """Bad user input: unknown model or hardware, malformed file, out-of-range number."""


def did_you_mean(name: str, choices) -> str:
    """" (did you mean 'x'?)" for the choice closest to a mistyped `name`, or "" where none is close
    (the one choice that begins with it first: "h100" finds h100-sxm, "h200" h200-sxm and not b200,
    "llama" none of several; else difflib's ratio of at least 0.75: "llama-3.1-8" finds llama-3.1-8b,
    "vlm" vllm, "eagel3" eagle3)."""
    import difflib

    key, names = str(name).strip().lower(), [str(c) for c in choices]
    close = [c for c in names if c.lower().startswith(key)] if len(key) >= 3 else []  # "h100" for h100-sxm
    if len(close) != 1:
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if len(close) == 1 else ""


def too_many_digits(error: ValueError) -> str | None:
    """"a number of more than 4,300 digits" where `error` is int()'s refusal of a longer one (Python's
    sys.get_int_max_str_digits), else None."""
    import sys

    if "integer string conversion" not in str(error):
        return None
    return f"a number of more than {sys.get_int_max_str_digits():,} digits"


MAX_DIGITS = 12  # digits a count typed as text may have: no batch, context or draft length comes near


def far_too_large(digits: str) -> str | None:
    """"123456789012... is far too large" for a whole number typed with more than MAX_DIGITS digits
    (int() would stop only at 4,300), else None."""
    return f"{digits[:MAX_DIGITS]}... is far too large" if len(digits) > MAX_DIGITS else None


def clipped(text: str, keep: int = 60) -> str:
    """`text` as a message quotes it: whole up to 3·`keep` characters, else its first and last
    `keep` with the length after ("/tmp/ddd...ddd/out (5,072 characters)"), so a path or spec of
    thousands of characters (the OS's "File name too long") still gives one readable line."""
    text = str(text)
    if len(text) <= 3 * keep:
        return text
    return f"{text[:keep]}...{text[-keep:]} ({len(text):,} characters)"
