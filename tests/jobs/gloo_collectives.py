"""A minimal 2-rank gloo job that issues each collective kind under the profiler.

    python -m tests.jobs.gloo_collectives OUT_DIR [WORLD_SIZE]

Writes OUT_DIR/rank-<r>.json.gz. Used by the tests as a real CPU/gloo trace.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch: ranks share 2 cores

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule

from instrument.launch import free_port

N = 1000


def step(rank: int, world: int) -> None:
    x = torch.full((N,), float(rank))
    a = torch.randn(128, 128)
    _ = a @ a
    dist.all_reduce(x)
    dist.all_gather_into_tensor(torch.empty(N * world), x)
    dist.reduce_scatter_tensor(torch.empty(N // world), x)
    dist.all_to_all_single(torch.empty(N), x)
    dist.broadcast(x, 0)
    if rank == 0:
        dist.send(x, 1)
    elif rank == 1:
        dist.recv(x, 0)
    dist.barrier()


def worker(rank: int, world: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)

    def on_ready(prof):
        prof.export_chrome_trace(os.path.join(out, f"rank-{rank}.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
        on_trace_ready=on_ready,
    ) as prof:
        for _ in range(4):
            step(rank, world)
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    out_dir = sys.argv[1]
    world_size = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    os.makedirs(out_dir, exist_ok=True)
    mp.spawn(worker, args=(world_size, free_port(), out_dir), nprocs=world_size)
