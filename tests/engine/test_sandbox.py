"""`tracekit query` / `Run.readonly_sql` read the run and nothing else."""

from __future__ import annotations

import json

import duckdb
import pytest
from click.testing import CliRunner

import tracekit
from tests.tracegen import ddp_like_rank
from tracekit.cli import main
from tracekit.errors import TracekitError

SECRET = "s3cr3t-line-not-in-any-trace"


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A run, a secret text file and a foreign Parquet file beside it."""
    root = tmp_path_factory.mktemp("sandbox")
    run = root / "run"
    for r in range(2):
        ddp_like_rank(r).write(run / f"rank-{r}.json.gz")
    (root / "secret.csv").write_text(f"a\n{SECRET}\n")
    with tracekit.open(run):  # cached before the tests compare folder listings
        pass
    duckdb.sql(f"COPY (SELECT '{SECRET}' AS a) TO '{root / 'other.parquet'}' (FORMAT parquet)")
    return root


# {s} a secret text file, {p} a foreign Parquet file, {out} a path that must stay absent
FORBIDDEN = [
    # file-reading table functions and replacement scans
    "SELECT * FROM read_csv('{s}')",
    "SELECT * FROM read_csv_auto('{s}')",
    "SELECT * FROM read_text('{s}')",
    "SELECT * FROM read_blob('{s}')",
    "SELECT * FROM read_json('{s}')",
    "SELECT * FROM read_json_auto('{s}')",
    "SELECT * FROM read_parquet('{p}')",
    "SELECT * FROM parquet_metadata('{p}')",
    "SELECT * FROM sniff_csv('{s}')",
    "SELECT * FROM glob('{root}/*')",
    "SELECT * FROM '{s}'",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_csv('https://example.com/x.csv')",
    "WITH t AS (SELECT * FROM read_text('{s}')) SELECT * FROM t",
    "SELECT (SELECT content FROM read_text('{s}')) AS x",
    # statements that write, reach out or change settings
    "COPY (SELECT 1) TO '{out}.csv'",
    "COPY steps TO '{out}.parquet'",
    "COPY steps FROM '{s}'",
    "EXPORT DATABASE '{out}'",
    "IMPORT DATABASE '{root}'",
    "ATTACH '{out}.db' AS x",
    "DETACH memory",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET allowed_directories = ['/']",
    "RESET lock_configuration",
    "PRAGMA version",
    "CALL pragma_version()",
    "USE memory",
    "CHECKPOINT",
    "VACUUM",
    "CREATE TABLE x AS SELECT 1",
    "CREATE MACRO m() AS 1",
    "CREATE VIEW v2 AS SELECT 1",
    "DROP VIEW steps",
    "INSERT INTO steps VALUES (1)",
    "UPDATE steps SET step = 0",
    "DELETE FROM steps",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}.csv'",
    "EXPLAIN ANALYZE CREATE TABLE x AS SELECT 1",
    "SELECT 1; SELECT 2",
    "SELECT 1; COPY (SELECT 1) TO '{out}.csv'",
]


@pytest.mark.parametrize("template", FORBIDDEN)
def test_forbidden_sql_is_refused_and_touches_nothing(place, template):
    sql = template.format(
        s=place / "secret.csv", p=place / "other.parquet", out=place / "written", root=place
    )
    before = sorted(p.name for p in place.rglob("*"))
    res = CliRunner().invoke(main, ["query", str(place / "run"), "--sql", sql])
    assert res.exit_code == 2, (sql, res.output)
    assert res.output.startswith("tracekit: ") and res.output.count("\n") == 1, res.output
    assert "internal error" not in res.output and "Traceback" not in res.output
    assert SECRET not in res.output
    after = sorted(p.name for p in place.rglob("*"))
    assert after == before, set(after) ^ set(before)


def test_views_still_work_after_a_refusal(place):
    with tracekit.open(place / "run") as run:
        with pytest.raises(TracekitError, match="reads only the run"):
            run.readonly_sql(f"SELECT * FROM read_text('{place / 'secret.csv'}')")
        with pytest.raises(TracekitError, match="SET statements are not allowed"):
            run.readonly_sql("SET enable_external_access = true")
        rows = run.readonly_sql("SELECT rank, count(*) FROM steps GROUP BY 1 ORDER BY 1")
        assert rows.fetchall() == [(0, 2), (1, 2)]
        # every public view answers through the sandbox
        for view in run.views():
            run.readonly_sql(f"SELECT count(*) FROM {view}").fetchall()
        # the run's own cache may be read (it is the run); the analysis connection is untouched
        n = run.readonly_sql(f"SELECT count(*) FROM glob('{run.cache_dir}/*.parquet')")
        assert n.fetchall()[0][0] > 0
        assert run.sql("SELECT current_setting('enable_external_access')").fetchall() == [(True,)]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 AS one",
        "WITH t AS (SELECT 1 AS one) SELECT * FROM t",
        "FROM (SELECT 1 AS one)",
        "VALUES (1)",
        "DESCRIBE steps",
        "SHOW TABLES",
        "SUMMARIZE steps",
        "EXPLAIN SELECT * FROM steps",
        "EXPLAIN ANALYZE SELECT count(*) FROM events",
    ],
)
def test_read_statements_are_allowed(place, sql):
    res = CliRunner().invoke(main, ["query", str(place / "run"), "--sql", sql])
    assert res.exit_code == 0, res.output


def test_query_results_are_text_not_markup(place):
    sql = "SELECT ':x: [bold]b[/bold] [memory]' AS \"[red]col\""
    res = CliRunner().invoke(main, ["query", str(place / "run"), "--sql", sql])
    assert res.exit_code == 0, res.output
    assert ":x: [bold]b[/bold] [memory]" in res.output and "[red]col" in res.output
    csv = CliRunner().invoke(main, ["query", str(place / "run"), "--sql", sql, "--format", "json"])
    assert json.loads(csv.output) == [{"[red]col": ":x: [bold]b[/bold] [memory]"}]


# -- bounds: memory and time (never run the huge queries without them) ----------------------


@pytest.mark.parametrize(
    "text,expect",
    [("500MB", 500 * 10**6), ("4GiB", 4 * 2**30), ("2g", 2 * 10**9), ("1024", 1024),
     ("1.5KB", 1500)],
)  # fmt: skip
def test_memory_sizes(text, expect):
    from tracekit.store.sandbox import parse_memory

    assert parse_memory(text) == expect


def test_memory_shares_are_of_this_machine():
    import os

    from tracekit.store.sandbox import Bounds, parse_memory

    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert parse_memory("10%") == int(ram * 0.10)
    assert Bounds.of().memory == int(ram * 0.25)
    for bad in ("lots", "0", "-1GB", "150%", "5XB"):
        with pytest.raises(TracekitError, match="memory limit"):
            parse_memory(bad)
    with pytest.raises(TracekitError, match="time limit"):
        Bounds.of(None, 0)


def test_bounds_end_a_query_with_one_line(place):
    """Memory, time and the result's size each stop a query; the sandbox then still
    answers, and a new memory limit opens a new sandbox (its configuration is locked)."""
    import time

    from tracekit.store.sandbox import Bounds

    tight = Bounds.of("300MB", 2)
    with tracekit.open(place / "run") as run:
        with pytest.raises(TracekitError, match="memory limit of 286 MiB"):
            run.readonly_sql("SELECT list(range) FROM range(1000000000)", tight)
        t0 = time.monotonic()
        with pytest.raises(TracekitError, match="time limit of 2 s"):
            run.readonly_sql(
                "SELECT count(*) FROM range(100000000000) t(a), range(10) u(b) WHERE a + b < 0",
                tight,
            )
        assert time.monotonic() - t0 < 6
        with pytest.raises(TracekitError, match="result is larger than its memory limit"):
            run.readonly_sql("SELECT * FROM range(10000000)", Bounds.of("20MB", 10))
        assert run.readonly_sql("SELECT count(*) FROM steps", tight).fetchall() == [(4,)]
        limit = run.readonly_sql("SELECT current_setting('memory_limit')", tight).fetchall()
        assert limit == [("286.1 MiB",)]
        wider = run.readonly_sql("SELECT current_setting('memory_limit')", Bounds.of("1GB"))
        assert wider.fetchall() == [("953.6 MiB",)]
