"""Build small Kineto traces with known contents for golden tests.

Times given to the builder are microseconds relative to the trace start (floats
allowed, 3 decimals = ns). The written file follows torch 2.x's layout: header
keys, `baseTimeNanoseconds`, `traceEvents` with X/s/f/i/M phases.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_NS = 1_700_000_000_000_000_000
CPU_PID = 1000
MAIN_TID = 1000


@dataclass
class TraceBuilder:
    rank: int | None = 0
    world_size: int = 1
    backend: str = "nccl"
    device_name: str | None = "NVIDIA H100 80GB HBM3"
    device_props: dict | None = None  # deviceProperties fields over the H100's below
    pg_config: list[dict] | None = None
    base_ns: int | None = BASE_NS
    events: list[dict] = field(default_factory=list)
    _corr: int = 1
    _ext: int = 1

    def _id(self) -> int:
        self._corr += 1
        return self._corr

    def x(
        self,
        name: str,
        cat: str,
        ts: float,
        dur: float,
        pid: Any = CPU_PID,
        tid: Any = MAIN_TID,
        **args: Any,
    ) -> dict:
        ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        if args:
            ev["args"] = args
        self.events.append(ev)
        return ev

    def step(self, n: int, ts: float, dur: float) -> None:
        self.x(f"ProfilerStep#{n}", "user_annotation", ts, dur, **{"External id": n})

    def cpu_op(self, name: str, ts: float, dur: float, tid: int = MAIN_TID, **args: Any) -> dict:
        return self.x(name, "cpu_op", ts, dur, tid=tid, **args)

    def kernel(
        self,
        name: str,
        ts: float,
        dur: float,
        stream: int = 7,
        launch_ts: float | None = None,
        launch_tid: int = MAIN_TID,
        device: int = 0,
        **args: Any,
    ) -> dict:
        """A kernel and, when launch_ts is given, its cudaLaunchKernel + ac2g flow."""
        corr = self._id()
        if launch_ts is not None:
            self.x(
                "cudaLaunchKernel",
                "cuda_runtime",
                launch_ts,
                2.0,
                tid=launch_tid,
                correlation=corr,
                **{"External id": corr},
            )
            self.events.append(
                {
                    "ph": "s",
                    "id": corr,
                    "pid": CPU_PID,
                    "tid": launch_tid,
                    "ts": launch_ts,
                    "cat": "ac2g",
                    "name": "ac2g",
                }
            )
            self.events.append(
                {
                    "ph": "f",
                    "id": corr,
                    "pid": device,
                    "tid": stream,
                    "ts": ts,
                    "cat": "ac2g",
                    "name": "ac2g",
                    "bp": "e",
                }
            )
        return self.x(
            name,
            "kernel",
            ts,
            dur,
            pid=device,
            tid=stream,
            device=device,
            stream=stream,
            correlation=corr,
            **{"External id": corr},
            **args,
        )

    def memcpy(self, ts: float, dur: float, nbytes: int = 1 << 20, stream: int = 7) -> dict:
        return self.x(
            "Memcpy HtoD (Pageable -> Device)",
            "gpu_memcpy",
            ts,
            dur,
            pid=0,
            tid=stream,
            device=0,
            stream=stream,
            bytes=nbytes,
            correlation=self._id(),
        )

    def memory(self, ts: float, nbytes: int, total_alloc: int, total_res: int) -> None:
        self.events.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": "[memory]",
                "pid": CPU_PID,
                "tid": MAIN_TID,
                "ts": ts,
                "args": {
                    "Device Type": 1,
                    "Device Id": 0,
                    "Addr": 12345,
                    "Bytes": nbytes,
                    "Total Allocated": total_alloc,
                    "Total Reserved": total_res,
                },
            }
        )

    def thread_name(self, tid: int, name: str) -> None:
        self.events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": CPU_PID,
                "tid": tid,
                "ts": 0,
                "args": {"name": name},
            }
        )

    def doc(self) -> dict:
        d: dict[str, Any] = {"schemaVersion": 1}
        d["deviceProperties"] = (
            [
                {
                    "id": 0,
                    "name": self.device_name,
                    "totalGlobalMem": 85_000_000_000,
                    "computeMajor": 9,
                    "computeMinor": 0,
                    "numSms": 132,
                }
                | (self.device_props or {})
            ]
            if self.device_name is not None or self.device_props
            else []
        )
        if self.rank is not None:
            d["distributedInfo"] = {
                "backend": self.backend,
                "rank": self.rank,
                "world_size": self.world_size,
                "pg_count": len(self.pg_config or []),
                "pg_config": self.pg_config
                or [
                    {
                        "pg_name": "0",
                        "pg_desc": "default_pg",
                        "pg_size": self.world_size,
                        "ranks": list(range(self.world_size)),
                    }
                ],
            }
        d["record_shapes"] = 1
        if self.base_ns is not None:
            d["baseTimeNanoseconds"] = self.base_ns
        d["traceEvents"] = self.events
        return d

    def write(self, path: Path, compact: bool = False) -> Path:
        text = json.dumps(self.doc(), separators=(",", ":") if compact else None)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.name.endswith(".gz"):
            with gzip.open(path, "wt") as fh:
                fh.write(text)
        else:
            path.write_text(text)
        return path


def nccl_meta(
    coll: str,
    nelems: int,
    dtype: str = "Float",
    group: int = 2,
    pg: str = "0",
    out_nelems: int | None = None,
) -> dict:
    return {
        "Collective name": coll,
        "In msg nelems": nelems,
        "Out msg nelems": nelems if out_nelems is None else out_nelems,
        "Group size": group,
        "dtype": dtype,
        "Process Group Name": pg,
        "Process Group Description": "default_pg",
        "Process Group Ranks": str(list(range(group))),
    }


def ddp_like_rank(
    rank: int, world: int = 2, steps: int = 2, comm_shift: float = 0.0
) -> TraceBuilder:
    """Each step (1000 µs): compute 0–600 µs, an all-reduce 500–800 µs (+shift), idle after.

    Per step: busy 800, compute 600, comm 300, overlap 100 (500–600), exposed 200.
    """
    b = TraceBuilder(rank=rank, world_size=world)
    for i in range(steps):
        t0 = 100.0 + i * 1000.0
        b.step(i + 1, t0, 1000.0)
        b.cpu_op("aten::mm", t0 + 1, 10)
        b.kernel("sm90_xmma_gemm_bf16", t0, 600.0, launch_ts=t0 + 2)
        rpc = b.cpu_op(
            "record_param_comms", t0 + 20, 30, **nccl_meta("allreduce", 1 << 20, group=world)
        )
        b.kernel(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            t0 + 500 + comm_shift,
            300.0 - comm_shift,
            stream=20,
            launch_ts=rpc["ts"] + 5,
        )
    return b


# ---- host waits and a saturated device: twins for the critical path (issue 29), each with
# its truth from its own schedule (µs). One rank, `steps` steps of the same shape.

BLOCKING_COPIES = (
    "cudaMemcpy",
    "cudaMemcpyAsync",  # to pageable memory: returns only when the copy is done
    "cudaMemcpyWithStream",
    "hipMemcpy",
    "hipMemcpyWithStream",
    "hipMemcpyDtoH",
)
SYNC_CALLS = (
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaDeviceSynchronize",
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
)


def saturated_rank(
    steps: int = 2,
    kernels: int = 20,
    kernel_us: float = 400.0,
    sync: str | None = "cudaStreamSynchronize",
    sync_event: bool = False,
) -> tuple[TraceBuilder, dict]:
    """The host launches `kernels` GEMMs 20 µs apart, far ahead of the device, which runs
    them back to back; then waits in `sync` until 10 µs after the last one ends, and one
    more op ends the step 30 µs after the device. Truth: device busy kernels·kernel_us of
    each step; compute 2× faster saves half of it (the launches stay far ahead). With
    `sync_event` the trace has Kineto's `Stream Sync` event (cat cuda_sync) naming the call
    by its correlation (`enable_cuda_sync_events=True`). With `sync` None the host does not
    wait: its last op ends 20 µs after its last launch, and the step (its window) runs to
    10 µs after the device's last work — the step as the device runs it, the CPU ahead; the
    next step's host starts 1 µs later (it waited for the device: a wait within 20 µs)."""
    b = TraceBuilder(world_size=1)
    step_us = 8.0 + kernels * kernel_us + (30.0 if sync else 10.0)
    for s in range(steps):
        t0 = 100.0 + s * step_us
        b.step(s + 1, t0, step_us)
        for j in range(kernels):
            b.cpu_op("aten::mm", t0 + 1 + j * 20, 15.0)
            b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", t0 + 8 + j * kernel_us, kernel_us,
                     launch_ts=t0 + 3 + j * 20)  # fmt: skip
        last_end = t0 + 8 + kernels * kernel_us
        call = t0 + 2 + kernels * 20
        if sync is None:
            b.cpu_op("aten::add", call + 20, 10.0)
            continue
        corr = b._id()
        b.x(sync, "cuda_runtime", call, last_end + 10 - call, correlation=corr)
        if sync_event:
            b.x("Stream Sync", "cuda_sync", call + 1, last_end - call, pid=0, tid=7, device=0,
                stream=7, correlation=corr)  # fmt: skip
        b.cpu_op("aten::add", last_end + 15, 10.0)
    return b, {"step_us": step_us, "device_us": kernels * kernel_us}


def blocking_copy_rank(
    api: str, steps: int = 2, wait_us: float = 3000.0, copy_us: float = 100.0
) -> tuple[TraceBuilder, dict]:
    """A 200 µs kernel, then `api` called inside `aten::_local_scalar_dense`: a blocking
    device-to-host copy on another stream that starts `wait_us` after the kernel ends (the
    trace shows nothing it waited for: the host is blocked in the call), lasts `copy_us`,
    and the call returns 10 µs later. Truth: the host waits in `api` wait_us + copy_us + 10
    µs of each step, its whole call (`call_us`) on the path: the kernel runs beside it."""
    b = TraceBuilder(world_size=1)
    step_us = 8.0 + 200.0 + wait_us + copy_us + 10.0 + 5.0 + 20.0
    for s in range(steps):
        t0 = 100.0 + s * step_us
        b.step(s + 1, t0, step_us)
        b.cpu_op("aten::mm", t0 + 1, 10.0)
        b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", t0 + 8, 200.0, launch_ts=t0 + 3)
        copy_ts = t0 + 208 + wait_us
        call_end = copy_ts + copy_us + 10.0
        b.cpu_op("aten::_local_scalar_dense", t0 + 20, call_end + 5.0 - (t0 + 20))
        corr = b._id()
        b.x(api, "cuda_runtime", t0 + 22, call_end - (t0 + 22), correlation=corr)
        b.x("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", copy_ts, copy_us, pid=0, tid=20,
            device=0, stream=20, bytes=4, correlation=corr)  # fmt: skip
    return b, {"step_us": step_us, "call_us": 208.0 + wait_us + copy_us + 10.0 - 22.0}


def graph_replay_rank(
    launch: str = "cudaGraphLaunch",
    sync: str = "cudaStreamSynchronize",
    steps: int = 2,
    kernels: int = 10,
    kernel_us: float = 300.0,
) -> tuple[TraceBuilder, dict]:
    """A graph replay: one `launch` call whose `kernels` kernels (its correlation) run back
    to back on stream 7 from 7 µs after it; then the host waits in `sync`: a stream sync
    that returns 10 µs after the last kernel, or (a copy name) a blocking 50 µs
    device-to-host copy queued behind the graph on its stream. Truth: the device runs the
    graph (kernels·kernel_us) and the copy; the host waits in `sync` for all of it."""
    b = TraceBuilder(world_size=1)
    copy_us = 50.0 if "Memcpy" in sync else 0.0
    step_us = 12.0 + kernels * kernel_us + copy_us + 10.0 + 20.0
    for s in range(steps):
        t0 = 100.0 + s * step_us
        b.step(s + 1, t0, step_us)
        corr = b._id()
        b.x(launch, "cuda_runtime", t0 + 5, 10.0, correlation=corr)
        for j in range(kernels):
            b.x("sm90_xmma_gemm_bf16bf16_bf16f32", "kernel", t0 + 12 + j * kernel_us, kernel_us,
                pid=0, tid=7, device=0, stream=7, correlation=corr)  # fmt: skip
        dev_end = t0 + 12 + kernels * kernel_us + copy_us
        scorr = b._id()
        b.x(sync, "cuda_runtime", t0 + 20, dev_end + 10 - (t0 + 20), correlation=scorr)
        if copy_us:
            b.x("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", dev_end - copy_us, copy_us,
                pid=0, tid=7, device=0, stream=7, bytes=4, correlation=scorr)  # fmt: skip
    return b, {"step_us": step_us, "device_us": kernels * kernel_us + copy_us}
