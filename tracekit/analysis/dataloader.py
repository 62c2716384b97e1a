"""Data loading: how long the device sits idle while the host fetches the next batch.

PyTorch wraps each batch fetch in a record_function span,
`enumerate(DataLoader)#<iterator>.__next__` (`torch/utils/data/dataloader.py`,
`_BaseDataLoaderIter.__next__`). The device idle inside those spans (span time less any
device work within: `activity_segments`) is time the step spends waiting for input —
with `num_workers=0` the main process decodes and augments the batch itself; with
workers it waits only when they fall behind. Per rank and step: the loader's span time,
the device idle inside it, and the part of the host-bound launch gaps
(`metrics.host_bound`) that lies inside it — which input-bound claims and the
host-bound rule leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracekit import sql
from tracekit.metrics import windows as W

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts


@dataclass(frozen=True)
class LoaderIdle:
    rank: int
    spans_per_step: float
    loader_ms: float  # per step: the loader's span time
    idle_ms: float  # per step: the device idle inside it
    host_bound_ms: float  # per step: host-bound launch gaps inside it
    step_idle_ms: float | None  # per step: the device idle of the whole step


def loader_idle(ctx: Facts) -> dict[int, LoaderIdle]:
    """Per rank with loader spans in its analysed windows, their device idle per step."""
    if ctx.cpu:
        return {}
    # a table: both queries below read the spans (a scan of every CPU op's name)
    spans = W.rows_of(ctx.run, sql.query("levels.dataloader", "loader_spans", windows=ctx.windows))
    idle = ctx.run.sql(sql.query("levels.dataloader", "loader_idle", spans=spans)).fetchall()
    if not idle:
        return {}
    gaps = ctx.device_gaps
    query = sql.query("levels.dataloader", "host_bound_in_loader", gaps=gaps, spans=spans)
    hb = dict(ctx.run.sql(query).fetchall())
    of_rank = {x[0]: x for x in idle}  # one row per rank
    out = {}
    for r in ctx.ranks:
        row = of_rank.get(r.rank)
        if row is None:
            continue
        _rank, n, loader_ns, idle_ns = row
        steps = max(r.steps, 1)
        out[r.rank] = LoaderIdle(
            rank=r.rank,
            spans_per_step=n / steps,
            loader_ms=loader_ns / 1e6 / steps,
            idle_ms=idle_ns / 1e6 / steps,
            host_bound_ms=(hb.get(r.rank) or 0) / 1e6 / steps,
            step_idle_ms=r.per_step_ms(r.idle_fraction),
        )
    return out
