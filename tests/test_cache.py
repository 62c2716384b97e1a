"""The Parquet cache: reused while sources are unchanged, refreshed when they change."""

from __future__ import annotations

import json
import os
import stat

import pytest

import tracekit
from tests.tracegen import ddp_like_rank
from tracekit import cache


def _run(tmp_path, n=2):
    for r in range(n):
        ddp_like_rank(r).write(tmp_path / f"rank-{r}.json.gz")
    return tmp_path


def _cached(run_dir):
    cdir = run_dir / ".tracekit" / f"v{cache.SCHEMA_VERSION}"
    return {p.name: p.stat().st_mtime_ns for p in cdir.glob("*.parquet")}


def test_reopen_reads_cache_and_rebuilds_only_changed_files(tmp_path):
    run = _run(tmp_path)
    with tracekit.open(run) as r:
        assert r.cache_dir == run / ".tracekit" / f"v{cache.SCHEMA_VERSION}"
    first = _cached(run)
    assert len(first) == 2 * len(cache.TABLES)
    with tracekit.open(run):
        pass
    assert _cached(run) == first  # nothing rewritten
    ddp_like_rank(1, steps=3).write(run / "rank-1.json.gz")  # rank 1 re-exported
    with tracekit.open(run) as r:
        steps = r.sql("SELECT rank, count(*) FROM steps GROUP BY 1 ORDER BY 1").fetchall()
    assert steps == [(0, 2), (1, 3)]
    after = _cached(run)
    assert {k for k in after if after[k] != first[k]} == {
        k for k in first if k.startswith("rank-1-")
    }


def test_index_records_fingerprints(tmp_path):
    run = _run(tmp_path, 1)
    with tracekit.open(run):
        pass
    index = json.loads((run / ".tracekit" / f"v{cache.SCHEMA_VERSION}" / "index.json").read_text())
    (entry,) = index.values()
    st = (run / "rank-0.json.gz").stat()
    assert entry["fingerprint"] == {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "schema": cache.SCHEMA_VERSION,
    }
    assert entry["rank"] == 0 and entry["rank_source"] == "distributedInfo"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_run_uses_user_cache(tmp_path, _user_cache):
    run = _run(tmp_path / "ro")
    run.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with tracekit.open(run) as r:
            assert str(r.cache_dir).startswith(str(_user_cache))
    finally:
        run.chmod(stat.S_IRWXU)


def test_unwritable_run_falls_back_to_user_cache(tmp_path, _user_cache, monkeypatch):
    run = _run(tmp_path)
    monkeypatch.setattr(cache, "_writable", lambda d: False)
    with tracekit.open(run) as r:
        assert str(r.cache_dir).startswith(str(_user_cache))
        assert r.sql("SELECT count(*) FROM steps").fetchall() == [(4,)]
    assert not (run / ".tracekit").exists()


def test_failed_ingest_leaves_no_partial_tables(tmp_path):
    run = _run(tmp_path)
    (run / "rank-2.json").write_text('{"traceEvents": [{"ph": "X"')  # truncated
    with tracekit.open(run) as r:  # the others are analysed; the damaged one is named
        assert r.ranks == [0, 1]
        assert [u["path"] for u in r.unreadable] == [str(run / "rank-2.json")]
        assert "not valid JSON" in r.unreadable[0]["reason"]
    with pytest.raises(tracekit.errors.TracekitError, match="--strict: .*not valid JSON"):
        tracekit.open(run, strict=True)
    cdir = run / ".tracekit" / f"v{cache.SCHEMA_VERSION}"
    assert not list(cdir.glob("*.tmp"))
    assert not list(cdir.glob("rank-2-*"))


def test_duplicate_ranks_are_refused(tmp_path):
    ddp_like_rank(0).write(tmp_path / "a.json")
    ddp_like_rank(0).write(tmp_path / "b.json")
    with pytest.raises(tracekit.errors.TracekitError, match="rank 0 appears twice"):
        tracekit.open(tmp_path)
