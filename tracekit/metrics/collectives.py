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
    out: dict[Key, dict[tuple[int, int], Exposure]] = {}
    for rank, wid, name, group, nbytes, union, exposed, wait in run.sql(query).fetchall():
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
