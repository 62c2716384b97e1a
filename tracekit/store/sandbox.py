"""User SQL that reads the run and nothing else (`tracekit query`, the TUI's console).

Two fences, either one enough on its own for what it covers:

1. **The statement.** Exactly one statement, of type SELECT (which includes `FROM v`,
   `VALUES`, `DESCRIBE`, `SHOW`, `SUMMARIZE`) or EXPLAIN of one. Everything else —
   writes, `ATTACH`, `INSTALL`, `LOAD`, `COPY`, `EXPORT`, `SET`, `PRAGMA`, `CALL`,
   `CREATE MACRO` — is refused before DuckDB runs anything. `EXPLAIN ANALYZE` executes
   its statement, so what it explains must pass the same check.
2. **The connection.** User SQL never runs on the analysis connection. It runs on a
   separate in-memory DuckDB holding the same views (replayed from the run's
   connection), with `allowed_directories` limited to the run's cache folder,
   `enable_external_access = false` and `lock_configuration = true`: no table function
   (`read_csv`, `read_text`, `read_blob`, `glob`, `read_json`, `read_parquet`, `ATTACH`,
   http…) can open a file outside the cache, and no statement can lift the fence.

Results are materialized (Arrow) before they are returned, so an error while
executing is a `TracekitError` here, never later while the caller fetches rows.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb

from tracekit.errors import TracekitError
from tracekit.sql.text import sql_str

_READS = {duckdb.StatementType.SELECT}
_EXPLAIN_HEAD = re.compile(
    r"^\s*explain\s+(?:analy[sz]e\s+|\((?:[^()]|\([^()]*\))*\)\s*)?", re.IGNORECASE
)


def check_statement(query: str) -> None:
    """Refuse anything but one read-only statement (one line, `TracekitError`)."""
    try:
        stmts = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise TracekitError(f"SQL error: {_first_line(exc)}") from exc
    if len(stmts) != 1:
        raise TracekitError(
            f"pass exactly one SQL statement (got {len(stmts)}); run them one at a time"
        )
    kind = stmts[0].type
    if kind in _READS:
        return
    if kind == duckdb.StatementType.EXPLAIN:
        inner = _EXPLAIN_HEAD.sub("", query, count=1)
        if inner != query:
            check_statement(inner)
            return
    name = kind.name.replace("_", " ")
    raise TracekitError(
        f"tracekit query only reads the run: {name} statements are not allowed "
        "(use SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE or EXPLAIN)"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def view_definitions(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(name, CREATE VIEW …) of every user view of `con`, in creation order."""
    return con.execute(
        "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal "
        "AND schema_name = 'main' ORDER BY view_oid"
    ).fetchall()


def open_sandbox(
    con: duckdb.DuckDBPyConnection, cache_dir: Path, views: list[tuple[str, str]] | None = None
) -> duckdb.DuckDBPyConnection:
    """A fresh connection with `con`'s views (or `views`, (name, CREATE VIEW …) as
    `view_definitions` gives them) that can read only files under `cache_dir`."""
    box = duckdb.connect()
    box.execute("SET enable_progress_bar = false")
    pending = list(views) if views is not None else view_definitions(con)
    # a view may name one defined after it (CREATE OR REPLACE): retry until none moves
    while pending:
        failed = []
        for name, sql in pending:
            try:
                box.execute(sql)
            except duckdb.CatalogException:
                failed.append((name, sql))
        if len(failed) == len(pending):
            names = ", ".join(n for n, _ in failed)
            box.close()
            raise RuntimeError(f"cannot rebuild views for the SQL sandbox: {names}")
        pending = failed
    # the views name their files as the store did; the resolved path too, for symlinks
    folders = {str(Path(cache_dir)), str(Path(cache_dir).resolve())}
    listed = ", ".join(sql_str(f.rstrip(os.sep) + os.sep) for f in sorted(folders))
    box.execute(f"SET allowed_directories = [{listed}]")
    box.execute("SET enable_external_access = false")
    box.execute("SET lock_configuration = true")
    return box


def run_readonly(box: duckdb.DuckDBPyConnection, query: str) -> duckdb.DuckDBPyRelation:
    """Check `query`, run it on the sandbox, return its rows as a materialized relation."""
    check_statement(query)
    try:
        rel = box.sql(query)
        if rel is None:  # not a query after all: nothing to show
            raise TracekitError("the statement returned no rows to show; pass a SELECT")
        table = rel.to_arrow_table()
    except duckdb.PermissionException as exc:
        raise TracekitError(
            "tracekit query reads only the run's own tables and views; "
            f"DuckDB refused: {_first_line(exc)}"
        ) from exc
    except duckdb.Error as exc:
        raise TracekitError(f"SQL error: {_first_line(exc)}") from exc
    return box.from_arrow(table)
