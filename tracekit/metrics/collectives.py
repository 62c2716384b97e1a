"""Per-collective figures over windows: time and exposed time (unions per rank), waiting
for late peers, and the instances' transfer times — one definition for the report (each
rank's window) and the per-step samples (each step a window).

A collective's key is (name, group size, bytes). Per rank and window, its time is the
union of its instances' intervals clipped to the window (concurrent sends count once),
its exposed time the part of that union no compute hides, its exposed wait the part of
its waits for a late peer (matched instances) no compute hides
(`tracekit/sql/metrics/collective_exposure.sql`). Per window, its transfer time is the
median over instances of the shortest duration across matched ranks, and it is
`matched` when every instance is matched across its whole group
(`collective_instances.sql`): a bus bandwidth needs both.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit import sql
from tracekit.metrics import windows as W
from tracekit.metrics.breakdown import hidden_by_compute_sql
from tracekit.store.run import Run

_EXPOSURE = "metrics.collective_exposure"

Key = tuple[str | None, int | None, int | None]  # name, group size, bytes


@dataclass(frozen=True)
class Exposure:
    union_ns: int
    exposed_ns: int
    wait_exposed_ns: int


@dataclass(frozen=True)
class Instances:
    dtypes: str | None
    pg_ranks: str | None
    instances: int
    transfer_ns: float | None
    matched: bool
    n: int


def exposure(run: Run, windows: str) -> dict[Key, dict[tuple[int, int], Exposure]]:
    """key → (rank, wid) → union / exposed / exposed-wait ns in that window."""
    kept = W.kept(run, (_EXPOSURE, windows))
    if kept is not None:
        return kept
    return _cells(_rows(run, windows))


def exposure_with_steps(
    run: Run, windows: str, step_windows: str
) -> dict[Key, dict[tuple[int, int], Exposure]]:
    """`exposure(run, windows)` for the report's windows (one a rank, wid 0), with the
    step windows' (`step_windows`, the samples') computed in the same query and kept for
    `exposure(run, step_windows)`. Where each rank's step windows lie, disjoint, inside
    its report window, the query runs once over the pieces of the report windows (the
    steps and the gaps between them): every figure is a sum of clipped interval lengths
    (a union within a window, its part under compute), so a window's figure is exactly
    the sum of its pieces' (`max(…, 0)` taken after the sum, as over the whole window).
    Otherwise the two queries run apart."""
    pieces = W.pieces(run, windows, step_windows)
    if pieces is None:
        return exposure(run, windows)
    rows = _rows(run, W.table(run, pieces))
    steps = [r for r in rows if r[1] >= 0]
    whole: dict[tuple, list[int]] = {}
    for rank, _wid, name, group, nbytes, union, exposed, wait in rows:
        acc = whole.setdefault((rank, 0, name, group, nbytes), [0, 0, 0])
        acc[0] += union or 0
        acc[1] += exposed or 0
        acc[2] += wait or 0
    W.keep(run, (_EXPOSURE, step_windows), _cells(steps))
    return _cells([(*k, u, x, w) for k, (u, x, w) in whole.items()])


def _rows(run: Run, windows: str) -> list[tuple]:
    all_rows = W.overlapping(sql.query(_EXPOSURE, "collective_rows"), windows)
    wait_rows = W.overlapping(sql.query(_EXPOSURE, "wait_rows"), windows, end="wait_end_ns")
    hidden = hidden_by_compute_sql("SELECT * FROM isl", "SELECT rank, start_ns, end_ns FROM w")
    query = sql.query(
        _EXPOSURE,
        "collective_exposure",
        windows=windows,
        all_rows=all_rows,
        wait_rows=wait_rows,
        hidden=hidden,
    )
    return run.sql(query).fetchall()


def _cells(rows) -> dict[Key, dict[tuple[int, int], Exposure]]:
    out: dict[Key, dict[tuple[int, int], Exposure]] = {}
    for rank, wid, name, group, nbytes, union, exposed, wait in rows:
        out.setdefault((name, group, nbytes), {})[(rank, wid)] = Exposure(
            union or 0, max(exposed or 0, 0), max(wait or 0, 0)
        )
    return out


def instances(run: Run, windows: str) -> dict[int, dict[Key, Instances]]:
    """wid → key → the instances starting in that window, summarised."""
    rows = W.starting_in(sql.query(_EXPOSURE, "collective_rows"), windows)
    query = sql.fill("metrics.collective_instances", rows=rows)
    out: dict[int, dict[Key, Instances]] = {}
    for wid, name, group, nbytes, *rest in run.sql(query).fetchall():
        out.setdefault(wid, {})[(name, group, nbytes)] = Instances(*rest)
    return out
