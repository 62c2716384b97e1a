"""Findings and the fixed vocabulary of kinds, each with a stable code and its docs.

Like Ruff's rules: a kind names the problem (never the fix), has a code that never
changes, a status and the version it arrived in, and docs in fixed sections — what it
detects, why it matters, an example, the fix. `tracekit explain CODE` prints them; a
test checks every kind has all four sections.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITIES = ("info", "warning", "critical")
LEVELS = ("memory", "compute", "communication", "scaling")


@dataclass(frozen=True)
class Kind:
    kind: str
    code: str
    name: str
    level: str
    detects: str
    why: str
    example: str
    fix: str
    status: str = "stable"
    since: str = "0.1.0"

    def explain(self) -> str:
        return (
            f"{self.code} {self.name} ({self.kind}) — {self.status}, since {self.since}\n\n"
            f"What it detects\n  {self.detects}\n\nWhy it matters\n  {self.why}\n\n"
            f"Example\n  {self.example}\n\nFix\n  {self.fix}\n"
        )


KINDS: dict[str, Kind] = {
    k.kind: k
    for k in [
        Kind(
            "memory.near_capacity",
            "TK-M101",
            "memory-near-capacity",
            "memory",
            "Peak reserved device memory of a rank at or above 90% of the device's capacity "
            "(critical at 97%), from the allocator totals of profile_memory=True.",
            "The caching allocator needs headroom: fragmentation or one larger batch turns "
            "this into an out-of-memory error, and allocator retries slow every step.",
            "rank 3 reserves 77.9 of 80.0 GB (97%), 9.4 GB of it unallocated.",
            "Activation checkpointing, sharding optimizer states and gradients (FSDP / "
            "ZeRO), a smaller micro-batch, or PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "when reserved far exceeds allocated.",
        ),
        Kind(
            "memory.over_prediction",
            "TK-M102",
            "memory-above-model",
            "memory",
            "Peak allocated memory above 1.5× (and 2 GB beyond) what the memory equation "
            "predicts from job.json: model states 16Ψ (sharded by ZeRO/FSDP, divided by TP "
            "and PP) plus activations s·b·h·(34 + 5as/h) per layer.",
            "Memory the model does not explain is memory you cannot plan with: leaked "
            "references, extra copies, un-sharded buffers.",
            "measured 61.2 GB, the model predicts 28.4 GB (FSDP, Ψ = 7B, 8 ranks).",
            "Look for tensors kept across steps (loss history, hooks), duplicated "
            "parameters, unsharded modules, and compare with torch.cuda.memory_snapshot().",
        ),
        Kind(
            "compute.low_mfu",
            "TK-C201",
            "low-model-flops-utilization",
            "compute",
            "Model FLOPs utilization below 25% (critical below 10%) where the device is "
            "busy: the counted GEMM/attention/convolution FLOPs run far below the device's "
            "peak for their dtype, not because the device waits.",
            "MFU is the fraction of the hardware the model uses; well-tuned training reaches "
            "35–55%. Slow kernels cost every step, on every rank.",
            "MFU 7.9%: GEMMs reach 74 TFLOP/s, 7% of the 989 TFLOP/s bf16 peak.",
            "Compute in bf16 (autocast) or allow TF32, use shapes that are multiples of 64, "
            "fused/flash attention, torch.compile; check that the kernels are tensor-core ones.",
        ),
        Kind(
            "compute.host_bound",
            "TK-C202",
            "host-bound-launch-gaps",
            "compute",
            "Device idle time caused by the host: gaps in device activity where the next "
            "kernel was launched only after the previous work had finished — 10% of the step "
            "or more (critical at 25%).",
            "The GPU waits for Python, the dispatcher or a synchronization; buying faster "
            "GPUs changes nothing.",
            "18% of each step (41 ms) the GPU waits for launches: 2,310 gaps, median kernel "
            "12 µs against a median launch interval of 31 µs.",
            "CUDA graphs (torch.compile mode='reduce-overhead'), fusing small ops, a larger "
            "batch per launch, removing host syncs (.item(), .cpu(), cudaStreamSynchronize) "
            "from the step, faster data loading.",
        ),
        Kind(
            "compute.idle",
            "TK-C203",
            "device-idle",
            "compute",
            "Device idle time, at 25% of the step or more, that neither host-bound launches "
            "nor a pipeline bubble explains.",
            "Idle devices are paid for and do nothing.",
            "the device is idle 31% of the step; 4% of it is host-bound.",
            "Look at the timeline for waits on the data loader, checkpointing, evaluation or "
            "cross-rank synchronization inside the step.",
        ),
        Kind(
            "communication.exposed",
            "TK-N301",
            "exposed-communication",
            "communication",
            "Exposed communication (exposed_comm_fraction: the union of communication, and "
            "on CPU runs host waits for it, that no compute hides) that no other finding "
            "accounts for — less the wait a straggler imposes (scaling.straggler), the "
            "excess of slow collectives (communication.slow_collective) and a pipeline's "
            "send/recv (scaling.pipeline_bubble) — at 10% of the step or more (critical "
            "at 25%). Waiting for peers that no single rank causes stays here.",
            "Exposed communication adds straight to the step time and grows with scale.",
            "communication is exposed 24% of the step, mostly all_reduce; 24% (88 ms) is not "
            "explained by a straggler, a slow collective or a pipeline.",
            "DDP: smaller bucket_cap_mb so buckets start during backward, check "
            "find_unused_parameters; FSDP: forward/backward prefetch; TP: sequence "
            "parallelism or async TP; fewer, larger collectives.",
        ),
        Kind(
            "communication.slow_collective",
            "TK-N302",
            "slow-collective",
            "communication",
            "A collective whose measured bus bandwidth (nccl-tests definition, shortest "
            "duration across matched ranks) is below half of what the α-β model predicts "
            "for its size and group — in a node, or between nodes when the group spans "
            "them — and which takes at least 1% of the step. Its impact is the excess over "
            "the prediction where the collective is exposed.",
            "A slow collective means a slow link, a bad topology or protocol choice, or "
            "contention — the network is not delivering what it should.",
            "all_reduce 256 MB × 8 ranks: 61 GB/s bus bandwidth against 420 predicted.",
            "Check NCCL_ALGO/NCCL_PROTO and topology (nvidia-smi topo -m), NIC and NVLink "
            "health, other jobs on the fabric; run nccl-tests on these nodes.",
        ),
        Kind(
            "scaling.pipeline_bubble",
            "TK-S401",
            "pipeline-bubble",
            "scaling",
            "Pipeline stages idle (no compute) for 20% of the step or more; measured per "
            "stage beside the schedule's formula (P−1)/(M+P−1), or (P−1)/(V·M+P−1) "
            "interleaved, and beside the modeled bubble (the schedule run with the measured "
            "stage times, plus the time outside the pipeline), with the gap split into "
            "stage imbalance, host time, transfers and time outside the pipeline.",
            "The bubble is time every pipeline rank pays; it shrinks with more microbatches "
            "per step or virtual stages.",
            "bubble 43% on 4 stages with 4 microbatches (formula 43%).",
            "Use M ≥ 4·P microbatches, an interleaved schedule (V > 1), or zero-bubble "
            "schedules; balance layers across stages when the measured bubble exceeds the "
            "formula.",
        ),
        Kind(
            "scaling.straggler",
            "TK-S402",
            "straggler-rank",
            "scaling",
            "One rank is charged at least 60% of all the time ranks wait for late peers at "
            "matched collectives (each wait charged to the last arrival; only waiting no "
            "compute hides), and that wait costs the others at least 2% of the step. Back-"
            "to-back collectives queue behind the first, so a rank late once per step is "
            "found by the wait it causes, not by how often it arrives last.",
            "Collectives run at the pace of the slowest rank: one straggler slows the whole job.",
            "rank 7 makes the others wait 4.9 ms per step (76% of all waiting for peers); it "
            "issues its costliest collective 4.7 ms after the median rank (its host is late).",
            "Check that rank's GPU (clocks, throttling, ECC), its data (sequence lengths, "
            "loader), and the balance of the work assigned to it.",
        ),
        Kind(
            "scaling.poor_projection",
            "TK-S403",
            "poor-scaling-projection",
            "scaling",
            "Weak-scaling efficiency projected below 60% at twice the world size, from the "
            "α-β model and the measured compute, when no communication finding already "
            "explains it.",
            "A job that scales badly wastes the GPUs added to it.",
            "at 2× ranks the step would take 1.9× longer (efficiency 53%).",
            "Overlap communication, shard differently (FSDP hybrid sharding, TP within a "
            "node), raise the per-rank batch.",
        ),
        Kind(
            "diagnoser.error",
            "TK-E001",
            "diagnoser-error",
            "scaling",
            "A diagnoser raised an exception on this run.",
            "Its level's figures are missing; the rest of the report stands.",
            "communication: KeyError 'bytes'.",
            "Report it with `tracekit --debug analyze`; the traceback shows where.",
        ),
    ]
}
CODES = {k.code: k for k in KINDS.values()}


@dataclass
class Finding:
    kind: str
    severity: str
    title: str
    ranks: list[int]
    measured: Any = None
    predicted: Any = None
    impact_ms: float | None = None
    remedy: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")

    @property
    def code(self) -> str:
        return KINDS[self.kind].code

    @property
    def level(self) -> str:
        return KINDS[self.kind].level

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {
            "kind": self.kind,
            "code": self.code,
            "level": self.level,
            "severity": self.severity,
            "title": self.title,
            "ranks": self.ranks,
            "measured": d["measured"],
            "predicted": d["predicted"],
            "impact_ms": self.impact_ms,
            "remedy": self.remedy,
            "details": d["details"],
        }


def lookup(code_or_kind: str) -> Kind | None:
    key = code_or_kind.strip()
    return (
        CODES.get(key.upper())
        or KINDS.get(key)
        or next((k for k in KINDS.values() if k.name == key), None)
    )
