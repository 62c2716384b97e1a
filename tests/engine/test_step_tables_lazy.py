"""The step model's inputs (`rank.step_*`) left out at ingest for a run the model cannot
cover (`tracekit.ingest.steptables`): the cache entry stays valid, the store computes
the same rows from the events, and the report is the same as with them built."""

from __future__ import annotations

import json
import shutil

import pytest

import tracekit
from tests.synth import Scenario, generate
from tracekit.ingest import steptables

STEP = steptables.STEP_TABLES


def _report(root) -> dict:
    rep = json.loads(tracekit.analyze(root, workers=1, cache=False).to_json())
    rep = json.loads(json.dumps(rep).replace(str(root), "<RUN>"))
    rep.pop("tracekit_version", None)
    return rep


def _step_files(root) -> list[str]:
    return sorted(p.name for p in root.rglob("*.parquet") if p.name.split(".")[-2] in STEP)


def _copies(src, tmp_path):
    """Two writable copies of `src` (shared traces are read-only: their cache would go
    to the user's cache folder), each with its cache in it."""
    out = []
    for name in ("built", "lazy"):
        dest = tmp_path / name
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".tracekit"))
        dest.chmod(0o755)
        out.append(dest)
    return out


def _both(src, tmp_path, monkeypatch) -> tuple[dict, dict]:
    built, lazy = _copies(src, tmp_path)
    with_tables = _report(built)
    assert _step_files(built)  # a small run: worth building
    assert with_tables["step_model"]  # the model built, from the tables
    with monkeypatch.context() as m:
        m.setattr(steptables, "MAX_STEP_NODES", 0)  # as a run past the model's reach
        without = _report(lazy)
    assert not _step_files(lazy)
    index = sorted(p for p in lazy.rglob("*.parquet"))
    again = _report(lazy)  # the entry stays fresh: nothing ingested again
    assert sorted(p for p in lazy.rglob("*.parquet")) == index
    assert again == without
    return with_tables, without


@pytest.mark.parametrize("name", ["v100_ddp_rank1", "a100_sendrecv_2rank"])
def test_a_run_ingested_without_the_step_tables_reports_the_same(
    shared_trace, tmp_path, monkeypatch, name
):
    with_tables, without = _both(shared_trace(name), tmp_path, monkeypatch)
    assert without == with_tables


def test_a_synthetic_run_without_the_step_tables_reports_the_same(tmp_path, monkeypatch):
    src = tmp_path / "src"
    generate(Scenario(name="lazy", world=4), src)
    shutil.rmtree(src / ".tracekit", ignore_errors=True)
    with_tables, without = _both(src, tmp_path, monkeypatch)
    assert without == with_tables


def test_the_store_computes_the_same_rows_from_the_events(shared_trace, tmp_path, monkeypatch):
    built, lazy = _copies(shared_trace("a100_sendrecv_2rank"), tmp_path)
    with monkeypatch.context() as m:
        m.setattr(steptables, "MAX_STEP_NODES", 0)
        tracekit.open(lazy, workers=1).close()
    with tracekit.open(built, workers=1) as a, tracekit.open(lazy, workers=1) as b:
        for table in STEP:
            q = f"SELECT * FROM {table} ORDER BY ALL"
            assert a.sql(q).fetchall() == b.sql(q).fetchall()
            assert a.sql(q).fetchall()


def test_the_estimate_builds_them_for_a_small_run_not_for_a_big_one(tmp_path):
    import duckdb

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE events AS SELECT * FROM (VALUES (0, 'kernel', 'k'), (0, 'runtime', 'r'),"
        " (0, 'cpu_op', 'ProfilerStep#1'), (1, 'kernel', 'k')) t(rank, kind, name)"
    )
    # 3 pieces of work over 2 ranks, one step: 3 nodes a rank
    assert steptables.worth_building(con, 0)
    assert steptables.worth_building(con, steptables.MAX_STEP_NODES // 3)
    assert not steptables.worth_building(con, steptables.MAX_STEP_NODES // 3 + 1)
