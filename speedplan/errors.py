"""The one input-error type: the CLI turns it into one line on stderr and exit code 2."""


class SpeedplanInputError(ValueError):
    """Bad user input: unknown model or hardware, malformed file, out-of-range number."""
