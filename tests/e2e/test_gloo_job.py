"""A real 2-rank gloo job (torch, CPU) → collectives with sizes and matched ranks."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tracekit
from tracekit.metrics.breakdown import per_rank

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory):
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("gloo")
    subprocess.run(
        [sys.executable, "-m", "tests.jobs.gloo_collectives", str(out)],
        check=True,
        timeout=240,
        capture_output=True,
    )
    return out


def test_gloo_collectives_have_sizes_and_matched_ranks(gloo_run):
    with tracekit.open(gloo_run) as run:
        rows = run.sql(
            "SELECT name, issue_name, in_nelems, out_nelems, bytes, group_size, "
            "min(ranks_matched), count(*) FROM collectives WHERE rank = 0 GROUP BY ALL ORDER BY 1"
        ).fetchall()
        got = {r[0]: r[1:] for r in rows}
        # two profiled steps: each collective twice
        assert got["all_reduce"] == ("c10d::allreduce_", 1000, 1000, 4000, 2, 2, 2)
        assert got["all_gather"] == ("c10d::_allgather_base_", 1000, 2000, 8000, 2, 2, 2)
        assert got["reduce_scatter"] == ("c10d::_reduce_scatter_base_", 1000, 500, 4000, 2, 2, 2)
        assert got["all_to_all"] == ("c10d::alltoall_base_", 1000, 1000, 4000, 2, 2, 2)
        assert got["broadcast"] == ("c10d::broadcast_", 1000, 1000, 4000, 2, 2, 2)
        assert got["send"][:4] == ("c10d::send", 1000, 1000, 4000)
        assert "barrier" in got
        recv = run.sql("SELECT count(*) FROM collectives WHERE rank = 1 AND name = 'recv'")
        assert recv.fetchall() == [(2,)]
        # the peer from the c10d op's Concrete Inputs: the job sends 0 → 1
        peers = run.sql(
            "SELECT rank, name, list(DISTINCT peer) FROM collectives "
            "WHERE name IN ('send', 'recv') GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        assert peers == [(0, "send", [1]), (1, "recv", [0])]
        # every matched instance spans both ranks; waits are non-negative
        inst = run.sql(
            "SELECT min(ranks_matched), max(ranks_matched), min(wait_ns) "
            "FROM collectives WHERE instance_key IS NOT NULL"
        ).fetchall()
        assert inst == [(2, 2, 0)]
        # issue precedes execution
        assert run.sql("SELECT count(*) FROM collectives WHERE issue_ts_ns > ts_ns").fetchall() == [
            (0,)
        ]
        rows = per_rank(run)
    assert [r.rank for r in rows] == [0, 1]
    for r in rows:
        assert r.steps == 2 and r.comm_fraction > 0 and r.compute_fraction > 0
