"""Clock offsets between ranks, estimated from collectives that end together.

Ranks on different hosts stamp their traces with different clocks; a few ms of skew
between hosts makes every cross-rank figure (who arrived last, how long a rank waited)
wrong by as much. A synchronizing collective — all-reduce, all-gather, reduce-scatter,
all-to-all, barrier — ends on every rank at (nearly) the same instant: no rank can finish
before the last peer's data has arrived, and the last step of the ring/tree releases all
ranks together. So for each instance matched across ranks (the `collectives` view's
`instance_key`), `end_ns(rank) − end_ns(reference rank)` is that rank's clock offset plus
a small jitter; the median over instances is the estimate, the median absolute deviation
its spread. The reference is the lowest rank of the run.

Only instances matched **by `Seq`** count: that pairing does not depend on the clocks.
Matching by occurrence assumes aligned clocks — its check that a synchronizing
collective's spans overlap refuses pairings a skew would shift — so an offset drawn from
it would be read from the very pairings a skew makes wrong (a rank missing one
collective would look like a clock 1 step ahead). Traces without `Seq` are not aligned.
Reads only the `collectives` view (`rank`, `name`, `instance_key`, `match_by`,
`end_ns`). `align` then shifts each skewed rank's instants (`ts_ns`, `end_ns`,
`*_ts_ns`, `*_start_ns`, `*_end_ns`) in the run's views by its offset, so cross-rank
figures (arrival order, waits) compare like with like;
durations and the Parquet cache stay as traced. The SQL is module `store.clocks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracekit import sql

if TYPE_CHECKING:
    from tracekit.store.run import Run

SYNCHRONIZING = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier")
# Below this, an offset is the end-time jitter of collectives on one clock, not skew.
THRESHOLD_NS = 100_000
MIN_INSTANCES = 3


@dataclass(frozen=True)
class Offset:
    rank: int
    offset_ns: int  # this rank's clock minus the reference rank's
    spread_ns: int  # median absolute deviation of the per-instance differences
    instances: int  # matched instances the estimate rests on


def estimate(run: Run) -> list[Offset]:
    """One offset per rank that shares at least `MIN_INSTANCES` synchronizing
    collectives with the reference rank (the reference itself is 0). None where no row
    can be matched by Seq (`any_seq`: the view's matching not computed for nothing)."""
    names = {"names": list(SYNCHRONIZING)}
    if not run.sql(sql.query("store.clocks", "any_seq"), names).fetchall()[0][0]:
        return []
    rows = run.sql(sql.query("store.clocks", "offsets"), names).fetchall()
    return [
        Offset(rank, round(med), round(mad), n) for rank, med, mad, n in rows if n >= MIN_INSTANCES
    ]


def skewed(run: Run, threshold_ns: int = THRESHOLD_NS) -> dict[int, int]:
    """{rank: offset_ns} for the ranks whose clock is off by more than `threshold_ns`
    and by more than its own spread (a noisy estimate is no evidence of skew)."""
    return {
        o.rank: o.offset_ns
        for o in estimate(run)
        if abs(o.offset_ns) > threshold_ns and abs(o.offset_ns) > 3 * o.spread_ns
    }


def _is_instant(column: str) -> bool:
    """A point in time (shifted by alignment), not a duration (never shifted)."""
    return column in ("ts_ns", "end_ns") or column.endswith(("_ts_ns", "_start_ns", "_end_ns"))


def align(run: Run, offsets: dict[int, int]) -> list[str]:
    """Subtract each rank's offset from its instants in every per-rank view read from the
    cache (the view is renamed `_unaligned_<name>` and a shifted view takes its name, so
    the views built on it — collectives, collective_instances — see aligned times).
    Returns the views shifted."""
    if not offsets:
        return []
    case = "CASE rank " + " ".join(f"WHEN {r} THEN {int(ns)}" for r, ns in offsets.items())
    case += " ELSE 0 END"
    views = run.sql(sql.query("store.catalog", "cache_views")).fetchall()
    shifted = []
    for (name,) in views:
        cols = [c for c, *_ in run.sql(f'DESCRIBE "{name}"').fetchall()]
        instants = [c for c in cols if _is_instant(c)]
        if "rank" not in cols or not instants:
            continue
        raw = f"_unaligned_{name}"
        run.con.execute(f'ALTER VIEW "{name}" RENAME TO "{raw}"')
        repl = ", ".join(f'"{c}" - ({case}) AS "{c}"' for c in instants)
        aligned = sql.query("store.clocks", "aligned", shifted=repl, raw=raw)
        run.con.execute(f'CREATE VIEW "{name}" AS {aligned}')
        shifted.append(name)
    return shifted
