"""TK-C201 low-model-flops-utilization."""

from __future__ import annotations

from msgspec import to_builtins

from diagnosers.base import pct
from diagnosers.rules.base import Rule
from tracekit.analysis.compute import op_json
from tracekit.analysis.uncounted import describe
from tracekit.model import figures as F
from tracekit.report.schema import known


class LowMfu(Rule):
    """What it detects
    Model FLOPs utilization below 25% (critical below 10%) where the device is busy: the
    counted GEMM/attention/convolution FLOPs run far below the device's peak for their
    dtype, not because the device waits. MFU is of the counted work: where half or more
    of the compute time is GEMM/attention/convolution work whose FLOPs tracekit cannot
    count (graph replays of GEMM kernels, matmul-class ops without a formula —
    uncounted_compute_fraction), a low MFU says little, and the finding is an info note
    with that share instead of a warning. Elementwise, normalization, embedding and
    optimizer time is not uncounted: it has ~zero model FLOPs, so a low MFU there stands.

    Why it matters
    MFU is the fraction of the hardware the model uses; well-tuned training reaches
    35–55%. Slow kernels cost every step, on every rank.

    Example
    MFU 7.9%: GEMMs reach 74 TFLOP/s, 7% of the 989 TFLOP/s bf16 peak.

    Fix
    Compute in bf16 (autocast) or allow TF32, use shapes that are multiples of 64,
    fused/flash attention, torch.compile; check that the kernels are tensor-core ones.
    """

    code = "TK-C201"
    kind = "compute.low_mfu"
    name = "low-model-flops-utilization"
    level = "compute"
    warn = 0.25  # MFU under this
    critical = 0.10
    slow_gemms = 0.40  # GEMM efficiency under which low MFU is the kernels' fault
    good_gemm_efficiency = 0.6  # what well-shaped bf16 GEMMs reach: the impact's target
    mostly_uncounted = 0.5  # uncounted compute share at which MFU cannot judge the run
    raised_when = (
        "MFU < {warn:.0%} (critical < {critical:.0%}) with GEMM efficiency < {slow_gemms:.0%}"
        "; info only when uncounted GEMM/attention compute ≥ {mostly_uncounted:.0%} of "
        "compute time"
    )

    def check(self, ctx):
        c = ctx.compute
        mfu, eff = c.mfu, c.gemm_efficiency
        if mfu is None or mfu >= self.warn or eff is None or eff >= self.slow_gemms:
            return  # high MFU, or low MFU that idle / communication explains (their findings)
        lost = 0.0
        for r in c.ranks:  # the kernels' time now, against the time at a good efficiency
            if r.gemm_efficiency and r.at_peak_ms_per_step:  # known (UNSET and None are falsy)
                at_peak = r.at_peak_ms_per_step
                lost += max(
                    0.0, at_peak / r.gemm_efficiency - at_peak / self.good_gemm_efficiency
                )
        peak_txt = ", ".join(f"{k} {p / 1e12:.0f}" for k, p in c.peak_flops_by_dtype.items())
        unc = c.uncounted_compute_fraction
        if unc is not None and unc >= self.mostly_uncounted:
            yield self.finding(
                "info",
                f"MFU {pct(mfu)} is of the counted work only: {pct(unc)} of compute time is "
                f"GEMM/attention work whose FLOPs tracekit cannot count "
                f"({describe(c.uncounted)}); the counted "
                f"GEMM/attention work runs at {pct(eff)} of its dtype's peak",
                ranks=[r.rank for r in c.ranks if known(r.mfu) is not None],
                measured={
                    F.MFU.key: mfu,
                    F.GEMM_EFFICIENCY.key: eff,
                    F.UNCOUNTED_COMPUTE_FRACTION.key: unc,
                },
                predicted={F.GEMM_EFFICIENCY.key: self.good_gemm_efficiency},
                impact_ms=None,
                remedy="read MFU as a bound on the counted ops; top_uncounted_ops names the "
                "rest (graph replays: profile a few steps without CUDA graphs to count them)",
                details={
                    "top_ops": [op_json(o) for o in c.top_ops[:5]],
                    "top_uncounted_ops": [to_builtins(o) for o in c.uncounted.top_ops[:5]],
                },
            )
            return
        yield self.finding(
            "critical" if mfu < self.critical else "warning",
            f"MFU {pct(mfu)}: the counted GEMM/attention work runs at {pct(eff)} of its "
            f"dtype's peak (TFLOP/s: {peak_txt or '—'})",
            ranks=[r.rank for r in c.ranks if known(r.mfu) is not None and r.mfu < self.warn],
            measured={F.MFU.key: mfu, F.GEMM_EFFICIENCY.key: eff},
            predicted={F.GEMM_EFFICIENCY.key: self.good_gemm_efficiency},
            impact_ms=lost / max(len(c.ranks), 1),
            remedy="bf16 autocast or TF32 for fp32 GEMMs, matmul shapes that are multiples of "
            "64, flash/fused attention, torch.compile; confirm tensor-core kernels in the "
            "top ops",
            details={"top_ops": [op_json(o) for o in c.top_ops[:5]]},
        )

    def candidates(self, ctx, finding):
        """Compute as much faster as the GEMMs would be at `good_gemm_efficiency`: the
        rule's lost time taken from each rank's compute."""
        return self.faster_compute(ctx, finding.impact_ms or 0.0)
