"""What every command does with its output: -o FILE tried before the work, the text
written (stdout, or the file atomically), the run's warnings said last."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import click

from tracekit.errors import TracekitError


def warn(warnings: Iterable[str]) -> None:
    """The run's warnings (unreadable files, missing ranks, skipped events) on stderr,
    one line each, once the command has done its work."""
    for w in warnings:
        click.echo(f"tracekit: warning: {w}", err=True)


def check_output(output: str | None) -> None:
    """-o FILE: its folder must exist and take a file — tried now, not after the analysis."""
    if not output:
        return
    import tempfile

    dest = Path(output)
    folder = dest.parent
    if not folder.is_dir():
        raise TracekitError(
            f"-o {output}: folder {folder} does not exist; create it or pick another path"
        )
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{dest.name}.", suffix=".tmp"):
            pass
    except OSError as exc:
        raise TracekitError(
            f"-o {output}: cannot write in {folder} ({exc.strerror or exc}); pick another path"
        ) from exc


def emit(text: str, output: str | None) -> None:
    """stdout, or `output` written atomically (a temporary file beside it, then renamed)."""
    if not output:
        sys.stdout.write(text)
        return
    from tracekit.atomic import write_text

    try:
        write_text(Path(output), text)
    except OSError as exc:
        raise TracekitError(f"-o {output}: cannot write ({exc.strerror or exc})") from exc
