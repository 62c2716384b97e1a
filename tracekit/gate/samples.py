"""Per-step samples for the report (`report["samples"]`): the figures of the per-rank
breakdown, one value per rank per ProfilerStep, so the gate can tell a change from noise.

The definitions are the breakdown's (`tracekit.breakdown`), with each step as the
window: busy = union of device activity, compute = compute activity not under a host
wait, exposed communication = communication not under compute, idle = step − busy.
Per step and rank, exactly

    step_time_ms = compute_ms + exposed_comm_ms + other_ms + idle_ms

(`other_ms`: memcpy/memset under neither compute nor communication). On GPU runs,
host-bound time per step (the compute level's definition). Per collective
(name, group size, bytes): time per step and its exposed part (the collective's
intervals, clipped to the step, less the time compute runs beside them; mean over
ranks), and bus bandwidth from the median transfer time of its instances in the step
(nccl-tests' definition, as `collectives[].busbw_GBps`). Per compute kernel (or CPU op)
among the ten that take the most time: its time per step, mean over ranks.

Layout (columnar, so a baseline stays small):

    {"steps": [3, 4, 5],
     "ranks": [{"rank": 0, "step": [3, 4, 5], "step_time_ms": [...], "compute_ms": [...],
                "comm_ms", "exposed_comm_ms", "other_ms", "idle_ms", "idle_fraction",
                "compute_fraction", "comm_fraction", "comm_overlap_fraction",
                "exposed_comm_fraction", "host_bound_ms", "host_bound_fraction" (GPU
                runs), "bubble_fraction" (pipeline runs)}],
     "collectives": [{"name", "group_size", "bytes", "step": [...], "time_ms": [...],
                      "exposed_ms": [...], "busbw_GBps": [...], "ranks": [...],
                      "time_ms_by_rank": [...], "exposed_ms_by_rank": [...]}],
     "kernels": [{"name", "step": [...], "time_ms": [...]}]}
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median
from typing import Any

from tracekit.breakdown import StepSelection
from tracekit.model.collectives import bus_factor
from tracekit.store import Run

TOP_KERNELS = 10

_STEP_SWEEP = """
WITH w AS (SELECT rank, step, ts_ns AS start_ns, end_ns FROM steps WHERE {sel}),
act AS (
    SELECT w.rank, w.step, a.category,
           greatest(a.ts_ns, w.start_ns) AS s, least(a.end_ns, w.end_ns) AS e
    FROM device_activity a JOIN w ON a.rank = w.rank
    WHERE a.end_ns > w.start_ns AND a.ts_ns < w.end_ns
),
edges AS (
    SELECT rank, step, t, sum(dc) AS dc, sum(dm) AS dm, sum(do_) AS do_, sum(dw) AS dw
    FROM (
        SELECT rank, step, s AS t,
               (category = 'compute')::INT AS dc, (category = 'communication')::INT AS dm,
               (category IN ('memcpy', 'memset'))::INT AS do_,
               (category = 'host_wait')::INT AS dw
        FROM act
        UNION ALL
        SELECT rank, step, e,
               -(category = 'compute')::INT, -(category = 'communication')::INT,
               -(category IN ('memcpy', 'memset'))::INT, -(category = 'host_wait')::INT
        FROM act
    )
    GROUP BY rank, step, t
),
segments AS (
    SELECT rank, step,
           lead(t) OVER (PARTITION BY rank, step ORDER BY t) - t AS len,
           sum(dc) OVER run > 0 AS c, sum(dm) OVER run > 0 AS m,
           sum(do_) OVER run > 0 AS o, sum(dw) OVER run > 0 AS wt
    FROM edges
    WINDOW run AS (PARTITION BY rank, step ORDER BY t ROWS UNBOUNDED PRECEDING)
),
p AS (
    SELECT rank, step,
           coalesce(sum(len) FILTER ((c AND NOT wt) OR m OR o), 0) AS busy_ns,
           coalesce(sum(len) FILTER (c AND NOT wt), 0) AS compute_ns,
           coalesce(sum(len) FILTER (m), 0) AS comm_ns,
           coalesce(sum(len) FILTER (c AND NOT wt AND m), 0) AS overlap_ns
    FROM segments WHERE len > 0
    GROUP BY rank, step
)
SELECT w.rank, w.step, w.end_ns - w.start_ns,
       coalesce(p.busy_ns, 0), coalesce(p.compute_ns, 0),
       coalesce(p.comm_ns, 0), coalesce(p.overlap_ns, 0)
FROM w LEFT JOIN p USING (rank, step)
ORDER BY w.rank, w.step
"""

# Per collective row, clipped to the step it overlaps: its time and the part compute
# hides (overlap with the rank's merged compute intervals). DuckDB's least/greatest
# skip NULLs, so rows without compute beside them are filtered, not clipped.
_COLLECTIVES = """
WITH w AS (SELECT rank, step, ts_ns AS start_ns, end_ns FROM steps WHERE {sel}),
comp AS (
    SELECT rank, min(s) AS s, max(e) AS e FROM (
        SELECT rank, s, e, sum(new) OVER (PARTITION BY rank ORDER BY s, e
                                          ROWS UNBOUNDED PRECEDING) AS isl
        FROM (SELECT a.rank, a.ts_ns AS s, a.end_ns AS e,
                     CASE WHEN a.ts_ns <= max(a.end_ns) OVER (
                         PARTITION BY a.rank ORDER BY a.ts_ns, a.end_ns
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                     THEN 0 ELSE 1 END AS new
              FROM device_activity a WHERE a.category = 'compute'))
    GROUP BY rank, isl
),
c AS (
    SELECT c.rank, w.step, c.name, c.group_size, c.bytes, c.dur_ns, c.ts_ns AS start_ns,
           i.transfer_ns, c.instance_key,
           greatest(c.ts_ns, w.start_ns) AS s, least(c.end_ns, w.end_ns) AS e
    FROM collectives c JOIN w ON c.rank = w.rank
    LEFT JOIN collective_instances i USING (instance_key)
    WHERE c.end_ns > w.start_ns AND c.ts_ns < w.end_ns
),
ov AS (
    SELECT c.rank, c.step, c.name, c.group_size, c.bytes, c.s, c.e, c.start_ns,
           any_value(c.transfer_ns) AS transfer_ns, any_value(c.dur_ns) AS dur_ns,
           coalesce(sum(greatest(0, least(c.e, comp.e) - greatest(c.s, comp.s)))
                    FILTER (comp.s IS NOT NULL), 0) AS hidden
    FROM c LEFT JOIN comp ON comp.rank = c.rank AND comp.s < c.e AND comp.e > c.s
    GROUP BY c.rank, c.step, c.name, c.group_size, c.bytes, c.s, c.e, c.start_ns,
             c.instance_key
)
SELECT rank, step, name, group_size, bytes,
       sum(greatest(0, e - s)), sum(greatest(0, e - s - hidden)),
       list(coalesce(transfer_ns, dur_ns))
FROM ov GROUP BY ALL
"""

# Host-bound gaps, the compute level's definition (diagnosers/compute.py) per step: a
# device gap that ends with a kernel launched only after the device ran dry; a gap
# across a step boundary is the step's tail, not launch overhead. GPU runs only.
_HOST_BOUND = """
WITH w AS (SELECT rank, step, ts_ns AS start_ns, end_ns FROM steps WHERE {sel}),
d AS (
    SELECT a.rank, a.ts_ns, a.end_ns, a.correlation FROM device_activity a
    WHERE a.kind IN ('kernel', 'memcpy', 'memset')
),
o AS (
    SELECT *, max(end_ns) OVER (PARTITION BY rank ORDER BY ts_ns, end_ns
              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM d
),
l0 AS (
    SELECT o.*, r.ts_ns AS launch_ns FROM o
    LEFT JOIN events r ON r.rank = o.rank AND r.correlation = o.correlation
                      AND r.kind = 'runtime'
),
boundary AS (
    SELECT DISTINCT l0.rank, l0.ts_ns FROM l0 JOIN steps s
      ON s.rank = l0.rank AND s.ts_ns > l0.prev_end AND s.ts_ns <= l0.launch_ns
),
l AS (SELECT l0.* FROM l0 ANTI JOIN boundary b ON b.rank = l0.rank AND b.ts_ns = l0.ts_ns)
SELECT w.rank, w.step,
       coalesce(sum(l.ts_ns - l.prev_end) FILTER (l.ts_ns > l.prev_end
                                                  AND l.launch_ns >= l.prev_end), 0)
FROM l JOIN w ON l.rank = w.rank AND l.ts_ns >= w.start_ns AND l.ts_ns < w.end_ns
GROUP BY ALL
"""

_KERNELS = """
WITH w AS (SELECT rank, step, ts_ns AS start_ns, end_ns FROM steps WHERE {sel}),
k AS (
    SELECT w.rank, w.step, a.name,
           sum(least(a.end_ns, w.end_ns) - greatest(a.ts_ns, w.start_ns)) AS ns
    FROM device_activity a JOIN w ON a.rank = w.rank
    WHERE a.category = 'compute' AND a.end_ns > w.start_ns AND a.ts_ns < w.end_ns
    GROUP BY ALL
),
top AS (SELECT name FROM k GROUP BY name ORDER BY sum(ns) DESC, name LIMIT {top})
SELECT rank, step, name, ns FROM k WHERE name IN (SELECT name FROM top)
"""


def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(float(x), digits)


def per_step(run: Run, steps: str | None = None, pipeline: bool = False) -> dict[str, Any]:
    """The report's `samples`: per-step figures per rank, per collective and per kernel.

    `steps` selects ProfilerSteps as `--steps` does; `pipeline` adds each rank's
    per-step `bubble_fraction` (1 − compute fraction, the scaling level's definition)."""
    sel = StepSelection.parse(steps).sql()
    ranks: dict[int, dict[str, list]] = {}
    for rank, step, win, busy, comp, comm, ovl in run.sql(_STEP_SWEEP.format(sel=sel)).fetchall():
        d = ranks.setdefault(rank, defaultdict(list))
        exposed = comm - ovl
        d["step"].append(step)
        d["step_time_ms"].append(_r(win / 1e6))
        d["compute_ms"].append(_r(comp / 1e6))
        d["comm_ms"].append(_r(comm / 1e6))
        d["exposed_comm_ms"].append(_r(exposed / 1e6))
        d["other_ms"].append(_r(max(busy - comp - exposed, 0) / 1e6))
        d["idle_ms"].append(_r((win - busy) / 1e6))
        frac = (lambda x, win=win: _r(x / win)) if win > 0 else (lambda x: None)
        d["idle_fraction"].append(frac(win - busy))
        d["compute_fraction"].append(frac(comp))
        d["comm_fraction"].append(frac(comm))
        d["comm_overlap_fraction"].append(_r(ovl / comm) if comm > 0 else None)
        d["exposed_comm_fraction"].append(frac(exposed))
        if pipeline:
            d["bubble_fraction"].append(_r(1 - comp / win) if win > 0 else None)
    hb = {(r, st): ns for r, st, ns in run.sql(_HOST_BOUND.format(sel=sel)).fetchall()}
    for rank, d in ranks.items():
        if any(r == rank for r, _ in hb):  # a GPU rank: its kernels have launches
            wins = dict(zip(d["step"], d["step_time_ms"], strict=True))
            d["host_bound_ms"] = [_r(hb.get((rank, st), 0) / 1e6) for st in d["step"]]
            d["host_bound_fraction"] = [
                _r(hb.get((rank, st), 0) / 1e6 / wins[st]) if wins[st] else None for st in d["step"]
            ]
    all_steps = sorted({s for d in ranks.values() for s in d["step"]})
    return {
        "steps": all_steps,
        "ranks": [{"rank": r, **d} for r, d in sorted(ranks.items())],
        "collectives": _collectives(run, sel),
        "kernels": _kernels(run, sel),
    }


def _collectives(run: Run, sel: str) -> list[dict]:
    rows = run.sql(_COLLECTIVES.format(sel=sel)).fetchall()
    by: dict[tuple, dict] = {}
    for rank, step, name, group, nbytes, time_ns, exposed_ns, transfers in rows:
        d = by.setdefault(
            (name, group, nbytes),
            {
                "time": defaultdict(dict),
                "exposed": defaultdict(dict),
                "transfer": defaultdict(list),
            },
        )
        d["time"][step][rank] = time_ns
        d["exposed"][step][rank] = exposed_ns
        d["transfer"][step].extend(t for t in transfers if t)
    out = []
    for (name, group, nbytes), d in by.items():
        steps = sorted(d["time"])
        ranks = sorted({r for s in steps for r in d["time"][s]})
        factor = bus_factor(name, group or 2)

        def busbw(step: int, nbytes=nbytes, factor=factor, d=d) -> float | None:
            t = median(d["transfer"][step]) if d["transfer"][step] else None
            return _r(nbytes * factor / t) if nbytes and factor and t else None  # B/ns = GB/s

        def per_rank_mean(key: str, r: int, steps=steps, d=d) -> float:
            return _r(sum(d[key][s].get(r, 0) for s in steps) / len(steps) / 1e6)

        n_ranks = max(len(ranks), 1)
        out.append(
            {
                "name": name,
                "group_size": group,
                "bytes": nbytes,
                "step": steps,
                "time_ms": [_r(sum(d["time"][s].values()) / n_ranks / 1e6) for s in steps],
                "exposed_ms": [_r(sum(d["exposed"][s].values()) / n_ranks / 1e6) for s in steps],
                "busbw_GBps": [busbw(s) for s in steps],
                "ranks": ranks,
                "time_ms_by_rank": [per_rank_mean("time", r) for r in ranks],
                "exposed_ms_by_rank": [per_rank_mean("exposed", r) for r in ranks],
            }
        )
    out.sort(key=lambda c: -sum(c["time_ms"]))
    return out


def _kernels(run: Run, sel: str) -> list[dict]:
    rows = run.sql(_KERNELS.format(sel=sel, top=TOP_KERNELS)).fetchall()
    n_ranks = max(len(run.ranks), 1)
    by: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for _rank, step, name, ns in rows:
        by[name][step] += ns
    out = []
    for name, per in by.items():
        steps = sorted(per)
        out.append(
            {
                "name": name,
                "step": steps,
                "time_ms": [_r(per[s] / n_ranks / 1e6) for s in steps],
            }
        )
    out.sort(key=lambda k: -sum(k["time_ms"]))
    return out
