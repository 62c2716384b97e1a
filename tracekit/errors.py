"""User-facing errors and the exit codes every command shares.

A `TracekitError` carries one line that says what is wrong and what to do. The CLI
prints it and exits `ExitCode.BAD_INPUT` without a traceback (`--debug` shows it).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """0 success, 1 a gate failed (`compare`), 2 bad input or usage — everywhere."""

    OK = 0
    GATE_FAILED = 1
    BAD_INPUT = 2
    INTERRUPTED = 130


class TracekitError(Exception):
    """Bad input or usage: one clear line, exit code 2."""
