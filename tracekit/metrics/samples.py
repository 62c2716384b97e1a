"""Per-step samples for the report (`report["samples"]`): the figures of the per-rank
breakdown, one value per rank per ProfilerStep, so the gate can tell a change from noise.

The definitions are the breakdown's (`tracekit.metrics.breakdown`), with each step as the
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
                "exposed_comm_fraction", "comm_wait_fraction", "exposed_transfer_fraction",
                "host_bound_ms", "host_bound_fraction" (GPU runs), "bubble_fraction"
                (pipeline runs)}],
     "collectives": [{"name", "group_size", "bytes", "step": [...], "time_ms": [...],
                      "exposed_ms": [...], "busbw_GBps": [...], "ranks": [...],
                      "time_ms_by_rank": [...], "exposed_ms_by_rank": [...]}],
     "kernels": [{"name", "step": [...], "time_ms": [...]}]}
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median
from typing import Any

from tracekit.metrics.breakdown import (
    StepSelection,
    hidden_by_compute_sql,
    host_bound_sql,
    sweep_sql,
)
from tracekit.model.collectives import bus_factor
from tracekit.store.run import Run

TOP_KERNELS = 10

# each step its own window, through the breakdown's own definitions
_STEPS = "SELECT rank, step, ts_ns AS start_ns, end_ns FROM steps WHERE {sel}"
_STEP_SWEEP = """
WITH w AS ({steps}),
p AS {sweep}
SELECT w.rank, w.step, w.end_ns - w.start_ns,
       coalesce(p.busy_ns, 0), coalesce(p.compute_ns, 0),
       coalesce(p.comm_ns, 0), coalesce(p.overlap_ns, 0), coalesce(p.wait_ns, 0)
FROM w LEFT JOIN p ON p.rank = w.rank AND p.wid = w.step
ORDER BY w.rank, w.step
"""

# Per collective row, clipped to the step it overlaps: its time and the part compute
# hides (the compute islands of that step, as the communication level counts them).
_COLLECTIVES = """
WITH w AS ({steps}),
c AS (
    SELECT c.rank, w.step, c.name, c.group_size, c.bytes, c.dur_ns, c.ts_ns AS start_ns,
           i.transfer_ns, c.instance_key,
           greatest(c.ts_ns, w.start_ns) AS s, least(c.end_ns, w.end_ns) AS e
    FROM collectives c JOIN w ON c.rank = w.rank
    LEFT JOIN collective_instances i USING (instance_key)
    WHERE c.end_ns > w.start_ns AND c.ts_ns < w.end_ns
),
ov AS {hidden}
SELECT rank, step, name, group_size, bytes,
       sum(greatest(0, e - s)), sum(greatest(0, e - s - hidden)),
       list(coalesce(transfer_ns, dur_ns))
FROM ov GROUP BY ALL
"""

_HOST_BOUND = """
WITH w AS ({steps})
SELECT rank, wid, host_bound_ns FROM {host_bound}
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
    steps_q = _STEPS.format(sel=sel)
    sweep = sweep_sql("SELECT rank, step AS wid, start_ns, end_ns FROM w")
    rows = run.sql(_STEP_SWEEP.format(steps=steps_q, sweep=sweep)).fetchall()
    for rank, step, win, busy, comp, comm, ovl, wait in rows:
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
        d["comm_wait_fraction"].append(frac(wait))
        d["exposed_transfer_fraction"].append(frac(exposed - wait))
        if pipeline:
            d["bubble_fraction"].append(_r(1 - comp / win) if win > 0 else None)
    host_bound = host_bound_sql("SELECT rank, step AS wid, start_ns, end_ns FROM w")
    hb = {
        (r, st): ns
        for r, st, ns in run.sql(
            _HOST_BOUND.format(steps=steps_q, host_bound=host_bound)
        ).fetchall()
    }
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
        "collectives": _collectives(run, steps_q),
        "kernels": _kernels(run, sel),
    }


def _collectives(run: Run, steps_q: str) -> list[dict]:
    hidden = hidden_by_compute_sql("(SELECT * FROM c)", "(SELECT rank, start_ns, end_ns FROM w)")
    rows = run.sql(_COLLECTIVES.format(steps=steps_q, hidden=hidden)).fetchall()
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
