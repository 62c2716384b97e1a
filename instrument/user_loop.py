"""`capture()`: profile a user's own training loop the way tracekit needs it.

    from instrument import capture

    with capture("runs/exp1", model=model, seq=2048, global_batch=512, strategy="fsdp") as cap:
        for batch in loader:
            train_step(batch)
            cap.step()

Every rank writes `runs/exp1/rank-<r>.json.gz`; rank 0 writes `job.json` with what
can be inferred (world size, backend, device, the process groups' mesh dims, the
parameter count of `model`, the torch version) plus what the caller states.
"""

from __future__ import annotations

import datetime as dt
import sys
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from instrument.profiling import make_profiler
from tracekit.errors import TracekitError
from tracekit.manifest import JobManifest, Mesh, ModelConfig

_MODEL_KEYS = {f.name for f in fields(ModelConfig)}
_TOP_KEYS = {f.name for f in fields(JobManifest)} - {"model", "mesh", "calibration"}
_MESH_KEYS = {f.name for f in fields(Mesh)}


class Capture:
    """What `capture()` yields: call `.step()` once per training step."""

    def __init__(self, prof, total: int):
        self._prof = prof
        self.total = total
        self.steps = 0

    def step(self) -> None:
        self._prof.step()
        self.steps += 1

    @property
    def done(self) -> bool:
        """True once the profiled window is over (the loop may stop or go on)."""
        return self.steps >= self.total


def _dist():
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def _mesh_from_groups() -> dict[str, int]:
    """Mesh dims from DeviceMesh groups (`mesh_dp`, `mesh_tp`, …), as the trace's
    pg_config lists them."""
    try:
        from torch.distributed.distributed_c10d import _world

        infos = list(_world.pg_config_info)
    except (ImportError, AttributeError):  # private API: best effort only
        return {}
    dims: dict[str, int] = {}
    for info in infos:
        desc = str(info.get("pg_desc", ""))
        for dim in ("dp", "tp", "pp", "ep"):
            if desc == f"mesh_{dim}":
                dims[dim] = int(info.get("pg_size") or len(info.get("ranks") or []))
    return dims


@contextmanager
def capture(
    out_dir: str | Path,
    model: torch.nn.Module | None = None,
    *,
    active: int = 2,
    wait: int = 1,
    warmup: int = 1,
    modules: bool = False,
    **known: Any,
):
    """Profile `wait + warmup + active` steps of the enclosing loop; see the module doc.

    Regions (where in the model, docs/regions.md): wrap each block's call in
    `torch.profiler.record_function("layers.3")` (named by its module path, as the
    reference jobs do), or pass `modules=True` for an `nn.Module: X` event per module call
    (torch's Python tracer: slower steps, larger traces).

    `known` takes any `job.json` key (strategy, schedule, microbatches, global_batch,
    micro_batch, dtype, optimizer …), any model key (layers, hidden, heads, kv_heads,
    ffn, vocab, seq, experts, top_k …) and mesh dims (dp, tp, pp, ep).
    """
    unknown = set(known) - _MODEL_KEYS - _TOP_KEYS - _MESH_KEYS
    if unknown:
        raise TracekitError(f"capture(): unknown job.json keys {sorted(unknown)}")
    out = Path(out_dir)
    dist = _dist()
    rank = dist.get_rank() if dist else 0
    world = dist.get_world_size() if dist else 1
    prof = make_profiler(out, rank, active=active, wait=wait, warmup=warmup, modules=modules)
    cap = Capture(prof, wait + warmup + active)
    prof.start()
    try:
        yield cap
    finally:
        prof.stop()
    if cap.steps < cap.total:
        print(
            f"tracekit capture: only {cap.steps} of {cap.total} steps ran; the trace covers "
            "what was profiled",
            file=sys.stderr,
        )
    if rank != 0:
        return
    model_cfg = {k: v for k, v in known.items() if k in _MODEL_KEYS}
    if model is not None and "params" not in model_cfg:
        # local parameters × shards is right for FSDP/TP; the caller may state params=
        model_cfg["params"] = sum(p.numel() for p in model.parameters())
    mesh = {"dp": world, **(_mesh_from_groups() if dist else {})}
    mesh.update({k: v for k, v in known.items() if k in _MESH_KEYS})
    if "dp" not in known and (mesh.get("tp", 1) * mesh.get("pp", 1)) > 1:
        mesh["dp"] = max(1, world // (mesh.get("tp", 1) * mesh.get("pp", 1)))
    top = {k: v for k, v in known.items() if k in _TOP_KEYS}
    top.setdefault("strategy", "custom")
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    if cuda:  # fp32 GEMMs on TF32 tensor cores: their peak is TF32's (stated keys win)
        top.setdefault("allow_tf32", torch.backends.cuda.matmul.allow_tf32)
    man = JobManifest(
        world_size=world,
        mesh=Mesh(**mesh),
        model=ModelConfig(**model_cfg),
        device=torch.cuda.get_device_name() if cuda else "cpu",
        backend=dist.get_backend() if dist else None,
        torch_version=torch.__version__,
        steps=cap.steps,
        profiled_steps=min(active, max(0, cap.steps - wait - warmup)),
        command=" ".join(sys.argv),
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **top,
    )
    if man.tokens_per_step is None and man.global_batch and man.model.seq:
        man.tokens_per_step = man.global_batch * man.model.seq
    try:
        man.validate()
    except TracekitError as exc:  # never fail the user's job over the manifest
        print(f"tracekit capture: {exc}; writing mesh dp={world}", file=sys.stderr)
        man.mesh = Mesh(dp=world)
    man.write(out)
