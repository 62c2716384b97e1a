"""TK-C206 fp32-matmuls-off-tensor-cores."""

from __future__ import annotations

from diagnosers.base import mean, pct
from diagnosers.rules.base import Rule


class Fp32Matmuls(Rule):
    """What it detects
    fp32 GEMM/attention work on a GPU with TF32 tensor cores that did not use them: the
    counted fp32 FLOPs ran at the fp32 (FMA) peak's class (no TF32 kernel names, no
    allow_tf32 in job.json), and their time — their FLOPs at the fp32 peak ÷ the rank's
    GEMM efficiency — takes at least 10% of the step. Its impact is that time less the
    same work at the same efficiency on TF32's peak, replayed.

    Why it matters
    Ampere and later GPUs run fp32 matmuls 7–8× faster on TF32 tensor cores (H100/H200:
    67 against 495 TFLOP/s dense) and 15× in bf16; PyTorch leaves TF32 off for matmuls
    by default, so an fp32 model runs its GEMMs on the FMA units at a high "MFU" of a
    small peak.

    Example
    fp32 GEMMs take 454 ms of a 484 ms step on an H200 (51 TFLOP/s of its 67 fp32 peak);
    on TF32 tensor cores they would take 61 ms.

    Fix
    `torch.backends.cuda.matmul.allow_tf32 = True` (or
    `torch.set_float32_matmul_precision("high")`) and `torch.backends.cudnn.allow_tf32`,
    or train in bf16 (autocast, or bf16 parameters).
    """

    code = "TK-C206"
    kind = "compute.fp32_matmuls"
    name = "fp32-matmuls-off-tensor-cores"
    level = "compute"
    share = 0.10  # of the step, for the fp32 GEMMs to matter
    raised_when = (
        "fp32 GEMM/attention FLOPs on a GPU with TF32 tensor cores, without TF32, taking "
        "≥ {share:.0%} of the step; impact: their time less the same at TF32's peak"
    )

    def check(self, ctx):
        spec = ctx.spec
        if ctx.cpu or spec is None or not spec.peak("tf32") or not spec.peak("fp32"):
            return
        fp32, tf32 = spec.peak("fp32"), spec.peak("tf32")
        c = ctx.compute
        steps = {r.rank: getattr(r, "step_ms", None) for r in ctx.ranks}
        rows = []
        for r in c.ranks:
            flops = (r.flops_by_dtype or {}).get("fp32")  # UNSET (no counted op) is falsy
            eff, step = r.gemm_efficiency, steps.get(r.rank)
            if not flops or not eff or not step:
                continue
            ms = flops / fp32 * 1e3 / eff  # the kernels' time at the rank's efficiency
            rows.append((r.rank, ms, ms * (1 - fp32 / tf32), ms / step, flops / ms / 1e9))
        if not rows or mean(x[3] for x in rows) < self.share:
            return
        ms, saved = mean(x[1] for x in rows), mean(x[2] for x in rows)
        share, tflops = mean(x[3] for x in rows), mean(x[4] for x in rows)
        yield self.finding(
            "critical" if share >= 0.5 else "warning",
            f"fp32 GEMMs take {ms:.1f} ms per step ({pct(share)} of the step) on the FMA "
            f"units: {tflops:.0f} TFLOP/s of the {fp32 / 1e12:.0f} TFLOP/s fp32 peak; TF32 "
            f"tensor cores peak at {tf32 / 1e12:.0f}"
            + (f", bf16 at {spec.peak('bf16') / 1e12:.0f}" if spec.peak("bf16") else ""),
            ranks=[x[0] for x in rows],
            measured={"fp32_gemm_ms_per_step": ms, "fp32_gemm_share": share},
            predicted={"tf32_gemm_ms_per_step": ms - saved},
            impact_ms=saved,
            remedy="torch.backends.cuda.matmul.allow_tf32 = True (or "
            "torch.set_float32_matmul_precision('high')) and torch.backends.cudnn.allow_tf32, "
            "or train in bf16",
            details={"ranks": [{"rank": x[0], "fp32_gemm_ms": x[1]} for x in rows]},
        )

    def candidates(self, ctx, finding):
        """Compute faster by what TF32 saves."""
        return self.faster_compute(ctx, finding.impact_ms or 0.0)
