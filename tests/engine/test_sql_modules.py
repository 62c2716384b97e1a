"""The SQL library (`tracekit.sql`): modules declare what they read (`-- @include`), the
load order comes from those declarations, and documented columns carry the types DuckDB
gives them on a real trace."""

from __future__ import annotations

import re

import pytest

import tracekit
from tracekit import sql

# Every module but the base tables' docs declares the tables and views it reads.
DECLARED = tuple({m.split(".")[0] for m in sql.all_modules()} - {"base"})
_READ = re.compile(r"\b(?:FROM|JOIN)\s+([a-z_][a-z0-9_]*)\b", re.IGNORECASE)


def _code(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def _defined_by() -> dict[str, str]:
    """Public table or view → the module that defines (or documents) it."""
    out = {}
    for name in sql.all_modules():
        for table, doc in sql.parse_docs(sql.module(name)).items():
            if doc.what != "query":
                out[table] = name
    return out


def test_every_include_names_a_module():
    modules = set(sql.all_modules())
    for name in modules:
        for inc in sql.includes(name):
            assert inc in modules, f"{name} includes {inc}, which does not exist"
            assert inc != name, f"{name} includes itself"


@pytest.mark.parametrize("name", [m for m in sql.all_modules() if m.startswith(DECLARED)])
def test_a_module_includes_what_it_reads(name):
    """The module includes exactly the modules whose public tables or views its SQL reads
    (a CTE of a public name would be a false alarm: none shadows one today)."""
    defined = _defined_by()
    reads = {t for t in _READ.findall(_code(sql.module(name))) if t in defined}
    needed = {defined[t] for t in reads} - {name}
    missing = needed - set(sql.includes(name))
    assert not missing, f"{name} reads tables of {sorted(missing)} without an -- @include"
    unread = set(sql.includes(name)) - needed
    assert not unread, f"{name} includes {sorted(unread)} but reads none of their tables"


@pytest.mark.parametrize("domain", ["rank", "run"])
def test_load_order_puts_each_module_after_its_includes(domain):
    order = sql.load_order(domain)
    assert set(order) == {m for m in sql.all_modules() if m.startswith(domain + ".")}
    seen: set[str] = set()
    for name in order:
        for inc in sql.includes(name):
            if inc.startswith(domain + "."):
                assert inc in seen, f"{name} comes before {inc}, which it includes"
        seen.add(name)
    assert (sql.RANK_MODULES if domain == "rank" else sql.RUN_MODULES) == order


def test_rank_modules_read_only_what_ingest_has():
    """Rank tables are built at ingest, before any run view exists."""
    for name in sql.RANK_MODULES:
        for inc in sql.includes(name):
            assert inc.startswith(("base.", "rank.")), f"{name} includes {inc}"


def test_a_cycle_fails_clearly(monkeypatch):
    graph = {"rank.a": ("rank.b",), "rank.b": ("rank.c",), "rank.c": ("rank.a",)}
    monkeypatch.setattr(sql, "all_modules", lambda: sorted(graph))
    monkeypatch.setattr(sql, "includes", lambda name: graph[name])
    cycle = r"include each other: rank\.\w → rank\.\w → rank\.\w → rank\.\w"
    with pytest.raises(ValueError, match=cycle):
        sql.load_order("rank")


def test_a_missing_include_fails_clearly(monkeypatch):
    graph = {"rank.a": ("rank.gone",)}

    def includes(name):
        if name not in graph:
            raise KeyError(name)
        return graph[name]

    monkeypatch.setattr(sql, "all_modules", lambda: sorted(graph))
    monkeypatch.setattr(sql, "includes", includes)
    with pytest.raises(ValueError, match=r"rank\.a includes 'rank\.gone', which does not exist"):
        sql.load_order("rank")


def test_the_order_is_a_tie_break_by_name(monkeypatch):
    graph = {"rank.z": (), "rank.a": ("rank.z",), "rank.b": (), "base.t": ()}
    monkeypatch.setattr(sql, "all_modules", lambda: sorted(graph))
    monkeypatch.setattr(sql, "includes", lambda name: graph[name])
    assert sql.load_order("rank") == ("rank.b", "rank.z", "rank.a")


def test_column_lines_parse_type_and_doc():
    text = (
        "-- @view v\n-- What it is.\n-- @column a BIGINT: a: with a colon\n"
        "-- @column b VARCHAR[]: a list\n-- @column c: untyped\nCREATE VIEW v AS SELECT 1"
    )
    d = sql.parse_docs(text)["v"]
    assert d.columns == {"a": "a: with a colon", "b": "a list", "c": "untyped"}
    assert d.types == {"a": "BIGINT", "b": "VARCHAR[]"}
    assert d.summary == "What it is."


@pytest.mark.parametrize("trace", ["v100_dlrm_8rank", "mi300_resnet_ddp4_merged"])
def test_declared_types_are_what_duckdb_describes(shared_trace, tmp_path, trace):
    """Every public table and view, opened on a real trace, has the columns and the types
    its `-- @column name TYPE:` lines declare."""
    docs = sql.docs()
    with tracekit.open(shared_trace(trace)) as run:
        run.materialize()  # the views as a report reads them
        for view, doc in docs.items():
            actual = {c: t for c, t, *_ in run.con.sql(f"DESCRIBE {view}").fetchall()}
            assert set(doc.types) == set(doc.columns), f"{view}: a column without a type"
            assert doc.types == actual, f"{view}: declared types differ from DESCRIBE"


def _examples() -> dict[tuple[str, str], dict[str, str]]:
    """Placeholders filled as the engine fills them, for the queries that take some; the
    windows those of the report (`metrics.windows.table`: no rows is enough for DESCRIBE)."""
    from tracekit.metrics import windows as W

    w = sql.query("metrics.windows", "no_windows")
    items = sql.query("metrics.host_bound", "work_items", windows=w)
    return {
        ("metrics.step_windows", "step_windows"): {"selection": "TRUE"},
        ("metrics.step_windows", "window_breakdown"): {
            "windows": w,
            "sweep": sql.query("metrics.sweep", "sweep", windows="SELECT * FROM w"),
        },
        ("metrics.windows_steps", "windows_steps"): {"selection": "TRUE"},
        ("metrics.windows_trace", "windows_trace"): {"activity": "activity_islands"},
        ("metrics.sweep", "sweep"): {"windows": w},
        ("metrics.kernel_time", "kernel_time"): {
            "clipped": W.overlapping(sql.query("metrics.kernel_time", "compute_activity"), w)
        },
        ("metrics.host_bound", "work_items"): {"windows": w},
        ("metrics.host_bound", "work"): {"items": items},
        ("metrics.host_bound", "device_gaps"): {
            "work": sql.query("metrics.host_bound", "work", items=items)
        },
        ("metrics.host_bound", "host_bound"): {
            "gaps": sql.query(
                "metrics.host_bound",
                "device_gaps",
                work=sql.query("metrics.host_bound", "work", items=items),
            )
        },
        ("metrics.regions", "region_time"): {
            "in_windows": W.starting_in("SELECT * FROM regions", w, start="work_ns")
        },
        ("metrics.collective_instances", "collective_instances_in_windows"): {
            "rows": W.starting_in(sql.query("metrics.collective_exposure", "collective_rows"), w)
        },
    }


def _typed_queries() -> list[tuple[str, str, dict[str, str]]]:
    """(module, query, placeholders) of every query whose columns are typed and that runs
    as written, or with the placeholders of `_examples`."""
    examples = _examples()
    out = []
    for name in sql.all_modules():
        for q, doc in sql.parse_docs(sql.module(name)).items():
            if doc.what != "query" or not doc.types:
                continue
            if (name, q) in examples:
                out.append((name, q, examples[name, q]))
            elif not re.search(r"\{\w+\}|\$\w", _code(sql.query(name, q))):
                out.append((name, q, {}))
    return out


def test_typed_queries_are_found():
    found = {(m, q) for m, q, _ in _typed_queries()}
    assert {("ingest.collectives", "comm_kernels"), ("store.health", "rank_starts")} <= found
    assert set(_examples()) <= found, "an example fills a query whose columns are untyped"


def test_declared_query_types_are_what_duckdb_describes(shared_trace):
    """A query that types its columns (`-- @column name TYPE:`) returns those columns, in
    that order, of those types, on a real trace."""
    with tracekit.open(shared_trace("v100_dlrm_8rank")) as run:
        for name, q, parts in _typed_queries():
            doc = sql.parse_docs(sql.module(name))[q]
            assert set(doc.types) == set(doc.columns), f"{name}:{q}: a column without a type"
            text = sql.query(name, q, **parts)
            got = run.con.sql(f"DESCRIBE ({text})").fetchall()
            assert [(c, t) for c, t, *_ in got] == list(doc.types.items()), f"{name}:{q}"
