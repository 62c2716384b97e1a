"""`tracekit mcp`: the agent door (`tracekit.mcp_server`) served over stdio or HTTP."""

from __future__ import annotations

import click

from tracekit.cli import params as P
from tracekit.errors import TracekitError


@click.command()
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A folder the assistant may read runs from (repeatable).  [default: the working "
    "directory]",
)
@click.option(
    "--http",
    "http_port",
    type=click.IntRange(1, 65535),
    default=None,
    metavar="PORT",
    help="Serve streamable HTTP on http://127.0.0.1:PORT/mcp instead of stdio (localhost only).",
)
@P.sql_bounds
def mcp(roots, http_port, memory, timeout):
    """Serve the run's report, findings, SQL, what-if and the gate as tools to an assistant
    (Model Context Protocol over stdio; docs/mcp.md). Needs the mcp extra."""
    from importlib.util import find_spec

    if find_spec("mcp") is None:
        raise TracekitError("tracekit mcp needs the MCP SDK: pip install 'tracekit-torch[mcp]'")
    bounds = P.bounds(memory, timeout)
    from tracekit.mcp_server import serve

    serve(list(roots) or ["."], bounds, http_port)
