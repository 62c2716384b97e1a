"""Work a cold open does in its own process while the ingest's workers read
(`ingest_run(while_ingesting=…)`): on a thread, done before the open returns, never
in the way of the ingest (what it raises is dropped), and not called when no worker
process reads."""

from __future__ import annotations

import threading

from tests.tracegen import ddp_like_rank
from tracekit.ingest import runner
from tracekit.ingest.discover import find_trace_files


def _run(tmp_path, n=2):
    for r in range(n):
        ddp_like_rank(r).write(tmp_path / f"rank-{r}.json.gz")
    return find_trace_files([tmp_path])


def test_called_on_a_thread_and_done_before_the_ingest_returns(tmp_path):
    root, files = _run(tmp_path)
    calls: list[str] = []
    done = threading.Event()

    def work() -> None:
        calls.append(threading.current_thread().name)
        done.set()

    _, sources = runner.ingest_run(root, files, workers=2, while_ingesting=work)
    assert done.is_set()
    assert calls == ["tracekit-while-ingesting"]
    assert [s.rank for s in sources] == [0, 1]


def test_what_it_raises_is_dropped(tmp_path):
    root, files = _run(tmp_path)

    def broken() -> None:
        raise ImportError("no such module")

    _, sources = runner.ingest_run(root, files, workers=2, while_ingesting=broken)
    assert [s.rank for s in sources] == [0, 1]


def test_not_called_without_worker_processes_or_work(tmp_path):
    root, files = _run(tmp_path)
    calls: list[int] = []
    runner.ingest_run(root, files, workers=1, while_ingesting=lambda: calls.append(1))
    assert calls == []  # read in this process: nothing to overlap
    runner.ingest_run(root, files, workers=2, while_ingesting=lambda: calls.append(1))
    assert calls == []  # cached: nothing read


def test_the_analysis_loads_ahead():
    """`tracekit analyze`'s work while the workers read imports modules that exist
    (the thread would drop an ImportError, and the analysis would pay for it later)."""
    from tracekit import commands

    commands.load_analysis()


def test_a_run_opens_on_the_connection_made_ahead(tmp_path):
    """`connect_ahead`'s connection is the next `Run`'s, configured as `Run` makes its
    own, and taken once."""
    import tracekit
    from tracekit.store import run as store

    root, _ = _run(tmp_path)
    store.connect_ahead()
    made = store._AHEAD[-1]
    with tracekit.open(root) as r:
        assert r._con is made
        assert r.sql("SELECT current_setting('asof_loop_join_threshold')").fetchone() == (0,)
    assert made not in store._AHEAD


def test_a_sampled_open_runs_it_once_in_its_last_ingest(tmp_path, monkeypatch):
    """`--sample-ranks` over files whose rank neither name nor header start tells
    ingests twice (those files and the lowest known rank first, then the sampled ranks
    left): the work beside runs in the second only, so no pool forks after its thread
    (and the DuckDB database it makes) started."""
    import gzip
    import json

    from tracekit.store import open as store_open

    for r in range(2, 5):
        ddp_like_rank(r, world=5).write(tmp_path / f"rank-{r}.json.gz")
    for r in range(2):  # no rank in the name, and the header after the events: unknown
        doc = ddp_like_rank(r, world=5).doc()
        doc = {"traceEvents": doc.pop("traceEvents"), **doc}
        with gzip.open(tmp_path / f"worker{'ab'[r]}.json.gz", "wt") as fh:
            json.dump(doc, fh)
    seen: list[tuple[int, bool]] = []
    real = runner.ingest_run

    def spy(root, batch, **kw):
        seen.append((len(batch), kw.get("while_ingesting") is not None))
        return real(root, batch, **kw)

    monkeypatch.setattr(store_open.loader, "ingest_run", spy)
    calls: list[int] = []
    with store_open.open_run(
        tmp_path, sample_ranks=5, workers=2, while_ingesting=lambda: calls.append(1)
    ) as run:
        assert sorted(s.rank for s in run.sources) == [0, 1, 2, 3, 4]
    assert [beside for _, beside in seen] == [False, True]
    assert calls == [1]


def test_connect_ahead_keeps_one_connection(tmp_path):
    from tracekit.store import run as store

    store.connect_ahead()
    store.connect_ahead()
    assert len(store._AHEAD) == 1
    store._AHEAD.pop().close()
