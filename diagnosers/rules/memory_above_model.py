"""TK-M102 memory-above-model."""

from __future__ import annotations

from diagnosers.base import gb
from diagnosers.rules.base import Rule


class MemoryAboveModel(Rule):
    """What it detects
    Peak allocated memory above 1.5× (and 2 GB beyond) what the memory equation predicts
    from job.json: model states 16Ψ (sharded by ZeRO/FSDP, divided by TP and PP) plus
    activations s·b·h·(34 + 5as/h) per layer.

    Why it matters
    Memory the model does not explain is memory you cannot plan with: leaked references,
    extra copies, un-sharded buffers.

    Example
    measured 61.2 GB, the model predicts 28.4 GB (FSDP, Ψ = 7B, 8 ranks).

    Fix
    Look for tensors kept across steps (loss history, hooks), duplicated parameters,
    unsharded modules, and compare with torch.cuda.memory_snapshot().
    """

    code = "TK-M102"
    kind = "memory.over_prediction"
    name = "memory-above-model"
    level = "memory"
    ratio = 1.5  # measured ÷ predicted
    beyond_gb = 2.0  # and this far beyond it
    raised_when = "peak allocated > {ratio:g}× the memory equation and {beyond_gb:g} GB beyond it"

    def check(self, ctx):
        mem = ctx.memory
        over, pred = mem.measured_over_predicted, mem.predicted
        if not (over and over > self.ratio):
            return
        peak = mem.peak_allocated_bytes
        if peak - pred["total_bytes"] <= self.beyond_gb * 1e9:
            return
        yield self.finding(
            "warning",
            f"peak allocated {gb(peak)} is {over:.1f}× the {gb(pred['total_bytes'])} "
            "the memory equation predicts",
            ranks=[r.rank for r in mem.ranks],
            measured=peak,
            predicted=pred["total_bytes"],
            remedy="look for tensors kept across steps, unsharded modules or extra copies "
            "(torch.cuda.memory_snapshot())",
        )
