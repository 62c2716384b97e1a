"""Is this a pipeline-parallel run, and with which P, M, V and schedule?

From job.json when it says (mesh.pp, microbatches, virtual_stages, schedule); else from
the stage labels torch emits — `PP:{stage}{F|B|I|W}{microbatch}` (multi-stage runtime
schedules; tracekit's jobs add them to Schedule1F1B), or `Forward i` / `Backward i`
(ScheduleGPipe) — or process groups described `mesh_pp`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnosers.context import Context

_PP = re.compile(r"^PP:(\d+)([FBIW])(\d+)$")
_GPIPE = re.compile(r"^(Forward|Backward) (\d+)$")


@dataclass(frozen=True)
class Pipeline:
    stages: int  # P
    microbatches: int | None  # M
    virtual: int  # V, model chunks per rank
    schedule: str | None
    source: str


def detect_pipeline(ctx: Context) -> Pipeline | None:
    if "pipeline" in ctx.metrics:
        return ctx.metrics["pipeline"]["info"]
    info = _detect(ctx)
    ctx.metrics["pipeline"] = {"info": info}
    return info


def _detect(ctx: Context) -> Pipeline | None:
    m = ctx.manifest
    if m is not None and m.mesh.pp > 1:
        return Pipeline(m.mesh.pp, m.microbatches, m.virtual_stages or 1, m.schedule, "job.json")
    rows = ctx.run.sql("""
        SELECT rank, name::VARCHAR FROM events
        WHERE kind IN ('user_annotation', 'gpu_annotation')
          AND (starts_with(name::VARCHAR, 'PP:') OR starts_with(name::VARCHAR, 'Forward ')
               OR starts_with(name::VARCHAR, 'Backward '))""").fetchall()
    stages: dict[int, set[int]] = {}
    mbs: set[int] = set()
    gpipe = False
    for rank, name in rows:
        if mt := _PP.match(name):
            stages.setdefault(rank, set()).add(int(mt.group(1)))
            mbs.add(int(mt.group(3)))
        elif mt := _GPIPE.match(name):
            gpipe = True
            stages.setdefault(rank, set()).add(rank)
            mbs.add(int(mt.group(2)))
    all_stages = set().union(*stages.values()) if stages else set()
    pp_groups = ctx.run.sql(
        "SELECT max(pg_size) FROM process_groups WHERE pg_desc = 'mesh_pp'"
    ).fetchall()[0][0]
    if not all_stages and not pp_groups:
        return None
    v = max((len(s) for s in stages.values()), default=1)
    p = pp_groups or (len(all_stages) // v if all_stages else 1)
    if p < 2:
        return None
    schedule = "gpipe" if gpipe else ("interleaved" if v > 1 else "1f1b")
    return Pipeline(
        p,
        (max(mbs) + 1) if mbs else None,
        v,
        schedule,
        "stage labels" if all_stages else "mesh_pp process group",
    )
