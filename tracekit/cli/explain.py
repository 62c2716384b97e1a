"""`tracekit explain [CODE]`: a rule's docs, or the table of codes; `tracekit schema`:
the report's JSON Schema."""

from __future__ import annotations

import json

import click

from tracekit.errors import TracekitError


@click.command()
@click.argument("code", required=False)
def explain(code):
    """Explain a finding: tracekit explain TK-N301 (or a kind, or a name); no CODE lists all."""
    from diagnosers.rules import lookup, registry

    if not code:
        for k in registry():
            click.echo(f"{k.code}  {k.kind:32} {k.name:32} {k.status}")
        return
    rule = lookup(code)
    if rule is None:
        raise TracekitError(f"no finding {code!r}; `tracekit explain` lists them")
    click.echo(rule.explain())


@click.command()
def schema():
    """Print the JSON Schema of the report (`analyze --format json`)."""
    from tracekit.report.schema import json_schema

    click.echo(json.dumps(json_schema(), indent=2, ensure_ascii=False))
