"""User-facing errors.

A `TracekitError` carries one line that says what is wrong and what to do. The CLI
prints it and exits 2 without a traceback (`--debug` shows the traceback).
"""


class TracekitError(Exception):
    """Bad input or usage: one clear line, exit code 2."""
