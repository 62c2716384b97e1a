"""TK-M101 memory-near-capacity."""

from __future__ import annotations

from diagnosers.base import gb, pct
from diagnosers.findings import severity
from diagnosers.rules.base import Rule


class MemoryNearCapacity(Rule):
    """What it detects
    Peak reserved device memory of a rank at or above 90% of the device's capacity
    (critical at 97%), from the allocator totals of profile_memory=True.

    Why it matters
    The caching allocator needs headroom: fragmentation or one larger batch turns this
    into an out-of-memory error, and allocator retries slow every step.

    Example
    rank 3 reserves 77.9 of 80.0 GB (97%), 9.4 GB of it unallocated.

    Fix
    Activation checkpointing, sharding optimizer states and gradients (FSDP / ZeRO), a
    smaller micro-batch, or PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when reserved
    far exceeds allocated.
    """

    code = "TK-M101"
    kind = "memory.near_capacity"
    name = "memory-near-capacity"
    level = "memory"
    warn = 0.90  # of the device's capacity
    critical = 0.97
    slack_bytes = 2e9  # reserved but unallocated worth the allocator remedy
    raised_when = "peak reserved ≥ {warn:.0%} of the device (critical ≥ {critical:.0%})"

    def check(self, ctx):
        mem = ctx.memory
        flagged = [
            r for r in mem.ranks
            if r.fraction is not None and severity(r.fraction, self.warn, self.critical)
        ]  # fmt: skip
        if not flagged:
            return
        w = max(flagged, key=lambda r: r.fraction)
        slack = (w.peak_reserved_bytes or 0) - (w.peak_allocated_bytes or 0)
        pred = mem.predicted
        yield self.finding(
            severity(w.fraction, self.warn, self.critical),
            f"rank {w.rank} reserves {gb(w.peak_reserved_bytes)} of "
            f"{gb(w.capacity_bytes)} ({pct(w.fraction)})",
            ranks=[r.rank for r in flagged],
            measured={"peak_fraction": w.fraction, "peak_reserved_bytes": w.peak_reserved_bytes},
            predicted={"total_bytes": pred["total_bytes"]} if pred else None,
            remedy=(
                f"{gb(slack)} of it is reserved but unallocated: "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; "
                if slack > self.slack_bytes
                else ""
            )
            + "activation checkpointing, FSDP/ZeRO sharding of "
            "optimizer states and gradients, or a smaller micro-batch",
        )
