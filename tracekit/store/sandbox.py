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

**Bounds.** A read can still exhaust the machine (`SELECT list(range) FROM
range(1000000000)` grew past 20 GB). `Bounds` caps it: DuckDB's `memory_limit` on the
sandbox (set before the configuration is locked; a share of the machine's memory by
default), the materialized result at the same size, and a time limit — a timer thread
interrupts the connection (`DuckDBPyConnection.interrupt`). Either ends the query with
one line.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tracekit.errors import TracekitError
from tracekit.sql.text import sql_str

_READS = {duckdb.StatementType.SELECT}
_EXPLAIN_HEAD = re.compile(
    r"^\s*explain\s+(?:analy[sz]e\s+|\((?:[^()]|\([^()]*\))*\)\s*)?", re.IGNORECASE
)


# the default share of the machine's memory one query may use, and its default time
MEMORY_SHARE = 0.25
TIMEOUT_S = 120.0
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(%|[kmgt]i?b?|b)?\s*$", re.IGNORECASE)


def machine_memory() -> int:
    """Physical memory of this machine, bytes (POSIX sysconf)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a small machine
        return 8 * 2**30


def parse_memory(text: str) -> int:
    """'500MB', '4GiB', '2G', '25%' (of this machine's memory) → bytes; one line if not."""
    m = _SIZE.match(str(text))
    if not m or float(m.group(1)) <= 0:
        raise TracekitError(
            f"memory limit {text!r}: pass a size like 500MB, 4GB or a share like 25%"
        )
    x, unit = float(m.group(1)), (m.group(2) or "").lower()
    if unit == "%":
        if x > 100:
            raise TracekitError(f"memory limit {text!r}: a share is at most 100%")
        return int(machine_memory() * x / 100)
    letters = unit.rstrip("b")  # 'mib' → 'mi', 'mb' → 'm', 'b' → ''
    power = "kmgt".index(letters[0]) + 1 if letters else 0
    base = (1024 if letters.endswith("i") else 1000) ** power
    return max(int(x * base), 1)


@dataclass(frozen=True)
class Bounds:
    """What one user query may use: `memory` bytes (DuckDB's memory_limit, and the size of
    the materialized result) and `timeout_s` seconds (None: no time limit)."""

    memory: int
    timeout_s: float | None = TIMEOUT_S

    @classmethod
    def of(cls, memory: str | int | None = None, timeout_s: float | None = TIMEOUT_S) -> Bounds:
        if memory is None:
            mem = int(machine_memory() * MEMORY_SHARE)
        elif isinstance(memory, int):
            mem = memory
        else:
            mem = parse_memory(memory)
        if timeout_s is not None and not timeout_s > 0:
            raise TracekitError(f"time limit {timeout_s!r}: pass a number of seconds > 0")
        return cls(mem, timeout_s)

    def memory_text(self) -> str:
        return f"{self.memory / 2**20:,.0f} MiB"


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
    from tracekit import sql

    return con.execute(sql.query("store.catalog", "user_views")).fetchall()


def open_sandbox(
    con: duckdb.DuckDBPyConnection,
    cache_dir: Path,
    views: list[tuple[str, str]] | None = None,
    bounds: Bounds | None = None,
) -> duckdb.DuckDBPyConnection:
    """A fresh connection with `con`'s views (or `views`, (name, CREATE VIEW …) as
    `view_definitions` gives them) that can read only files under `cache_dir` and use at
    most `bounds.memory` bytes (default `Bounds.of()`)."""
    bounds = bounds or Bounds.of()
    box = duckdb.connect()
    box.execute("SET enable_progress_bar = false")
    box.execute(f"SET memory_limit = '{int(bounds.memory)}B'")
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


def run_readonly(
    box: duckdb.DuckDBPyConnection, query: str, bounds: Bounds | None = None
) -> duckdb.DuckDBPyRelation:
    """Check `query`, run it on the sandbox within `bounds` (its time; the result's size),
    return its rows as a materialized relation."""
    import pyarrow as pa

    check_statement(query)
    bounds = bounds or Bounds.of()
    timer = None
    if bounds.timeout_s is not None:
        timer = threading.Timer(bounds.timeout_s, box.interrupt)
        timer.daemon = True
        timer.start()
    try:
        rel = box.sql(query)
        if rel is None:  # not a query after all: nothing to show
            raise TracekitError("the statement returned no rows to show; pass a SELECT")
        reader = rel.to_arrow_reader(64 * 1024)
        batches, size = [], 0
        for batch in reader:  # the result outside DuckDB's buffer counts against the limit
            size += batch.nbytes
            if size > bounds.memory:
                raise TracekitError(
                    f"the query's result is larger than its memory limit of "
                    f"{bounds.memory_text()}; select fewer rows (LIMIT) or raise --memory"
                )
            batches.append(batch)
        table = pa.Table.from_batches(batches, schema=reader.schema)
    except duckdb.InterruptException as exc:
        raise TracekitError(
            f"the query ran past its time limit of {bounds.timeout_s:g} s and was stopped; "
            "narrow it or raise --timeout"
        ) from exc
    except duckdb.OutOfMemoryException as exc:
        raise TracekitError(
            f"the query needs more than its memory limit of {bounds.memory_text()} and was "
            "stopped; narrow it or raise --memory"
        ) from exc
    except duckdb.PermissionException as exc:
        raise TracekitError(
            "tracekit query reads only the run's own tables and views; "
            f"DuckDB refused: {_first_line(exc)}"
        ) from exc
    except duckdb.Error as exc:
        raise TracekitError(f"SQL error: {_first_line(exc)}") from exc
    finally:
        if timer is not None:
            timer.cancel()
    return box.from_arrow(table)
