"""The graph's edges into device work and the searches that infer them: what set a
device node's start (its stream, its launch, a recorded or inferred wait), the device work
a blocking call waited for, the work a thread's idle gap waited for, the launch latency.
Called by `graph.build` for every node: each search is a `bisect` over one rank's nodes
sorted by end."""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING

import numpy as np

from tracekit.stepmodel.kinds import (
    DEFAULT_LAUNCH_NS,
    E_LAUNCH,
    E_STREAM,
    E_UNEXPLAINED,
    E_WAIT,
    MAX_LAUNCH_NS,
    ROUND_NS,
    STREAM_SLACK_NS,
    WAIT_NS,
)

if TYPE_CHECKING:
    from tracekit.stepmodel.graph import Graph


def last_ending(g: Graph, srt, times, start: int, end: int, lane: str | None = None):
    """The device work (by end: `srt`, `times`) that ended last in [start, end] (within
    rounding), on `lane` when given: what a blocking call over that span waited for."""
    k = bisect_right(times, end + ROUND_NS) - 1
    while k >= 0 and times[k] >= start:
        if lane is None or g.lane[srt[k]] == lane:
            return srt[k]
        k -= 1
    return None


def device_edges(g: Graph, loc, a: int, ts_a, end_a, lane_code, on_host, launcher, lts_a,
                 recorded_of) -> None:  # fmt: skip
    """Start edges of one rank's device work: `loc`, its rows (node − `a`) by (lane,
    start, node); `ts_a`, `end_a`, `lane_code`, `on_host` (a gloo span on a host thread),
    `launcher` (the host node of its launch, −1 for none), `lts_a` (that launch call's
    start): arrays over every device row; `recorded_of(node)`: the work a CUDA sync event
    says it waited for, or None.

    Each node's stream predecessor is the work before it on its lane (none for a span on
    a host thread: posted in host order, not queued). What set its start, first that
    explains it: its stream (it was queued: started within STREAM_SLACK_NS of the stream
    freeing), its launch (within the launch latency of its call), the recorded wait
    (however long after that work ended), work on another lane that ended within WAIT_NS
    before it (an event wait), its stream after a longer gap; else its launch with the
    measured delay. Edges that did not bind keep the smallest lag the trace allows. The
    tests of each rule as arrays over the rank, the edges built per node."""
    n = len(loc)
    nodes = loc + a
    ts, en, lc = ts_a[loc], end_a[loc], lane_code[loc]
    p = np.full(n, -2, np.int64)
    same = lc[1:] == lc[:-1]
    p[1:][same] = nodes[:-1][same]
    p[on_host[loc]] = -2
    has_p = p >= 0
    end_p = np.where(has_p, np.r_[0, en[:-1]], 0)
    h = launcher[loc]
    lts = lts_a[loc]
    # the launch latency: the low end of what launch-bound work shows (its median would
    # count work that waited for something the trace does not show)
    bound = (h >= 0) & (~has_p | (ts - end_p > STREAM_SLACK_NS))
    lat = launch_latency((ts - lts)[bound].tolist()) if bound.any() else DEFAULT_LAUNCH_NS
    by_end = np.lexsort((np.arange(n), en))  # by end, then as `loc`
    srt, times = nodes[by_end].tolist(), en[by_end].tolist()
    gap = ts - end_p
    # overlapping on one stream (ns rounding, or a trace quirk): from the predecessor's
    # start, at the measured distance (no gap)
    gap_ok = has_p & (end_p <= ts + STREAM_SLACK_NS)
    bound_s = gap_ok & (gap <= STREAM_SLACK_NS)
    bound_l = (h >= 0) & ~bound_s & (ts - lts <= lat + STREAM_SLACK_NS)
    gts, gend, gstarts = g.ts, g.end, g.starts
    for i, pk, gok, gp, bs, bl, hk, lk, tk, ep in zip(
        nodes.tolist(), p.tolist(), gap_ok.tolist(), gap.tolist(), bound_s.tolist(),
        bound_l.tolist(), h.tolist(), lts.tolist(), ts.tolist(), end_p.tolist(), strict=True,
    ):  # fmt: skip
        w = None
        if not bs and not bl:
            after = max(lk if hk >= 0 else 0, ep)
            rec = recorded_of(i)
            if rec is not None and after <= gend[rec] <= tk + ROUND_NS:
                w = rec
            else:
                w = waited_for(g, srt, times, i, after)
        stream_lag = 0
        if gok and (bs or (w is None and not bl and gp <= WAIT_NS)):
            stream_lag = gp
            bs = True
        st = gstarts[i]
        if pk >= 0:
            if gok:
                st.append((pk, True, stream_lag, E_STREAM))
            else:
                st.append((pk, False, tk - gts[pk], E_STREAM))
                bs = True
        if w is not None:
            st.append((w, True, tk - gend[w], E_WAIT))
        if hk >= 0:
            r = tk - lk
            explained = bs or w is not None or bl
            lag = r if not (bs or w is not None) else min(r, lat)
            # started long after its launch with nothing in the trace to say why: an
            # unexplained wait, kept as measured (not host time)
            ek = E_LAUNCH if explained else E_UNEXPLAINED
            st.append((hk, False, lk - gts[hk] + lag, ek))
        elif pk >= 0 and not bs and w is None and gok:
            st[-1] = (pk, True, gp, E_STREAM)  # nothing else explains it


def launchers(g: Graph, host_nodes: dict[int, list[int]], rank, lts) -> list[int]:
    """For each device row (its rank; `lts`: its launch call's start, masked without one;
    numpy arrays) the top-level host node (any thread of its rank) whose span holds the
    launch, −1 for none: of the 8 nodes that start last at or before it, the
    latest-starting one that holds it, else the last to start before it (a launch on a
    thread whose op has ended). All rows of a rank at once: one `searchsorted` over its
    host nodes (`host_nodes`, by start), then the look back."""
    out = np.full(len(rank), -1, np.int64)
    has = ~np.ma.getmaskarray(lts)
    if not has.any():
        return out.tolist()
    r = np.asarray(rank, np.int64)
    t_all = np.ma.filled(lts.astype(np.int64), 0)
    g_ts = np.fromiter(g.ts, np.int64, g.n)
    g_end = np.fromiter(g.end, np.int64, g.n)
    for rk, nodes in host_nodes.items():
        sel = np.flatnonzero(has & (r == rk))
        if not len(sel) or not nodes:
            continue
        nd = np.asarray(nodes, np.int64)
        st, en = g_ts[nd], g_end[nd]
        t = t_all[sel]
        k = np.searchsorted(st, t, side="right") - 1
        res = np.where(k >= 0, nd[np.maximum(k, 0)], -1)
        found = np.zeros(len(t), bool)
        for d in range(8):  # the look back, nearest first
            j = k - d
            jj = np.maximum(j, 0)
            hit = ~found & (j >= 0) & (st[jj] <= t) & (t <= en[jj])
            res[hit] = nd[jj[hit]]
            found |= hit
        out[sel] = res
    return out.tolist()


def waited_for(g: Graph, srt: list[int], times: list[int], i: int, after: int) -> int | None:
    """Work on another lane of i's rank that ended within WAIT_NS before i started and
    after `after` (what i's start waited for), else None."""
    return latest_before(
        srt, times, g.ts[i], exclude_lane=g.lane[i], g=g, after=after, rank=g.rank[i]
    )


def latest_before(
    srt, times, t, *, exclude_lane, g, after, rank=None, within: int | None = WAIT_NS
) -> int | None:
    # ends a few ns after t: the trace's µs timestamps with 3 decimals round
    k = bisect_right(times, t + ROUND_NS) - 1
    while k >= 0 and times[k] >= after:
        j = srt[k]
        if g.lane[j] != exclude_lane and (rank is None or g.rank[j] == rank):
            return j if within is None or t - times[k] <= within else None
        k -= 1
    return None


def on_host_thread(g: Graph, i: int, host_lanes: set[tuple[int, str]]) -> bool:
    """A gloo span on a thread that runs host ops (send/recv sit on the main thread)."""
    lane = g.lane[i]
    return lane.startswith("gloo ") and (g.rank[i], "thread " + lane[5:]) in host_lanes


def in_flight(
    srt: list[int], times: list[int], g: Graph, idle: int, t: int, sent: dict[int, int]
) -> int | None:
    """The gloo span (communication by end: `srt`, `times`) ending last in (`idle`, `t`]
    that started before `idle` and whose transfer ended after it: what a thread idle from
    `idle` to `t` waited for. A send/recv's transfer ends with its pair's first member
    (`sent`), not at its span's end, which may be the wait itself. Only gloo spans: a
    thread blocks in `Work.wait()` on them, the trace does not show it; a GPU host thread
    is not blocked by a kernel except through a sync."""
    k = bisect_right(times, t + ROUND_NS) - 1
    while k >= 0 and times[k] > idle:
        j = srt[k]
        if g.ts[j] < idle and g.lane[j].startswith("gloo ") and sent.get(j, times[k]) > idle:
            return j
        k -= 1
    return None


def launch_latency(values: list[int]) -> float:
    """The launch latency: the 10th percentile of the non-negative values, at most
    MAX_LAUNCH_NS (DEFAULT_LAUNCH_NS without any): when the host runs far ahead, work that
    did not queue behind its stream waited for something else (an event), not its launch."""
    v = sorted(x for x in values if x >= 0)
    return float(min(v[len(v) // 10], MAX_LAUNCH_NS)) if v else float(DEFAULT_LAUNCH_NS)
