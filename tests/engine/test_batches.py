"""Ingest in batches: many traces read together into one set of Parquet files give, rank by
rank, the very tables each trace read alone gives (the cache's contract, whatever the
batching); a file that cannot be read, or one the batch cannot take, costs only itself."""

from __future__ import annotations

import shutil

import duckdb
import pytest

from tests.conftest import ROOT
from tests.tracegen import ddp_like_rank
from tracekit.ingest import cache, runner
from tracekit.sql.text import sql_str


def _rows(cdir, batches: list[str], table: str) -> list[tuple]:
    files = ", ".join(sql_str(str(cache.table_path(cdir, b, table))) for b in batches)
    rel = duckdb.sql(f"SELECT * FROM read_parquet([{files}]) ORDER BY ALL")
    return [tuple(rel.columns), *rel.fetchall()]


def _together_and_alone(files, tmp_path):
    together, alone = tmp_path / "together", tmp_path / "alone"
    together.mkdir()
    alone.mkdir()
    items = [(f, f"k{i}") for i, f in enumerate(files)]
    res = runner.ingest_batch(items, together, "b", single=False)
    assert all("parts" in r for r in res), res
    assert {p["batch_parts"] for r in res for p in r["parts"]} == {len(files)}
    for f, key in items:
        runner.ingest_file(f, alone, key, single=False)
    return together, alone, [key for _, key in items]


@pytest.mark.parametrize("name", ["ddp", "pp_1f1b", "moe"])
def test_a_batch_holds_what_each_trace_alone_holds(name, tmp_path):
    src = ROOT / "sample_traces" / name
    files = sorted(p for p in src.iterdir() if p.name.startswith("rank"))
    assert len(files) > 1
    together, alone, keys = _together_and_alone(files, tmp_path)
    for table in cache.TABLES:
        assert _rows(together, ["b"], table) == _rows(alone, keys, table), table


def test_a_bad_file_costs_only_itself(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for r in range(3):
        ddp_like_rank(r, world=3).write(run / f"rank-{r}.json.gz")
    (run / "rank-1.json.gz").write_bytes(b"not gzip at all")
    res = runner.ingest_batch(
        [(run / f"rank-{r}.json.gz", f"k{r}") for r in range(3)], run, "b", single=False
    )
    assert "is not valid JSON" in res[1]["error"]
    assert [p["rank"] for r in (res[0], res[2]) for p in r["parts"]] == [0, 2]
    ranks = duckdb.sql(
        f"SELECT DISTINCT rank FROM {sql_str(str(cache.table_path(run, 'b', 'events')))} ORDER BY 1"
    ).fetchall()
    assert ranks == [(0,), (2,)]


def test_a_file_the_joint_read_cannot_take_is_read_alone(tmp_path):
    """A stream id that is a string fails the typed joint read: the batch is read file by
    file, and that file leniently (its odd value null), as before batches."""
    src = ROOT / "sample_traces" / "ddp"
    files = sorted(p for p in src.iterdir() if p.name.startswith("rank"))
    odd = ddp_like_rank(2, world=3)
    odd.events[-1].setdefault("args", {})["stream"] = "seven"
    odd.write(tmp_path / "rank-2.json.gz")
    copies = [shutil.copy(f, tmp_path / f.name) for f in files]
    res = runner.ingest_batch(
        [(p, f"k{i}") for i, p in enumerate([*copies, tmp_path / "rank-2.json.gz"])],
        tmp_path,
        "b",
        single=False,
    )
    assert [p["rank"] for r in res for p in r["parts"]] == [0, 1, 2]


def test_python_built_rows_reach_duckdb_by_the_schema_alone(tmp_path):
    """`coltable.create` encodes the rows as they are: a key outside the schema is left
    out, a missing one is null, the columns are the schema's, in its order."""
    from tracekit.ingest import coltable

    con = duckdb.connect()
    schema = (("b", "VARCHAR"), ("a", "BIGINT"), ("r", "BIGINT[]"))
    rows = [{"a": 1, "extra": {"x": 1}, "b": "x"}, {"r": [3, 4]}]
    coltable.create(con, "t", schema, rows, tmp_path)
    assert con.execute("SELECT * FROM t").fetchall() == [("x", 1, None), (None, None, [3, 4])]
    assert [c[0] for c in con.execute("DESCRIBE t").fetchall()] == ["b", "a", "r"]
    assert not list(tmp_path.iterdir())
