"""One table of communication kernels: which device kernels move data between ranks.

A kernel whose name matches an entry (`re.search`, first match wins) is
communication; every other kernel is compute. Each entry says the library
(`family`), the collective it runs when the name tells (`kind`; `None`: the kind
comes from the collective metadata on the kernel or its issuing CPU op, else from
the name as NCCL spells it — see `tracekit.ingest.collectives`) and where the name was
read. CPU runs have no kernels: there the `gloo:*` execution spans are the
communication (the last row documents them; `tracekit/sql/device_activity.sql`
applies it by event kind).

Users add patterns (they are never removed): `--comm-kernel REGEX` on `analyze`,
`ingest` and `query`, `comm_kernels` in `job.json`, and `comm_kernels` in the
`[tool.tracekit]` table of a `pyproject.toml` — the run folder's when it has one,
else the current directory's. All three add up (`user_patterns`). A user pattern
marks a kernel as communication of family `user`; its kind comes from the
metadata or issuing op, else null. Patterns are part of the cache fingerprint:
changing them ingests the run again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tracekit.errors import TracekitError


@dataclass(frozen=True)
class CommKernel:
    pattern: str  # Python regex, searched in the kernel name
    family: str  # nccl (NCCL and RCCL), deepep, nvshmem, symm_mem, custom_all_reduce …
    kind: str | None  # canonical collective, or None: from metadata / issuing op / NCCL name
    source: str  # where this name was read


TABLE: tuple[CommKernel, ...] = (
    CommKernel(
        r"^nccl",
        "nccl",
        None,
        "NVIDIA/nccl src/device (ncclKernel_<Coll>_<Algo>_<Proto>_<Op>_<type> up to 2.18, "
        "ncclDevKernel_<Coll>… from 2.19); ROCm/rccl names every collective "
        "ncclDevKernel_Generic and puts the operation in the metadata args only",
    ),
    CommKernel(
        r"^msccl",
        "nccl",
        None,
        "ROCm/rccl src/device/msccl (mscclKernel_<Op>_<type>…, MSCCL algorithms in RCCL)",
    ),
    CommKernel(
        r"deep_ep::(?:internode_ll|internode|intranode)::(?:dispatch|combine)\b",
        "deepep",
        "all_to_all",
        "deepseek-ai/DeepEP csrc/kernels/{intranode,internode,internode_ll}.cu: MoE token "
        "dispatch / combine (NVLink, RDMA via NVSHMEM, low-latency)",
    ),
    CommKernel(
        r"deep_ep::(?:internode|intranode)::(?:cached_)?notify",
        "deepep",
        "all_to_all",
        "deepseek-ai/DeepEP: notify_dispatch / cached_notify exchange per-rank token counts",
    ),
    CommKernel(
        r"\bep::(?:internode_ll|internode|intranode)::(?:dispatch|combine|notify|cached_notify)",
        "deepep",
        "all_to_all",
        "DeepEP forks and ports (other outer namespaces: …ep::internode::dispatch<…>)",
    ),
    CommKernel(
        r"(?i)nvshmem",
        "nvshmem",
        None,
        "NVIDIA NVSHMEM: nvshmemx_*_on_stream launches kernels named nvshmemi_…",
    ),
    CommKernel(
        r"\ballToAllV(?:_2d)?\b",
        "nvshmem",
        "all_to_all",
        "pytorch torch/csrc/distributed/c10d/symm_mem/nvshmem_extension.cu (all_to_all_vdev)",
    ),
    CommKernel(
        r"multimem_all_reduce|multimem_one_shot_all_reduce",
        "symm_mem",
        "all_reduce",
        "pytorch torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu (NVLS multimem)",
    ),
    CommKernel(
        r"multimem_all_gather",
        "symm_mem",
        "all_gather",
        "pytorch c10d symm_mem CUDASymmetricMemoryOps.cu",
    ),
    CommKernel(
        r"(?i)(?:one|two)_?shot_?all_?reduce",
        "symm_mem",
        "all_reduce",
        "pytorch c10d symm_mem (one_shot_all_reduce_kernel, two_shot_all_reduce_kernel); "
        "TensorRT-LLM custom all-reduce (oneShotAllReduceKernel, twoShotAllReduceKernel)",
    ),
    CommKernel(
        r"cross_device_reduce",
        "custom_all_reduce",
        "all_reduce",
        "vllm-project/vllm csrc/custom_all_reduce.cuh and sgl-project/sglang "
        "(cross_device_reduce_1stage / _2stage)",
    ),
    CommKernel(
        r"userbuffers_\w*_rs",
        "userbuffers",
        "reduce_scatter",
        "NVIDIA/TransformerEngine common/comm_gemm_overlap/userbuffers (…_rr_rs, …_rw_rs)",
    ),
    CommKernel(
        r"userbuffers_\w*_ag",
        "userbuffers",
        "all_gather",
        "NVIDIA/TransformerEngine userbuffers (…_rr_ag, …_rw_ag)",
    ),
    CommKernel(
        r"kuserbuffers_(?:pull|push)(?:send|recv)",
        "userbuffers",
        "send_recv",
        "NVIDIA/TransformerEngine userbuffers point-to-point (kuserbuffers_pullsend …)",
    ),
    CommKernel(
        r"userbuffers",
        "userbuffers",
        None,
        "NVIDIA/TransformerEngine userbuffers (other kernels: in-place sums, signals)",
    ),
    CommKernel(
        r"^gloo:",
        "gloo",
        None,
        "CPU runs: torch's gloo:* execution spans on a process group's worker thread "
        "(events.kind = comm_thread; not a kernel)",
    ),
)

USER_FAMILY = "user"
_COMPILED = tuple((re.compile(e.pattern), e) for e in TABLE if e.family != "gloo")


@dataclass(frozen=True)
class Classified:
    family: str
    kind: str | None
    pattern: str


def compile_patterns(patterns: Iterable[str], where: str) -> list[re.Pattern]:
    out = []
    for p in patterns:
        if not isinstance(p, str) or not p:
            raise TracekitError(f"{where}: comm_kernels entries must be non-empty strings")
        try:
            out.append(re.compile(p))
        except re.error as exc:
            raise TracekitError(
                f"{where}: comm kernel pattern {p!r} is not a regex ({exc})"
            ) from exc
    return out


def classify(name: str, user: Iterable[re.Pattern] = ()) -> Classified | None:
    """The table entry a kernel name matches (built-ins first, then the user's), or None."""
    for rx, entry in _COMPILED:
        if rx.search(name):
            return Classified(entry.family, entry.kind, entry.pattern)
    for rx in user:
        if rx.search(name):
            return Classified(USER_FAMILY, None, rx.pattern)
    return None


def pyproject_patterns(root: Path) -> list[str]:
    """`[tool.tracekit].comm_kernels` of the project's pyproject.toml (`tracekit.config`)."""
    from tracekit import config

    f = config.pyproject_for(root)
    value = config.tracekit_table(f).get("comm_kernels", [])
    if not isinstance(value, list):
        raise TracekitError(f"{f}: [tool.tracekit] comm_kernels must be a list of regexes")
    compile_patterns(value, str(f))
    return list(value)


def user_patterns(root: Path, cli: Iterable[str] = (), manifest_patterns: Iterable[str] = ()):
    """The user's patterns in order, deduplicated: --comm-kernel, job.json, pyproject.toml."""
    cli = list(cli)
    compile_patterns(cli, "--comm-kernel")
    seen: dict[str, None] = {}
    for p in (*cli, *manifest_patterns, *pyproject_patterns(root)):
        seen.setdefault(p, None)
    return tuple(seen)
