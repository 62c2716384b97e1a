"""The command line, `tracekit …`: one module a command (or a close group of them), each
only argument handling; what the commands do is `tracekit.commands` (shared with the
MCP door) and the engine. This module assembles the group.

- `group`: the root group `main` — every error one line on stderr, exit code 2
- `params`: the options commands share, each spelled once (their values reach
  `tracekit.options.resolve` by name); `output`: -o FILE, stdout, the run's warnings
- `analyze`, `tui`, `whatif`, `export`, `query`, `ingest`: commands over a run
- `gate`: `compare`, `baseline save|add`, `gate calibrate`
- `explain` (and `schema`), `run` (options from `instrument.config.JobConfig`), `mcp`

Exit codes: 0 success, 1 a gate failed, 2 bad input or usage (one line on stderr,
no traceback unless `--debug`).
"""

from __future__ import annotations

from tracekit.cli import analyze, explain, export, gate, ingest, mcp, query, run, tui, whatif
from tracekit.cli.group import main

for _command in (
    analyze.analyze,
    explain.explain,
    explain.schema,
    query.query,
    ingest.ingest,
    tui.tui,
    gate.baseline,
    gate.compare,
    gate.gate_group,
    export.export,
    run.run,  # always listed; it needs torch (the `jobs` extra) only when it runs
    whatif.whatif,
    mcp.mcp,
):
    main.add_command(_command)

__all__ = ["main"]
