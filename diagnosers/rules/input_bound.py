"""TK-C204 input-bound."""

from __future__ import annotations

from diagnosers.base import mean, pct
from diagnosers.findings import severity
from diagnosers.rules.base import Rule


class InputBound(Rule):
    """What it detects
    The device idle while the host fetches the next batch — inside the data loader's
    spans (`enumerate(DataLoader)#…__next__`, PyTorch's record_function around each
    fetch) — at 10% of the step or more (critical at 25%). That idle time is the input
    pipeline's, not the launch overhead's: the host-bound rule leaves it out.

    Why it matters
    The GPU waits for data decoding and augmentation on the host: a faster GPU, CUDA
    graphs or fused kernels change nothing while it does.

    Example
    the device is idle 59.3 ms of each 174.9 ms step (34%) while the data loader fetches
    the next batch (69.3 ms per step in `_SingleProcessDataLoaderIter.__next__`).

    Fix
    DataLoader(num_workers>0 — one per spare core —, pin_memory=True,
    prefetch_factor≥2, persistent_workers=True); decode on the GPU (DALI, torchvision.io
    decode_jpeg on device) or move heavy augmentation there.
    """

    code = "TK-C204"
    kind = "compute.input_bound"
    name = "input-bound"
    level = "compute"
    warn = 0.10  # of the step
    critical = 0.25
    raised_when = (
        "device idle inside the data loader's fetches ≥ {warn:.0%} of the step (critical ≥ "
        "{critical:.0%}); impact: what `no-input-wait` saves in the step model's replay"
    )

    def check(self, ctx):
        rows = []
        step = ctx.step_ms or 0  # a mean over ranks: once, not per rank
        for r in ctx.input_wait.values():
            if step and r.idle_ms / step >= self.warn:
                rows.append(r)
        if not rows:
            return
        step_ms = ctx.step_ms
        idle = mean(r.idle_ms for r in rows)
        loader = mean(r.loader_ms for r in rows)
        frac = idle / step_ms
        # the estimate until the replay (`candidates`): the idle inside the loader,
        # bounded by the step's device idle
        bound = mean(
            min(r.idle_ms, r.step_idle_ms) if r.step_idle_ms is not None else r.idle_ms
            for r in rows
        )
        yield self.finding(
            severity(frac, self.warn, self.critical) or "warning",
            f"the device is idle {idle:.1f} ms of each {step_ms:.1f} ms step ({pct(frac)}) "
            f"while the data loader fetches the next batch ({loader:.1f} ms per step in its "
            "fetches)",
            ranks=[r.rank for r in rows],
            measured={
                "input_idle_ms_per_step": idle,
                "input_bound_fraction": frac,
                "loader_ms_per_step": loader,
            },
            predicted={"input_idle_ms_per_step": 0.0},
            impact_ms=bound,
            remedy="the host prepares each batch while the device waits: "
            "DataLoader(num_workers>0 (a worker per spare core), pin_memory=True, "
            "prefetch_factor≥2, persistent_workers=True), or decode and augment on the GPU "
            "(DALI, torchvision.io.decode_jpeg on device)",
        )

    def candidates(self, ctx, finding):
        return ["no-input-wait"]
