"""The agent door's tools: each calls what the command line calls (`tracekit.commands`,
the store's sandbox, `diagnosers.assemble.cached`, imported lazily) and answers JSON of
the report's own types."""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from tracekit.errors import TracekitError
from tracekit.mcp_calls import (
    DEFAULT_ROWS,
    MAX_ROWS,
    READ_ONLY,
    Codes,
    Run,
    Steps,
    Window,
    bounded,
    jsonable,
    work,
)
from tracekit.mcp_roots import Roots
from tracekit.stepmodel.changes import CHANGES


def add_tools(server: MCPServer, where: Roots, bounds) -> None:
    """The tools of `server`, reading runs under `where`; `bounds` cap each query."""
    from tracekit import commands
    from tracekit.options import OpenOptions

    def report(run: str, window="steps", steps=None, select=(), ignore=(), keep=None):
        """The run's report as `tracekit analyze` builds it; `keep(r, rep)` reads the open
        run too."""
        from diagnosers import assemble

        path = where.run(run)
        values = {"window": window, "steps": steps, "select": select, "ignore": ignore}
        opts, options = commands.resolve_options([path], values)
        with commands.open_run([path], opts) as r:
            rep = assemble.cached(r, options)
            return keep(r, rep) if keep else rep

    @server.tool(annotations=READ_ONLY)
    async def analyze(
        run: Run,
        window: Window = "steps",
        steps: Steps = None,
        select: Codes = [],  # noqa: B006 (pydantic copies defaults)
        ignore: Codes = [],  # noqa: B006
        ctx: Context = None,
    ) -> dict[str, Any]:
        """The run's report — what `tracekit analyze RUN --format json` prints: the run,
        the summary figures, the four levels (memory → compute → communication →
        scaling), the findings ordered by the time a fix would win, the step model.
        Its JSON Schema is the resource tracekit://schema/report."""
        from tracekit.report.schema import to_dict

        def go():
            return to_dict(report(run, window, steps, select, ignore))

        out = await work(ctx, ["opening the run", "analysing"], go)
        return bounded(out, "report")

    @server.tool(annotations=READ_ONLY)
    async def findings(
        run: Run,
        window: Window = "steps",
        steps: Steps = None,
        select: Codes = [],  # noqa: B006
        ignore: Codes = [],  # noqa: B006
        ctx: Context = None,
    ) -> dict[str, Any]:
        """The run's findings (the report's `findings`, best first: each its code, level,
        severity, title, ranks, measured and predicted figures, the time a fix would win
        per step and its replayed remedies), with the run's step time."""
        from tracekit.report.schema import to_dict

        def go():
            d = to_dict(report(run, window, steps, select, ignore))
            return {"summary": d.get("summary"), "findings": d.get("findings") or []}

        out = await work(ctx, ["opening the run", "analysing"], go)
        return bounded(out, "findings")

    @server.tool(annotations=READ_ONLY)
    def explain(
        code: Annotated[
            str | None,
            Field(description="A finding's code (TK-N301), kind or name; none lists all."),
        ] = None,
    ) -> dict[str, Any]:
        """A rule's docs (What it detects, Why it matters, Example, Fix) — what `tracekit
        explain CODE` prints; without a code, every rule."""
        from diagnosers.rules import lookup, registry

        if not code:
            return {
                "rules": [
                    {"code": k.code, "kind": k.kind, "name": k.name, "status": k.status}
                    for k in registry()
                ]
            }
        rule = lookup(code)
        if rule is None:
            raise ToolError(f"no finding {code!r}; call explain without a code to list them")
        return {"code": rule.code, "kind": rule.kind, "name": rule.name, "docs": rule.explain()}

    @server.tool(annotations=READ_ONLY)
    async def describe(
        run: Run,
        view: Annotated[
            str | None, Field(description="A table or view; none lists them all.")
        ] = None,
        ctx: Context = None,
    ) -> dict[str, Any]:
        """The run's tables and views that `query` reads, or one view's columns (name,
        type, doc) — what `tracekit query RUN --views / --describe VIEW` prints."""
        from tracekit.sql import docs

        def go():
            path = where.run(run)
            if not view:
                return {
                    "views": [
                        {"name": n, "what": d.what, "summary": d.summary}
                        for n, d in sorted(docs().items())
                    ]
                }
            d = docs().get(view)
            with commands.open_run([path], OpenOptions()) as r:
                rows = r.describe(view)
            return {
                "view": view,
                "what": d.what if d else None,
                "summary": d.summary if d else None,
                "columns": [{"name": c, "type": t, "doc": doc} for c, t, doc in rows],
            }

        return await work(ctx, ["opening the run"], go)

    @server.tool(annotations=READ_ONLY)
    async def query(
        run: Run,
        sql: Annotated[
            str,
            Field(
                description="One read-only statement (SELECT, WITH, FROM, "
                "DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)."
            ),
        ],
        limit: Annotated[
            int, Field(ge=1, le=MAX_ROWS, description="Rows returned at most.")
        ] = DEFAULT_ROWS,
        ctx: Context = None,
    ) -> dict[str, Any]:
        """Read-only DuckDB SQL over the run's tables and views (see `describe`), in the
        sandbox of `tracekit query`: it reads no file outside the run's cache and no
        network, and stops at the server's memory and time limits. Returns columns, at
        most `limit` rows and whether more were left out."""

        def go():
            path = where.run(run)
            with commands.open_run([path], OpenOptions()) as r:
                rel = r.readonly_sql(sql, bounds)
                names = rel.columns
                rows = rel.limit(limit + 1).fetchall()
            return {
                "columns": names,
                "rows": [[jsonable(v) for v in row] for row in rows[:limit]],
                "truncated": len(rows) > limit,
            }

        out = await work(ctx, ["opening the run", "running the query"], go)
        return bounded(out, "query result")

    @server.tool(annotations=READ_ONLY)
    async def whatif(
        run: Run,
        changes: Annotated[
            list[str],
            Field(
                min_length=1,
                description="Changes replayed together: "
                + ", ".join(c.syntax for c in CHANGES)
                + ".",
            ),
        ],
        window: Window = "steps",
        steps: Steps = None,
        ctx: Context = None,
    ) -> dict[str, Any]:
        """Replay the run's step model with changes — what `tracekit whatif RUN --change …
        --format json` prints: the measured, replayed and predicted step, the time saved and
        the critical path after the changes (docs/step-model.md)."""
        import msgspec

        def go():
            path = where.run(run)
            values = {"window": window, "steps": steps}
            opts, options = commands.resolve_options([path], values)
            out, _ = commands.whatif_report([path], opts, options, list(changes))
            return msgspec.to_builtins(out)

        out = await work(ctx, ["opening the run", "replaying the step model"], go)
        return bounded(out, "what-if result")

    @server.tool(annotations=READ_ONLY)
    async def compare(
        base: Annotated[
            list[str],
            Field(
                min_length=1,
                description="The base side: runs under the roots (several: run-to-run noise).",
            ),
        ],
        new: Annotated[list[str], Field(min_length=1, description="The new side: runs.")],
        max_regression: Annotated[
            str | None, Field(description="Thresholds: step_time=5%,exposed_comm=2pt")
        ] = None,
        steps: Steps = None,
        ctx: Context = None,
    ) -> dict[str, Any]:
        """Gate NEW against BASE — what `tracekit compare --format json` prints: each
        metric's verdict (regression, improvement, unchanged, inconclusive) with its
        change, limit and evidence, and whether the gate failed."""

        def go():
            b = [where.run(p) for p in base]
            n = [where.run(p) for p in new]
            cmp = commands.gate_compare(b, n, max_regression, steps=steps)
            return json.loads(json.dumps(cmp.to_dict(), default=str))

        out = await work(ctx, ["analysing both sides", "judging"], go)
        return bounded(out, "comparison")

    @server.tool(annotations=READ_ONLY)
    async def perfetto_link(
        run: Run,
        code: Annotated[
            str | None,
            Field(description="A finding's code (TK-N301); none gives every finding's link."),
        ] = None,
        ctx: Context = None,
    ) -> dict[str, Any]:
        """Each finding's ui.perfetto.dev link, opened at its evidence (visStart/visEnd).
        The link loads the merged trace from `tracekit export RUN -o merged.json.gz
        --serve`, which the engineer runs (the `serve` field)."""
        from tracekit.report import export as ex

        def go():
            rep, base, places = report(
                run, keep=lambda r, rep: (rep, ex.base_ns(r), ex.evidence(r, rep))
            )
            links = [
                {"code": f.code, "title": f.title, "link": ex.perfetto_url(p, base) if p else None}
                for f, p in zip(rep.findings or [], places, strict=True)
                if not code or f.code == code
            ]
            if code and not links:
                raise TracekitError(f"the run has no finding {code!r}")
            return {
                "links": links,
                "serve": f"tracekit export {where.run(run)} -o merged.json.gz --serve",
            }

        return await work(ctx, ["opening the run", "analysing"], go)
