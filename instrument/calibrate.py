"""Calibration measured at job start: peak matmul FLOP/s and collective α-β.

Peak FLOP/s: the best of a few n×n×n matmuls in the job's dtype (2n³ FLOPs each).
Collectives: a sweep of message sizes for each collective on the default group,
best of a few timed repetitions per size (the noise on shared cores only ever adds
time), the slowest rank's time (the collective
ends when its last rank does); t = α + S/algbw fitted by least squares
(`tracekit.model.collectives.fit_alpha_beta`), S as nccl-tests defines it.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from tracekit.manifest import Calibration, CollectiveFit
from tracekit.model.collectives import bus_factor, fit_alpha_beta

SIZES = (1 << 10, 1 << 14, 1 << 17, 1 << 19, 1 << 20)  # elements per rank-buffer
REPS = 5


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_matmul_flops(dtype: torch.dtype, device: torch.device, n: int) -> float:
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    best = float("inf")
    for i in range(5):
        _sync(device)
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        if i:  # the first is a warm-up
            best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def _collective(name: str, n: int, world: int, rank: int, dtype, device):
    """(callable running the collective once, S in bytes) or None."""
    x = torch.ones(n, dtype=dtype, device=device)
    esz = x.element_size()
    if name == "all_reduce":
        return (lambda: dist.all_reduce(x)), n * esz
    if name == "all_gather":
        out = torch.empty(n * world, dtype=dtype, device=device)
        return (lambda: dist.all_gather_into_tensor(out, x)), n * world * esz
    if name == "reduce_scatter":
        big = torch.ones(n * world, dtype=dtype, device=device)
        return (lambda: dist.reduce_scatter_tensor(x, big)), n * world * esz
    if name == "all_to_all":
        xs = torch.ones(n * world, dtype=dtype, device=device)
        out = torch.empty_like(xs)
        return (lambda: dist.all_to_all_single(out, xs)), n * world * esz
    if name == "send_recv":
        if world < 2:
            return None
        peer = rank ^ 1

        def pingpong():
            if peer >= world:
                return
            if rank % 2 == 0:
                dist.send(x, peer)
                dist.recv(x, peer)
            else:
                dist.recv(x, peer)
                dist.send(x, peer)

        return pingpong, n * esz  # a ping-pong is two one-way transfers of S
    raise ValueError(name)


def calibrate(
    dtype: torch.dtype,
    device: torch.device,
    collectives=("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"),
) -> Calibration:
    t0 = time.perf_counter()
    n_mm = 1024 if device.type == "cuda" else 256
    cal = Calibration(
        dtype=str(dtype).removeprefix("torch."),
        peak_flops=peak_matmul_flops(dtype, device, n_mm),
        matmul_n=n_mm,
    )
    if dist.is_initialized():
        world, rank = dist.get_world_size(), dist.get_rank()
        # the slowest rank's peak is the one every rank can count on
        peak = torch.tensor([cal.peak_flops], dtype=torch.float64, device=device)
        dist.all_reduce(peak, op=dist.ReduceOp.MIN)
        cal.peak_flops = float(peak.item())
        for name in collectives if world > 1 else ():
            sizes, times = [], []
            for n in SIZES:
                made = _collective(name, n, world, rank, dtype, device)
                if made is None:
                    break
                fn, nbytes = made
                fn()  # warm-up
                samples = []
                for _ in range(REPS):
                    dist.barrier()
                    _sync(device)
                    t = time.perf_counter()
                    fn()
                    _sync(device)
                    samples.append(time.perf_counter() - t)
                per_transfer = min(samples) / (2 if name == "send_recv" else 1)
                slowest = torch.tensor([per_transfer], dtype=torch.float64, device=device)
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
                sizes.append(nbytes)
                times.append(float(slowest.item()))
            if len(sizes) < 2:
                continue
            try:
                alpha, bw, r2 = fit_alpha_beta(sizes, times)
            except ValueError:
                alpha, bw, r2 = None, None, None
            group = 2 if name == "send_recv" else world
            factor = bus_factor(name, group)
            cal.collectives[name] = CollectiveFit(
                alpha_s=alpha,
                algbw_Bps=bw,
                busbw_Bps=bw * factor if bw and factor else None,
                group_size=group,
                sizes_bytes=sizes,
                times_s=times,
                r2=r2,
            )
    cal.seconds = time.perf_counter() - t0
    return cal
