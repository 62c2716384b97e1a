"""The reference jobs: one builder per parallelism strategy.

Each builder runs inside an initialised process group and returns a `Job`: a
`step()` that runs one optimizer step, and what the manifest needs to know about the
parallel layout. Data is random tokens, the same on ranks that must see the same
batch (tensor- and pipeline-parallel peers), different across data-parallel ranks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from instrument.config import JobConfig
from instrument.model import MoE, Transformer, loss_fn
from tracekit.manifest import Mesh


@dataclass
class Job:
    step: Callable[[], float]
    mesh: Mesh
    micro_batch: int
    global_batch: int
    schedule: str | None = None
    microbatches: int | None = None
    virtual_stages: int | None = None
    notes: dict = field(default_factory=dict)


def _dtype(cfg: JobConfig) -> torch.dtype:
    return getattr(torch, cfg.dtype)


def _batch(cfg: JobConfig, device, data_rank: int, batch: int | None = None):
    g = torch.Generator().manual_seed(cfg.seed * 1000 + data_rank)
    shape = (batch or cfg.batch, cfg.seq)
    x = torch.randint(0, cfg.vocab, shape, generator=g).to(device)
    y = torch.randint(0, cfg.vocab, shape, generator=g).to(device)
    return x, y


def _slow(cfg: JobConfig, model: Transformer, rank: int) -> Transformer:
    """Slow block `cfg.slow_layer` on rank `cfg.slow_rank` (where that rank holds it)."""
    name = str(cfg.slow_layer)
    if cfg.slow_layer >= 0 and rank == cfg.slow_rank and name in model.layers:
        model.layers[name].slow_down(cfg, cfg.slow_factor)
    return model


def _train_step(model, opt, x, y) -> Callable[[], float]:
    def step() -> float:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return float(loss.detach())

    return step


def _adamw(params, foreach: bool = True):
    return torch.optim.AdamW(params, lr=1e-3, foreach=foreach)


def build_ddp(cfg: JobConfig, device, rank: int, world: int) -> Job:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = _slow(cfg, Transformer(cfg).to(device=device, dtype=_dtype(cfg)), rank)
    x, y = _batch(cfg, device, rank)
    if not cfg.ddp_overlap:
        opt = _adamw(model.parameters())

        def step() -> float:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            _all_reduce_after_backward([p.grad for p in model.parameters()], world)
            opt.step()
            return float(loss.detach())

        return Job(
            step,
            Mesh(dp=world),
            micro_batch=cfg.batch,
            global_batch=cfg.batch * world,
            notes={"ddp": "no overlap: one all-reduce of every gradient after backward"},
        )
    ddp = DDP(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,
        bucket_cap_mb=cfg.bucket_cap_mb,
    )
    return Job(
        _train_step(ddp, _adamw(ddp.parameters()), x, y),
        Mesh(dp=world),
        micro_batch=cfg.batch,
        global_batch=cfg.batch * world,
    )


def _all_reduce_after_backward(grads: list, world: int) -> None:
    """Average `grads` over the data-parallel ranks with one all-reduce of one flat
    bucket, issued once backward is done (what DDP does without overlap)."""
    grads = [g for g in grads if g is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= world
    off = 0
    for g in grads:
        g.copy_(flat[off : off + g.numel()].view_as(g))
        off += g.numel()


def _prefetch(layers: list) -> None:
    for cur, nxt in itertools.pairwise(layers):
        cur.set_modules_to_forward_prefetch([nxt])
        nxt.set_modules_to_backward_prefetch([cur])


def build_fsdp(cfg: JobConfig, device, rank: int, world: int) -> Job:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (world,), mesh_dim_names=("dp",))
    model = _slow(cfg, Transformer(cfg).to(device=device, dtype=_dtype(cfg)), rank)
    layers = list(model.layers.values())
    for block in layers:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    if cfg.fsdp_prefetch:
        _prefetch(layers)
    x, y = _batch(cfg, device, rank)
    return Job(
        _train_step(model, _adamw(model.parameters()), x, y),
        Mesh(dp=world),
        micro_batch=cfg.batch,
        global_batch=cfg.batch * world,
        notes={"fsdp": "fully_shard per block + root"},
    )


def _tensor_parallel(model: Transformer, tp_mesh) -> None:
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    plan = {
        "attn.wq": ColwiseParallel(),
        "attn.wk": ColwiseParallel(),
        "attn.wv": ColwiseParallel(),
        "attn.wo": RowwiseParallel(),
        "mlp.w1": ColwiseParallel(),
        "mlp.w3": ColwiseParallel(),
        "mlp.w2": RowwiseParallel(),
    }
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, plan)


def build_tp(cfg: JobConfig, device, rank: int, world: int) -> Job:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, (world,), mesh_dim_names=("tp",))
    model = _slow(cfg, Transformer(cfg).to(device=device, dtype=_dtype(cfg)), rank)
    _tensor_parallel(model, mesh)
    x, y = _batch(cfg, device, 0)  # every TP rank sees the same batch
    # foreach=True fails on a mix of Tensor and DTensor parameters
    return Job(
        _train_step(model, _adamw(model.parameters(), foreach=False), x, y),
        Mesh(tp=world),
        micro_batch=cfg.batch,
        global_batch=cfg.batch,
    )


def build_hybrid(cfg: JobConfig, device, rank: int, world: int) -> Job:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dp = world // cfg.tp
    mesh = init_device_mesh(device.type, (dp, cfg.tp), mesh_dim_names=("dp", "tp"))
    model = _slow(cfg, Transformer(cfg).to(device=device, dtype=_dtype(cfg)), rank)
    _tensor_parallel(model, mesh["tp"])
    if cfg.hybrid_dp == "fsdp":
        layers = list(model.layers.values())
        for block in layers:
            fully_shard(block, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
        if cfg.fsdp_prefetch:
            _prefetch(layers)
    else:
        from torch.distributed._composable.replicate import replicate
        from torch.distributed.fsdp import MixedPrecisionPolicy  # noqa: F401 (replicate via fsdp)

        replicate(model, device_mesh=mesh["dp"])
    dp_rank = mesh["dp"].get_local_rank()
    x, y = _batch(cfg, device, dp_rank)
    return Job(
        _train_step(model, _adamw(model.parameters(), foreach=False), x, y),
        Mesh(dp=dp, tp=cfg.tp),
        micro_batch=cfg.batch,
        global_batch=cfg.batch * dp,
        notes={"hybrid": f"{cfg.hybrid_dp} over dp × tensor parallel over tp"},
    )


def build_moe(cfg: JobConfig, device, rank: int, world: int) -> Job:
    model = Transformer(cfg, moe_factory=lambda: MoE(cfg, ep=world, ep_rank=rank)).to(
        device=device, dtype=_dtype(cfg)
    )
    _slow(cfg, model, rank)
    # experts are sharded (expert parallel); everything else is replicated data-parallel
    dense = [p for n, p in model.named_parameters() if ".experts." not in n]
    opt = _adamw(model.parameters())
    x, y = _batch(cfg, device, rank)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        _all_reduce_after_backward([p.grad for p in dense], world)  # one bucket
        opt.step()
        return float(loss.detach())

    return Job(
        step,
        Mesh(dp=world, ep=world),
        micro_batch=cfg.batch,
        global_batch=cfg.batch * world,
        notes={"moe": "all_to_all_single dispatch + combine, dense grads all-reduced"},
    )


def build_pp(cfg: JobConfig, device, rank: int, world: int) -> Job:
    from torch.distributed.pipelining import (
        PipelineStage,
        Schedule1F1B,
        ScheduleGPipe,
        ScheduleInterleaved1F1B,
    )

    from instrument.profiling import label_pipeline_stage

    v = cfg.virtual_stages if cfg.schedule == "interleaved" else 1
    n_stages = world * v
    base, extra = divmod(cfg.layers, n_stages)
    per = [base + (1 if i < extra else 0) for i in range(n_stages)]
    bounds = [sum(per[:i]) for i in range(n_stages + 1)]
    stage_ids = [rank + j * world for j in range(v)]  # looped placement
    stages, params = [], []
    for sid in stage_ids:
        module = Transformer(
            cfg,
            layer_ids=range(bounds[sid], bounds[sid + 1]),
            first=sid == 0,
            last=sid == n_stages - 1,
        )
        _slow(cfg, module.to(device=device, dtype=_dtype(cfg)), rank)
        params += list(module.parameters())
        stage = PipelineStage(module, sid, n_stages, device)
        if cfg.schedule == "1f1b":
            label_pipeline_stage(stage, sid)
        stages.append(stage)
    if cfg.schedule == "interleaved":
        sched = ScheduleInterleaved1F1B(stages, n_microbatches=cfg.microbatches, loss_fn=loss_fn)
    else:
        cls = Schedule1F1B if cfg.schedule == "1f1b" else ScheduleGPipe
        sched = cls(stages[0], n_microbatches=cfg.microbatches, loss_fn=loss_fn)
    opt = _adamw(params)
    x, y = _batch(cfg, device, 0)
    has_first, has_last = 0 in stage_ids, n_stages - 1 in stage_ids

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        losses: list = []
        args = (x,) if has_first else ()
        kwargs = {"target": y, "losses": losses} if has_last else {}
        sched.step(*args, **kwargs)
        opt.step()
        return float(torch.stack([x.detach() for x in losses]).mean()) if losses else float("nan")

    return Job(
        step,
        Mesh(pp=world),
        micro_batch=cfg.batch // cfg.microbatches,
        global_batch=cfg.batch,
        schedule=cfg.schedule,
        microbatches=cfg.microbatches,
        virtual_stages=v,
        notes={"pp_stage_layers": per, "stage_placement": "looped"},
    )


BUILDERS = {
    "ddp": build_ddp,
    "fsdp": build_fsdp,
    "tp": build_tp,
    "pp": build_pp,
    "moe": build_moe,
    "hybrid": build_hybrid,
}
