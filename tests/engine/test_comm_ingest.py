"""Communication on the ingest side: the kernel table, kind and size, honest matching,
merged multi-rank files, user patterns (issue 8)."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from click.testing import CliRunner

import tracekit
from tests.conftest import SHARED_TRACES
from tests.tracegen import BASE_NS, TraceBuilder, ddp_like_rank, nccl_meta
from tracekit.cli import main
from tracekit.errors import TracekitError

ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"

# (kernel name as real traces spell it, kernel args, family, collective)
FAMILIES = [
    (
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        {},
        "nccl",
        "all_reduce",
    ),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", {}, "nccl", "send_recv"),
    # RCCL: the operation only in the metadata; without it, no kind
    (
        "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
        nccl_meta("allgather", 1024, out_nelems=2048),
        "nccl",
        "all_gather",
    ),
    ("ncclDevKernel_Generic_4(ncclDevComm*, channelMasks, ncclWork*)", {}, "nccl", None),
    ("mscclKernel_Sum_bf16_LL128(ncclDevComm*, mscclAlgo*, mscclWork*)", {}, "nccl", None),
    (
        "void deep_ep::internode::dispatch<false, 8, 4, 1024, 16, 2, 6>(int4*, float*, int*)",
        {},
        "deepep",
        "all_to_all",
    ),
    (
        "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*)",
        {},
        "deepep",
        "all_to_all",
    ),
    (
        "void deep_ep::internode::notify_dispatch<true, 8>(int const*, int*, int, int const*)",
        {},
        "deepep",
        "all_to_all",
    ),
    (
        "void deep_ep::internode_ll::dispatch<true, 3, 7168>(void*, float*, int*, long*)",
        {},
        "deepep",
        "all_to_all",
    ),
    (
        "void nvshmemi_alltoall_on_stream_kernel<float>(int, float*, float const*, unsigned long)",
        {},
        "nvshmem",
        None,
    ),
    (
        "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16, 4>(...)",
        {},
        "symm_mem",
        "all_reduce",
    ),
    (
        "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 16>(float**, float*)",
        {},
        "symm_mem",
        "all_reduce",
    ),
    (
        "void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 16, 8>(float**, unsigned)",
        {},
        "symm_mem",
        "all_reduce",
    ),
    (
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::Signal*)",
        {},
        "custom_all_reduce",
        "all_reduce",
    ),
    (
        "void sglang::cross_device_reduce_2stage<half, 4>(sglang::RankData*, sglang::Signal*)",
        {},
        "custom_all_reduce",
        "all_reduce",
    ),
    (
        "userbuffers_fp16_sum_inplace_gpu_rr_rs(int, int, int, int, int, int, void**, int)",
        {},
        "userbuffers",
        "reduce_scatter",
    ),
    (
        "userbuffers_fp16_sum_inplace_gpu_rr_ag(int, int, int, int, int, int, void**, int)",
        {},
        "userbuffers",
        "all_gather",
    ),
    (
        "kuserbuffers_pullsend(int, int, int*, int*, int, void*, void*)",
        {},
        "userbuffers",
        "send_recv",
    ),
]
COMPUTE = [
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(float)",
    "my_fused_allreduce_kernel(float*, int)",  # not in the table: a user pattern can add it
]


def _one_rank(tmp_path, names_args, world=1):
    b = TraceBuilder(rank=0, world_size=world)
    b.step(1, 0, 100.0 * (len(names_args) + 1))
    for i, (name, args) in enumerate(names_args):
        b.kernel(name, 10.0 + 100 * i, 50.0, **args)
    b.write(tmp_path / "rank-0.json")
    return tmp_path


def test_every_kernel_family_is_communication(tmp_path):
    run_dir = _one_rank(tmp_path, [(n, a) for n, a, _, _ in FAMILIES] + [(n, {}) for n in COMPUTE])
    with tracekit.open(run_dir) as run:
        cat = dict(run.sql("SELECT name, category FROM device_activity").fetchall())
        fam = dict(run.sql("SELECT name, family FROM kernel_classes").fetchall())
        kinds = dict(run.sql("SELECT raw_name, name FROM collectives").fetchall())
    for name, _, family, kind in FAMILIES:
        assert cat[name] == "communication", name
        assert fam[name] == family, name
        assert kinds[name] == kind, name
    for name in COMPUTE:
        assert cat[name] == "compute" and fam[name] is None and name not in kinds


def _copy(tmp_path, name):
    src = SHARED_TRACES / name
    if not src.is_dir():
        pytest.skip(f"{src} not present")
    dst = tmp_path / name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".tracekit"))
    return dst


def test_old_nccl_alltoall_is_named_and_sized_from_its_c10d_op(tmp_path):
    """v100_dlrm_8rank (torch ~2.0): no metadata; c10d::alltoall_base_ runs as SendRecv."""
    with tracekit.open(_copy(tmp_path, "v100_dlrm_8rank")) as run:
        rows = run.sql(
            "SELECT name, in_nelems, out_nelems, bytes, size_source FROM collectives "
            "WHERE rank = 0 ORDER BY ts_ns"
        ).fetchall()
        unmatched = run.sql("SELECT count(*) FROM collectives WHERE NOT matched").fetchall()
        per_rank = run.sql("SELECT rank, count(*) FROM collectives GROUP BY 1").fetchall()
    names = [r[0] for r in rows]
    assert names.count("all_to_all") == 5 and names.count("all_reduce") == 3
    assert "send_recv" not in names
    # rank 0's first all-to-all: c10d::alltoall_base_ Input Dims [[6144], [6144]] float
    assert rows[0] == ("all_to_all", 6144, 6144, 6144 * 4, "issue_op")
    # its fourth: output [768], input [3392] int → S = 3392 × 4
    assert rows[3][:4] == ("all_to_all", 3392, 768, 3392 * 4)
    # the first all-reduce: c10d::allreduce_ dims are a TensorList; nccl:all_reduce says 394241
    assert rows[4][:4] == ("all_reduce", 394241, 394241, 394241 * 4)
    assert len(per_rank) == 8 and unmatched == [(0,)]  # all 8 ranks of the world present


def test_partial_run_matches_nothing_and_has_no_bandwidth(tmp_path):
    """a100_allreduce_meta_rank0 is rank 0 of a group of 2: nothing may be matched."""
    path = _copy(tmp_path, "a100_allreduce_meta_rank0")
    with tracekit.open(path) as run:
        n, matched, wait = run.sql(
            "SELECT count(*), count(*) FILTER (matched), count(wait_ns) FROM collectives"
        ).fetchall()[0]
        inst = run.sql("SELECT count(*) FROM collective_instances").fetchall()[0][0]
    assert n == 21 and matched == 0 and wait == 0 and inst == 0
    res = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["collectives"] and all(c["busbw_GBps"] is None for c in rep["collectives"])
    assert all(not c["matched"] for c in rep["collectives"])
    assert "communication.slow_collective" not in {f["kind"] for f in rep["findings"]}


def _missing_one(tmp_path, with_seq: bool):
    """2 ranks, 4 all-reduces of one size; rank 1 lacks the 2nd. Rank 1 starts each
    collective 10 µs after rank 0 (so rank 0 waits 10 µs); instances are 1 ms apart."""
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2)
        b.step(1, 0, 5000)
        for i in range(4):
            if rank == 1 and i == 1:
                continue
            meta = nccl_meta("allreduce", 1 << 20, group=2)
            if with_seq:
                meta["Seq"] = i + 1
            start = 100.0 + 1000 * i + 10 * rank
            b.kernel(ALLREDUCE, start, 200.0 - 10 * rank, stream=20, **meta)
        b.write(tmp_path / f"rank-{rank}.json")
    return tmp_path


def test_missing_collective_with_seq_leaves_only_that_instance_unmatched(tmp_path):
    with tracekit.open(_missing_one(tmp_path, with_seq=True)) as run:
        rows = run.sql(
            "SELECT rank, seq, match_by, matched, wait_ns FROM collectives ORDER BY seq, rank"
        ).fetchall()
        inst = run.sql("SELECT count(*), max(skew_ns) FROM collective_instances").fetchall()[0]
    assert (0, 2, "seq", False, None) in rows
    for seq in (1, 3, 4):
        assert (0, seq, "seq", True, 10_000) in rows
        assert (1, seq, "seq", True, 0) in rows
    assert inst == (3, 10_000)


def test_missing_collective_without_seq_is_refused_not_shifted(tmp_path):
    """Without Seq the later occurrences of rank 1 shift by one; their spans lie 1 ms
    apart from rank 0's, which a synchronizing collective cannot do: they stay unmatched
    rather than pairing rank 0's n-th with rank 1's (n+1)-th and inventing a 1 ms wait."""
    with tracekit.open(_missing_one(tmp_path, with_seq=False)) as run:
        rows = run.sql(
            "SELECT rank, occurrence, match_by, matched, wait_ns FROM collectives "
            "ORDER BY rank, occurrence"
        ).fetchall()
        inst = run.sql("SELECT count(*), max(skew_ns) FROM collective_instances").fetchall()[0]
    assert rows[0] == (0, 1, "occurrence", True, 10_000)
    assert all(not r[3] and r[4] is None for r in rows if r[1] > 1)
    assert inst == (1, 10_000)


def _merged(tmp_path, n_ranks=2, steps=2):
    """A TraceFusion-style file: the ranks' events in one list, processes `RANK r - CPU/GPU`,
    pids offset by r×10⁸, args.rank on every event, no distributedInfo / base time."""
    events = []
    for r in range(n_ranks):
        b = ddp_like_rank(r, world=n_ranks, steps=steps, comm_shift=30.0 * r)
        off = r * 100_000_000
        for ev in b.events:
            ev = dict(ev)
            ev["ts"] = BASE_NS / 1000 + ev["ts"]
            ev["pid"] = ev["pid"] + off
            ev["args"] = {**ev.get("args", {}), "rank": r}
            events.append(ev)
        for pid, what in ((1000, "CPU"), (0, "GPU")):
            events.append(
                {
                    "ph": "M",
                    "name": "process_name",
                    "pid": pid + off,
                    "tid": 0,
                    "args": {"name": f"RANK {r} - {what}"},
                }
            )
    path = tmp_path / "merged_all_events.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": events}, fh)
    return tmp_path


def test_merged_file_is_split_into_ranks(tmp_path):
    with tracekit.open(_merged(tmp_path, n_ranks=3)) as run:
        info = run.sql("SELECT rank, rank_source, device_id FROM rank_info ORDER BY 1").fetchall()
        steps = run.sql("SELECT rank, count(*) FROM steps GROUP BY 1 ORDER BY 1").fetchall()
        inst = run.sql(
            "SELECT ranks_matched, last_rank, skew_ns FROM collective_instances"
        ).fetchall()
        pids = run.sql("SELECT DISTINCT pid FROM events ORDER BY 1").fetchall()
    assert [r[0] for r in info] == [0, 1, 2]
    assert all(src.startswith("merged file") and dev == 0 for _, src, dev in info)
    assert steps == [(0, 2), (1, 2), (2, 2)]
    # each rank shifts its all-reduce by 30 µs × rank: rank 2 is last, 60 µs after rank 0
    assert len(inst) == 2 and all(i == (3, 2, 60_000) for i in inst)
    assert pids == [(0,), (1000,)]  # the rank offset is taken off


def test_real_merged_file_gives_four_ranks_matched(tmp_path):
    with tracekit.open(_copy(tmp_path, "mi300_resnet_ddp4_merged")) as run:
        ranks = [r for (r,) in run.sql("SELECT rank FROM rank_info ORDER BY 1").fetchall()]
        ar = run.sql(
            "SELECT count(*), count(*) FILTER (matched), count(DISTINCT rank) "
            "FROM collectives WHERE name = 'all_reduce'"
        ).fetchall()[0]
        inst = run.sql(
            "SELECT DISTINCT ranks_matched FROM collective_instances WHERE name = 'all_reduce'"
        ).fetchall()
    assert ranks == [0, 1, 2, 3]
    assert ar[0] > 0 and ar[0] == ar[1] and ar[2] == 4 and inst == [(4,)]


def test_rccl_generic_kernels_are_named_by_their_metadata(tmp_path):
    with tracekit.open(_copy(tmp_path, "mi300x_resnet_ddp8_rank0")) as run:
        rows = run.sql(
            "SELECT name, kind_source, count(*) FROM collectives GROUP BY ALL"
        ).fetchall()
    named = {(n, s): c for n, s, c in rows}
    # 12 kernels carry metadata; 5 were launched before the trace began and say nothing
    assert named[("all_reduce", "kernel")] == 6 and named[("broadcast", "kernel")] == 6
    assert named[(None, None)] == 5


def test_user_pattern_reclassifies_a_kernel_and_refreshes_the_cache(tmp_path):
    name = "my_fused_allreduce_kernel(float*, int)"
    run_dir = _one_rank(tmp_path, [(name, {})])

    def category(**kw):
        with tracekit.open(run_dir, **kw) as run:
            return run.sql(
                "SELECT category, family FROM device_activity WHERE name = ?", params=[name]
            ).fetchall()[0], run.sql("SELECT count(*) FROM collectives").fetchall()[0][0]

    assert category() == (("compute", None), 0)
    assert category(comm_kernels=["my_fused_allreduce"]) == (("communication", "user"), 1)
    assert category() == (("compute", None), 0)  # the cache does not keep a stale answer
    res = CliRunner().invoke(
        main,
        [
            "query",
            str(run_dir),
            "--comm-kernel",
            "^my_fused",
            "--format",
            "json",
            "SELECT category FROM device_activity",
        ],
    )
    assert res.exit_code == 0 and json.loads(res.stdout) == [{"category": "communication"}]
    bad = CliRunner().invoke(main, ["ingest", str(run_dir), "--comm-kernel", "("])
    assert bad.exit_code == 2 and "not a regex" in bad.output


def test_comm_kernels_from_job_json_and_pyproject(tmp_path, monkeypatch):
    name = "my_fused_allreduce_kernel(float*, int)"
    run_dir = _one_rank(tmp_path / "run", [(name, {})])
    monkeypatch.chdir(tmp_path)

    def category():
        with tracekit.open(run_dir) as run:
            return run.sql("SELECT category FROM device_activity").fetchall()[0][0]

    (tmp_path / "pyproject.toml").write_text('[tool.tracekit]\ncomm_kernels = ["fused_all"]\n')
    assert category() == "communication"  # the cwd's pyproject.toml
    (run_dir / "pyproject.toml").write_text("[tool.tracekit]\ncomm_kernels = []\n")
    assert category() == "compute"  # the run folder's wins over the cwd's
    (run_dir / "job.json").write_text(json.dumps({"schema": 1, "comm_kernels": ["^my_"]}))
    assert category() == "communication"
    (run_dir / "job.json").write_text(json.dumps({"schema": 1, "comm_kernels": ["[oops"]}))
    with pytest.raises(TracekitError, match=r"job\.json: comm kernel pattern"):
        tracekit.open(run_dir)


def test_kind_and_size_from_the_issuing_cpu_ops(tmp_path):
    """No metadata on the kernels: RCCL's generic kernel takes record_param_comms'; an old
    NCCL SendRecv kernel under c10d::alltoall_base_ is an all_to_all of its input; an
    all-reduce whose c10d op has only a TensorList takes nccl:all_reduce's dims; a kernel
    with nothing around it keeps what its name says and no size."""
    b = TraceBuilder(rank=0, world_size=4)
    b.step(1, 0, 1000)
    rpc = b.cpu_op("record_param_comms", 10, 20, **nccl_meta("allreduce", 1000, "BFloat16", 4))
    b.kernel(
        "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", 50, 30, launch_ts=rpc["ts"] + 5
    )
    op = b.cpu_op(
        "c10d::alltoall_base_",
        100,
        40,
        **{
            "Input Dims": [[768], [3392], [], [], [], []],
            "Input type": ["int", "int", "", "", "", "Scalar"],
        },
    )
    b.kernel(
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long)",
        150,
        30,
        launch_ts=op["ts"] + 10,
    )
    b.cpu_op(
        "c10d::allreduce_",
        300,
        40,
        **{"Input Dims": [[], [], [], []], "Input type": ["TensorList", "", "", "Scalar"]},
    )
    b.x(
        "nccl:all_reduce",
        "user_annotation",
        305,
        30,
        **{"Input Dims": [[394241]], "Input type": ["float"]},
    )
    b.kernel(
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long)",
        350,
        30,
        launch_ts=310,
    )
    b.kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long)", 500, 30)
    b.write(tmp_path / "rank-0.json")
    with tracekit.open(tmp_path) as run:
        rows = run.sql(
            "SELECT name, kind_source, in_nelems, out_nelems, dtype, bytes, size_source, "
            "group_size FROM collectives ORDER BY ts_ns"
        ).fetchall()
    assert rows == [
        ("all_reduce", "record_param_comms", 1000, 1000, "BFloat16", 2000, "record_param_comms", 4),
        ("all_to_all", "issue_op", 3392, 768, "int", 3392 * 4, "issue_op", 4),
        ("all_reduce", "issue_op", 394241, 394241, "float", 394241 * 4, "issue_op", 4),
        ("all_gather", "kernel_name", None, None, "int8", None, None, 4),
    ]


def test_group_ranks_are_the_groups_once_not_a_list_per_cached_row(tmp_path):
    """Two TP groups ({0, 2} and {1, 3}, "Process Group Ranks" as traced): each row of the
    `collectives` view carries its group's ranks, read from the raw trace by hand; the
    cache keeps each rank's group once (`collective_groups`) and writes no list on the
    collective rows (nothing read them: the view joins the group back)."""
    truth = {}
    for rank in range(4):
        b = TraceBuilder(rank=rank, world_size=4)
        b.step(1, 0, 400.0)
        meta = nccl_meta("allreduce", 1024, group=2, pg="1") | {
            "Process Group Ranks": str([rank % 2, rank % 2 + 2])
        }
        b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                 10.0, 50.0, **meta)  # fmt: skip
        b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                 110.0, 50.0, **meta)  # fmt: skip
        b.write(tmp_path / f"rank-{rank}.json")
    for rank in range(4):
        events = json.loads((tmp_path / f"rank-{rank}.json").read_text())["traceEvents"]
        (ranks,) = {e["args"]["Process Group Ranks"] for e in events if e.get("cat") == "kernel"}
        truth[rank] = json.loads(ranks)
    with tracekit.open(tmp_path) as run:
        rows = run.sql("SELECT rank, group_ranks FROM collectives ORDER BY rank").fetchall()
        groups = run.sql(
            "SELECT rank, group_ranks FROM collective_groups ORDER BY rank"
        ).fetchall()
    assert rows == [(r, truth[r]) for r in range(4) for _ in range(2)]
    assert groups == [(r, truth[r]) for r in range(4)]
    cached = sorted(str(p) for p in tmp_path.glob(".tracekit/v*/*.collectives.parquet"))
    import duckdb

    n, lists = duckdb.sql(
        "SELECT count(*), count(group_ranks) FROM read_parquet($files)", params={"files": cached}
    ).fetchall()[0]
    assert n == 8 and lists == 0
