"""Who makes the others wait: the wait of every matched collective, charged to the rank
that arrived last.

For each matched instance (every rank of its group present), each rank's wait is the
time from its own start to the last peer's arrival (`collectives.wait_ns`, at most its
duration). That wait is charged to the last rank. Back-to-back collectives on one
stream queue behind the first: a rank late for the lead collective makes the others
wait there, and the queued ones start together on every rank — so the charge, not the
count of last arrivals, finds the straggler. Only the part of a rank's waiting that
nothing hides counts (the rank's exposed wait, `comm_wait_fraction`, shared out over
its waits in proportion), so a wait under compute costs nothing.

A straggler is charged ≥ `SHARE` of all imposed wait, costing ≥ `COST` of the step, and
imposes the most wait in more than half of the steps (ranks late in turn are not
stragglers: their wait stays unexplained, in communication.exposed). Per straggler: the
wait it imposes per step (mean over the other ranks), its share of all imposed wait, the
steps in which it imposed the most, and an explanation: its own compute per step beside
the median rank's, or its idle (host) time beside theirs. The thresholds live
here and the straggler rule (`diagnosers/rules/straggler.py`) reads them: the finding
and the explained wait that the exposure's attribution takes out must agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import TYPE_CHECKING

from tracekit import sql
from tracekit.metrics import windows as W

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts

SHARE = 0.6  # of all imposed wait
COST = 0.02  # of the step


@dataclass(frozen=True)
class Straggler:
    rank: int
    imposed_ms_per_step: float  # wait it imposes per step, mean over the other ranks
    share: float  # of all imposed wait
    steps_worst: int  # steps in which it imposed the most
    steps: int  # steps with any imposed wait
    worst_by_step: list[int]  # the rank imposing the most, step by step
    compute_excess_ms: float | None  # its compute per step − the median rank's
    host_late_ms: float | None  # how much later it issued its costliest collective
    device_late_ms: float | None  # how much later its device started it, once issued
    step_start_late_ms: float | None  # how much later its first step began
    # its issue lateness over every matched instance (not only the costliest): a host
    # late by a little at each of many collectives explains a wait no single one does
    host_late_median_ms: float | None = None  # median over instances
    host_late_min_ms: float | None = None
    host_late_max_ms: float | None = None
    host_late_share: float | None = None  # of matched instances it issued after the median
    host_late_instances: int = 0  # matched instances with issue times on every rank
    late_instances_per_step: float = 0.0  # instances per step at which it arrived last


UNMATCHED = (
    "no collective matched across the analysed ranks with a wait: stragglers are measured "
    "at matched collectives"
)


@dataclass
class Attribution:
    imposed_ms: dict[int, float] = field(default_factory=dict)  # last rank → ms per step
    found: list[Straggler] = field(default_factory=list)
    explained_ms: dict[int, float] = field(default_factory=dict)  # waiting rank → charged
    per_step: dict[int, dict[int, float]] = field(default_factory=dict)  # step → rank → ms
    why: str | None = None  # why stragglers are not measured (None: they are)


def attribute(ctx: Facts) -> Attribution:
    """The run's wait attribution (`ctx.stragglers` caches it)."""
    ranks = [r.rank for r in ctx.ranks]
    if len(ranks) < 2:
        why = f"{len(ranks)} rank analysed: a straggler is measured against its peers"
        return Attribution(why=why)
    rows = ctx.run.sql(
        sql.query(
            "levels.stragglers",
            "waits_by_last_rank",
            rows=W.starting_in("SELECT * FROM collectives", ctx.windows),
        )
    ).fetchall()
    if not rows:
        return Attribution(why=UNMATCHED)
    raw: dict[int, float] = {}
    for rank, _last, _step, wait in rows:
        raw[rank] = raw.get(rank, 0) + wait
    byrank = {r.rank: r for r in ctx.ranks}
    steps = {r.rank: max(r.steps, 1) for r in ctx.ranks}
    # exposed wait per waiting rank (ns over the window), shared over its raw waits
    ratio = {
        r: min(1.0, (byrank[r].comm_wait_ms or 0) * 1e6 / raw[r]) if raw[r] else 0
        for r in raw
        if r in byrank
    }
    n_others = len(ranks) - 1
    imposed: dict[int, float] = {}
    per_step: dict[int, dict[int, float]] = {}
    charged: dict[tuple[int, int], float] = {}  # (waiting rank, last rank) → ms per step
    for rank, last, step, wait in rows:
        if rank not in ratio:
            continue
        ms = wait * ratio[rank] / 1e6 / steps[rank]
        imposed[last] = imposed.get(last, 0) + ms / n_others
        charged[(rank, last)] = charged.get((rank, last), 0) + ms
        per_step.setdefault(step, {})
        per_step[step][last] = per_step[step].get(last, 0) + ms / n_others
    total = sum(imposed.values())
    step_ms = ctx.step_ms or 0
    found = []
    for last, ms in sorted(imposed.items(), key=lambda kv: (-kv[1], kv[0])):
        if total and ms / total >= SHARE and step_ms and ms >= COST * step_ms:
            worst = [max(v, key=v.get) for _s, v in sorted(per_step.items()) if v]
            if len(worst) >= 2 and 2 * sum(w == last for w in worst) <= len(worst):
                continue  # late in one step, not the next: ranks take turns, no straggler
            found.append(
                Straggler(
                    rank=last,
                    imposed_ms_per_step=ms,
                    share=ms / total,
                    steps_worst=sum(w == last for w in worst),
                    steps=len(worst),
                    worst_by_step=worst,
                    **_explain(ctx, last),
                )
            )
    names = {f.rank for f in found}
    explained: dict[int, float] = {}
    for (rank, last), ms in charged.items():
        if last in names:
            explained[rank] = explained.get(rank, 0) + ms
    return Attribution(imposed, found, explained, per_step, None if imposed else UNMATCHED)


def _explain(ctx: Facts, rank: int) -> dict:
    """Why `rank` is late: at the instance where it imposed the most wait, how much later
    than the median other rank it issued the collective (host) and how much longer its
    device took to start it once issued (device busy: compute); its compute per step
    beside the median rank's; how much later its step began."""
    compute = {r.rank: r.per_step_ms(r.compute_fraction) for r in ctx.ranks}
    mine = compute.get(rank)
    others = [v for k, v in compute.items() if k != rank and v is not None]
    out = {
        "compute_excess_ms": mine - median(others) if mine is not None and others else None,
        "host_late_ms": None,
        "device_late_ms": None,
        "step_start_late_ms": None,
    }
    rows_ = W.starting_in("SELECT * FROM collectives", ctx.windows)
    late = ctx.run.sql(
        sql.query("levels.stragglers", "issue_lateness", rows=rows_), params={"rank": rank}
    ).fetchall()
    if late:
        ms = [ns / 1e6 for ns, _ in late]
        steps = max(next((r.steps for r in ctx.ranks if r.rank == rank), 1), 1)
        out |= {
            "host_late_median_ms": median(ms),
            "host_late_min_ms": min(ms),
            "host_late_max_ms": max(ms),
            "host_late_share": sum(m > 0 for m in ms) / len(ms),
            "host_late_instances": len(ms),
            "late_instances_per_step": sum(bool(last) for _, last in late) / steps,
        }
    lead = ctx.run.sql(
        sql.query(
            "levels.stragglers",
            "costliest_instance",
            rows=W.starting_in("SELECT * FROM collectives", ctx.windows),
        ),
        params={"rank": rank},
    ).fetchall()
    if lead:
        rows = ctx.run.sql(
            sql.query("levels.stragglers", "instance_issue_times"), params={"key": lead[0][0]}
        ).fetchall()
        me = [(i, t) for r, i, t in rows if r == rank]
        peers = [(i, t) for r, i, t in rows if r != rank]
        if me and peers and me[0][0] is not None and all(i is not None for i, _ in peers):
            (mi, mt), med_i = me[0], median(i for i, _ in peers)
            out["host_late_ms"] = (mi - med_i) / 1e6
            out["device_late_ms"] = ((mt - mi) - median(t - i for i, t in peers)) / 1e6
    starts = dict(ctx.run.sql(sql.query("levels.stragglers", "first_step_start")).fetchall())
    if rank in starts and len(starts) > 1:
        out["step_start_late_ms"] = (
            starts[rank] - median(v for k, v in starts.items() if k != rank)
        ) / 1e6
    return out
