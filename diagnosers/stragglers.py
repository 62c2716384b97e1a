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

A straggler is charged ≥ 60% of all imposed wait, costing ≥ 2% of the step, and imposes
the most wait in more than half of the steps (ranks late in turn are not stragglers:
their wait stays unexplained, in communication.exposed). Per straggler: the wait it
imposes per step (mean over the other ranks), its share of all imposed wait, the steps
in which it imposed the most, and an explanation: its own
compute per step beside the median rank's, or its idle (host) time beside theirs.
"""

from __future__ import annotations

from statistics import median

from diagnosers.context import Context

SHARE = 0.6  # of all imposed wait
COST = 0.02  # of the step


def attribute(ctx: Context) -> dict:
    if "stragglers" in ctx.metrics:
        return ctx.metrics["stragglers"]
    out = _attribute(ctx)
    ctx.metrics["stragglers"] = out
    return out


def _attribute(ctx: Context) -> dict:
    ranks = [r["rank"] for r in ctx.ranks]
    empty = {"imposed_ms": {}, "found": [], "explained_ms": {}, "per_step": {}}
    if len(ranks) < 2:
        return empty
    rows = ctx.run.sql(f"""
        WITH w AS {ctx.window_sql()},
        c AS (
            SELECT c.rank, c.instance_key, least(c.wait_ns, c.dur_ns) AS wait_ns, c.ts_ns
            FROM collectives c JOIN w ON c.rank = w.rank
            WHERE c.ts_ns >= w.start_ns AND c.ts_ns < w.end_ns
              AND c.instance_key IS NOT NULL AND c.wait_ns IS NOT NULL
              AND c.matched
        ),
        st AS (SELECT rank, step, ts_ns, end_ns FROM steps)
        SELECT c.rank, i.last_rank, coalesce(st.step, -1) AS step, sum(c.wait_ns)
        FROM c JOIN collective_instances i USING (instance_key)
        LEFT JOIN st ON st.rank = c.rank AND c.ts_ns >= st.ts_ns AND c.ts_ns < st.end_ns
        WHERE c.rank <> i.last_rank AND c.wait_ns > 0
        GROUP BY ALL""").fetchall()
    if not rows:
        return empty
    raw: dict[int, float] = {}
    for rank, _last, _step, wait in rows:
        raw[rank] = raw.get(rank, 0) + wait
    byrank = {r["rank"]: r for r in ctx.ranks}
    steps = {r["rank"]: max(r["steps"], 1) for r in ctx.ranks}
    # exposed wait per waiting rank (ns over the window), shared over its raw waits
    ratio = {
        r: min(1.0, (byrank[r].get("comm_wait_ms") or 0) * 1e6 / raw[r]) if raw[r] else 0
        for r in raw
        if r in byrank
    }
    n_others = len(ranks) - 1
    imposed: dict[int, float] = {}  # last rank → ms per step, mean over the other ranks
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
    for last, ms in sorted(imposed.items(), key=lambda kv: -kv[1]):
        if total and ms / total >= SHARE and step_ms and ms >= COST * step_ms:
            worst = [max(v, key=v.get) for _s, v in sorted(per_step.items()) if v]
            if len(worst) >= 2 and 2 * sum(w == last for w in worst) <= len(worst):
                continue  # late in one step, not the next: ranks take turns, no straggler
            found.append(
                {
                    "rank": last,
                    "imposed_ms_per_step": ms,
                    "share": ms / total,
                    "steps_worst": sum(w == last for w in worst),
                    "steps": len(worst),
                    "worst_by_step": worst,
                    **_explain(ctx, last),
                }
            )
    names = {f["rank"] for f in found}
    explained = {}
    for (rank, last), ms in charged.items():
        if last in names:
            explained[rank] = explained.get(rank, 0) + ms
    return {
        "imposed_ms": imposed,
        "found": found,
        "explained_ms": explained,  # waiting rank → its exposed wait charged to stragglers
        "per_step": per_step,
    }


def _per_step_ms(r: dict, key: str) -> float | None:
    v = r.get(key)
    return None if v is None else v * (r["step_time_ms"] or r["window_ms"])


def _explain(ctx: Context, rank: int) -> dict:
    """Why `rank` is late: at the instance where it imposed the most wait, how much later
    than the median other rank it issued the collective (host) and how much longer its
    device took to start it once issued (device busy: compute); its compute per step
    beside the median rank's; how much later its step began."""

    def excess(key: str) -> float | None:
        vals = {r["rank"]: _per_step_ms(r, key) for r in ctx.ranks}
        mine = vals.get(rank)
        others = [v for k, v in vals.items() if k != rank and v is not None]
        return mine - median(others) if mine is not None and others else None

    out = {
        "compute_excess_ms": excess("compute_fraction"),
        "host_late_ms": None,
        "device_late_ms": None,
        "step_start_late_ms": None,
    }
    lead = ctx.run.sql(f"""
        WITH w AS {ctx.window_sql()},
        c AS (SELECT c.* FROM collectives c JOIN w ON c.rank = w.rank
              WHERE c.ts_ns >= w.start_ns AND c.ts_ns < w.end_ns
                AND c.instance_key IS NOT NULL AND c.wait_ns IS NOT NULL)
        SELECT instance_key FROM c JOIN collective_instances i USING (instance_key)
        WHERE i.last_rank = {rank} GROUP BY instance_key
        ORDER BY sum(least(c.wait_ns, c.dur_ns)) DESC LIMIT 1""").fetchall()
    if lead:
        rows = ctx.run.sql(
            "SELECT rank, issue_ts_ns, ts_ns FROM collectives WHERE instance_key = ?",
            params=[lead[0][0]],
        ).fetchall()
        mine = [(i, t) for r, i, t in rows if r == rank]
        others = [(i, t) for r, i, t in rows if r != rank]
        if mine and others and mine[0][0] is not None and all(i is not None for i, _ in others):
            (mi, mt), med_i = mine[0], median(i for i, _ in others)
            out["host_late_ms"] = (mi - med_i) / 1e6
            out["device_late_ms"] = ((mt - mi) - median(t - i for i, t in others)) / 1e6
    starts = dict(ctx.run.sql("SELECT rank, min(ts_ns) FROM steps GROUP BY rank").fetchall())
    if rank in starts and len(starts) > 1:
        out["step_start_late_ms"] = (
            starts[rank] - median(v for k, v in starts.items() if k != rank)
        ) / 1e6
    return out
