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

The modules: `mcp_roots` (the roots and what lies under them), `mcp_calls` (how a tool
runs and answers: progress, errors, bounds), `mcp_tools` (the tools); here the server,
its resources and prompt.

Docs: docs/mcp.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from tracekit.mcp_roots import Roots
from tracekit.mcp_tools import add_tools

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
    from tracekit.store.sandbox import Bounds
    from tracekit.version import __version__

    where = Roots(roots)
    bounds = bounds or Bounds.of()
    server = _Server(
        "tracekit", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    add_tools(server, where, bounds)

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


def serve(roots: list[str | Path], bounds=None, http_port: int | None = None) -> None:
    """Serve over stdio until the client closes it, or streamable HTTP on
    http://127.0.0.1:`http_port`/mcp (localhost only: the SDK's DNS-rebinding protection
    accepts only local Host headers) until interrupted."""
    server = build(roots, bounds)
    if http_port is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=http_port)
