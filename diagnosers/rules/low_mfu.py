"""TK-C201 low-model-flops-utilization."""

from __future__ import annotations

from diagnosers.base import pct
from diagnosers.rules.base import Rule


class LowMfu(Rule):
    """What it detects
    Model FLOPs utilization below 25% (critical below 10%) where the device is busy: the
    counted GEMM/attention/convolution FLOPs run far below the device's peak for their
    dtype, not because the device waits.

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
    raised_when = (
        "MFU < {warn:.0%} (critical < {critical:.0%}) with GEMM efficiency < {slow_gemms:.0%}"
    )

    def check(self, ctx):
        c = ctx.compute
        mfu, eff = c.mfu, c.gemm_efficiency
        if mfu is None or mfu >= self.warn or eff is None or eff >= self.slow_gemms:
            return  # high MFU, or low MFU that idle / communication explains (their findings)
        lost = 0.0
        for r in c.ranks:  # the kernels' time now, against the time at a good efficiency
            if r.get("gemm_efficiency") and r.get("at_peak_ms_per_step"):
                at_peak = r["at_peak_ms_per_step"]
                lost += max(
                    0.0, at_peak / r["gemm_efficiency"] - at_peak / self.good_gemm_efficiency
                )
        peak_txt = ", ".join(f"{k} {p / 1e12:.0f}" for k, p in c.peak_flops_by_dtype.items())
        yield self.finding(
            "critical" if mfu < self.critical else "warning",
            f"MFU {pct(mfu)}: the counted GEMM/attention work runs at {pct(eff)} of its "
            f"dtype's peak (TFLOP/s: {peak_txt or '—'})",
            ranks=[r["rank"] for r in c.ranks if r.get("mfu") is not None and r["mfu"] < self.warn],
            measured={"mfu": mfu, "gemm_efficiency": eff},
            predicted={"gemm_efficiency": self.good_gemm_efficiency},
            impact_ms=lost / max(len(c.ranks), 1),
            remedy="bf16 autocast or TF32 for fp32 GEMMs, matmul shapes that are multiples of "
            "64, flash/fused attention, torch.compile; confirm tensor-core kernels in the "
            "top ops",
            details={"top_ops": c.top_ops[:5]},
        )
