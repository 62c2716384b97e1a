"""Golden tests: a small hand-built trace, a query, the expected rows."""

from __future__ import annotations

import pytest

import tracekit
from tests.tracegen import BASE_NS, TraceBuilder, ddp_like_rank, nccl_meta


@pytest.fixture
def ddp_run(tmp_path):
    for r in range(2):
        ddp_like_rank(r).write(tmp_path / f"rank-{r}.json.gz")
    with tracekit.open(tmp_path) as run:
        yield run


def test_events_time_is_integer_ns_from_base(tmp_path):
    b = TraceBuilder(rank=0)
    b.step(1, 1.5, 10.25)
    b.kernel("k", 2.001, 0.999, launch_ts=1.6)
    b.write(tmp_path / "rank-0.json")
    with tracekit.open(tmp_path) as run:
        rows = run.sql(
            "SELECT kind, name, ts_ns, dur_ns FROM events ORDER BY ts_ns, kind"
        ).fetchall()
    assert rows == [
        ("user_annotation", "ProfilerStep#1", BASE_NS + 1500, 10250),
        ("runtime", "cudaLaunchKernel", BASE_NS + 1600, 2000),
        ("kernel", "k", BASE_NS + 2001, 999),
    ]


def test_absolute_microsecond_timestamps_without_base(tmp_path):
    b = TraceBuilder(rank=0, base_ns=None)
    b.step(1, 1623142623460172, 176078)
    b.write(tmp_path / "rank-0.json")
    with tracekit.open(tmp_path) as run:
        assert run.sql("SELECT ts_ns, dur_ns FROM steps").fetchall() == [
            (1623142623460172000, 176078000)
        ]


def test_old_capitalised_categories_and_string_ids(tmp_path):
    b = TraceBuilder(rank=None, base_ns=None)
    b.x("ProfilerStep#5", "Operator", 100, 50, tid="25738")
    b.x("aten::mm", "Operator", 110, 5, tid="25738", **{"Input Dims": [[2, 3], [3, 4]]})
    b.x("cudaLaunchKernel", "Runtime", 112, 2, tid="25738", correlation=9, **{"external id": 3})
    b.x(
        "volta_sgemm",
        "Kernel",
        115,
        10,
        pid=0,
        tid="stream 7",
        stream=7,
        correlation=9,
        **{"external id": 3},
    )
    b.x(
        "Memcpy HtoD",
        "Memcpy",
        130,
        4,
        pid=0,
        tid="stream 7",
        stream=7,
        **{"memory bandwidth (GB/s)": 0.25, "bytes": 1000},
    )
    b.x("PyTorch Profiler (0)", "Trace", 100, 100, pid="Spans", tid="PyTorch Profiler")
    b.write(tmp_path / "resnet_worker0.json")
    with tracekit.open(tmp_path) as run:
        rows = run.sql(
            "SELECT kind, tid, external_id, bytes, input_dims FROM events ORDER BY ts_ns, kind"
        ).fetchall()
        assert run.ranks == [0]
    assert rows == [
        ("cpu_op", 25738, None, None, None),
        ("trace", None, None, None, None),
        ("cpu_op", 25738, None, None, "[[2,3],[3,4]]"),
        ("runtime", 25738, 3, None, None),
        ("kernel", 7, 3, None, None),
        ("memcpy", 7, None, 1000, None),
    ]


def test_odd_arg_types_become_null_not_errors(tmp_path):
    b = TraceBuilder(rank=0)
    b.step(1, 0, 100)
    b.x("k", "kernel", 1.0, 2.0, pid=0, tid=7, stream="7x", correlation=12)
    b.x("c", "cpu_op", 1.0, 2.0, **{"Group size": [2], "Input Dims": "n/a"})
    b.write(tmp_path / "rank-0.json")
    with tracekit.open(tmp_path) as run:
        rows = run.sql(
            "SELECT name, stream, correlation, group_size, input_dims FROM events "
            "WHERE name IN ('k', 'c') ORDER BY name"
        ).fetchall()
    assert rows == [("c", None, None, None, '"n/a"'), ("k", None, 12, None, None)]


def test_steps_flows_memory_threads(tmp_path):
    b = TraceBuilder(rank=3, world_size=4)
    b.step(7, 0, 100)
    b.step(8, 100, 120)
    b.kernel("k", 10, 5, launch_ts=5)
    b.memory(20, 4096, 8192, 1 << 20)
    b.thread_name(1000, "thread 1000 (pt_main_thread)")
    b.write(tmp_path / "x.json")
    with tracekit.open(tmp_path) as run:
        assert run.sql("SELECT rank, step, dur_ns FROM steps ORDER BY step").fetchall() == [
            (3, 7, 100_000),
            (3, 8, 120_000),
        ]
        assert run.sql("SELECT phase, count(*) FROM flows GROUP BY 1 ORDER BY 1").fetchall() == [
            ("f", 1),
            ("s", 1),
        ]
        assert run.sql(
            "SELECT device_type, bytes, total_allocated, total_reserved FROM memory"
        ).fetchall() == [(1, 4096, 8192, 1 << 20)]
        assert run.sql("SELECT tid, what, name FROM threads").fetchall() == [
            (1000, "thread", "thread 1000 (pt_main_thread)")
        ]
        info = run.sql(
            "SELECT rank, world_size, backend, device_name, device_memory_bytes, device_sms, "
            "device_compute_capability, has_device_events FROM rank_info"
        ).fetchall()
        assert info == [(3, 4, "nccl", "NVIDIA H100 80GB HBM3", 85_000_000_000, 132, "9.0", True)]
        pgs = run.sql("SELECT pg_name, pg_desc, pg_size, ranks FROM process_groups").fetchall()
        assert pgs == [("0", "default_pg", 4, [0, 1, 2, 3])]


def test_device_activity_classification(tmp_path):
    b = TraceBuilder(rank=0)
    b.step(1, 0, 100)
    b.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 1, 1)
    b.kernel("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", 2, 1)
    b.kernel("ampere_sgemm_128x64_nn", 3, 1)
    b.memcpy(4, 1)
    b.x("Memset (Device)", "gpu_memset", 5, 1, pid=0, tid=7, stream=7)
    b.x("## forward ##", "gpu_user_annotation", 0, 10, pid=0, tid=7)
    b.write(tmp_path / "rank-0.json")
    with tracekit.open(tmp_path) as run:
        rows = run.sql("SELECT category, count(*) FROM device_activity GROUP BY 1 ORDER BY 1")
        assert rows.fetchall() == [
            ("communication", 2),
            ("compute", 1),
            ("memcpy", 1),
            ("memset", 1),
        ]


def test_cpu_run_uses_host_ops_and_gloo_spans(tmp_path):
    b = TraceBuilder(rank=0, backend="gloo", device_name=None)
    b.step(1, 0, 1000)
    b.cpu_op("aten::mm", 10, 300)
    b.cpu_op("aten::add", 20, 50)  # nested inside mm: unions count it once
    # a functional collective's wait inside an enclosing op is not compute
    b.cpu_op("_c10d_functional::wait_tensor", 200, 60)
    b.cpu_op("c10d::allreduce_", 400, 10, **{"Input Dims": [[[1000]]]})
    b.x(
        "gloo:all_reduce",
        "user_annotation",
        420,
        200,
        tid=2001,
        **{"Input Dims": [[1000]], "Input type": ["float"]},
    )
    b.x("gloo:send", "user_annotation", 700, 100, **{"Input Dims": [[1000]]})
    b.write(tmp_path / "rank-0.json")
    from tracekit.metrics.breakdown import per_rank

    with tracekit.open(tmp_path) as run:
        cats = run.sql(
            "SELECT category, kind, name FROM device_activity ORDER BY ts_ns, category"
        ).fetchall()
        assert cats == [
            ("compute", "cpu_op", "aten::mm"),
            ("compute", "cpu_op", "aten::add"),
            ("host_wait", "cpu_op", "_c10d_functional::wait_tensor"),
            ("host_wait", "cpu_op", "c10d::allreduce_"),
            ("communication", "comm_thread", "gloo:all_reduce"),
            ("communication", "comm_thread", "gloo:send"),  # an in-flight isend
        ]
        (r,) = per_rank(run)
    assert r.compute_fraction == pytest.approx(0.24)  # 300 µs of mm less the 60 µs wait
    # communication: all_reduce 200 + send 100, and the host's waits for it (wait_tensor
    # 60, the allreduce_ issue 10): a thread blocked on a collective spends that time on
    # communication
    assert r.comm_fraction == pytest.approx(0.37)
    assert r.idle_fraction == pytest.approx(1 - 0.24 - 0.37)
    assert r.comm_overlap_fraction == pytest.approx(0)
    assert r.exposed_comm_fraction == pytest.approx(0.37)
    # no peer in the run: nothing is known to be waiting, all of it counts as transfer
    assert r.comm_wait_fraction == 0
    assert r.exposed_transfer_fraction == pytest.approx(0.37)


def test_nccl_collectives_take_metadata_from_record_param_comms(ddp_run):
    rows = ddp_run.sql(
        "SELECT rank, name, issue_name, bytes, group_size, dtype, pg_name, occurrence, "
        "instance_key, ranks_matched FROM collectives ORDER BY rank, ts_ns"
    ).fetchall()
    key = "0/all_reduce/4194304/"
    assert rows == [
        (0, "all_reduce", "allreduce", 4194304, 2, "Float", "0", 1, key + "1", 2),
        (0, "all_reduce", "allreduce", 4194304, 2, "Float", "0", 2, key + "2", 2),
        (1, "all_reduce", "allreduce", 4194304, 2, "Float", "0", 1, key + "1", 2),
        (1, "all_reduce", "allreduce", 4194304, 2, "Float", "0", 2, key + "2", 2),
    ]


def test_collective_instances_skew_and_last_rank(tmp_path):
    ddp_like_rank(0).write(tmp_path / "rank-0.json")
    ddp_like_rank(1, comm_shift=40.0).write(tmp_path / "rank-1.json")  # rank 1 arrives 40 µs late
    with tracekit.open(tmp_path) as run:
        inst = run.sql(
            "SELECT ranks_matched, skew_ns, last_rank, transfer_ns FROM collective_instances"
        ).fetchall()
        waits = run.sql("SELECT rank, max(wait_ns) FROM collectives GROUP BY 1 ORDER BY 1")
        assert waits.fetchall() == [(0, 40_000), (1, 0)]
    assert inst == [(2, 40_000, 1, 260_000)] * 2


def test_nccl_metadata_on_kernel_is_used_directly(tmp_path):
    b = TraceBuilder(rank=0, world_size=4)
    b.step(1, 0, 100)
    b.kernel(
        "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        10,
        5,
        **nccl_meta("_allgather_base", 256, dtype="BFloat16", group=4, out_nelems=1024),
    )
    b.write(tmp_path / "rank-0.json")
    with tracekit.open(tmp_path) as run:
        assert run.sql(
            "SELECT name, in_nelems, out_nelems, elem_bytes, bytes, group_size FROM collectives"
        ).fetchall() == [("all_gather", 256, 1024, 2, 2048, 4)]


def test_nccl_kernel_without_metadata(tmp_path):
    b = TraceBuilder(rank=0, world_size=2, pg_config=[])
    b.step(1, 0, 100)
    b.kernel("ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)", 10, 5)
    b.write(tmp_path / "rank-0.json")
    with tracekit.open(tmp_path) as run:
        assert run.sql(
            "SELECT name, dtype, elem_bytes, bytes, group_size FROM collectives"
        ).fetchall() == [("all_reduce", "half", 2, None, 2)]


BESIDE_SEES = """
import sys, tracekit
run = tracekit.open(sys.argv[1])
before = "numpy.ma" in sys.modules
seen = run.beside(lambda: "numpy.ma" in sys.modules).result()
run.close()
print(before, seen)
"""


def test_numpy_ma_is_loaded_before_a_thread_beside_queries(tmp_path):
    """`Run.beside` imports numpy.ma on the caller's thread before its thread starts: two
    threads loading numpy's lazy `ma` at once can recurse until RecursionError (CPython
    issue 149728; a compute level once failed so under load). In a fresh process, where
    opening a cached run has not loaded numpy."""
    import subprocess
    import sys

    for r in range(2):
        ddp_like_rank(r).write(tmp_path / f"rank-{r}.json.gz")
    tracekit.open(tmp_path).close()  # the ingest, in this process
    out = subprocess.run(
        [sys.executable, "-c", BESIDE_SEES, str(tmp_path)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True"]
