"""Cross-stream waits of device work: those the trace records (CUDA sync events) and
those its runtime calls imply (`cudaEventRecord` then `cudaStreamWaitEvent`), as
consumer → producer device nodes for `graph.build`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

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
    c = con.sql(sql.query("stepmodel.graph", "event_calls", windows=windows)).fetchnumpy()
    if not len(c["ts_ns"]):
        return {}
    # each thread's launches (start, node), sorted: the device rows launched from it (a
    # kept row is on a stream: its lane's number names it, as "stream N" does)
    d_rank, d_lane, d_gloo, d_tid, d_lts = (dcols.arrays[k] for k in (0, 1, 4, 7, 8))
    keep = np.flatnonzero(
        ~np.ma.getmaskarray(d_tid) & ~np.ma.getmaskarray(d_lts) & ~np.asarray(d_gloo, bool)
    )
    if not len(keep):
        return {}
    l_rank = np.asarray(d_rank, np.int64)[keep]
    l_tid = np.ma.getdata(d_tid).astype(np.int64)[keep]
    l_ts = np.ma.getdata(d_lts).astype(np.int64)[keep]
    l_node = keep + ids.start
    l_lane = np.ma.filled(d_lane.astype(np.int64), np.iinfo(np.int64).min)[keep]  # NULL: its own
    srt = np.lexsort((l_node, l_ts, l_tid, l_rank))  # by thread, then (start, node)
    l_rank, l_tid, l_ts, l_node, l_lane = (x[srt] for x in (l_rank, l_tid, l_ts, l_node, l_lane))
    # the calls (in the query's time order), by thread, that order kept
    c_rank = np.asarray(c["rank"], np.int64)
    c_tid = np.asarray(c["tid"], np.int64)
    c_ts = np.asarray(c["ts_ns"], np.int64) - o
    c_wait = np.asarray(c["is_wait"], bool)
    csrt = np.lexsort((np.arange(len(c_ts)), c_tid, c_rank))
    c_rank, c_tid, c_ts, c_wait = (x[csrt] for x in (c_rank, c_tid, c_ts, c_wait))
    out: dict[int, int] = {}
    lb = _bounds(l_rank, l_tid)
    for key, (ca, cb) in _bounds(c_rank, c_tid).items():
        if key not in lb:
            continue
        la, lb_ = lb[key]
        starts, nodes, lanes = l_ts[la:lb_], l_node[la:lb_], l_lane[la:lb_]
        ts, wait = c_ts[ca:cb], c_wait[ca:cb]
        # each call's latest record call before it on the thread (−1: none yet)
        rec_at = np.where(~wait, np.arange(len(ts)), -1)
        rec_at = np.maximum.accumulate(rec_at)
        w = np.flatnonzero(wait)
        n = np.searchsorted(starts, ts[w], side="right")
        ok = n < len(starts)
        w, n = w[ok], n[ok]
        consumer = nodes[n]
        has_rec = rec_at[w] >= 0
        # the work launched last before the record call; a thread without record calls
        # (older Kineto): the work launched last on another stream before the wait (the
        # last launch before the run of same-lane launches the wait's falls in)
        run_start = np.maximum.accumulate(
            np.where(np.r_[True, lanes[1:] != lanes[:-1]], np.arange(len(lanes)), 0)
        )
        k_rec = np.searchsorted(starts, ts[np.maximum(rec_at[w], 0)], side="right") - 1
        k_prev = n - 1
        same = (k_prev >= 0) & (lanes[np.maximum(k_prev, 0)] == lanes[n])
        k_none = np.where(same, run_start[np.maximum(k_prev, 0)] - 1, k_prev)
        k = np.where(has_rec, k_rec, k_none)
        good = (k >= 0) & (lanes[np.maximum(k, 0)] != lanes[n])
        for cons, prod in zip(consumer[good].tolist(), nodes[k[good]].tolist(), strict=True):
            out.setdefault(cons, prod)
    return out


def _bounds(rank: np.ndarray, tid: np.ndarray) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, tid) → the [start, stop) of its rows (rows sorted by rank, tid)."""
    if not len(rank):
        return {}
    new = np.r_[True, (rank[1:] != rank[:-1]) | (tid[1:] != tid[:-1])]
    at = np.flatnonzero(new)
    stop = np.r_[at[1:], len(rank)]
    return {
        (r, t): (a, b)
        for r, t, a, b in zip(rank[at].tolist(), tid[at].tolist(), at.tolist(), stop.tolist(),
                              strict=True)
    }  # fmt: skip
