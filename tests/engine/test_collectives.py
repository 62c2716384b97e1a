"""Collective naming, sizes and gloo issue/execution pairing."""

from __future__ import annotations

import json

import pytest

from tracekit.ingest.collnames import canonical_name, dtype_bytes, kernel_dtype
from tracekit.ingest.gloo import match_gloo
from tracekit.ingest.issueops import issue_sizes


@pytest.mark.parametrize(
    "raw,name",
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "all_reduce"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "all_gather"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)", "reduce_scatter"),
        ("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", "send_recv"),
        ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)", "broadcast"),
        ("allreduce", "all_reduce"),
        ("_allgather_base", "all_gather"),
        ("all_gather_into_tensor_coalesced", "all_gather"),
        ("reduce_scatter_tensor_coalesced", "reduce_scatter"),
        ("all_to_all", "all_to_all"),
        ("alltoall_base", "all_to_all"),
        ("send", "send"),
        ("recv", "recv"),
        ("c10d::allreduce_", "all_reduce"),
        ("c10d::_reduce_scatter_base_", "reduce_scatter"),
        ("c10d::alltoall_base_", "all_to_all"),
        ("c10d::recv_", "recv"),
        ("c10d::barrier", "barrier"),
        ("c10d::monitored_barrier_", "barrier"),
        ("gloo:all_gather", "all_gather"),
        ("nccl:all_reduce", "all_reduce"),
        ("aten::mm", None),
        ("", None),
        (None, None),
    ],
)
def test_canonical_name(raw, name):
    assert canonical_name(raw) == name


@pytest.mark.parametrize(
    "dtype,size",
    [
        ("Float", 4),
        ("BFloat16", 2),
        ("c10::BFloat16", 2),
        ("Half", 2),
        ("double", 8),
        ("long int", 8),
        ("Float8_e4m3fn", 1),
        ("unsigned char", 1),
        ("mystery", None),
        (None, None),
    ],
)
def test_dtype_bytes(dtype, size):
    assert dtype_bytes(dtype) == size


def test_kernel_dtype():
    assert kernel_dtype("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)") == "bfloat16"
    assert kernel_dtype("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == "float"
    assert kernel_dtype("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)") == "int8"
    assert kernel_dtype("ncclDevKernel_SendRecv(ncclDevComm*)") is None


@pytest.mark.parametrize(
    "op,dims,expected",
    [
        # shapes exactly as torch 2.13's profiler records them for gloo (world size 2)
        ("c10d::allreduce_", [[[1000]], [], [], [], [], []], (1000, 1000)),
        ("c10d::_allgather_base_", [[2000], [1000], [], [], []], (1000, 2000)),
        ("c10d::_reduce_scatter_base_", [[500], [1000], [], [], [], []], (1000, 500)),
        ("c10d::alltoall_base_", [[1000], [1000], [], [], [], [], []], (1000, 1000)),
        ("c10d::allgather_", [[], [[1000]], [], [], []], (1000, None)),
        ("c10d::broadcast_", [[[4, 250]], [], [], [], [], []], (1000, 1000)),
        ("c10d::barrier", [[1], [], [], [], []], (1, 1)),
    ],
)
def test_issue_sizes(op, dims, expected):
    assert issue_sizes(op, json.dumps(dims)) == expected


def _op(name, ts, n_in, n_out=None, op=None):
    return {
        "name": name,
        "op": op or name,
        "ts_ns": ts,
        "in": n_in,
        "out": n_in if n_out is None else n_out,
        "dtype": "float",
    }


def _span(raw, ts, size):
    return {"raw_name": raw, "ts_ns": ts, "size": size}


def test_match_gloo_fifo_per_op_and_size():
    issue = [
        _op("all_reduce", 10, 1000),
        _op("reduce_scatter", 20, 1000, 500),  # executes as gloo:all_reduce of the full input
        _op("all_gather", 30, 1000, 2000),
        _op("all_reduce", 40, 64),
    ]
    spans = [
        _span("gloo:all_reduce", 100, 64),  # the 64-element one finishes waiting first
        _span("gloo:all_reduce", 200, 1000),
        _span("gloo:all_gather", 150, 1000),
        _span("gloo:all_reduce", 300, 1000),
    ]
    pairs = {(s["raw_name"], s["ts_ns"]): op and op["name"] for s, op in match_gloo(issue, spans)}
    assert pairs == {
        ("gloo:all_reduce", 100): "all_reduce",
        ("gloo:all_reduce", 200): "all_reduce",
        ("gloo:all_gather", 150): "all_gather",
        ("gloo:all_reduce", 300): "reduce_scatter",
    }


def test_match_gloo_span_issued_before_the_trace_stays_unpaired():
    pairs = match_gloo(
        [_op("all_reduce", 50, 8)],
        [_span("gloo:all_reduce", 10, 8), _span("gloo:all_reduce", 60, 8)],
    )
    assert [op and op["ts_ns"] for _, op in pairs] == [None, 50]
