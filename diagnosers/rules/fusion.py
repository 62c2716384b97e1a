"""TK-C205 unfused-kernels."""

from __future__ import annotations

from diagnosers.base import mean, pct
from diagnosers.rules.base import Rule


class Unfused(Rule):
    """What it detects
    Compute time that goes mostly to unfused memory-bound kernels — elementwise, copy,
    cast, norm, reduction, softmax, optimizer — by kernel name: at least half of the
    compute kernels' device time, and at least 25% of the step (critical at 50%), while
    the GEMMs run well (GEMM efficiency not below low MFU's 40%, or unknown). These
    kernels are bound by memory bandwidth, so MFU stays low however well the GEMMs run.

    Why it matters
    Each unfused op reads and writes its tensors to HBM once; a chain of them costs a
    round trip per op where one fused kernel makes one. A faster GEMM library changes
    nothing while they take most of the step.

    Example
    64% of compute time (41.2 ms per step, 52% of the step) is in unfused elementwise,
    copy, cast and norm kernels: vectorized_elementwise_kernel<GeluCUDAKernel> 30.1 ms, …
    (MFU 12%).

    Fix
    Fuse them: torch.compile (Inductor fuses elementwise chains and norms into the
    neighbouring kernels), fused kernels for RMSNorm/LayerNorm, RoPE and the optimizer
    (fused=True / foreach=True AdamW), and fewer dtype casts (keep activations in
    bf16).
    """

    code = "TK-C205"
    kind = "compute.unfused"
    name = "unfused-kernels"
    level = "compute"
    share = 0.5  # of compute kernel time
    gemm_ok = 0.4  # GEMM efficiency below it: low MFU's finding (TK-C201), not this one
    warn = 0.25  # of the step
    critical = 0.50
    raised_when = (
        "unfused elementwise/copy/cast/norm kernels ≥ {share:.0%} of compute kernel time and "
        "≥ {warn:.0%} of the step (critical ≥ {critical:.0%}), GEMM efficiency ≥ "
        "{gemm_ok:.0%} or unknown"
    )

    def check(self, ctx):
        step_ms = ctx.step_ms or 0
        eff = ctx.compute.gemm_efficiency
        if not step_ms or (eff is not None and eff < self.gemm_ok):
            return
        rows = [
            f
            for f in ctx.fusion.values()
            if (f.elementwise_fraction or 0) >= self.share and f.other_ms >= self.warn * step_ms
        ]
        if not rows:
            return
        share = mean(f.elementwise_fraction for f in rows)
        other = mean(f.other_ms for f in rows)
        top = ", ".join(f"{_short(n)} {ms:.1f} ms" for n, ms in rows[0].top)
        mfu = ctx.compute.mfu
        yield self.finding(
            "critical" if other >= self.critical * step_ms else "warning",
            f"{pct(share)} of compute time ({other:.1f} ms per step, {pct(other / step_ms)} of "
            f"the step) is in unfused elementwise, copy, cast and norm kernels: {top}"
            + (f" (MFU {pct(mfu)})" if mfu is not None else ""),
            ranks=[f.rank for f in rows],
            measured={
                "elementwise_fraction": share,
                "elementwise_ms_per_step": other,
            },
            predicted=None,
            remedy="fuse the memory-bound kernels: torch.compile (Inductor fuses elementwise "
            "chains and norms), fused RMSNorm/LayerNorm, RoPE and optimizer kernels "
            "(AdamW fused=True), fewer dtype casts",
        )

    fused_speedup = 2.0  # what fusing a chain of memory-bound kernels wins, conservatively

    def candidates(self, ctx, finding):
        """Those kernels twice as fast: an elementwise chain of k eager ops reads and
        writes its tensors k times, fused once (k ≥ 2 wherever fusion applies)."""
        return [f"fuse={self.fused_speedup:g}"]


def _short(name: str) -> str:
    """A kernel's name without its argument list and namespaces, at most 60 characters."""
    base = name.split("(")[0].replace("void ", "")
    return base if len(base) <= 60 else base[:57] + "…"
