"""The agent door: `tracekit mcp`, a Model Context Protocol server over stdio.

An assistant (Claude Desktop, Claude Code, any MCP client) calls the run's report, its
findings, the rules' docs, the run's tables, read-only SQL, the step model's what-if
replay, the gate and the Perfetto links as tools, each with an input schema and a JSON
result of the report's own types (`tracekit/report/schema.py`, msgspec to builtins).

Like the command line it is a door: it computes nothing of its own. Each tool calls what
the CLI calls (`tracekit.commands`: `analysis`, `whatif_report`, `gate_compare`; the store's
sandbox; `diagnosers.assemble.cached`), importing the diagnosers lazily.

Safety, checked here before anything is opened:
- a run is a folder or trace file under one of the roots given at start, after every
  link is resolved (a link that leads out is refused), and so is every trace file found
  in it;
- SQL runs in the store's sandbox (`tracekit.store.sandbox`: one read-only statement, no
  file outside the run's cache, no network) within `Bounds` (memory, time);
- a bad argument is a tool error of one line (`ToolError`); the server keeps serving;
- every result is bounded (`MAX_RESULT_BYTES`, `MAX_ROWS`).

Docs: docs/mcp.md.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from tracekit.errors import TracekitError
from tracekit.stepmodel.changes import CHANGES

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
MAX_RESULT_BYTES = 4_000_000  # a tool's JSON result; over it, the tool says how to narrow
MAX_ROWS = 1000  # rows one `query` call may return
DEFAULT_ROWS = 100

INSTRUCTIONS = """tracekit analyzes PyTorch profiler (Kineto) traces of distributed training
runs: a run is a folder with one trace per rank. Start with `analyze` (or `findings`), walk
memory → compute → communication → scaling, read a finding's rule with `explain`, test a
fix with `whatif` before recommending it, check figures with `query` (read-only DuckDB SQL;
`describe` lists the tables and columns), gate two runs with `compare`. Runs are paths
relative to the server's roots (or absolute paths under them)."""

DIAGNOSE = """Diagnose the distributed training run `{run}` with the tracekit tools.

1. Call `analyze` with run="{run}". Read `summary`, `levels` and `findings`.
2. Walk the levels in order, and stop to explain each finding with `explain` (its code):
   - memory: does it fit? (peak memory vs device capacity)
   - compute: is the device busy and busy with useful work? (idle, host-bound gaps, MFU)
   - communication: is the network busy and hidden? (exposed vs overlapped collectives)
   - scaling: does it improve with more devices? (pipeline bubble, stragglers)
3. Check any figure you rely on with `query` (see `describe` for the tables); keep
   queries small (LIMIT).
4. For the largest findings, test the remedy with `whatif` (the changes a finding's
   `remedies` name) and report the predicted step time and saving.
5. Give each finding's Perfetto link (`perfetto_link`) so the engineer can see it.
Answer with: the step time, where it goes, the findings ordered by time saved, and what to
change first, each claim backed by a figure from the tools."""


class Roots:
    """The folders the server may read runs from, resolved once at start."""

    def __init__(self, roots: list[str | Path]):
        if not roots:
            raise TracekitError("tracekit mcp: pass at least one --root DIR")
        self.roots: list[Path] = []
        for r in roots:
            p = Path(r).expanduser()
            if not p.is_dir():
                raise TracekitError(f"--root {r}: not a folder")
            self.roots.append(p.resolve())
        self.first = self.roots[0]

    def inside(self, path: Path) -> bool:
        return any(path == r or path.is_relative_to(r) for r in self.roots)

    def run(self, run: str) -> str:
        """The resolved path of `run` (relative to the first root, or absolute), refused
        unless it and every trace file in it lie under a root."""
        from tracekit.ingest.discover import find_trace_files

        if not run or "\x00" in run:
            raise TracekitError("run: pass a run folder or trace file under the roots")
        p = Path(run).expanduser()
        if not p.is_absolute():
            p = self.first / p
        try:
            real = p.resolve(strict=True)
        except (OSError, RuntimeError):
            raise TracekitError(f"run {run!r}: no such folder or file under the roots") from None
        if not self.inside(real):
            raise TracekitError(f"run {run!r} is outside the server's roots; it is not read")
        _, files = find_trace_files([real])
        for f in files:  # a link inside the run that leads out
            if not self.inside(f.resolve()):
                raise TracekitError(
                    f"run {run!r}: {f.name} leads outside the server's roots; it is not read"
                )
        return str(real)

    def names(self) -> list[str]:
        return [str(r) for r in self.roots]


def _bounded(value: Any, what: str) -> Any:
    size = len(json.dumps(value, default=str))
    if size > MAX_RESULT_BYTES:
        raise ToolError(
            f"the {what} is {size / 1e6:.1f} MB, over this tool's {MAX_RESULT_BYTES / 1e6:.0f} "
            "MB limit; narrow it (fewer steps, `findings`, or a `query` with LIMIT)"
        )
    return value


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


async def _progress(ctx: Context | None, done: float, total: float, what: str) -> None:
    """A progress notification, where the call came from a client (not in-process)."""
    if ctx is None:
        return
    with contextlib.suppress(ValueError):  # no request: called in-process (tests, notebooks)
        await ctx.report_progress(done, total, what)


async def _work(ctx: Context | None, steps: list[str], fn):
    """Run `fn` (blocking: tables, DuckDB, replays) off the event loop, with progress
    notifications around it; a TracekitError becomes a tool error of one line."""
    total = len(steps) + 1
    try:
        for i, what in enumerate(steps):
            await _progress(ctx, i, total, what)
        out = await anyio.to_thread.run_sync(fn)
        await _progress(ctx, total, total, "done")
        return out
    except ToolError:
        raise
    except TracekitError as exc:
        raise ToolError(_one_line(exc)) from exc
    except (ValueError, KeyError, OSError) as exc:
        raise ToolError(f"{type(exc).__name__}: {_one_line(exc)}") from exc


Run = Annotated[
    str,
    Field(
        description="A run folder (one trace per rank) or trace file, relative to the "
        "server's first root or absolute under a root."
    ),
]
Steps = Annotated[str | None, Field(description="ProfilerSteps to analyse: all, N or A-B.")]
Window = Annotated[
    str,
    Field(
        description="Analysed window: steps (ProfilerStep spans), trace (first to last device "
        "event) or hta (HTA's window).",
        pattern="^(steps|trace|hta)$",
    ),
]
Codes = Annotated[
    list[str],
    Field(description="Rule codes (TK-N301), prefixes (TK-N), kinds or names."),
]


class _Server(MCPServer):
    """MCPServer whose argument errors are one line: each field and what is wrong with it
    (the SDK's text is pydantic's, several lines with a URL)."""

    async def call_tool(self, name, arguments, context=None):
        from pydantic import ValidationError

        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            said = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in cause.errors()
            )
            raise ToolError(f"Error executing tool {name}: bad arguments: {said}") from cause


def _publish_schemas(server: MCPServer) -> None:
    """The report's own JSON Schema as the output schema of `analyze` (MCP wants an object
    schema at the top: the Report definition, its $defs beside it)."""
    from tracekit.report.schema import json_schema

    schema = json_schema()
    root = schema["$ref"].rsplit("/", 1)[-1]
    tool = server._tool_manager.get_tool("analyze")
    tool.fn_metadata.output_schema = {
        **schema["$defs"][root],
        "$defs": schema["$defs"],
        "title": schema["title"],
    }


def build(roots: list[str | Path], bounds=None) -> MCPServer:
    """The server over `roots`; `bounds` (`tracekit.store.sandbox.Bounds`) cap each query."""
    from tracekit import commands
    from tracekit.options import OpenOptions
    from tracekit.store.sandbox import Bounds
    from tracekit.version import __version__

    where = Roots(roots)
    bounds = bounds or Bounds.of()
    server = _Server(
        "tracekit", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

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

        out = await _work(ctx, ["opening the run", "analysing"], go)
        return _bounded(out, "report")

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

        out = await _work(ctx, ["opening the run", "analysing"], go)
        return _bounded(out, "findings")

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

        return await _work(ctx, ["opening the run"], go)

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
                "rows": [[_jsonable(v) for v in row] for row in rows[:limit]],
                "truncated": len(rows) > limit,
            }

        out = await _work(ctx, ["opening the run", "running the query"], go)
        return _bounded(out, "query result")

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

        out = await _work(ctx, ["opening the run", "replaying the step model"], go)
        return _bounded(out, "what-if result")

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

        out = await _work(ctx, ["analysing both sides", "judging"], go)
        return _bounded(out, "comparison")

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

        return await _work(ctx, ["opening the run", "analysing"], go)

    @server.resource("tracekit://schema/report", mime_type="application/json")
    def report_schema() -> str:
        """The JSON Schema of the report (`tracekit schema`): every figure's label, unit,
        direction and definition."""
        from tracekit.report.schema import json_schema

        return json.dumps(json_schema(), indent=1, ensure_ascii=False)

    @server.resource("tracekit://rules", mime_type="text/markdown")
    def rules_docs() -> str:
        """Every rule's docs (`tracekit explain CODE` for each code)."""
        from diagnosers.rules import registry

        return "\n\n".join(k.explain() for k in registry())

    @server.resource("tracekit://sql/columns", mime_type="application/json")
    def sql_docs() -> str:
        """The tables and views `query` reads, each column documented."""
        from tracekit.sql import docs

        return json.dumps(
            {
                n: {"what": d.what, "summary": d.summary, "columns": d.columns}
                for n, d in sorted(docs().items())
            },
            indent=1,
        )

    @server.resource("tracekit://roots", mime_type="application/json")
    def root_list() -> str:
        """The folders this server reads runs from."""
        return json.dumps(where.names())

    @server.prompt(name="diagnose", title="Diagnose this run")
    def diagnose(run: str) -> str:
        """Walk memory → compute → communication → scaling on a run with the tools."""
        return DIAGNOSE.format(run=run)

    _publish_schemas(server)
    return server


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


def serve(roots: list[str | Path], bounds=None, http_port: int | None = None) -> None:
    """Serve over stdio until the client closes it, or streamable HTTP on
    http://127.0.0.1:`http_port`/mcp (localhost only: the SDK's DNS-rebinding protection
    accepts only local Host headers) until interrupted."""
    server = build(roots, bounds)
    if http_port is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=http_port)
