"""Per-step samples for the report (`report.samples`): the report's own figures with each
ProfilerStep as the window, so the gate can tell a change from noise.

One definition per figure: the per-rank series are `metrics.breakdown`'s sweep and
host-bound SQL, the collective series `metrics.collectives`' exposure and instances, the
kernel series `metrics.kernels`' — each called with the steps as windows where the
report calls it with each rank's analysed window. Hence, for the `steps` window, the
sum over steps of a time series is the report's figure over the window (exactly, when
the steps tile the window; gaps between steps can only take from it), and the mean over
steps of a per-step figure is the report's per-step figure. Per step and rank, exactly

    step_time_ms = compute_ms + exposed_comm_ms + other_ms + idle_ms

(`other_ms`: memcpy/memset under neither compute nor communication).

Per collective (name, group size, bytes): time and exposed time per step, the mean
over every rank of the report (ranks that did not take part count 0, as the report's
`time_ms_per_step` counts them), and bus bandwidth from the median transfer time of its
instances in the step — null in every step when the report's bus bandwidth is null
(an unmatched instance, an unknown group): the samples never know what the report does
not. Per kernel of the report's `top_kernels`: its time per step, mean over ranks.

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
from math import fsum
from operator import attrgetter

import msgspec

from tracekit import sql
from tracekit.metrics import collectives as C
from tracekit.metrics import kernels as K
from tracekit.metrics import windows as W
from tracekit.metrics.breakdown import host_bound_sql, sweep_sql
from tracekit.metrics.regions import region_time
from tracekit.model import figures as F
from tracekit.model.collectives import bus_factor
from tracekit.store.run import Run

UNSET = msgspec.UNSET


class SampleRank(msgspec.Struct, kw_only=True):
    rank: int
    step: list[int]
    step_time_ms: list[float | None]
    compute_ms: list[float | None]
    comm_ms: list[float | None]
    exposed_comm_ms: list[float | None]
    other_ms: list[float | None]
    idle_ms: list[float | None]
    idle_fraction: list[float | None]
    compute_fraction: list[float | None]
    comm_fraction: list[float | None]
    comm_overlap_fraction: list[float | None]
    exposed_comm_fraction: list[float | None]
    comm_wait_fraction: list[float | None]
    exposed_transfer_fraction: list[float | None]
    bubble_fraction: list[float | None] | msgspec.UnsetType = UNSET
    host_bound_ms: list[float | None] | msgspec.UnsetType = UNSET
    host_bound_fraction: list[float | None] | msgspec.UnsetType = UNSET


class SampleCollective(msgspec.Struct, kw_only=True):
    name: str | None
    group_size: int | None
    bytes: int | None
    step: list[int]
    time_ms: list[float | None]
    exposed_ms: list[float | None]
    busbw_GBps: list[float | None]
    ranks: list[int]
    time_ms_by_rank: list[float | None]
    exposed_ms_by_rank: list[float | None]


class SampleKernel(msgspec.Struct, kw_only=True):
    name: str
    step: list[int]
    time_ms: list[float | None]


class SampleRegion(msgspec.Struct, kw_only=True):
    """One of the report's top regions (`regions[]`) per step: the device time it launched
    (children included; null on CPU runs) and its CPU time, each the mean over the ranks
    holding it in that step."""

    path: list[str]
    kind: str
    step: list[int]
    device_ms: list[float | None]
    cpu_ms: list[float | None] = []


class Samples(msgspec.Struct, kw_only=True):
    steps: list[int]
    ranks: list[SampleRank]
    collectives: list[SampleCollective]
    kernels: list[SampleKernel]
    regions: list[SampleRegion] = []


def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(float(x), digits)


def per_step(
    run: Run,
    steps: str | None = None,
    pipeline: bool = False,
    ranks: list[int] | None = None,
    busbw_null: set[C.Key] | None = None,
    kernels: list[str] | None = None,
    regions: list[tuple[str, list[str]]] | None = None,
    cpu: bool = False,
) -> Samples:
    """The report's `samples`. `steps` selects ProfilerSteps as `--steps` does; `pipeline`
    adds each rank's per-step `bubble_fraction` (1 − compute fraction, the scaling level's
    definition); `ranks` are the report's ranks (the collectives' mean is over them);
    `busbw_null` the collective keys whose bus bandwidth the report leaves null;
    `kernels` the report's `top_kernels` names; `regions` the (kind, path) of the report's
    top regions (none: no region series); `cpu`: a run without device events (the regions'
    device time is null)."""
    windows = W.step_windows(steps)
    by_rank = _ranks(run, windows, pipeline)
    all_steps = sorted({s for d in by_rank for s in d.step})
    n_ranks = len(ranks) if ranks else len(by_rank)
    return Samples(
        steps=all_steps,
        ranks=by_rank,
        collectives=_collectives(run, windows, max(n_ranks, 1), busbw_null or set()),
        kernels=_kernels(run, windows, max(n_ranks, 1), kernels),
        regions=_regions(run, windows, regions or [], cpu),
    )


def _ranks(run: Run, windows: str, pipeline: bool) -> list[SampleRank]:
    query = sql.query(
        "metrics.step_windows",
        "window_breakdown",
        windows=windows,
        sweep=sweep_sql("SELECT * FROM w"),
    )
    rows = W.kept(run, ("window_breakdown", windows))  # `breakdown.per_rank` kept them
    if rows is None:
        rows = run.sql(query).fetchall()
    series: dict[int, dict[str, list]] = {}
    for rank, step, win, busy, comp, comm, ovl, wait in rows:
        d = series.setdefault(rank, defaultdict(list))
        exposed = comm - ovl
        d["step"].append(step)
        d[F.STEP_TIME_MS.key].append(_r(win / 1e6))
        d["compute_ms"].append(_r(comp / 1e6))
        d["comm_ms"].append(_r(comm / 1e6))
        d["exposed_comm_ms"].append(_r(exposed / 1e6))
        d["other_ms"].append(_r(max(busy - comp - exposed, 0) / 1e6))
        d["idle_ms"].append(_r((win - busy) / 1e6))
        frac = (lambda x, win=win: _r(x / win)) if win > 0 else (lambda x: None)
        d[F.IDLE_FRACTION.key].append(frac(win - busy))
        d[F.COMPUTE_FRACTION.key].append(frac(comp))
        d[F.COMM_FRACTION.key].append(frac(comm))
        d[F.COMM_OVERLAP_FRACTION.key].append(_r(ovl / comm) if comm > 0 else None)
        d[F.EXPOSED_COMM_FRACTION.key].append(frac(exposed))
        d[F.COMM_WAIT_FRACTION.key].append(frac(wait))
        d[F.EXPOSED_TRANSFER_FRACTION.key].append(frac(exposed - wait))
        if pipeline:
            d[F.BUBBLE_FRACTION.key].append(_r(1 - comp / win) if win > 0 else None)
    hb: dict[tuple[int, int], int] = {}
    # the host-bound time alone: not the gaps' median kernel the samples do not show
    query = f"SELECT rank, wid, host_bound_ns FROM ({host_bound_sql(windows, run)})"
    for rank, step, ns in run.sql(query).fetchall():
        hb[(rank, step)] = ns
    gpu = {r for r, _ in hb}  # a GPU rank: its kernels have launches
    for rank, d in series.items():
        if rank in gpu:
            wins = dict(zip(d["step"], d[F.STEP_TIME_MS.key], strict=True))
            d["host_bound_ms"] = [_r(hb.get((rank, st), 0) / 1e6) for st in d["step"]]
            d[F.HOST_BOUND_FRACTION.key] = [
                _r(hb.get((rank, st), 0) / 1e6 / wins[st]) if wins[st] else None for st in d["step"]
            ]
    return [SampleRank(rank=r, **d) for r, d in sorted(series.items())]


def _collectives(
    run: Run, windows: str, n_ranks: int, busbw_null: set[C.Key]
) -> list[SampleCollective]:
    exp = C.exposure(run, windows)
    inst = C.instances(run, windows)
    out = []
    for key, cells in exp.items():
        name, group, nbytes = key
        steps = sorted({wid for _, wid in cells})
        ranks = sorted({r for r, _ in cells})
        factor = bus_factor(name, group or 2)

        def busbw(step: int, key=key, nbytes=nbytes, factor=factor, group=group) -> float | None:
            i = inst.get(step, {}).get(key)
            if key in busbw_null or i is None or not i.matched or not group:
                return None
            t = i.transfer_ns
            return _r(nbytes * factor / t) if nbytes and factor and t else None  # B/ns = GB/s

        # the cells of each step and of each rank, gathered once (not a scan of every
        # cell per rank: quadratic at 1,024 ranks); fsum is exact, so order does not matter
        of_step: dict[int, list] = {}
        of_rank: dict[int, list] = {}
        for (r, w), v in cells.items():
            of_step.setdefault(w, []).append(v)
            of_rank.setdefault(r, []).append(v)

        def per_step(field: str, of_step=of_step, steps=steps) -> list[float | None]:
            get = attrgetter(field)
            return [_r(fsum(map(get, of_step[s])) / n_ranks / 1e6) for s in steps]

        n_steps = len(steps)

        def by_rank(field: str, of_rank=of_rank, ranks=ranks, n=n_steps) -> list[float | None]:
            get = attrgetter(field)
            return [_r(fsum(map(get, of_rank[r])) / n / 1e6) for r in ranks]

        out.append(
            SampleCollective(
                name=name,
                group_size=group,
                bytes=nbytes,
                step=steps,
                time_ms=per_step("union_ns"),
                exposed_ms=per_step("exposed_ns"),
                busbw_GBps=[busbw(s) for s in steps],
                ranks=ranks,
                time_ms_by_rank=by_rank("union_ns"),
                exposed_ms_by_rank=by_rank("exposed_ns"),
            )
        )
    out.sort(key=lambda c: (-fsum(c.time_ms), c.name or "", c.group_size or 0, c.bytes or 0))
    return out


def _kernels(run: Run, windows: str, n_ranks: int, names: list[str] | None) -> list[SampleKernel]:
    per = K.kernel_time(run, windows, names, top=K.TOP_KERNELS)
    if names is None:
        names = K.top_names(per)
    out = []
    for name in names:
        cells = per.get(name, {})
        steps = sorted({wid for _, wid in cells})
        out.append(
            SampleKernel(
                name=name,
                step=steps,
                time_ms=[
                    _r(fsum(ns for (_, w), (ns, _n) in cells.items() if w == s) / n_ranks / 1e6)
                    for s in steps
                ],
            )
        )
    return out


def _regions(
    run: Run, windows: str, wanted: list[tuple[str, list[str]]], cpu: bool = False
) -> list[SampleRegion]:
    """The regions `wanted` per step (`tracekit.metrics.regions`, each step a window)."""
    if not wanted:
        return []
    per = region_time(run, windows, only={(kind, tuple(path)) for kind, path in wanted})
    out = []
    for kind, path in wanted:
        cells = per.get((kind, tuple(path)), {})
        of_step: dict[int, list] = {}  # each step's cells, gathered once
        for (_, w), c in cells.items():
            of_step.setdefault(w, []).append(c)
        steps = sorted(of_step)
        dev, host = [], []
        for s in steps:
            here = of_step[s]
            dev.append(None if cpu else _r(fsum(c.device_ns / c.n for c in here) / len(here) / 1e6))
            host.append(_r(fsum(c.cpu_ns / c.n for c in here) / len(here) / 1e6))
        out.append(SampleRegion(path=list(path), kind=kind, step=steps, device_ms=dev, cpu_ms=host))
    return out
