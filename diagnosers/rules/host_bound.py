"""TK-C202 host-bound-launch-gaps."""

from __future__ import annotations

from msgspec.structs import replace

from diagnosers.base import mean, pct
from diagnosers.findings import severity
from diagnosers.rules.base import Rule
from tracekit.model import figures as F
from tracekit.report.schema import ComputeRankRow


class HostBound(Rule):
    """What it detects
    Device idle time caused by the host: gaps in device activity where the next kernel was
    launched only after the previous work had finished — 10% of the step or more
    (critical at 25%).

    Why it matters
    The GPU waits for Python, the dispatcher or a synchronization; buying faster GPUs
    changes nothing.

    Example
    18% of each step (41 ms) the GPU waits for launches: 2,310 gaps, median kernel 12 µs
    against a median launch interval of 31 µs.

    Fix
    CUDA graphs (torch.compile mode='reduce-overhead'), fusing small ops, a larger batch
    per launch, removing host syncs (.item(), .cpu(), cudaStreamSynchronize) from the
    step, faster data loading.
    """

    code = "TK-C202"
    kind = "compute.host_bound"
    name = "host-bound-launch-gaps"
    level = "compute"
    warn = 0.10  # of the step
    critical = 0.25
    raised_when = "host-bound gaps ≥ {warn:.0%} of the step (critical ≥ {critical:.0%})"

    def check(self, ctx):
        if ctx.cpu:
            return
        per_rank = [self._less_input(ctx, r) for r in ctx.compute.ranks]
        flagged = [
            r for r in per_rank
            if severity(r.host_bound_fraction or 0, self.warn, self.critical)
        ]  # fmt: skip
        if not flagged:
            return
        frac = mean(r.host_bound_fraction for r in flagged)
        ms = mean(r.host_bound_ms_per_step for r in flagged)
        gaps = mean(r.host_gaps_per_step for r in flagged)
        yield self.finding(
            severity(frac, self.warn, self.critical) or "warning",
            f"the device waits for kernel launches {pct(frac)} of each step ({ms:.1f} ms, "
            f"{gaps:.0f} gaps per step)",
            ranks=[r.rank for r in flagged],
            measured={F.HOST_BOUND_FRACTION.key: frac},
            predicted={F.HOST_BOUND_FRACTION.key: 0.0},
            impact_ms=ms,
            remedy=self.advice(ctx, flagged),
        )

    def candidates(self, ctx, finding):
        return ["no-host-gaps"]

    graph_share = 0.5  # of the flagged ranks' kernels replayed by graph launches: no graph advice

    def advice(self, ctx, flagged) -> str:
        """The remedy: CUDA graphs where the kernels are launched one by one; where they
        already come from graph launches (cudaGraphLaunch / hipGraphLaunch), the launch
        cost that is left and the syncs."""
        kernel = f"median kernel {flagged[0].median_kernel_us or 0:.0f} µs"
        share = self.replayed_share(ctx, [r.rank for r in flagged])
        if share is not None and share >= self.graph_share:
            return (
                f"{kernel}; {share:.0%} of the kernels already replay from graph launches "
                "(cudaGraphLaunch/hipGraphLaunch): the device waits on the host between "
                "replays — remove host syncs and blocking copies (.item(), .cpu(), "
                "cudaStreamSynchronize, a blocking hipMemcpy/cudaMemcpy) between them, "
                "capture more of the step per graph so fewer launches remain, and keep "
                "the per-replay host work (input copies, Python) off the critical path"
            )
        return (
            f"{kernel}: CUDA graphs (torch.compile mode='reduce-overhead'), fuse small ops, "
            "a larger batch per launch, and no host syncs (.item(), .cpu(), "
            "cudaStreamSynchronize) inside the step"
        )

    @staticmethod
    def replayed_share(ctx, ranks: list[int]) -> float | None:
        """The share of these ranks' kernels in the window launched by a graph launch; 0
        where the run has no graph launch (its kernels not counted then: a scan of every
        kernel, 0.07 s at 1,024 ranks)."""
        if not ranks or getattr(ctx, "run", None) is None:
            return None  # facts alone (a rule's test): no trace to ask
        wins = ctx.window_sql()
        launches = (
            "SELECT DISTINCT rank, correlation FROM events WHERE kind = 'runtime' "
            "AND contains(name, 'GraphLaunch')"
        )
        if ctx.run.sql(f"SELECT count(*) FROM ({launches})").fetchone()[0] == 0:
            return 0.0
        rows = ctx.run.sql(
            f"""WITH w AS {wins},
            k AS (SELECT e.rank, e.correlation FROM events e JOIN w ON e.rank = w.rank
                  WHERE e.kind = 'kernel' AND e.ts_ns >= w.start_ns AND e.ts_ns < w.end_ns
                    AND e.rank IN ({", ".join(str(int(r)) for r in ranks)})),
            g AS ({launches})
            SELECT count(*), count(g.correlation) FROM k
            LEFT JOIN g ON g.rank = k.rank AND g.correlation = k.correlation"""
        ).fetchall()
        n, replayed = rows[0]
        return replayed / n if n else None

    @staticmethod
    def _less_input(ctx, row: ComputeRankRow) -> ComputeRankRow:
        """The rank's host-bound gaps less those inside the data loader's fetches: that
        idle is the input pipeline's (compute.input_bound), not the launches'."""
        wait = (getattr(ctx, "input_wait", None) or {}).get(row.rank)
        if wait is None or not wait.host_bound_ms or row.host_bound_ms_per_step is None:
            return row
        ms = max(row.host_bound_ms_per_step - wait.host_bound_ms, 0.0)
        frac = row.host_bound_fraction
        if frac and row.host_bound_ms_per_step:
            frac *= ms / row.host_bound_ms_per_step
        return replace(row, host_bound_ms_per_step=ms, host_bound_fraction=frac)
