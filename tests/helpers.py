"""What several test modules share: the full report of an open run, as JSON values."""

from __future__ import annotations

from diagnosers import assemble
from tracekit.options import AnalysisOptions, Overrides
from tracekit.report.schema import to_dict


def full_report(run, overrides: Overrides | None = None, **options) -> dict:
    """The report `tracekit analyze --format json` prints for `run` (not cached), as
    plain JSON values."""
    opts = AnalysisOptions(overrides=overrides or Overrides(), **options)
    return to_dict(assemble.analyze(run, opts))
