"""The root group, `tracekit`: every error one line on stderr and exit code 2.

Exit codes: 0 success, 1 a gate failed, 2 bad input or usage (one line on stderr,
no traceback unless `--debug`).
"""

from __future__ import annotations

import traceback

import click

from tracekit.errors import ExitCode, TracekitError
from tracekit.version import __version__


class _Group(click.Group):
    """Turns every error into one line and exit code 2 (traceback with --debug)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a bad option value: one line too
            where = exc.ctx.command_path if exc.ctx else "tracekit"
            _fail(ctx, f"{exc.format_message()} (see {where} --help)", exc)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except TracekitError as exc:
            _fail(ctx, str(exc), exc)
        except KeyboardInterrupt:
            click.echo("tracekit: interrupted", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
        except BrokenPipeError:
            ctx.exit(ExitCode.OK)
        except Exception as exc:  # a bug, or a trace shape we have not met: still one line
            _fail(
                ctx,
                f"internal error ({type(exc).__name__}: {exc}); rerun with --debug and "
                "report the traceback",
                exc,
            )


def _fail(ctx: click.Context, message: str, exc: BaseException) -> None:
    if ctx.obj and ctx.obj.get("debug"):
        traceback.print_exception(exc)
    click.echo(f"tracekit: {message}", err=True)
    ctx.exit(ExitCode.BAD_INPUT)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Analyze PyTorch profiler (Kineto) traces of distributed training runs.

    RUN is a folder with one trace per rank (*.json or *.json.gz), or trace files.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
