"""A reference job's configuration: small dataclasses whose field docs are the CLI help.

Invalid combinations fail at construction, naming the fields (torchtitan's habit).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from tracekit.errors import TracekitError
from tracekit.manifest import PP_SCHEDULES

JOBS = ("ddp", "fsdp", "tp", "pp", "moe", "hybrid")


def opt(doc: str, default):
    return field(default=default, metadata={"doc": doc})


@dataclass
class JobConfig:
    """What `tracekit run JOB` runs."""

    job: str = opt(f"strategy: {', '.join(JOBS)}", "ddp")
    world_size: int = opt("ranks (one process each)", 2)
    out: str = opt("run folder to write (traces + job.json)", "run")
    steps: int = opt("profiled (active) steps; one wait and one warm-up step run before", 2)
    layers: int = opt("transformer blocks", 4)
    hidden: int = opt("model width", 128)
    heads: int = opt("attention heads", 4)
    kv_heads: int = opt("key/value heads (GQA when < heads)", 2)
    ffn: int = opt("MLP inner width (SwiGLU)", 256)
    vocab: int = opt("vocabulary size", 512)
    seq: int = opt("sequence length", 64)
    batch: int = opt("sequences per data-parallel rank per step", 4)
    microbatches: int = opt("pipeline microbatches per step (pp)", 4)
    schedule: str = opt(f"pipeline schedule: {', '.join(PP_SCHEDULES)}", "1f1b")
    virtual_stages: int = opt("model chunks per rank for the interleaved schedule", 2)
    experts: int = opt("experts per MoE layer (moe)", 4)
    top_k: int = opt("experts per token (moe)", 2)
    tp: int = opt("tensor-parallel degree of the hybrid mesh (dp = world / tp)", 2)
    hybrid_dp: str = opt("data parallelism of the hybrid mesh: fsdp or ddp-style replicate", "fsdp")
    fsdp_prefetch: bool = opt("FSDP2 explicit forward/backward prefetch of the next layer", False)
    bucket_cap_mb: float = opt("DDP gradient bucket size, MB", 25.0)
    ddp_overlap: bool = opt(
        "DDP: all-reduce each gradient bucket during backward as its gradients are ready; "
        "off: one all-reduce of every gradient after backward (no overlap)",
        True,
    )
    dtype: str = opt("parameter/compute dtype: float32 or bfloat16", "float32")
    tf32: bool = opt(
        "allow TF32 tensor cores for fp32 matmuls (torch.backends.cuda.matmul.allow_tf32; "
        "CUDA, Ampere and later)",
        False,
    )
    device: str = opt("auto (CUDA + NCCL when there are enough GPUs), cpu or cuda", "auto")
    backend: str = opt(
        "auto (NCCL on CUDA, gloo on CPU), nccl or gloo; gloo on CUDA lets ranks share "
        "GPUs (rank r on GPU r mod count) where there are fewer GPUs than ranks",
        "auto",
    )
    profile_modules: bool = opt(
        "also record nn.Module events (the profiler's with_stack and with_modules: Python "
        "tracing, slower steps and larger traces); each block's record_function range "
        "(layers.N) is recorded either way",
        False,
    )
    slow_layer: int = opt(
        "slow this transformer block (its index; -1: none) on --slow-rank only: extra "
        "local matmuls in its forward, no communication (a straggler to find)",
        -1,
    )
    slow_rank: int = opt("the rank whose --slow-layer is slowed", 0)
    slow_factor: float = opt(
        "the slowed block's forward does about this many times its matmul work", 8.0
    )
    calibrate: bool = opt("measure peak matmul FLOP/s and collective α-β before profiling", True)
    seed: int = opt("random seed", 0)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        err = []
        if self.job not in JOBS:
            err.append(f"job {self.job!r} is not one of {', '.join(JOBS)}")
        if self.world_size < 1:
            err.append("world_size must be ≥ 1")
        if self.steps < 1:
            err.append("steps must be ≥ 1")
        if self.hidden % self.heads:
            err.append(f"hidden {self.hidden} must be divisible by heads {self.heads}")
        if self.heads % self.kv_heads:
            err.append(f"heads {self.heads} must be divisible by kv_heads {self.kv_heads}")
        if self.slow_layer >= self.layers:
            err.append(f"slow_layer {self.slow_layer} must be < layers {self.layers}")
        if self.slow_layer >= 0 and not 0 <= self.slow_rank < self.world_size:
            err.append(f"slow_rank {self.slow_rank} must be a rank (< {self.world_size})")
        if self.slow_factor < 1:
            err.append("slow_factor must be ≥ 1")
        if self.backend not in ("auto", "nccl", "gloo"):
            err.append("backend must be auto, nccl or gloo")
        if self.backend == "nccl" and self.device == "cpu":
            err.append("backend nccl needs device cuda")
        if self.dtype not in ("float32", "bfloat16"):
            err.append("dtype must be float32 or bfloat16")
        tp = self.tp_degree
        if tp > 1 and (self.kv_heads % tp or self.ffn % tp):
            err.append(f"kv_heads {self.kv_heads} and ffn {self.ffn} must be divisible by tp {tp}")
        if self.job == "hybrid":
            if self.world_size % self.tp or self.world_size // self.tp < 2 or self.tp < 2:
                err.append(
                    f"hybrid needs world_size = dp·tp with dp, tp ≥ 2 (world_size "
                    f"{self.world_size}, tp {self.tp})"
                )
            if self.hybrid_dp not in ("fsdp", "replicate"):
                err.append("hybrid_dp must be fsdp or replicate")
        if self.job == "pp":
            if self.schedule not in PP_SCHEDULES:
                err.append(f"schedule must be one of {', '.join(PP_SCHEDULES)}")
            if self.world_size < 2:
                err.append("pp needs world_size ≥ 2")
            v = self.virtual_stages if self.schedule == "interleaved" else 1
            stages = self.world_size * v
            if self.layers < stages:
                err.append(f"layers {self.layers} < pipeline stages {stages}")
            if self.batch % self.microbatches:
                err.append(
                    f"batch {self.batch} must be divisible by microbatches {self.microbatches}"
                )
            if self.schedule == "interleaved" and self.microbatches % self.world_size:
                err.append("interleaved needs microbatches divisible by world_size")
        if self.job == "moe" and (self.experts % self.world_size or self.top_k > self.experts):
            err.append(
                f"experts {self.experts} must be divisible by world_size {self.world_size} and "
                f"≥ top_k {self.top_k}"
            )
        if err:
            raise TracekitError("invalid job: " + "; ".join(err))

    @property
    def tp_degree(self) -> int:
        return {"tp": self.world_size, "hybrid": self.tp}.get(self.job, 1)


def field_help() -> dict[str, str]:
    return {f.name: f.metadata["doc"] for f in fields(JobConfig)}
