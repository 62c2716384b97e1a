"""`tracekit run JOB`: a reference job (`instrument/`) with the profiler on. Its options
are generated from `instrument.config.JobConfig`: every field (but the job, the world
size and the folder) is an option, its doc the help."""

from __future__ import annotations

import click

from tracekit.errors import TracekitError


def _job_options() -> list[click.Option]:
    """One --option per JobConfig field; the field docs are the help."""
    from dataclasses import MISSING, fields

    from instrument.config import JobConfig

    out = []
    for f in fields(JobConfig):
        if f.name in ("job", "world_size", "out"):
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not MISSING else None
        if isinstance(default, bool):
            decls = [f"{flag}/--no-{flag[2:]}"]
            out.append(
                click.Option(decls, default=default, show_default=True, help=f.metadata["doc"])
            )
        else:
            out.append(
                click.Option(
                    [flag],
                    type=type(default),
                    default=default,
                    show_default=True,
                    help=f.metadata["doc"],
                )
            )
    return out


class _NeedsTorch(click.Command):
    """`tracekit run`: always listed; without torch (the `jobs` extra) it says in one line
    how to get it, before parsing anything (`--help` still works). Its JobConfig options
    are made when the command's parameters are first read (`_job_options`), not when
    the command line is assembled: every other command skips importing `instrument`."""

    @property
    def params(self) -> list[click.Parameter]:
        if not self._with_job_options:
            self._with_job_options = True
            self._params += _job_options()
        return self._params

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self._params, self._with_job_options = value, False

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from importlib.util import find_spec

        help_asked = any(a in ctx.help_option_names for a in args)
        if not help_asked and find_spec("torch") is None:  # checked without importing torch
            raise TracekitError(
                "tracekit run needs torch: pip install 'tracekit-torch[jobs]' "
                "(or pip install torch first, for a CPU or CUDA build of your choice)"
            )
        return super().parse_args(ctx, args)


@click.command("run", cls=_NeedsTorch)
@click.argument("job", type=click.Choice(["ddp", "fsdp", "tp", "pp", "moe", "hybrid"]))
@click.option(
    "--world-size",
    "-n",
    type=click.IntRange(1),
    default=2,
    show_default=True,
    help="Ranks, one process each (gloo on CPU; NCCL, one GPU each, on CUDA).",
)
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(file_okay=False),
    help="Run folder to write: rank-<r>.json.gz per rank and job.json.",
)
def run(job, world_size, out, **options):
    """Run a reference job with the profiler on: traces per rank + job.json (needs
    torch: pip install 'tracekit-torch[jobs]')."""
    from instrument.config import JobConfig
    from instrument.launch import run_job

    cfg = JobConfig(job=job, world_size=world_size, out=out, **options)
    path = run_job(cfg)
    click.echo(f"wrote {cfg.world_size} traces and job.json to {path}")
