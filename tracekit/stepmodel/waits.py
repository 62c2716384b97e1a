"""Cross-stream waits of device work: those the trace records (CUDA sync events) and
those its runtime calls imply (`cudaEventRecord` then `cudaStreamWaitEvent`), as
consumer → producer device nodes for `graph.build`."""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING

from tracekit import sql

if TYPE_CHECKING:
    from tracekit.stepmodel.graph import Graph


def recorded(con, windows: str, g: Graph, dev_nodes: dict[int, list[int]], o: int):
    """Device node → the device node a CUDA sync event (`Stream Wait Event`) says it
    waited for (`stepmodel.graph:event_waits`); empty when the trace has no such events."""
    if not con.sql(
        "SELECT 1 FROM events WHERE kind = 'sync' AND wait_on_event_correlation IS NOT NULL LIMIT 1"
    ).fetchall():
        return {}  # the trace has no CUDA sync events (most do not): skip the joins
    rows = con.sql(sql.query("stepmodel.graph", "event_waits", windows=windows)).fetchall()
    if not rows:
        return {}
    at = {(g.rank[i], g.lane[i], g.ts[i]): i for v in dev_nodes.values() for i in v}
    out: dict[int, int] = {}
    for rank, src_lane, src_ts, dst_lane, dst_ts in rows:
        src = at.get((rank, f"stream {src_lane}", int(src_ts) - o))
        dst = at.get((rank, f"stream {dst_lane}", int(dst_ts) - o))
        if src is not None and dst is not None and src != dst:
            out[dst] = src
    return out


def from_calls(con, windows: str, g: Graph, dcols, ids: range, o: int) -> dict[int, int]:
    """Device node → the device node a `cudaStreamWaitEvent` (`hipStreamWaitEvent`) says
    it waited for, from the runtime calls alone (`stepmodel.graph:event_calls`): the work a
    thread launches first after the wait call waits for the work it launched last before
    its latest `cudaEventRecord` (without record calls in the trace: the work it launched
    last on another stream before the wait) — where the two run on different streams (the event is
    recorded on the producer's stream, awaited on the consumer's: DDP's all-reduce after
    its bucket's gradients, the optimizer after the all-reduce)."""
    calls = con.sql(sql.query("stepmodel.graph", "event_calls", windows=windows)).fetchall()
    if not calls:
        return {}
    launched: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (rank, tid) → (ts, node)
    for i, rank, tid, lts, kind in zip(ids, dcols[0], dcols[7], dcols[8], dcols[4], strict=True):
        if tid is not None and lts is not None and kind != "comm_thread":
            launched.setdefault((rank, tid), []).append((lts, i))
    for v in launched.values():
        v.sort()
    # each thread's launch times, built once (rebuilt per wait call they were a quarter
    # of a recompute at 8 big ranks: 1.6 of 6.1 s)
    starts_of = {key: [x for x, _ in v] for key, v in launched.items()}
    out: dict[int, int] = {}
    record: dict[tuple[int, int], int] = {}  # (rank, tid) → its latest record call
    for rank, tid, ts, is_wait in calls:  # in time order
        ts = int(ts) - o
        if not is_wait:
            record[(rank, tid)] = ts
            continue
        lst = launched.get((rank, tid))
        if not lst:
            continue
        starts = starts_of[(rank, tid)]
        n = bisect_right(starts, ts)
        if n >= len(lst):
            continue
        consumer = lst[n][1]
        # the work launched last before the record call; a trace without record calls
        # (older Kineto): the work launched last on another stream before the wait
        k = bisect_right(starts, record.get((rank, tid), ts)) - 1
        while k >= 0 and (rank, tid) not in record and g.lane[lst[k][1]] == g.lane[consumer]:
            k -= 1
        if k >= 0 and g.lane[lst[k][1]] != g.lane[consumer]:
            out.setdefault(consumer, lst[k][1])
    return out
