"""`tracekit run JOB`: launch one process per rank, profile, write traces and job.json."""

from __future__ import annotations

import datetime as dt
import os
import shlex
import socket
import sys
import traceback
from dataclasses import asdict
from pathlib import Path

from instrument.config import JobConfig
from tracekit.errors import TracekitError
from tracekit.manifest import JobManifest, ModelConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _device_and_backend(cfg: JobConfig, rank: int):
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    want_cuda = cfg.device == "cuda" or (
        cfg.device == "auto" and gpus >= cfg.world_size and cfg.backend != "gloo"
    )
    if want_cuda:
        if cfg.backend == "gloo" and gpus:
            # ranks share GPUs: NCCL refuses two ranks on one device, gloo copies through
            # the host (DDP's all-reduce and FSDP's collectives on CUDA tensors work)
            torch.cuda.set_device(rank % gpus)
            return torch.device("cuda", rank % gpus), "gloo"
        if gpus < cfg.world_size:
            raise TracekitError(
                f"--device cuda needs {cfg.world_size} GPUs, found {gpus} "
                "(--backend gloo lets ranks share them)"
            )
        torch.cuda.set_device(rank)
        return torch.device("cuda", rank), "nccl"
    return torch.device("cpu"), "gloo"


class _OwnMeasures:
    """What the job measures itself over its profiled steps, for checks against the
    trace (benchmarks/gpu_check.py): wall time per step (the device synchronized) and
    `torch.cuda.max_memory_allocated` (peak statistics reset before the first profiled
    step), per rank."""

    def __init__(self, device) -> None:
        import torch

        self.torch, self.device = torch, device
        self.cuda = device.type == "cuda"
        self.seconds: list[float] = []
        self._t0: float | None = None

    def _sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def before(self, profiled: bool) -> None:
        import time

        self._t0 = None
        if profiled:
            self._sync()
            if not self.seconds and self.cuda:
                self.torch.cuda.reset_peak_memory_stats(self.device)
            self._t0 = time.perf_counter()

    def after(self) -> None:
        import time

        if self._t0 is not None:
            self._sync()
            self.seconds.append(time.perf_counter() - self._t0)

    def gather(self, world: int) -> dict:
        import torch.distributed as dist

        mine = {
            "step_seconds": self.seconds,
            "max_memory_allocated_bytes": (
                self.torch.cuda.max_memory_allocated(self.device) if self.cuda else None
            ),
        }
        every: list = [None] * world
        dist.all_gather_object(every, mine)
        return {"ranks": every}


def _worker(rank: int, cfg_dict: dict, port: int, command: str) -> None:
    import torch

    torch.set_num_threads(1)  # ranks share the cores; oversubscription makes steps erratic
    import torch.distributed as dist

    from instrument.calibrate import calibrate
    from instrument.jobs import BUILDERS
    from instrument.model import param_counts
    from instrument.profiling import make_profiler

    cfg = JobConfig(**cfg_dict)
    device, backend = _device_and_backend(cfg, rank)
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=cfg.world_size,
        device_id=device if backend == "nccl" else None,
    )
    try:
        torch.manual_seed(cfg.seed)
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = cfg.tf32  # job.json records it
        cal = calibrate(getattr(torch, cfg.dtype), device) if cfg.calibrate else None
        job = BUILDERS[cfg.job](cfg, device, rank, cfg.world_size)
        wait, warmup = 1, 1
        own = _OwnMeasures(device)
        with make_profiler(
            cfg.out,
            rank,
            active=cfg.steps,
            wait=wait,
            warmup=warmup,
            modules=cfg.profile_modules,
        ) as prof:
            for i in range(wait + warmup + cfg.steps):
                own.before(profiled=i >= wait + warmup)
                job.step()
                own.after()
                prof.step()
        measured = own.gather(cfg.world_size)
        dist.barrier()
        if rank == 0:
            counts = param_counts(cfg)
            man = JobManifest(
                strategy=cfg.job,
                world_size=cfg.world_size,
                mesh=job.mesh,
                schedule=job.schedule,
                microbatches=job.microbatches,
                virtual_stages=job.virtual_stages,
                model=ModelConfig(
                    layers=cfg.layers,
                    hidden=cfg.hidden,
                    heads=cfg.heads,
                    kv_heads=cfg.kv_heads,
                    ffn=cfg.ffn,
                    vocab=cfg.vocab,
                    seq=cfg.seq,
                    experts=cfg.experts if cfg.job == "moe" else None,
                    top_k=cfg.top_k if cfg.job == "moe" else None,
                    **counts,
                ),
                global_batch=job.global_batch,
                micro_batch=job.micro_batch,
                tokens_per_step=job.global_batch * cfg.seq,
                dtype=cfg.dtype,
                optimizer="adamw",
                master_weights=False,  # the model is cast to cfg.dtype; AdamW keeps it
                activation_checkpointing=False,
                allow_tf32=torch.backends.cuda.matmul.allow_tf32 if device.type == "cuda" else None,
                fsdp_prefetch=cfg.fsdp_prefetch if cfg.job in ("fsdp", "hybrid") else None,
                cpu_cores_per_rank=_cores_per_rank(cfg.world_size),
                device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                backend=backend,
                torch_version=torch.__version__,
                steps=wait + warmup + cfg.steps,
                profiled_steps=cfg.steps,
                calibration=cal if cal is not None else JobManifest().calibration,
                command=command,
                created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                notes={"config": asdict(cfg), **job.notes, "measured_by_the_job": measured},
            )
            man.write(cfg.out)
        dist.barrier()  # no rank tears gloo down while rank 0 still writes job.json
    finally:
        dist.destroy_process_group()
    # every file is written and closed: leave without the interpreter's teardown, where
    # torch's CPU build now and then aborts on a thread left joinable ("terminate called
    # without an active exception"), failing a job whose work is complete
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_job(cfg: JobConfig, command: str | None = None) -> Path:
    """Run all ranks of a reference job; return the run folder."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("rank-*.json.gz"):
        stale.unlink()  # a folder holds one run: old ranks would mix with new ones
    cfg = JobConfig(**{**asdict(cfg), "out": str(out.resolve())})
    # set before the ranks import torch (spawned children inherit the environment)
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch.multiprocessing as mp

    command = command or shlex.join(["tracekit", *sys.argv[1:]])
    try:
        mp.start_processes(
            _worker,
            args=(asdict(cfg), free_port(), command),
            nprocs=cfg.world_size,
            start_method="spawn",
        )
    except mp.ProcessRaisedException as exc:
        last = str(exc).strip().splitlines()[-1]
        raise TracekitError(f"job {cfg.job} failed on a rank: {last}") from exc
    except mp.ProcessExitedException as exc:
        raise TracekitError(f"job {cfg.job}: a rank exited abnormally ({exc})") from exc
    missing = [r for r in range(cfg.world_size) if not (out / f"rank-{r}.json.gz").exists()]
    if missing or not (out / "job.json").exists():
        raise TracekitError(f"job {cfg.job} finished without writing traces for ranks {missing}")
    return out


if __name__ == "__main__":  # pragma: no cover - debugging aid
    try:
        run_job(JobConfig(job=sys.argv[1], out=sys.argv[2]))
    except TracekitError:
        traceback.print_exc()
        sys.exit(2)


def _cores_per_rank(world_size: int) -> float:
    """The CPU cores each rank may use: every rank of `tracekit run` is a process on this
    host, sharing the cores this process may run on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return cores / max(world_size, 1)
