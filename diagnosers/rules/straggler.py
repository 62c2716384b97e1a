"""TK-S402 straggler-rank."""

from __future__ import annotations

from diagnosers.base import pct
from diagnosers.rules.base import Rule
from tracekit.analysis import stragglers
from tracekit.analysis.regions import lag_region


class Straggler(Rule):
    """What it detects
    One rank is charged at least 60% of all the time ranks wait for late peers at matched
    collectives (each wait charged to the last arrival; only waiting no compute hides),
    and that wait costs the others at least 2% of the step. Back-to-back collectives queue
    behind the first, so a rank late once per step is found by the wait it causes, not by
    how often it arrives last. Its cause: a device that starts the collective late once
    issued (compute), a host that issues it late — at the costliest collective, or at
    (almost) every matched one by a little each —, longer compute, else the link. Where
    the lag accrues: the region (record_function range or nn.Module) whose time on that
    rank — device time, CPU time where its host is late or the run has no device —
    exceeds the median other rank's the most, narrowed to the child holding most of it,
    named where that excess is at least a quarter of the wait it imposes.

    Why it matters
    Collectives run at the pace of the slowest rank: one straggler slows the whole job.

    Example
    rank 7 makes the others wait 4.9 ms per step (76% of all waiting for peers); it issues
    its costliest collective 4.7 ms after the median rank (its host is late); its lag
    accrues in region "## forward ## / layers.3": 9.1 ms of CPU time per step, 4.6 ms more
    than the median other rank's.

    Fix
    Check that rank's GPU (clocks, throttling, ECC), its data (sequence lengths, loader),
    and the balance of the work assigned to it.
    """

    code = "TK-S402"
    kind = "scaling.straggler"
    name = "straggler-rank"
    level = "scaling"
    share = stragglers.SHARE  # of all imposed wait
    cost = stragglers.COST  # of the step
    critical = 0.10  # of the step: a critical straggler
    explains = 0.25  # of the wait it imposes: a lateness that explains it
    consistent = 0.9  # of the matched instances: a host late at (almost) every collective
    raised_when = (
        "one rank charged ≥ {share:.0%} of the wait for late peers, costing the others ≥ "
        "{cost:.0%} of the step, the worst in more than half of the steps; impact: the wait "
        "it imposes"
    )

    def check(self, ctx):
        step_ms = ctx.step_ms or 0
        for f in ctx.stragglers.found:
            cost_ms = f.imposed_ms_per_step
            why, remedy, host_side = self._why(f, cost_ms)
            lag = self._where(ctx, f.rank, host_side)
            if lag is not None and lag.excess_ms < self.explains * cost_ms:
                lag = None  # a region explaining little of the wait is not where it accrues
            n, worst = f.steps, f.steps_worst
            every = (
                "one step in the window: whether it is late every step is unknown"
                if n == 1
                else f"it is the worst in every one of {n} steps"
                if n and worst == n
                else f"it is the worst in {worst} of {n} steps (by step: "
                + ", ".join(map(str, f.worst_by_step))
                + ")"
            )
            yield self.finding(
                "critical" if cost_ms >= self.critical * step_ms else "warning",
                f"rank {f.rank} makes the others wait {cost_ms:.1f} ms per step "
                f"({pct(f.share)} of all waiting for peers); {why}; {every}"
                + (
                    f'; its lag accrues in region "{lag.name}": {lag.rank_ms:.1f} ms of '
                    f"{'CPU' if lag.basis == 'cpu' else 'device'} time per step, "
                    f"{lag.excess_ms:.1f} ms more than the median other rank's"
                    if lag
                    else ""
                ),
                ranks=[f.rank],
                measured={
                    "imposed_wait_ms_per_step": cost_ms,
                    "wait_share": f.share,
                    "compute_excess_ms": f.compute_excess_ms,
                    "host_late_ms": f.host_late_ms,
                    "device_late_ms": f.device_late_ms,
                    "step_start_late_ms": f.step_start_late_ms,
                    "host_late_median_ms": getattr(f, "host_late_median_ms", None),
                    "host_late_share": getattr(f, "host_late_share", None),
                    "steps_worst": worst,
                    "steps": n,
                    **self._lag_facts(lag),
                },
                predicted={"imposed_wait_ms_per_step": 0.0},
                impact_ms=cost_ms,
                remedy=remedy,
            )

    def _why(self, f, cost_ms: float) -> tuple[str, str, bool]:
        """(why, the remedy, whether the lag is its host's)."""
        comp_x, host, dev = f.compute_excess_ms, f.host_late_ms, f.device_late_ms
        start = f.step_start_late_ms
        enough = self.explains * cost_ms
        if dev is not None and host is not None and dev > host and dev >= enough:
            return (
                f"at its costliest collective its device starts {dev:.1f} ms later than the "
                "median rank's once issued (its device is busy: compute"
                + (f", {comp_x:.1f} ms more per step" if comp_x and comp_x > 0 else "")
                + ")",
                "its device works longer: check that rank's GPU (clocks, throttling, ECC "
                "errors) and the work assigned to it (uneven sharding, sequence lengths, "
                "pipeline stage balance)",
                False,
            )
        if host is not None and host >= enough:
            return (
                f"it issues its costliest collective {host:.1f} ms after the median rank "
                "(its host is late: data loading, Python, garbage collection, logging)"
                + (
                    f"; its step starts {start:.1f} ms after theirs"
                    if start is not None and start >= enough
                    else ""
                ),
                "its host is late: more data-loader workers or prefetching on that rank, "
                "look for host syncs, logging or checkpointing on it alone, and give its "
                "process its own cores",
                True,
            )
        if self._host_consistently_late(f, enough):
            n, share = f.host_late_instances, f.host_late_share
            every = "all" if share == 1 else f"{share:.0%} of the"
            return (
                f"its host issues {every} {n} matched collectives "
                f"{f.host_late_min_ms:.2f}–{f.host_late_max_ms:.2f} ms after the median "
                f"other rank (median {f.host_late_median_ms:.2f} ms: its host is late — data "
                "loading, Python, garbage collection, logging)"
                + (
                    f"; its step starts {start:.1f} ms after theirs"
                    if start is not None and start > 0
                    else ""
                ),
                "its host is late: more data-loader workers or prefetching on that rank, "
                "look for host syncs, logging or checkpointing on it alone, and give its "
                "process its own cores",
                True,
            )
        if comp_x is not None and comp_x >= enough:
            return (
                f"its compute takes {comp_x:.1f} ms longer per step than the median rank's",
                "its compute is slower: check that rank's GPU (clocks, throttling, ECC "
                "errors) and the work assigned to it (uneven sharding, sequence lengths, "
                "pipeline stage balance)",
                False,
            )
        return (
            "neither its host nor its compute is visibly later: look at a slower link or NIC "
            "on that rank",
            "check that rank's links (nvidia-smi topo -m, NIC counters) and its GPU",
            False,
        )

    @staticmethod
    def _where(ctx, rank: int, host_side: bool):
        """The region where the rank's lag accrues (`tracekit.analysis.regions.lag_region`): by CPU
        time where its host is late or the run has no device, else by device time; None
        when no region exceeds the median or regions cannot be read."""
        try:
            return lag_region(ctx, rank, "cpu" if ctx.cpu or host_side else "device")
        except Exception:  # the finding stands without it
            return None

    @staticmethod
    def _lag_facts(lag) -> dict:
        if lag is None:
            return {"lag_region": None}
        return {
            "lag_region": list(lag.path),
            "lag_region_kind": lag.kind,
            "lag_region_basis": lag.basis,
            "lag_region_ms_per_step": lag.rank_ms,
            "lag_region_median_ms_per_step": lag.median_ms,
            "lag_region_excess_ms_per_step": lag.excess_ms,
        }

    def candidates(self, ctx, finding):
        return ["no-straggler"]

    def _host_consistently_late(self, f, enough: float) -> bool:
        """Its host issues (almost) every matched collective after the median other rank,
        later than its device adds once issued, and that lateness at each collective it
        arrives last at adds up to a share of the wait it imposes."""
        share, med = getattr(f, "host_late_share", None), getattr(f, "host_late_median_ms", None)
        per_step = getattr(f, "late_instances_per_step", 0.0)
        if share is None or med is None or getattr(f, "host_late_instances", 0) < 3:
            return False
        dev = f.device_late_ms
        return (
            share >= self.consistent
            and med > 0
            and (dev is None or med > dev)
            and med * max(per_step, 1.0) >= enough
        )
