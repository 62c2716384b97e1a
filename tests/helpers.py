"""What several test modules share: the full report of an open run, as JSON values, each
one checked against the report's JSON Schema (`tracekit schema`) on the way; the CLI
invoked in-process."""

from __future__ import annotations

from functools import cache

from diagnosers import assemble
from tracekit.options import AnalysisOptions, Overrides
from tracekit.report.schema import json_schema, to_dict


@cache
def _validator():
    import jsonschema

    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate(report: dict) -> dict:
    """`report` (JSON values) if it satisfies the report's JSON Schema; else the first
    error, raised."""
    errors = sorted(_validator().iter_errors(report), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        raise AssertionError(f"report breaks its schema at {list(e.path)}: {e.message}")
    return report


def full_report(run, overrides: Overrides | None = None, **options) -> dict:
    """The report `tracekit analyze --format json` prints for `run` (not cached), as
    plain JSON values, validated against the schema."""
    opts = AnalysisOptions(overrides=overrides or Overrides(), **options)
    return validate(to_dict(assemble.analyze(run, opts)))


def invoke(*args, env=None):
    """`tracekit ARGS…` in-process (click's runner; exceptions not caught: a traceback
    fails the test)."""
    from click.testing import CliRunner

    from tracekit.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)
