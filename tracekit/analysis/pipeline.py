"""Is this a pipeline-parallel run, with which P, M, V and schedule — and what does its
schedule look like when fed with the measured stage times?

Detection, first that answers: job.json (mesh.pp, microbatches, virtual_stages,
schedule); the stage labels torch emits — `PP:{stage}{F|B|I|W}{microbatch}` (multi-stage
runtime schedules; tracekit's jobs add them to Schedule1F1B) or `Forward i` /
`Backward i` (ScheduleGPipe); else the send/recv pattern a pipeline leaves (torch's own
Schedule1F1B emits no label): every rank of the pipeline group sends as often as it
receives, the two end stages M times a step, the middle ones 2M; the first stage is the
one whose step opens with a send; all its sends before its first receive is GPipe,
sends and receives alternating after P−1 warm-up forwards is 1F1B. P is the pipeline
group's size (`mesh_pp` process group), else the number of stages seen.

`measure(ctx, pipe)` reads, from the labels, each operation's duration per step (mean
over steps), each rank's order of operations, the hop between stages (per
operation that waited for the previous stage: from the end of that stage's label to its
own start — negative when the data left before the label closed; the median for the
others), the host time a rank spends between two of its operations when it was not
waiting for another stage, the pipeline's measured span per step, and each rank's busy and computing
time inside its operations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING

from tracekit import sql
from tracekit.metrics import windows as W
from tracekit.metrics.breakdown import hidden_by_compute_sql

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts

_PP = re.compile(r"^PP:(\d+)([FBIW])(\d+)$")
_GPIPE = re.compile(r"^(Forward|Backward) (\d+)$")


@dataclass(frozen=True)
class Pipeline:
    stages: int  # P
    microbatches: int | None  # M
    virtual: int  # V, model chunks per rank
    schedule: str | None
    source: str


def detect(ctx: Facts) -> Pipeline | None:
    """The pipeline of the run, or None (`ctx.pipeline` caches it)."""
    return _detect(ctx)


def _pp_group_size(ctx: Facts) -> int | None:
    return ctx.run.sql(sql.query("levels.pipeline", "pp_group_size")).fetchall()[0][0]


def _detect(ctx: Facts) -> Pipeline | None:
    m = ctx.manifest
    if m is not None and m.mesh.pp > 1:
        return Pipeline(m.mesh.pp, m.microbatches, m.virtual_stages or 1, m.schedule, "job.json")
    rows = ctx.run.sql(sql.query("levels.pipeline", "stage_labels")).fetchall()
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
    pp_group = _pp_group_size(ctx)
    if not all_stages:
        return _from_send_recv(ctx, pp_group)
    v = max((len(s) for s in stages.values()), default=1)
    p = pp_group or len(all_stages) // v
    if p < 2:
        return None
    schedule = "gpipe" if gpipe else ("interleaved" if v > 1 else "1f1b")
    return Pipeline(p, (max(mbs) + 1) if mbs else None, v, schedule, "stage labels")


def _from_send_recv(ctx: Facts, pp_group: int | None) -> Pipeline | None:
    """1F1B / GPipe from the point-to-point pattern alone (no labels, no job.json)."""
    rows = ctx.run.sql(
        sql.query(
            "levels.pipeline",
            "p2p_in_windows",
            rows=W.starting_in("SELECT * FROM collectives", ctx.windows),
        )
    ).fetchall()
    others = ctx.run.sql(sql.query("levels.pipeline", "non_p2p_count")).fetchall()[0][0]
    if not rows:
        return None
    steps = {r.rank: max(r.steps, 1) for r in ctx.ranks}
    seq: dict[int, list[str]] = {}
    for rank, name, _ts in rows:
        seq.setdefault(rank, []).append(name)
    ranks = sorted(r.rank for r in ctx.ranks)
    if set(seq) != set(ranks) or len(ranks) < 2:
        return None
    per_step = {}
    for r, names in seq.items():
        sends, recvs = names.count("send"), names.count("recv")
        if sends != recvs or sends % steps[r]:
            return None
        per_step[r] = sends // steps[r]
    m = min(per_step.values())
    ends = [r for r, n in per_step.items() if n == m]
    middle = [r for r, n in per_step.items() if n != m]
    if m < 1 or any(per_step[r] != 2 * m for r in middle):
        return None
    if len(ranks) > 2 and len(ends) != 2:
        return None
    # a pipeline's p2p carries the step; data-parallel groups may add collectives only
    # when a pp group is declared
    if others and not pp_group:
        return None
    p = pp_group or len(ranks)
    first = next((r for r in ends if seq[r][0] == "send"), None)
    if first is None:
        return None
    one_step = seq[first][: 2 * m]
    first_recv = one_step.index("recv") if "recv" in one_step else len(one_step)
    schedule = "gpipe" if first_recv >= m else "1f1b"
    return Pipeline(p, m, 1, schedule, "send/recv pattern")


@dataclass
class Measured:
    orders: dict[int, list[tuple[str, int, int]]]
    duration: dict[tuple[str, int, int], float]  # ms, mean over steps
    stage_rank: dict[int, int]
    latency_ms: float  # median hop
    hop_ms: dict[tuple[str, int, int], float]  # consuming op → its measured hop, mean
    overhead_ms: dict[tuple[str, int, int], float]  # host time before an op, not waiting
    span_ms: float  # first operation start to last operation end, mean over steps
    occupied_ms: dict[int, float]  # rank → time inside its operations per step
    compute_in_ops_ms: dict[int, float]  # rank → compute inside its operations per step


def measure(ctx: Facts, pipe: Pipeline) -> Measured | None:
    labels = W.starting_in("SELECT * FROM events", ctx.windows)
    hidden = hidden_by_compute_sql("SELECT * FROM lab", ctx.windows)
    rows = ctx.run.sql(
        sql.query("levels.pipeline", "stage_operations", labels=labels, hidden=hidden)
    ).fetchall()
    if not rows:
        return None
    ranks = sorted({r for r, *_ in rows})
    pos = {r: i for i, r in enumerate(ranks)}
    by_step: dict[int, list] = {}
    for rank, name, s, e, comp, step in rows:
        if (op := operation_key(name, pos[rank])) is not None:
            by_step.setdefault(step, []).append((rank, op, s, e, comp))
    steps = sorted(by_step)
    n = len(steps)
    dur: dict = {}
    occ: dict[int, float] = {}
    comp_in: dict[int, float] = {}
    stage_rank: dict[int, int] = {}
    spans, gaps = [], []
    hop: dict = {}
    overhead: dict = {}
    for st in steps:
        ops = by_step[st]
        spans.append((max(e for *_, e, _c in ops) - min(s for _r, _o, s, _e, _c in ops)) / 1e6)
        ends = {op: e for _r, op, _s, e, _c in ops}
        prev_end: dict[int, float] = {}
        for rank, op, s, e, comp in sorted(ops, key=lambda x: x[2]):
            stage_rank[op[1]] = rank
            dur[op] = dur.get(op, 0.0) + (e - s) / 1e6 / n
            occ[rank] = occ.get(rank, 0.0) + (e - s) / 1e6 / n
            comp_in[rank] = comp_in.get(rank, 0.0) + comp / 1e6 / n
            d = _dependency(op, pipe)
            pe = prev_end.get(rank)
            cross = d in ends and stage_rank.get(d[1], rank) != rank
            if cross and (pe is None or ends[d] >= pe):  # it waited for the other stage
                # signed: a stage may start before its producer's label ends (the data
                # leaves before the label closes)
                g = (s - ends[d]) / 1e6
                gaps.append(g)
                hop[op] = hop.get(op, 0.0) + g / n
            elif pe is not None:  # it only waited for its own rank: host time between ops
                overhead[op] = overhead.get(op, 0.0) + max(s - pe, 0) / 1e6 / n
            prev_end[rank] = e
    first = by_step[steps[0]]
    orders: dict[int, list] = {}
    for rank, op, *_ in sorted(first, key=lambda x: x[2]):
        orders.setdefault(rank, []).append(op)
    return Measured(
        orders,
        dur,
        stage_rank,
        median(gaps) if gaps else 0.0,
        hop,
        overhead,
        sum(spans) / len(spans),
        occ,
        comp_in,
    )


def operation_key(label: str, position: int) -> tuple[str, int, int] | None:
    """(F|B|W, stage, microbatch) of a stage label: `PP:{stage}{F|B|I|W}{mb}` (I, a
    backward's input half, is B), or `Forward i` / `Backward i` of the rank at
    `position` among the pipeline's ranks (ScheduleGPipe names no stage)."""
    if mt := _PP.match(label):
        return ({"I": "B"}.get(mt.group(2), mt.group(2)), int(mt.group(1)), int(mt.group(3)))
    if mt := _GPIPE.match(label):
        return (mt.group(1)[0], position, int(mt.group(2)))
    return None


def _dependency(op: tuple[str, int, int], pipe: Pipeline) -> tuple[str, int, int] | None:
    kind, s, i = op
    last = pipe.stages * pipe.virtual - 1
    if kind == "F":
        return ("F", s - 1, i) if s > 0 else None
    if kind == "B":
        return ("B", s + 1, i) if s < last else None
    return None
