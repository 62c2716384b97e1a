"""Where each finding's evidence lies on the run's aligned clock (`evidence`: one
`Place` a finding), the merged trace's zero (`base_ns`), and the allocator's series over
time (`memory_timeline`) — what the Perfetto links and the HTML page point at."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracekit import sql
from tracekit.report.schema import FindingRow, Report
from tracekit.store.run import Run


@dataclass(frozen=True)
class Place:
    """Where a finding's evidence lies: an interval, ns since the epoch (aligned), and
    what it is (shown beside the link)."""

    start_ns: int
    end_ns: int
    what: str


def base_ns(run: Run) -> int:
    """The merged trace's zero: its earliest event, floored to a whole µs."""
    ((b,),) = run.sql(sql.query("report.export", "base")).fetchall()
    return int(b or 0) // 1000 * 1000


def _ranks(f: FindingRow, report: Report) -> list[int]:
    return list(f.ranks) or list(report.run.ranks)


def step_rows(run: Run) -> list[tuple[int, int, int, int]]:
    return run.sql(sql.query("report.export", "steps")).fetchall()


def _slowest_step(steps, ranks: list[int]) -> Place | None:
    mine = [s for s in steps if s[0] in ranks]
    if not mine:
        return None
    rank, step, s, e = max(mine, key=lambda r: (r[3] - r[2], -r[2]))
    return Place(s, e, f"the slowest step, ProfilerStep#{step} on rank {rank}")


def _named_collective(f: FindingRow) -> dict[str, Any] | None:
    for key in ("collectives", "sizes"):
        rows = f.details.get(key)
        if isinstance(rows, list) and rows and isinstance(rows[0], dict) and rows[0].get("name"):
            return rows[0]
    return None


def evidence(run: Run, report: Report) -> list[Place | None]:
    """One place per finding (None where the run has nothing to point at): the longest
    instance of the collective a communication finding names first, the step holding the
    allocator's peak for a memory finding, else the slowest step of the finding's ranks
    (a straggler, a host-bound or low-MFU step, a pipeline's bubble all show there)."""
    steps = step_rows(run)
    out: list[Place | None] = []
    for f in report.findings or []:
        ranks = _ranks(f, report)
        place = None
        coll = _named_collective(f)
        if coll is not None:
            rows = run.sql(
                sql.query("report.export", "collective"),
                {"name": coll["name"], "ranks": ranks, "bytes": coll.get("bytes")},
            ).fetchall()
            if rows:
                rank, s, e = rows[0]
                pad = max((e - s) // 2, 1000)
                place = Place(s - pad, e + pad, f"the longest {coll['name']} on rank {rank}")
        elif f.level == "memory":
            rows = run.sql(sql.query("report.export", "memory_peak"), {"ranks": ranks}).fetchall()
            if rows:
                rank, t = rows[0]
                hold = [s for s in steps if s[0] == rank and s[2] <= t < s[3]]
                s, e = (hold[0][2], hold[0][3]) if hold else (t - 1_000_000, t + 1_000_000)
                place = Place(s, e, f"the allocator's peak on rank {rank}")
        out.append(place or _slowest_step(steps, ranks))
    return out


def memory_timeline(run: Run, buckets: int = 300) -> list[dict[str, Any]]:
    """Each rank's allocator total over time (ms from the merged trace's zero), the
    highest in each of `buckets` spans; empty when the trace has no memory events."""
    zero = base_ns(run)
    rows = run.sql(sql.query("report.export", "memory_timeline"), {"buckets": buckets}).fetchall()
    return [
        {"rank": r, "t_ms": (t - zero) / 1e6, "allocated_bytes": a, "reserved_bytes": res}
        for r, t, a, res in rows
    ]
