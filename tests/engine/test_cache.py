"""The Parquet cache: reused while sources are unchanged, refreshed when they change."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

import tracekit
from tests.tracegen import ddp_like_rank
from tracekit.ingest import cache


def _run(tmp_path, n=2):
    for r in range(n):
        ddp_like_rank(r).write(tmp_path / f"rank-{r}.json.gz")
    return tmp_path


def _cached(run_dir):
    cdir = run_dir / ".tracekit" / f"v{cache.SCHEMA_VERSION}"
    return {p.name: p.stat().st_mtime_ns for p in cdir.glob("*.parquet")}


def _batches(run_dir) -> dict[int, str]:
    """rank → the batch its tables are in."""
    index = cache.load_index(run_dir / ".tracekit" / f"v{cache.SCHEMA_VERSION}")
    return {p["rank"]: p["batch"] for e in index.values() for p in e.get("parts", ())}


def test_reopen_reads_cache_and_rebuilds_only_changed_files(tmp_path):
    run = _run(tmp_path)
    with tracekit.open(run, workers=2) as r:
        assert r.cache_dir == run / ".tracekit" / f"v{cache.SCHEMA_VERSION}"
    first = _cached(run)
    old = _batches(run)
    assert len(set(old.values())) == 2  # one batch a worker
    assert len(first) == 2 * len(cache.TABLES)
    with tracekit.open(run):
        pass
    assert _cached(run) == first  # nothing rewritten
    ddp_like_rank(1, steps=3).write(run / "rank-1.json.gz")  # rank 1 re-exported
    with tracekit.open(run) as r:
        steps = r.sql("SELECT rank, count(*) FROM steps GROUP BY 1 ORDER BY 1").fetchall()
    assert steps == [(0, 2), (1, 3)]
    after = _cached(run)
    new = _batches(run)
    assert new[0] == old[0] and new[1] != old[1]
    # rank 0's tables untouched, rank 1's in a new batch, its old batch removed
    assert {k: v for k, v in after.items() if k.startswith(old[0])} == {
        k: v for k, v in first.items() if k.startswith(old[0])
    }
    assert {k.split(".")[0] for k in after} == {old[0], new[1]}


def test_a_rank_ingested_again_is_read_from_its_new_batch_only(tmp_path):
    """Both ranks in one batch (one worker); rank 1 re-exported goes to a batch of its
    own, and the old batch is then read for rank 0 alone: no rank counted twice."""
    run = _run(tmp_path)
    with tracekit.open(run, workers=1) as r:
        before = r.sql("SELECT rank, count(*) FROM events GROUP BY 1 ORDER BY 1").fetchall()
    old = _batches(run)
    assert old[0] == old[1]
    ddp_like_rank(1, steps=3).write(run / "rank-1.json.gz")
    with tracekit.open(run, workers=1) as r:
        steps = r.sql("SELECT rank, count(*) FROM steps GROUP BY 1 ORDER BY 1").fetchall()
        events = r.sql("SELECT rank, count(*) FROM events GROUP BY 1 ORDER BY 1").fetchall()
        info = r.sql("SELECT rank FROM rank_info ORDER BY 1").fetchall()
    assert steps == [(0, 2), (1, 3)]
    assert events[0] == before[0] and events[1][1] > before[1][1]
    assert info == [(0,), (1,)]
    new = _batches(run)
    assert new[0] == old[0] and new[1] != old[0]
    # a selection of rank 0 alone reads the old batch filtered as well
    with tracekit.open(run, ranks="0") as r:
        assert r.sql("SELECT DISTINCT rank FROM events").fetchall() == [(0,)]


def test_small_traces_are_batched_and_big_ones_alone(tmp_path):
    from tracekit.ingest import runner

    small = [tmp_path / f"s{i}.json" for i in range(10)]
    for f in small:
        f.write_bytes(b" " * 1000)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * runner.SMALL_BYTES)
    batches = runner.plan_batches([*small[:5], big, *small[5:]], workers=2)
    assert batches[0] == [big]
    assert batches[1:] == [small[:5], small[5:]]  # small ones in order, one batch a worker
    assert runner.plan_batches(small[:1], workers=2) == [small[:1]]


def test_small_batches_come_in_a_multiple_of_the_workers(tmp_path):
    """Small traces of 2.1 × BATCH_BYTES (128 MiB) need 3 batches; on 2 workers they are
    cut into 4 (equal batches end together, no core idles for a last one), on 3 or 1
    worker into 3. (Sparse files: only their size is read.)"""
    from tracekit.ingest import runner

    n = round(2.1 * runner.BATCH_BYTES / (15 * 2**20))
    files = [tmp_path / f"s{i}.json" for i in range(n)]
    for f in files:
        with open(f, "wb") as fh:
            fh.truncate(15 * 2**20)
    for workers, count in ((2, 4), (3, 3), (1, 3), (4, 4)):
        batches = runner.plan_batches(files, workers)
        assert len(batches) == count, workers
        assert [f for b in batches for f in b] == files  # in order, each once
        assert max(len(b) for b in batches) * 15 * 2**20 <= runner.BATCH_BYTES


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
    with pytest.raises(tracekit.errors.TracekitError, match=r"--strict: .*not valid JSON"):
        tracekit.open(run, strict=True)
    cdir = run / ".tracekit" / f"v{cache.SCHEMA_VERSION}"
    assert not list(cdir.glob("*.tmp"))
    # the damaged file's entry is its error; no batch holds a rank of it
    (entry,) = [e for e in cache.load_index(cdir).values() if e["source"] == "rank-2.json"]
    assert "parts" not in entry and "not valid JSON" in entry["error"]


def test_duplicate_ranks_are_refused(tmp_path):
    ddp_like_rank(0).write(tmp_path / "a.json")
    ddp_like_rank(0).write(tmp_path / "b.json")
    with pytest.raises(tracekit.errors.TracekitError, match="rank 0 appears twice"):
        tracekit.open(tmp_path)


def test_read_only_folder_is_not_ours_even_for_root(tmp_path, _user_cache):
    """A run folder without write bits (like ../shared/traces) gets its cache in the user
    cache dir, whoever we are: root could write there, but it is not ours to write."""
    run = _run(tmp_path / "ro")
    run.chmod(0o555)
    try:
        with tracekit.open(run) as r:
            assert str(r.cache_dir).startswith(str(_user_cache))
            assert r.sql("SELECT count(*) FROM steps").fetchall() == [(4,)]
        assert not (run / ".tracekit").exists()
    finally:
        run.chmod(0o755)


def test_leftovers_of_a_killed_writer_are_removed(tmp_path):
    run = _run(tmp_path)
    with tracekit.open(run) as r:
        cdir = r.cache_dir
    (cdir / ".rank-0-abc.events.xyz.tmp").write_bytes(b"half a trace")
    (cdir / ".index.json.1.tmp").write_text("{")
    with tracekit.open(run) as r:
        assert r.sql("SELECT count(*) FROM steps").fetchall() == [(4,)]
    assert not list(cdir.glob(".*.tmp"))


def _analyze_json(run, *extra):
    return subprocess.Popen(
        [sys.executable, "-m", "tracekit", "analyze", str(run), "--format", "json", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TRACEKIT_NO_PROGRESS": "1"},
    )


def _answer(stdout: str) -> dict:
    rep = json.loads(stdout)
    rep["run"].pop("path")
    return rep


def _big_run(folder, ranks=6):
    for r in range(ranks):
        ddp_like_rank(r, world=ranks, steps=40).write(folder / f"rank-{r}.json.gz")
    return folder


def test_ingest_killed_midway_is_repaired_by_the_next_run(tmp_path):
    ref_run = _big_run(tmp_path / "ref")
    ref = _analyze_json(ref_run, "--breakdown-only").communicate()[0]
    run = _big_run(tmp_path / "run")
    cdir = run / ".tracekit" / f"v{cache.SCHEMA_VERSION}"
    proc = _analyze_json(run, "--breakdown-only", "--workers", "1")
    # kill it once the first table is on disk: some ranks ingested, the index not yet
    while proc.poll() is None and not list(cdir.glob("*.parquet")):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the ingest finished before it was killed"
    assert 0 < len(list(cdir.glob("*.parquet"))) < 6 * len(cache.TABLES)
    again = _analyze_json(run, "--breakdown-only")
    out, err = again.communicate()
    assert again.returncode == 0, err
    assert _answer(out) == _answer(ref)
    assert not list(cdir.glob(".*.tmp"))


def test_two_analyzes_at_once_give_the_same_answer(tmp_path):
    # --breakdown-only: collective_instances.last_rank breaks ties between ranks that
    # arrive together arbitrarily, which the full report shows (not a cache matter)
    ref = _analyze_json(_big_run(tmp_path / "ref", 4), "--breakdown-only").communicate()[0]
    run = _big_run(tmp_path / "run", 4)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in run.glob("rank-*")}
    procs = [_analyze_json(run, "--breakdown-only"), _analyze_json(run, "--breakdown-only")]
    outs = [p.communicate() for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    assert _answer(outs[0][0]) == _answer(outs[1][0]) == _answer(ref)
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in run.glob("rank-*")}
    assert after == before  # inputs are never modified


def test_a_read_only_run_folder_is_never_written(_user_cache, tmp_path):
    """A run folder that is not ours to write (its mode has no write bit, as a shared data
    folder's): opening it, even as root, writes the cache under the user cache dir and
    leaves the folder as it was. The test makes its own read-only copy of a shared trace
    (../shared itself may be writable; no test writes there)."""
    import shutil
    import stat

    from tests.conftest import SHARED_TRACES

    src = SHARED_TRACES / "cpu_gloo_rank34"
    if not src.is_dir():
        pytest.skip(f"{src} not present")
    folder = shutil.copytree(src, tmp_path / "ro", ignore=shutil.ignore_patterns(".tracekit"))
    paths = [folder, *folder.rglob("*")]
    for p in paths:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        before = sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*"))
        with tracekit.open(folder) as r:
            assert str(r.cache_dir).startswith(str(_user_cache))
        assert sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*")) == before
    finally:
        for p in paths:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
