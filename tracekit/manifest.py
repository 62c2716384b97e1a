"""`job.json`: what a profiled run was, so tracekit can predict what it should have done.

The schema lives here, in the consumer; `instrument/` (the reference jobs and
`capture()`) writes it. Versioned by `MANIFEST_SCHEMA`; fields only grow, and a
reader ignores keys it does not know. Every field documents itself
(`field_docs()`, printed by `tracekit run --help-manifest`). A figure that is not
known is `null`, never a guess.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tracekit.errors import TracekitError

MANIFEST_SCHEMA = 1
MANIFEST_NAME = "job.json"
STRATEGIES = ("ddp", "fsdp", "tp", "pp", "moe", "hybrid", "custom")
PP_SCHEDULES = ("1f1b", "gpipe", "interleaved")


def doc(text: str, default: Any = None, factory: Any = None) -> Any:
    """A dataclass field with its documentation."""
    if factory is not None:
        return field(default_factory=factory, metadata={"doc": text})
    return field(default=default, metadata={"doc": text})


@dataclass
class ModelConfig:
    """The model, as the FLOP and memory models need it."""

    layers: int | None = doc("transformer blocks (L)")
    hidden: int | None = doc("model width (h)")
    heads: int | None = doc("attention heads (a)")
    kv_heads: int | None = doc("key/value heads (GQA); = heads without GQA")
    ffn: int | None = doc("MLP inner width (SwiGLU: per gate)")
    vocab: int | None = doc("vocabulary size (V)")
    seq: int | None = doc("sequence length (s)")
    experts: int | None = doc("MoE experts per layer (0 or null: dense)")
    top_k: int | None = doc("experts each token is routed to")
    params: int | None = doc("total parameters Ψ")
    active_params: int | None = doc("parameters a token passes through (MoE: top_k of the experts)")
    embedding_params: int | None = doc("embedding + LM-head parameters (excluded from 6N by some)")
    causal: bool | None = doc(
        "causal attention (a decoder): the masked half of the scores is not computed, as "
        "the measured FLOPs count it; null: counted in full (PaLM's 12·L·H·Q·T)"
    )


@dataclass
class Mesh:
    """Parallel dimensions; their product is the world size (ep shares ranks with dp)."""

    dp: int = doc("data-parallel degree (DDP replicas or FSDP shards)", 1)
    tp: int = doc("tensor-parallel degree", 1)
    pp: int = doc("pipeline stages (P)", 1)
    ep: int = doc("expert-parallel degree", 1)


@dataclass
class CollectiveFit:
    """t(S) = alpha_s + S / algbw_Bps for one collective, fitted by least squares."""

    alpha_s: float | None = doc("latency α, seconds")
    algbw_Bps: float | None = doc("algorithm bandwidth 1/β: bytes of S per second")
    busbw_Bps: float | None = doc("algbw × the nccl-tests bus factor for the group size")
    group_size: int | None = doc("ranks in the measured group")
    sizes_bytes: list[int] = doc("message sizes S of the sweep", factory=list)
    times_s: list[float] = doc("best time per size (slowest rank), seconds", factory=list)
    r2: float | None = doc("coefficient of determination of the fit")


@dataclass
class Calibration:
    """Measured on the job's own machine just before profiling."""

    dtype: str | None = doc("dtype of the matmul benchmark")
    peak_flops: float | None = doc("best dense matmul FLOP/s for that dtype on one rank")
    matmul_n: int | None = doc("n of the n×n×n matmul used")
    collectives: dict[str, CollectiveFit] = doc(
        "α-β fit per collective (all_reduce, all_gather, reduce_scatter, all_to_all, send_recv)",
        factory=dict,
    )
    seconds: float | None = doc("how long the calibration took")


@dataclass
class JobManifest:
    """One profiled run."""

    schema: int = doc("job.json schema version", MANIFEST_SCHEMA)
    strategy: str = doc(f"one of {', '.join(STRATEGIES)}", "custom")
    world_size: int = doc("ranks", 1)
    mesh: Mesh = doc("parallel dimensions", factory=Mesh)
    schedule: str | None = doc(f"pipeline schedule: {', '.join(PP_SCHEDULES)}")
    microbatches: int | None = doc("pipeline microbatches per step (M)")
    virtual_stages: int | None = doc("model chunks per pipeline rank (V; interleaved)")
    model: ModelConfig = doc("the model", factory=ModelConfig)
    global_batch: int | None = doc("sequences per optimizer step, all ranks")
    micro_batch: int | None = doc("sequences per microbatch per rank")
    tokens_per_step: int | None = doc("global_batch × seq")
    dtype: str | None = doc("training dtype (float32, bfloat16 …)")
    optimizer: str | None = doc("optimizer (adamw, sgd …)")
    master_weights: bool | None = doc(
        "the optimizer keeps fp32 master copies of 16-bit parameters (mixed precision: "
        "16 bytes per parameter with Adam); false: parameters, gradients and Adam's states "
        "all in `dtype`; null: mixed precision assumed"
    )
    activation_checkpointing: bool | None = doc("recompute activations in backward")
    allow_tf32: bool | None = doc(
        "torch.backends.cuda.matmul.allow_tf32 in the job: fp32 GEMMs ran on TF32 tensor cores"
    )
    sequence_parallel: bool | None = doc(
        "tensor-parallel ranks also split layer norms and dropouts along the sequence "
        "(Megatron --sequence-parallel, torch SequenceParallel); activations ÷ tp"
    )
    fsdp_prefetch: bool | None = doc("FSDP2 explicit forward/backward prefetch")
    gpus_per_node: int | None = doc(
        "ranks (GPUs) per node; ranks fill nodes in order (rank // gpus_per_node). Decides "
        "whether a group's collectives run in a node or between nodes"
    )
    cpu_cores_per_rank: float | None = doc(
        "CPU cores each rank's process may use (cores on its host ÷ ranks on it). On a CPU "
        "run below 2, gloo's communication threads share the cores compute runs on: the "
        "step model's overlap takes the transfer's time from compute"
    )
    device: str | None = doc("cpu or the CUDA device name")
    backend: str | None = doc("gloo or nccl")
    torch_version: str | None = doc("torch.__version__")
    steps: int | None = doc("training steps run")
    profiled_steps: int | None = doc("steps in the profiler's active window")
    trace_pattern: str = doc("trace file name per rank", "rank-{rank}.json.gz")
    calibration: Calibration = doc("measured peak FLOP/s and collective α-β", factory=Calibration)
    command: str | None = doc("the command that produced the run")
    created: str | None = doc("ISO time the run was written")
    notes: dict[str, Any] = doc("anything else the producer wants to keep", factory=dict)
    comm_kernels: list[str] = doc(
        "regexes (Python re, searched in the kernel name) of extra communication kernels, "
        "added to tracekit's table (tracekit/model/commkernels.py)",
        factory=list,
    )

    def validate(self) -> None:
        if self.strategy not in STRATEGIES:
            raise TracekitError(f"job.json: strategy {self.strategy!r} is not one of {STRATEGIES}")
        m = self.mesh
        if self.gpus_per_node is not None and (
            not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1
        ):
            raise TracekitError("job.json: gpus_per_node must be an integer ≥ 1")
        for name, v in (
            ("world_size", self.world_size),
            *((f"mesh.{k}", getattr(m, k)) for k in ("dp", "tp", "pp", "ep")),
        ):
            if v < 1:
                raise TracekitError(f"job.json: {name} must be ≥ 1, not {v}")
        for name in ("microbatches", "virtual_stages"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise TracekitError(f"job.json: {name} must be ≥ 1 or null, not {v}")
        if m.dp * m.tp * m.pp != self.world_size:
            raise TracekitError(
                f"job.json: mesh dp·tp·pp = {m.dp}·{m.tp}·{m.pp} must equal world_size "
                f"{self.world_size}"
            )
        if self.schedule is not None and self.schedule not in PP_SCHEDULES:
            raise TracekitError(f"job.json: schedule {self.schedule!r} not in {PP_SCHEDULES}")
        if not isinstance(self.comm_kernels, list):
            raise TracekitError("job.json: comm_kernels must be a list of regexes")
        from tracekit.model.commkernels import compile_patterns

        compile_patterns(self.comm_kernels, "job.json")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, run_dir: str | Path) -> Path:
        self.validate()
        dest = Path(run_dir) / MANIFEST_NAME
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".job.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(self.to_dict(), fh, indent=2)
            fh.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a manifest is for sharing
        os.replace(tmp, dest)
        return dest


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


# field annotation → (check, what the user is told it must be)
_TYPES: dict[str, tuple[Any, str]] = {
    "int": (lambda v: _is_int(v) and v >= 0, "a whole number ≥ 0"),
    "float": (lambda v: _is_num(v) and v >= 0, "a finite number ≥ 0"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "list[int]": (
        lambda v: isinstance(v, list) and all(_is_int(x) and x >= 0 for x in v),
        "a list of whole numbers ≥ 0",
    ),
    "list[float]": (
        lambda v: isinstance(v, list) and all(_is_num(x) and x >= 0 for x in v),
        "a list of finite numbers ≥ 0",
    ),
    "list[str]": (
        lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "a list of strings",
    ),
    "dict[str, Any]": (lambda v: isinstance(v, dict), "an object"),
}


def _check_field(annotation: str, value: Any, where: str) -> Any:
    """The value, if it has the field's type; else one line naming the field."""
    optional = annotation.endswith(" | None")
    base = annotation.removesuffix(" | None")
    if value is None and optional:
        return None
    check, what = _TYPES[base]
    if isinstance(value, float) and base == "int" and value.is_integer():
        value = int(value)  # 2.0 written by a hand or a float-only tool
    if not check(value):
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "…"
        null = " or null" if optional else ""
        raise TracekitError(
            f"job.json: {where} must be {what}{null}, not {shown}; fix it or remove the key"
        )
    return value


def _build(cls: type, data: Any, where: str) -> Any:
    """A dataclass from a dict, recursively; unknown keys are ignored (the schema grows).
    Each known key's value is checked against its field's type, by name."""
    if not isinstance(data, dict):
        raise TracekitError(f"job.json: {where} must be an object, not {json.dumps(data)[:40]}")
    kwargs = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        name = f"{where}.{f.name}" if where else f.name
        sub = _NESTED.get((cls.__name__, f.name))
        if sub is not None:
            if value is None:
                continue  # the default
            if f.name == "collectives":
                if not isinstance(value, dict):
                    raise TracekitError(f"job.json: {name} must be an object of fits")
                value = {k: _build(sub, v, f"{name}.{k}") for k, v in value.items()}
            else:
                value = _build(sub, value, name)
        else:
            value = _check_field(str(f.type), value, name)
        kwargs[f.name] = value
    return cls(**kwargs)


_NESTED = {
    ("JobManifest", "mesh"): Mesh,
    ("JobManifest", "model"): ModelConfig,
    ("JobManifest", "calibration"): Calibration,
    ("Calibration", "collectives"): CollectiveFit,
}


def from_dict(data: dict[str, Any]) -> JobManifest:
    schema = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(schema, int) or schema > MANIFEST_SCHEMA:
        raise TracekitError(
            f"job.json: schema {schema!r} is not one this tracekit reads (≤ {MANIFEST_SCHEMA}); "
            "upgrade tracekit"
        )
    try:
        man = _build(JobManifest, data, "")
    except TypeError as exc:
        raise TracekitError(f"job.json: {exc}") from exc
    man.validate()
    return man


def load(run_dir: str | Path) -> JobManifest | None:
    """The manifest of a run folder, or None when it has none."""
    p = Path(run_dir)
    p = p if p.name == MANIFEST_NAME else p / MANIFEST_NAME
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise TracekitError(f"{p}: not readable JSON ({exc}); fix or remove it") from exc
    return from_dict(data)


def field_docs(cls: type = JobManifest, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, doc) for every manifest field, nested ones included."""
    out = []
    for f in fields(cls):
        key = f"{prefix}{f.name}"
        out.append((key, f.metadata.get("doc", "")))
        sub = _NESTED.get((cls.__name__, f.name))
        if sub is not None:
            out.extend(field_docs(sub, key + ("[name]." if f.name == "collectives" else ".")))
    return out


__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "Calibration",
    "CollectiveFit",
    "JobManifest",
    "Mesh",
    "ModelConfig",
    "field_docs",
    "from_dict",
    "load",
]
