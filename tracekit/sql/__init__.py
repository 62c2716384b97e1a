"""Every SQL text tracekit runs, as named modules (Perfetto's standard-library habit).

A module is a `.sql` file under this folder; its dotted name is its path:
`rank.steps` is `rank/steps.sql`. Domains, in the order data flows:

- `base.*`    — the tables ingest writes (one Parquet file per ingest batch and table); docs only
- `ingest.*`  — how ingest builds them: the base tables from the trace JSON, the
  collective rows, the per-batch statistics
- `rank.*`    — rank-local derived tables, materialized at ingest, in `RANK_MODULES` order
- `run.*`     — cross-rank views created when a run is opened (`RUN_MODULES`)
- `store.*`   — what opening a run asks of it (health, clock alignment)
- `metrics.*` — figures over analysis windows (the breakdown, per-collective exposure,
  host-bound gaps, per-step samples): queries whose `{placeholders}` Python fills
- `levels.*`  — what the diagnosers read (FLOPs per op, memory peaks, pipeline labels …)
- `tui.*`     — the drill-down screens' queries

A module states what it reads, above its first block: `-- @include rank.steps`, one line
per module whose tables or views it reads. `RANK_MODULES` and `RUN_MODULES` are those
declarations in dependency order (`load_order`, a topological sort): a new module is a
new file with its includes, not an edit of a list here.

Public tables and views document every column where they are defined (`-- @table`,
`-- @view`, `-- @column name TYPE: doc`, TYPE as DuckDB's DESCRIBE prints it); `docs()`
parses them, `tracekit query --describe VIEW` prints them, and tests fail on a public
column without a doc or with another type. Query modules document their result columns
the same way (`-- @query name`, `-- @column name: doc`, the type optional), so a reader
of Python never has to open the SQL to know what a row holds; where given, a test runs
the query on a real trace to check the types (a query over windows is typed over the
report's, `metrics.windows.table`: over per-step windows `wid` is the BIGINT step).

What stays in Python strings is plumbing, not queries: connection settings (`SET`),
transactions, `DROP`/`ALTER … RENAME` of the working tables, `DESCRIBE`, copying a view
or a query into a table (`CREATE TABLE t AS SELECT * FROM v`, `INSERT INTO t BY NAME`),
`SELECT * FROM t` as a query's source, a `count(*)` of a named table, the Parquet write
(`tracekit.ingest.cache`: `COPY … TO`) and the generic row loader
(`tracekit.ingest.coltable`): each names only tables, and its text is its meaning.
"""

from __future__ import annotations

import graphlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources


@cache
def module(name: str) -> str:
    """The text of SQL module `name` (`rank.steps` → `rank/steps.sql`)."""
    *folders, leaf = name.split(".")
    node = resources.files(__name__)
    for part in folders:
        node = node.joinpath(part)
    try:
        return node.joinpath(f"{leaf}.sql").read_text()
    except FileNotFoundError:
        raise KeyError(f"no SQL module {name!r}") from None


_INCLUDE = re.compile(r"^-- @include ([\w.]+)\s*$")


@cache
def includes(name: str) -> tuple[str, ...]:
    """The modules module `name` declares it reads (its `-- @include` lines)."""
    return tuple(m.group(1) for line in module(name).splitlines() if (m := _INCLUDE.match(line)))


def load_order(domain: str) -> tuple[str, ...]:
    """The modules of `domain` (`rank`, `run`), each after every module it includes
    (graphlib's topological sort; modules ready together go in name order, so the order
    is the same on every machine). An include that names no module, or a cycle, raises
    ValueError."""
    graph: dict[str, tuple[str, ...]] = {}
    todo = [(m, None) for m in all_modules() if m.startswith(domain + ".")]
    while todo:
        name, by = todo.pop()
        if name in graph:
            continue
        try:
            graph[name] = includes(name)
        except KeyError:
            raise ValueError(f"SQL module {by} includes {name!r}, which does not exist") from None
        todo.extend((inc, name) for inc in graph[name])
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise ValueError(f"SQL modules include each other: {' → '.join(exc.args[1])}") from None
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        order += ready
        sorter.done(*ready)
    return tuple(m for m in order if m.startswith(domain + "."))


def _fill(label: str, text: str, parts: dict[str, str]) -> str:
    lines = text.splitlines()
    code = [i for i, line in enumerate(lines) if not line.lstrip().startswith("--")]
    for key, part in parts.items():
        marker = "{" + key + "}"
        hit = False
        for i in code:
            if marker in lines[i]:
                lines[i] = lines[i].replace(marker, part)
                hit = True
        if not hit:
            raise KeyError(f"SQL {label} has no {marker}")
    return "\n".join(lines)


def fill(name: str, /, **parts: str) -> str:
    """Module `name` with its `{placeholders}` replaced by SQL `parts` (subqueries, table
    names, predicates built by Python). Only the named placeholders, and only outside
    comments, are touched, so SQL braces and the docs stay as written. Values never go
    in here: bind them (`$name` parameters)."""
    return _fill(f"module {name}", module(name), parts)


@cache
def _queries(name: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in module(name).splitlines():
        if m := _HEAD.match(line):
            cur = out.setdefault(m.group(2), []) if m.group(1) == "query" else None
        if cur is not None:
            cur.append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def query(name: str, query_name: str, /, **parts: str) -> str:
    """The `-- @query query_name` block of module `name` (a module may hold several named
    queries of one topic), placeholders filled as `fill` does."""
    try:
        text = _queries(name)[query_name]
    except KeyError:
        raise KeyError(f"SQL module {name} has no query {query_name!r}") from None
    return _fill(f"{name}:{query_name}", text, parts)


def table_name(name: str) -> str:
    """The table a rank/run module creates: its last dotted part."""
    return name.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class ViewDoc:
    name: str
    what: str  # "table", "view" or "query"
    summary: str
    columns: dict[str, str]  # name → doc
    types: dict[str, str]  # name → declared DuckDB type, where the doc gives one


_HEAD = re.compile(r"^-- @(table|view|query) (\w+)\s*$")
# `-- @column name TYPE: doc`; TYPE as DESCRIBE prints it (BIGINT, VARCHAR[], …), optional
_COL = re.compile(r"^-- @column (\w+)(?: ([A-Z][A-Z0-9_]*(?:\[\])*))?: (.+)$")


def parse_docs(text: str) -> dict[str, ViewDoc]:
    """The `@table` / `@view` / `@query` blocks of one module's text."""
    out: dict[str, dict] = {}
    cur: dict | None = None
    for line in text.splitlines():
        if m := _HEAD.match(line):
            cur = {"name": m.group(2), "what": m.group(1), "summary": [], "columns": {}}
            cur["types"] = {}
            out[cur["name"]] = cur
        elif _INCLUDE.match(line):
            continue
        elif cur is not None and (m := _COL.match(line)):
            cur["columns"][m.group(1)] = m.group(3)
            if m.group(2):
                cur["types"][m.group(1)] = m.group(2)
        elif cur is not None and line.startswith("-- ") and not cur["columns"]:
            cur["summary"].append(line[3:])
        elif not line.startswith("--"):
            cur = None
    return {
        k: ViewDoc(v["name"], v["what"], " ".join(v["summary"]), v["columns"], v["types"])
        for k, v in out.items()
    }


@cache
def docs() -> dict[str, ViewDoc]:
    """Column docs of every public table and view (what `tracekit query` can read)."""
    out: dict[str, ViewDoc] = {}
    for name in DOC_MODULES:
        out.update(parse_docs(module(name)))
    return out


def all_modules() -> list[str]:
    """Every module's dotted name."""
    root = resources.files(__name__)
    names: list[str] = []

    def walk(node, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir() and not child.name.startswith("_"):
                walk(child, f"{prefix}{child.name}.")
            elif child.name.endswith(".sql"):
                names.append(prefix + child.name.removesuffix(".sql"))

    walk(root, "")
    return names


# Rank-local derived tables, materialized one by one at ingest (each a table before the
# next module reads it, so none is computed twice) and read back from Parquet.
RANK_MODULES = load_order("rank")
# Cross-rank views, created over the per-rank tables when a run is opened.
RUN_MODULES = load_order("run")
DOC_MODULES = ("base.tables", *RANK_MODULES, *RUN_MODULES)
