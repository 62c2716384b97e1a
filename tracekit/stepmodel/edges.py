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


def device_edges(
    g: Graph, i: int, p: int, launch, lat: float, srt, times, recorded: int | None = None
) -> None:
    """Start edges of device work `i` (stream predecessor `p`, −2 for none; `launch`:
    (host node, launch call start) or None; `recorded`: the work a CUDA sync event says it
    waited for). What set its start, first that explains it: its stream (it was queued:
    started within STREAM_SLACK_NS of the stream freeing), its launch (within the launch
    latency of its call), the recorded wait (however long after that work ended), work on
    another lane that ended within WAIT_NS before it (an event wait), its stream after a
    longer gap; else its launch with the measured delay. Edges that did not bind keep the
    smallest lag the trace allows."""
    gts, gend = g.ts, g.end  # bound once: called once a device node (~36,000 at 8 big ranks)
    ts = gts[i]
    end_p = gend[p] if p >= 0 else 0
    gap_s = None
    if p >= 0:
        # overlapping on one stream (ns rounding, or a trace quirk): from the
        # predecessor's start, at the measured distance
        gap_s = ts - end_p if end_p <= ts + STREAM_SLACK_NS else None
    r = ts - launch[1] if launch is not None else None
    w = None
    bound_s = gap_s is not None and gap_s <= STREAM_SLACK_NS
    bound_l = r is not None and not bound_s and r <= lat + STREAM_SLACK_NS
    if not bound_s and not bound_l:
        after = max(launch[1] if launch else 0, end_p)
        if recorded is not None and after <= gend[recorded] <= ts + ROUND_NS:
            w = recorded
        else:
            w = waited_for(g, srt, times, i, after)
    stream_lag = 0
    if gap_s is not None and (bound_s or (w is None and not bound_l and gap_s <= WAIT_NS)):
        stream_lag = gap_s
        bound_s = True
    st = g.starts[i]
    if p >= 0:
        if gap_s is not None:
            st.append((p, True, stream_lag, E_STREAM))
        else:
            st.append((p, False, ts - gts[p], E_STREAM))
            bound_s = True
    if w is not None:
        st.append((w, True, ts - gend[w], E_WAIT))
    if launch is not None:
        h, lts = launch
        explained = bound_s or w is not None or bound_l
        lag = r if not (bound_s or w is not None) else min(r, lat)
        # started long after its launch with nothing in the trace to say why: an
        # unexplained wait, kept as measured (not host time)
        ek = E_LAUNCH if explained else E_UNEXPLAINED
        st.append((h, False, lts - gts[h] + lag, ek))
    elif p >= 0 and not bound_s and w is None and gap_s is not None:
        st[-1] = (p, True, gap_s, E_STREAM)  # nothing else explains it


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
