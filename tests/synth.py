"""Synthetic multi-rank GPU/NCCL training runs with one injected problem, and their truth.

A small discrete-event simulation per rank: a CPU thread that launches work (each op
costs `host_op_us`), a compute stream and an NCCL stream. A kernel starts when it has
been launched and its stream is free; a collective starts on each rank when that rank
issues it and its NCCL stream is free, and ends on every rank at the last arrival plus
the transfer time S·f/busbw + α — so early ranks' kernels include their wait, as real
NCCL kernels do. Data-parallel runs: forward and backward GEMMs (aten::mm with bf16
shapes), DDP-style gradient buckets all-reduced during backward, an optimizer, a device
sync closing the step. Pipeline runs: 1F1B over P stages and M microbatches with
`PP:{stage}{F|B}{mb}` labels and SendRecv kernels.

Every run returns its truth, computed from the intervals it wrote: per-rank fractions of
the ProfilerStep window, MFU, bus bandwidth, bubble.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from tests.tracegen import TraceBuilder, nccl_meta

PEAK_BF16 = 989.4e12  # H100 SXM dense bf16, as tracekit's spec table
DEVICE = "NVIDIA H100 80GB HBM3"
CAPACITY = 85_520_809_984
COMPUTE_STREAM, NCCL_STREAM = 7, 20


@dataclass
class Scenario:
    world: int = 4
    layers: int = 8
    hidden: int = 2048
    tokens: int = 4096  # per rank per step (micro-batch × sequence)
    steps: int = 3
    gemm_eff: float = 0.62
    elementwise_us: float = 12.0
    busbw_GBps: float = 380.0  # what the collectives achieve
    alpha_us: float = 12.0
    buckets: int = 4
    buckets_after_backward: bool = False  # injected: exposed all-reduce
    straggler: int | None = None  # injected: this rank computes slower
    straggler_slowdown: float = 1.35
    straggler_host_us: float = 0.0  # injected: the straggler's host stalls this long per step
    straggler_layer: int | None = None  # the straggler is slower in this forward layer only
    layer_annotations: bool = False  # a record_function range "layers.{i}" per forward layer
    host_op_us: float = 6.0  # CPU time per launched op (host-bound when > kernel time)
    memory_peak: float = 0.55  # of capacity
    pipeline: tuple[int, int] | None = None  # (P, M): pipeline-parallel run
    jitter: float = 0.03
    seed: int = 0
    name: str = "healthy"
    seq: bool = False  # collective metadata carries Seq (torch ≥ 2.2)
    # graph replay, shaped as real traces are (vLLM/SGLang decode, xDiT on MI300X): the
    # phase's kernels run under one cudaGraphLaunch / hipGraphLaunch per step, correlated
    # to it, with no CPU op above them: "forward", "backward" or "all"; "elementwise": only
    # each forward layer's elementwise kernel is replayed (no GEMM in the graph)
    graph_replay: str | None = None
    graph_launch: str = "cudaGraphLaunch"
    # an op tracekit has no FLOP formula for, launched once per forward layer: (op, kernel, µs)
    formula_less_op: tuple[str, str, float] | None = None
    formula_less_matmul: bool = True  # that op is GEMM/attention work (it may carry FLOPs)


@dataclass
class Truth:
    fractions: dict[int, dict[str, float]] = field(default_factory=dict)
    mfu: float | None = None
    busbw_GBps: float | None = None
    bubble: float | None = None
    # rank → wait it imposes per step, ms: at each collective, the others' wait for the
    # last arrival that no compute of theirs hides (mean over the others), charged to
    # that last rank
    imposed_wait_ms: dict[int, float] = field(default_factory=dict)
    exposed_ms: dict[int, float] = field(default_factory=dict)  # per step, per rank
    # per rank: device time of compute kernels without FLOPs (graph replays, ops without
    # a formula, elementwise) ÷ all compute kernel time, from the kernels written
    uncounted_fraction: dict[int, float] = field(default_factory=dict)
    graph_share: dict[int, float] = field(default_factory=dict)  # graph kernels' share
    # per rank: elementwise kernels' device time ÷ all compute kernel time
    elementwise_fraction: dict[int, float] = field(default_factory=dict)
    # rank → layer → device time its forward launched per step, ms (from the kernels written)
    layer_device_ms: dict[int, dict[int, float]] = field(default_factory=dict)


def merge_intervals(iv):
    """Maximal intervals of a set of them (touching ones merged), by start: [[s, e], …]."""
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _length(iv) -> float:
    return sum(e - s for s, e in merge_intervals(iv))


def _clip(iv, a, b):
    return [(max(s, a), min(e, b)) for s, e in iv if e > a and s < b]


class Rank:
    def __init__(self, rank: int, sc: Scenario):
        self.rank, self.sc = rank, sc
        self.b = TraceBuilder(rank=rank, world_size=sc.world, device_name=DEVICE)
        self.cpu = 100.0  # µs
        self.gpu = 100.0
        self.nccl = 100.0
        self.compute: list[tuple[float, float]] = []
        self.comm: list[tuple[float, float]] = []
        self.flops = 0.0
        self.rng = random.Random(sc.seed * 1000 + rank)
        self.slow = (
            sc.straggler_slowdown
            if sc.straggler == rank and sc.straggler_layer is None
            else 1.0
        )
        self.kernel_us = 0.0  # all compute kernels
        self.uncounted_us = 0.0  # compute kernels whose FLOPs a trace reader cannot count
        self.graph_us = 0.0
        self.elementwise_us = 0.0  # elementwise kernels (not GEMM/attention)
        self.graph: int | None = None  # correlation of the graph launch replaying now

    def graph_launch(self) -> None:
        """One graph launch: the kernels that follow replay under it until `graph_end`."""
        corr = self.b._id()
        self.b.x(self.sc.graph_launch, "cuda_runtime", self.cpu, 8.0, correlation=corr,
                 **{"External id": corr})  # fmt: skip
        self.gpu = max(self.gpu, self.cpu + 12.0)
        self.cpu += 10.0
        self.graph = corr

    def graph_end(self) -> None:
        self.graph = None

    def _jit(self, x: float) -> float:
        return x * (1 + self.rng.uniform(-self.sc.jitter, self.sc.jitter))

    def launch(
        self,
        name: str,
        dur_us: float,
        op: str,
        dims=None,
        flops: float = 0.0,
        tid: int = 1000,
        matmul: bool = False,
    ) -> tuple[float, float]:
        """A CPU op launching one kernel on the compute stream (inside a graph replay:
        the kernel alone, correlated to the graph launch). `matmul`: the generator's own
        word that the kernel is GEMM/attention work; only such work without counted
        FLOPs is uncounted (elementwise work has no model FLOPs to miss)."""
        self.kernel_us += dur_us
        if self.graph is not None:
            start = self.gpu
            self.b.x(name, "kernel", start, dur_us, pid=0, tid=COMPUTE_STREAM, device=0,
                     stream=COMPUTE_STREAM, correlation=self.graph,
                     **{"External id": self.graph})  # fmt: skip
            self.gpu = start + dur_us
            self.compute.append((start, self.gpu))
            if matmul:
                self.uncounted_us += dur_us
            self.graph_us += dur_us
            self.flops += flops
            return start, self.gpu
        if matmul and not (op == "aten::mm" and dims):
            self.uncounted_us += dur_us
        op_dur = self.sc.host_op_us
        args = (
            {"Input Dims": dims, "Input type": ["c10::BFloat16", "c10::BFloat16"]} if dims else {}
        )
        self.b.cpu_op(op, self.cpu, op_dur, tid=tid, **args)
        launch = self.cpu + op_dur * 0.5
        start = max(launch + 4.0, self.gpu)
        k = self.b.kernel(
            name, start, dur_us, stream=COMPUTE_STREAM, launch_ts=launch, launch_tid=tid
        )
        self.gpu = start + dur_us
        self.cpu += op_dur + 1.0
        self.compute.append((start, self.gpu))
        self.flops += flops
        return k["ts"], self.gpu

    def gemm(self, m: int, k: int, n: int, tid: int = 1000) -> None:
        flops = 2.0 * m * k * n
        dur = self._jit(flops / (PEAK_BF16 * self.sc.gemm_eff) * 1e6) * self.slow
        self.launch(
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
            dur,
            "aten::mm",
            dims=[[m, k], [k, n]],
            flops=flops,
            tid=tid,
            matmul=True,
        )

    def elementwise(self, tid: int = 1000) -> None:
        dur = self._jit(self.sc.elementwise_us) * self.slow
        self.elementwise_us += dur
        self.launch(
            "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernel>",
            dur,
            "aten::gelu",
            tid=tid,
        )


def _layer_gemms(sc: Scenario):
    h, t = sc.hidden, sc.tokens
    return [(t, h, 3 * h), (t, h, h), (t, h, 4 * h), (t, 4 * h, h)]


def _transfer_us(sc: Scenario, nbytes: float) -> float:
    factor = 2 * (sc.world - 1) / sc.world
    return sc.alpha_us + nbytes * factor / (sc.busbw_GBps * 1e9) * 1e6


def _ddp(sc: Scenario, out: Path) -> Truth:
    ranks = [Rank(r, sc) for r in range(sc.world)]
    params_per_layer = 12 * sc.hidden * sc.hidden
    bucket_bytes = params_per_layer * sc.layers // sc.buckets * 2  # bf16 gradients
    windows: dict[int, list[tuple[float, float]]] = {r: [] for r in range(sc.world)}
    transfers = []
    waits: list[tuple[int, int, float, float]] = []  # (waiting rank, last rank, from, to)
    truth_layers: dict[int, dict[int, float]] = {}
    for step in range(sc.steps):
        starts = {}
        ready: dict[int, list[float]] = {}
        for rk in ranks:
            starts[rk.rank] = rk.cpu
            _memory(rk, sc, step)
            if rk.rank == sc.straggler and sc.straggler_host_us:
                rk.cpu += sc.straggler_host_us  # e.g. waiting for its data loader
            if sc.graph_replay in ("forward", "all"):
                rk.graph_launch()
            for i in range(sc.layers):  # forward
                if sc.straggler_layer is not None:
                    late = rk.rank == sc.straggler and i == sc.straggler_layer
                    rk.slow = sc.straggler_slowdown if late else 1.0
                t0, k0 = rk.cpu, rk.kernel_us
                for m, k, n in _layer_gemms(sc):
                    rk.gemm(m, k, n)
                if sc.formula_less_op:
                    op, kernel, us = sc.formula_less_op
                    rk.launch(kernel, rk._jit(us) * rk.slow, op, dims=[[sc.tokens, sc.hidden]],
                              matmul=sc.formula_less_matmul)  # fmt: skip
                if sc.graph_replay == "elementwise":
                    rk.graph_launch()
                rk.elementwise()
                if sc.graph_replay == "elementwise":
                    rk.graph_end()
                if sc.layer_annotations:
                    rk.b.x(f"layers.{i}", "user_annotation", t0, rk.cpu - t0 - 0.5, tid=1000)
                    per = truth_layers.setdefault(rk.rank, {})
                    per[i] = per.get(i, 0.0) + (rk.kernel_us - k0) / 1e3 / sc.steps
            if sc.straggler_layer is not None:
                rk.slow = 1.0  # backward and the optimizer at full speed
            if sc.graph_replay == "forward":
                rk.graph_end()
            if sc.graph_replay == "backward":
                rk.graph_launch()
            ready[rk.rank] = []
            per_bucket = sc.layers // sc.buckets
            for i in range(sc.layers):  # backward: dgrad + wgrad per GEMM
                for m, k, n in reversed(_layer_gemms(sc)):
                    rk.gemm(m, n, k, tid=1001)
                    rk.gemm(k, m, n, tid=1001)
                rk.elementwise(tid=1001)
                if (i + 1) % per_bucket == 0:
                    ready[rk.rank].append((rk.cpu, rk.gpu))  # grads of this bucket ready
                    rk.cpu += 6.0  # the autograd thread issues the bucket's all-reduce
            rk.graph_end()
        if sc.buckets_after_backward:  # all buckets issued once backward is done
            for rk in ranks:
                _, last_gpu = ready[rk.rank][-1]
                ready[rk.rank] = [(rk.cpu + 6.0 * j, last_gpu) for j in range(sc.buckets)]
                rk.cpu += 6.0 * sc.buckets
        # resolve the buckets in order: every rank ends together
        for b in range(sc.buckets):
            arrive = {}
            for rk in ranks:
                cpu_t, gpu_t = ready[rk.rank][b]
                # + a launch jitter of up to 2 µs: queued collectives start together but
                # not to the nanosecond, so who is "last" at them is chance
                arrive[rk.rank] = max(cpu_t + 4.0, gpu_t, rk.nccl) + rk.rng.uniform(0, 2.0)
            t = _transfer_us(sc, bucket_bytes)
            end = max(arrive.values()) + t
            last = max(arrive, key=lambda r: (arrive[r], r))
            for r, a in arrive.items():
                if r != last and arrive[last] > a:
                    waits.append((r, last, a, arrive[last]))
            transfers.append((bucket_bytes, t))
            for rk in ranks:
                cpu_t, _ = ready[rk.rank][b]
                meta = nccl_meta("allreduce", bucket_bytes // 2, dtype="BFloat16", group=sc.world)
                if sc.seq:  # the group's collective count, the same on every rank
                    meta["Seq"] = step * sc.buckets + b + 1
                rpc = rk.b.cpu_op("record_param_comms", cpu_t, 5.0, tid=1001, **meta)
                rk.b.kernel(
                    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, "
                    "ncclWork*)",
                    arrive[rk.rank],
                    end - arrive[rk.rank],
                    stream=NCCL_STREAM,
                    launch_ts=rpc["ts"] + 2,
                    launch_tid=1001,
                    **meta,
                )
                rk.nccl = end
                rk.comm.append((arrive[rk.rank], end))
        for rk in ranks:  # optimizer waits for the last bucket; then a device sync
            rk.gpu = max(rk.gpu, rk.nccl)
            for _ in range(4):
                rk.elementwise()
            sync_start = rk.cpu
            rk.cpu = max(rk.cpu, rk.gpu) + 5.0
            rk.b.x(
                "cudaDeviceSynchronize",
                "cuda_runtime",
                sync_start,
                rk.cpu - sync_start,
                correlation=rk.b._id(),
            )
        end_all = max(rk.cpu for rk in ranks)
        for rk in ranks:
            rk.b.step(step + 1, starts[rk.rank], end_all - starts[rk.rank])
            windows[rk.rank].append((starts[rk.rank], end_all))
            rk.cpu = end_all + 2.0
            rk.gpu = max(rk.gpu, rk.cpu)
    truth = _finish(ranks, sc, out, windows, transfers)
    imposed: dict[int, float] = {}
    for r, last, a, b in waits:  # only the wait no compute of the waiting rank hides
        hidden = _length(_clip(ranks[r].compute, a, b))
        imposed[last] = imposed.get(last, 0.0) + (b - a - hidden) / (sc.world - 1) / 1e3
    truth.imposed_wait_ms = {r: v / sc.steps for r, v in imposed.items()}
    truth.layer_device_ms = truth_layers
    return truth


def _memory(rk: Rank, sc: Scenario, step: int) -> None:
    if step:
        return
    base = 0.30 * CAPACITY
    peak = sc.memory_peak * CAPACITY
    for i in range(6):
        alloc = base + (peak * 0.97 - base) * i / 5
        rk.b.memory(rk.cpu + i, int(alloc / 6), int(alloc), int(max(peak, alloc)))
    rk.b.memory(rk.cpu + 7, -int(peak / 6), int(base), int(peak))


def _pipeline(sc: Scenario, out: Path) -> Truth:
    p, m = sc.pipeline
    ranks = [Rank(r, sc) for r in range(p)]
    act_bytes = sc.tokens * sc.hidden * 2
    t_p2p = sc.alpha_us + act_bytes / (sc.busbw_GBps * 1e9) * 1e6
    windows: dict[int, list] = {r: [] for r in range(p)}
    transfers = []
    for step in range(sc.steps):
        t0 = max(max(rk.cpu, rk.gpu) for rk in ranks)
        for rk in ranks:
            rk.cpu = rk.gpu = rk.nccl = t0
            _memory(rk, sc, step)
        f_end: dict[tuple[int, int], float] = {}
        b_end: dict[tuple[int, int], float] = {}
        # 1F1B order per stage: P−s−1 warm-up forwards, then alternate, then backwards
        orders = []
        for s in range(p):
            warm = min(p - s - 1, m)
            seq = [("F", i) for i in range(warm)]
            f, bwd = warm, 0
            while f < m or bwd < m:
                if f < m:
                    seq.append(("F", f))
                    f += 1
                if bwd < m:
                    seq.append(("B", bwd))
                    bwd += 1
            orders.append(seq)
        pos = [0] * p
        done = False
        while not done:
            done = True
            for s, rk in enumerate(ranks):
                while pos[s] < len(orders[s]):
                    kind, i = orders[s][pos[s]]
                    dep = None
                    if kind == "F" and s > 0:
                        dep = f_end.get((s - 1, i))
                        if dep is None:
                            break
                    if kind == "B" and s < p - 1:
                        dep = b_end.get((s + 1, i))
                        if dep is None:
                            break
                    if dep is not None:  # a recv kernel waits for the data
                        arrive = dep + t_p2p
                        start = rk.gpu
                        if arrive > start:
                            meta = nccl_meta("recv", act_bytes // 2, dtype="BFloat16", group=p)
                            rk.b.kernel(
                                "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
                                start,
                                arrive - start,
                                stream=NCCL_STREAM,
                                launch_ts=t0 + 1,
                                **meta,
                            )
                            rk.comm.append((start, arrive))
                            transfers.append((act_bytes, t_p2p))
                            rk.gpu = arrive
                    label_start = rk.gpu
                    n_layers = max(sc.layers // p, 1)
                    for _ in range(n_layers):
                        for mm, kk, nn in _layer_gemms(sc):
                            if kind == "F":
                                rk.gemm(mm, kk, nn)
                            else:
                                rk.gemm(mm, nn, kk, tid=1001)
                                rk.gemm(kk, mm, nn, tid=1001)
                    rk.b.x(
                        f"PP:{s}{kind}{i}",
                        "user_annotation",
                        label_start - 1,
                        rk.gpu - label_start + 1,
                    )
                    (f_end if kind == "F" else b_end)[(s, i)] = rk.gpu
                    pos[s] += 1
                if pos[s] < len(orders[s]):
                    done = False
        end_all = max(rk.gpu for rk in ranks) + 5.0
        for rk in ranks:
            rk.b.step(step + 1, t0, end_all - t0)
            windows[rk.rank].append((t0, end_all))
            rk.cpu = rk.gpu = end_all + 2.0
    return _finish(ranks, sc, out, windows, transfers)


def _finish(ranks, sc: Scenario, out: Path, windows, transfers) -> Truth:
    truth = Truth()
    total_flops, total_time = 0.0, 0.0
    for rk in ranks:
        rk.b.write(out / f"rank-{rk.rank}.json.gz")
        a, b = windows[rk.rank][0][0], windows[rk.rank][-1][1]
        win = b - a
        comp = _clip(rk.compute, a, b)
        comm = _clip(rk.comm, a, b)
        busy = _length(comp + comm)
        c, m = _length(comp), _length(comm)
        overlap = c + m - busy
        truth.exposed_ms[rk.rank] = (m - overlap) / 1e3 / len(windows[rk.rank])
        if rk.kernel_us:
            truth.uncounted_fraction[rk.rank] = rk.uncounted_us / rk.kernel_us
            truth.graph_share[rk.rank] = rk.graph_us / rk.kernel_us
            truth.elementwise_fraction[rk.rank] = rk.elementwise_us / rk.kernel_us
        truth.fractions[rk.rank] = {
            "idle_fraction": (win - busy) / win,
            "compute_fraction": c / win,
            "comm_fraction": m / win,
            "exposed_comm_fraction": (m - overlap) / win,
        }
        total_flops += rk.flops
        total_time += win
    truth.mfu = total_flops / (total_time * 1e-6) / PEAK_BF16
    if transfers and not sc.pipeline:
        nbytes, t = transfers[0]
        truth.busbw_GBps = nbytes * 2 * (sc.world - 1) / sc.world / (t * 1e-6) / 1e9
    if sc.pipeline:
        truth.bubble = sum(1 - f["compute_fraction"] for f in truth.fractions.values()) / len(ranks)
    return truth


def generate(sc: Scenario, out: Path) -> Truth:
    out.mkdir(parents=True, exist_ok=True)
    return _pipeline(sc, out) if sc.pipeline else _ddp(sc, out)


# The injected problems, each with the finding kind it must raise (None: healthy)
SCENARIOS = {
    "healthy": (Scenario(), None),
    "exposed_allreduce": (
        Scenario(name="exposed", hidden=4096, tokens=4096, buckets_after_backward=True),
        "communication.exposed",
    ),
    "slow_collective": (Scenario(name="slow", busbw_GBps=40), "communication.slow_collective"),
    "straggler": (Scenario(name="straggler", straggler=2), "scaling.straggler"),
    "low_mfu": (Scenario(name="low_mfu", gemm_eff=0.06), "compute.low_mfu"),
    "host_bound": (
        Scenario(name="host_bound", hidden=512, tokens=1024, host_op_us=45.0),
        "compute.host_bound",
    ),
    "pipeline_bubble": (
        Scenario(name="bubble", pipeline=(4, 2), layers=8),
        "scaling.pipeline_bubble",
    ),
    "memory": (Scenario(name="memory", memory_peak=0.96), "memory.near_capacity"),
}
