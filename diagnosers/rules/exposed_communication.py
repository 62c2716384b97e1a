"""TK-N301 exposed-communication."""

from __future__ import annotations

from diagnosers.base import mean, pct
from diagnosers.findings import severity
from diagnosers.rules.base import Rule
from tracekit.analysis.communication import P2P, bare_counts, bucket_sizes, most_exposed
from tracekit.model import figures as F


class ExposedCommunication(Rule):
    """What it detects
    Exposed communication (exposed_comm_fraction: the union of communication, and on CPU
    runs host waits for it, that no compute hides) — less the wait a straggler imposes
    (scaling.straggler) and a pipeline's send/recv (scaling.pipeline_bubble) — at 10% of
    the step or more (critical at 25%). Causes are
    not exclusive: a slow collective that runs with nothing beside it is raised here too
    (overlapping it hides all of it, its slow excess included) while
    communication.slow_collective keeps its own impact, the excess alone. Waiting for
    peers that no single rank causes stays here.

    Why it matters
    Exposed communication adds straight to the step time and grows with scale.

    Example
    communication is exposed 24% of the step, mostly all_reduce; 24% (88 ms) is not
    explained by a straggler, a slow collective or a pipeline.

    Fix
    DDP: smaller bucket_cap_mb so buckets start during backward, check
    find_unused_parameters; FSDP: forward/backward prefetch; TP: sequence parallelism or
    async TP; fewer, larger collectives.
    """

    code = "TK-N301"
    kind = "communication.exposed"
    name = "exposed-communication"
    level = "communication"
    warn = 0.10  # of the step
    critical = 0.25
    mostly_wait = 0.5  # of the unexplained time: the remedy is about ranks arriving late
    # many small all-reduces a step: each pays NCCL's fixed latency (launch, a ring's
    # handshake, ~10-30 µs), so they want coalescing, not smaller buckets
    many_buckets = 32  # per step
    small_bucket_ms = 0.1  # median kernel
    raised_when = (
        "exposed communication no straggler or pipeline explains (slow collectives "
        "included) ≥ {warn:.0%} of the step (critical ≥ {critical:.0%}); impact: what "
        "overlapping its most exposed collectives saves in the step model's replay"
    )
    # the title's claim, and what it says once the replay finds no gain (`refuted`)
    claim = " and overlap with compute would win it: "
    no_gain = "; the replay finds no gain from overlapping it: "
    # the transfer part's claim, and what it is once refuted: time spent in transfer
    hideable = " transfer compute could hide"
    in_transfer = " in transfer"

    def check(self, ctx):
        comm = ctx.communication
        per_rank = comm.ranks
        resid = comm.unexplained_exposed_fraction
        if resid is None:
            return
        # overlap hides the slow excess too, where the collective runs with nothing beside it
        slow_ms = self.bare_slow_ms(ctx)
        steps = [r.step_ms for r in per_rank if getattr(r, "step_ms", None)]
        step_ms = mean(steps) if steps else None
        exposed = mean(r.exposed_comm_fraction for r in ctx.ranks)
        # collectives in flight together each count their own excess: the slow excess
        # overlap would win is at most the exposed time the residual leaves (a 2-rank
        # gloo run on one GPU read 149% of the step)
        exposed_ms = mean(getattr(r, "exposed_ms", None) for r in per_rank)
        if exposed_ms is not None:
            resid_ms = mean(r.residual_ms for r in per_rank) or 0.0
            slow_ms = min(slow_ms, max(exposed_ms - resid_ms, 0.0))
        share = resid + (slow_ms / step_ms if step_ms else 0.0)
        if share < self.warn:
            return
        flagged = [r for r in per_rank if (r.residual_fraction or 0) >= self.warn] or (
            list(per_rank) if slow_ms else []
        )
        tops = [r.top_collective for r in flagged if r.top_collective]
        top = max(tops, key=tops.count) if tops else None
        ms = (mean(r.residual_ms for r in per_rank) or 0.0) + slow_ms
        wait_ms = mean(r.unexplained_wait_ms for r in per_rank) or 0.0
        blind = min(mean(r.unmatched_ms for r in per_rank) or 0.0, max(ms - wait_ms, 0.0))
        parts = []
        if ms - wait_ms - blind - slow_ms >= 0.05 * ms:
            parts.append(f"{ms - wait_ms - blind - slow_ms:.2f} ms{self.hideable}")
        if slow_ms >= 0.05 * ms:
            parts.append(
                f"{slow_ms:.2f} ms the excess of slow collectives (raised as slow collective "
                "too), which overlap would hide as well"
            )
        if blind >= 0.05 * ms:
            parts.append(
                f"{blind:.2f} ms in collectives not matched across ranks (point-to-point, or "
                "peers missing from the run), where transfer and waiting cannot be told apart"
            )
        if wait_ms >= 0.05 * ms:
            parts.append(f"{wait_ms:.2f} ms waiting for peers that no single rank delays")
        yield self.finding(
            severity(share, self.warn, self.critical),
            f"communication is exposed {pct(exposed)} of the step"
            + (f", mostly {top}" if top else "")
            + f"; {pct(share)} ({ms:.2f} ms) is not explained by a straggler or a pipeline"
            + self.claim
            + ", ".join(parts),
            ranks=[r.rank for r in flagged],
            measured={
                F.EXPOSED_COMM_FRACTION.key: exposed,
                F.EXPOSED_TRANSFER_FRACTION.key: mean(
                    r.exposed_transfer_fraction for r in ctx.ranks
                ),
                F.COMM_WAIT_FRACTION.key: mean(r.comm_wait_fraction for r in ctx.ranks),
                F.UNEXPLAINED_EXPOSED_FRACTION.key: resid,
                "overlap_win_ms": ms,
            },
            predicted={F.EXPOSED_COMM_FRACTION.key: 0.0},
            impact_ms=ms,
            remedy=self.remedy(ctx, top, wait_ms > self.mostly_wait * ms),
            details={
                "ranks": comm.attribution(),
                "collectives": most_exposed(ctx.collectives.table),
            },
        )

    def refuted(self, finding):
        """The exposed time is measured and stays (so does the severity, at most warning
        once no candidate wins: `diagnosers.impact.impacts`); the gain overlap would win
        is the replay's to claim, and it found none (a100_sendrecv_2rank: 160.12 ms "overlap
        would win", every overlap replayed saving 0.00 ms). The transfer part loses its
        claim as well: it is time in transfer, not time compute was shown to hide
        (sample-fsdp: "12.04 ms transfer compute could hide" beside overlap:all_gather
        saving 0.00 ms)."""
        title = finding.title.replace(self.claim, self.no_gain, 1)
        return title.replace(f" ms{self.hideable}", f" ms{self.in_transfer}", 1)

    @staticmethod
    def bare_slow_ms(ctx) -> float:
        """The exposed excess of slow collectives (communication.slow_collective's impact)
        that overlap would win as well, per step, mean over ranks: the excess weighted by
        how much of the collective would stay exposed at its predicted speed (its exposed
        transfer beyond the excess ÷ its predicted time, at most 1). A collective with no
        compute beside it stays exposed at any speed: overlap hides its excess too, and
        the time is charged to both findings. One slow only because it is slow (its
        queue spills past the compute it was issued beside) is the bandwidth's alone."""
        comm = ctx.communication
        total = 0.0
        for name in dict.fromkeys(r.name for r in getattr(comm, "slow", [])):
            rows = [r for r in comm.slow if r.name == name]
            predicted = sum((x.predicted_ms or 0) * x.count_per_step for x in rows)
            if not predicted:
                continue
            wins = []
            for pr in comm.ranks:
                own = excess = 0.0
                for x in rows:
                    e = max(
                        ctx.key_ms(x, pr.rank, "exposed_ns")
                        - ctx.key_ms(x, pr.rank, "wait_exposed_ns"),
                        0.0,
                    )
                    extra = max(0.0, x.transfer_ms - (x.predicted_ms or 0))
                    own += e
                    excess += min(extra * x.count_per_step, e)
                wins.append(excess * min(1.0, max(own - excess, 0.0) / predicted))
            total += mean(wins) or 0.0
        return total

    @staticmethod
    def remedy(ctx, top: str | None, mostly_wait: bool) -> str:
        strategy = ctx.manifest.strategy if ctx.manifest else None
        if mostly_wait:
            return (
                "ranks arrive at collectives at different times, each late in turn: look for "
                "uneven work between ranks (data, sequence lengths), host jitter (data loader, "
                "garbage collection, oversubscribed cores) and synchronizations inside the step"
            )
        if top == "all_reduce" and strategy in (None, "ddp", "custom"):
            bare, n = bare_counts(ctx, "all_reduce")
            dur_ms, size = bucket_sizes(ctx, "all_reduce")
            lead = (
                f"{_count(bare)} of {_count(n)} all-reduce buckets per step run with no "
                "compute beside them: "
                if n
                else ""
            )
            if n and not any(r.compute_fraction for r in ctx.ranks):
                return (
                    lead + "no compute runs in the step to hide them behind: communicate "
                    "less (fewer, larger all-reduces; gradient compression; a larger batch "
                    "per all-reduce) or over a faster backend or link"
                )
            if (
                n >= ExposedCommunication.many_buckets
                and dur_ms is not None
                and dur_ms < ExposedCommunication.small_bucket_ms
            ):
                each = f"a median kernel of {dur_ms * 1e3:.0f} µs" + (
                    f" and {size / 2**10:.0f} KiB" if size else ""
                )
                return (
                    lead + f"{_count(n)} all-reduces a step with {each} pay a fixed latency "
                    "each: coalesce them into fewer, larger buckets (DDP: a larger "
                    "bucket_cap_mb, gradient_as_bucket_view=True; FSDP/ZeRO: coalesced "
                    "collectives, larger units) and check that no hook reduces parameters "
                    "one by one"
                )
            return (
                lead + "start reduction during backward with smaller DDP buckets "
                "(bucket_cap_mb), check find_unused_parameters=False and that no hook or "
                "sync holds the buckets until backward ends"
            )
        if top == "all_reduce" and strategy in ("tp", "hybrid"):
            return (
                "tensor parallelism: its all-reduces sit on the critical path of every layer — "
                "sequence parallelism (reduce-scatter + all-gather) or async TP to overlap them "
                "with the matmuls, and keep the TP group inside a node"
            )
        if top in ("all_gather", "reduce_scatter"):
            if ctx.manifest and ctx.manifest.fsdp_prefetch:
                return (
                    "FSDP prefetch is already on: reshard_after_forward=False for the last "
                    "layers, larger FSDP units (fewer, bigger all-gathers), or hybrid sharding "
                    "within a node"
                )
            return (
                "FSDP: enable forward/backward prefetch (set_modules_to_forward_prefetch, "
                "set_modules_to_backward_prefetch), reshard_after_forward=False for the last "
                "layers, or hybrid sharding within a node"
            )
        if top == "all_to_all":
            return "MoE: overlap dispatch/combine with expert compute, or capacity-factor tuning"
        if top in P2P:
            # not a pipeline (a pipeline's send/recv is the bubble's): point-to-point exchange
            return (
                "point-to-point transfers run with nothing beside them: post them earlier "
                "(isend/irecv) and overlap them with independent compute, or batch them"
            )
        return "overlap the collective with independent compute, or issue fewer, larger ones"

    def candidates(self, ctx, finding):
        """Overlap for each of the most exposed collectives (three at most)."""
        rows = (finding.details or {}).get("collectives") or []
        names = [r.get("name") for r in rows if r.get("name")]
        return [f"overlap:{n}" for n in dict.fromkeys(names)][:3]


def _count(x: float) -> str:
    """A count per step: whole where it is, else one decimal (1.8 buckets a step)."""
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"
