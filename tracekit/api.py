"""`tracekit.analyze(RUN)`: the report for a notebook — the Python door beside the CLI.

Like `tracekit.cli`, this door may import the diagnosers (lazily); the engine below it
never does. The report is the one `tracekit analyze` builds (`diagnosers.assemble`, the
report cache included), typed; its tables come as DataFrames, polars by default
(`backend="pandas"` for pandas), and Jupyter shows a summary.
"""

from __future__ import annotations

import html
import importlib
from typing import Any

from tracekit.report import units
from tracekit.report.schema import Report, encode, to_dict
from tracekit.version import DIST_NAME


def analyze(*inputs, cache: bool = True, **options: Any) -> Analysis:
    from diagnosers import assemble
    from tracekit.commands import open_run, resolve_options

    open_opts, opts = resolve_options(inputs, options, where="tracekit.analyze")
    with open_run(inputs, open_opts) as run:
        report = assemble.cached(run, opts) if cache else assemble.analyze(run, opts)
        warnings = list(run.warnings)
    return Analysis(report, warnings)


class Analysis:
    """A report and its tables as frames."""

    def __init__(self, report: Report, warnings: list[str] | None = None):
        self.report = report
        self.warnings = warnings or []

    def __getattr__(self, name: str) -> Any:  # report.summary, report.levels …
        return getattr(self.report, name)

    def to_json(self) -> str:
        return encode(self.report)

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self.report)

    # ------------------------------------------------------------ tables as frames
    def _frame(self, rows: list[dict], backend: str):
        if backend not in ("polars", "pandas"):
            raise ValueError(f"backend {backend!r}: use 'polars' or 'pandas'")
        try:
            lib = importlib.import_module(backend)
        except ModuleNotFoundError as exc:
            if exc.name != backend:  # the library is there, something it imports is not
                raise
            # an optional extra: the CLI and the report need no DataFrame library
            raise ModuleNotFoundError(
                f"tables as DataFrames need {backend}: pip install '{DIST_NAME}[frames]'",
                name=backend,
            ) from None
        if backend == "polars":
            return lib.DataFrame(rows, infer_schema_length=None)
        return lib.DataFrame(rows)

    def _rows(self, key: str) -> list[dict]:
        value = self.to_dict().get(key)
        return list(value or [])

    def ranks(self, backend: str = "polars"):
        """`ranks[]`: one row per rank (the breakdown and what the levels add)."""
        return self._frame(self._rows("ranks"), backend)

    def collectives(self, backend: str = "polars"):
        """`collectives[]`: one row per (name, group size, bytes)."""
        return self._frame(self._rows("collectives"), backend)

    def top_ops(self, backend: str = "polars"):
        return self._frame(self._rows("top_ops"), backend)

    def top_kernels(self, backend: str = "polars"):
        return self._frame(self._rows("top_kernels"), backend)

    def findings(self, backend: str = "polars"):
        rows = [{k: v for k, v in f.items() if k != "details"} for f in self._rows("findings")]
        return self._frame(rows, backend)

    def samples(self, backend: str = "polars"):
        """The per-step samples, long: one row per (rank, step) with every series."""
        s = self.to_dict().get("samples") or {}
        rows = []
        for r in s.get("ranks") or []:
            series = {k: v for k, v in r.items() if isinstance(v, list) and k != "step"}
            for i, step in enumerate(r["step"]):
                rows.append(
                    {"rank": r["rank"], "step": step, **{k: v[i] for k, v in series.items()}}
                )
        return self._frame(rows, backend)

    # ------------------------------------------------------------ display
    def __repr__(self) -> str:
        s = self.report.summary
        step = units.fmt(s.step_time_ms, "ms") if self.report.full else "—"
        n = len(self.report.findings or [])
        return f"<tracekit report: {self.report.run.path}, step {step}, {n} findings>"

    def _repr_html_(self) -> str:
        from tracekit.report.render import header, level_rows

        esc = html.escape
        out = [f"<div><b>{esc(line)}</b></div>" for line in header(self.report)]
        if self.report.full:
            out.append("<table><tr><th>level</th><th>figure</th><th>measured</th>"
                       "<th>predicted</th><th>verdict</th></tr>")  # fmt: skip
            for row in level_rows(self.report):
                out.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
            out.append("</table><ul>")
            for f in self.report.findings:
                out.append(
                    f"<li><b>{esc(f.severity)}</b> <code>{esc(f.code)}</code> {esc(f.title)}"
                    f"<br/>→ {esc(f.remedy)}</li>"
                )
            out.append("</ul>")
        return "\n".join(out)
