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
