"""The dependency graph of the analysed steps, across ranks, from the trace alone.

Nodes (one per unit of work, each with a start and an end):
- **host**: a top-level CPU op or runtime call on a thread (`stepmodel.graph:host`); what
  it contains (launches, blocking syncs, collective issue ops) acts through it;
- **device**: a kernel, copy or memset on its stream, or a gloo span on its worker thread;
- **instance**: a collective instance matched across every rank of its group
  (`collectives.matched`), a node of its own.

Edges (a node starts at the latest of its start edges; ends at the later of start + its
duration and its end edges), each with a lag measured from the trace:
- host order: a top-level event follows the one before it on its thread, after the
  measured gap (host work between ops is taken as measured);
- launch: device work starts no earlier than its launch call (correlation) plus the launch
  latency: the measured one where the work waited for its launch (its stream was free),
  else the rank's median launch latency;
- stream order: device work follows the work before it on its stream;
- blocking sync: a host event containing a call that blocks until device work is done
  (`cudaDeviceSynchronize`, `cudaStreamSynchronize`, `cudaEventSynchronize`, their `hip`
  names, a blocking copy of any name, a call a Kineto `cuda_sync` event names) ends no
  earlier than the last device work that ended during it, plus the measured tail; a call
  whose own device work ended inside it (a blocking copy) ends no earlier than that work.
  Either is a host wait (`Graph.sync_api`, `Graph.awaited`): "sync" on the path;
- inferred waits: device work that starts later than its launch and its stream allow, within
  `WAIT_NS` after work on another lane of its rank ended, waits for that work (an event
  wait the trace does not record: the optimizer after the gradient all-reduce, the
  all-reduce after its bucket's gradients); a host event that starts more than `WAIT_NS`
  after its predecessor on the thread, within `WAIT_NS` after work of another thread or
  lane of its rank ended, waits for it (a gloo `Work.wait()`, the autograd thread
  starting after the forward);
- collectives: every member of an instance starts as its own lane allows; the instance
  starts at its last member's start and takes the transfer time (the earliest member end
  − the last start: the collective without the wait for peers); each member ends at the
  instance's end plus its own measured tail. A send and its recv are an instance of two
  where the peer is known (a 2-rank group: the graph SQL's `p2p:` keys). Unmatched
  collectives and point-to-point transfers without a known peer keep their measured
  duration (docs/step-model.md).

Every lag is measured, so replaying the graph unchanged gives the measured times up to the
edges the trace cannot explain; `replay_error` says how complete the graph is.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from tracekit import sql
from tracekit.stepmodel import edges, instances, rows, waits
from tracekit.stepmodel.kinds import (
    COMM,
    COMM_WAKE_NS,
    COMPUTE,
    DEFAULT_LAUNCH_NS,
    E_ANCHOR,
    E_CHAIN,
    E_DUR,
    E_HOSTWAIT,
    E_INST,
    E_LAUNCH,
    E_STREAM,
    E_SYNC,
    E_TAIL,
    E_UNEXPLAINED,
    E_WAIT,
    HOST,
    INST,
    MAX_LAUNCH_NS,
    P2P,
    ROUND_NS,
    STREAM_SLACK_NS,
    SYNC_API,
    WAIT_NS,
)

# the graph's vocabulary (kinds.py) stays importable from here: callers read G.E_CHAIN …
__all__ = [
    "COMM",
    "COMM_WAKE_NS",
    "COMPUTE",
    "DEFAULT_LAUNCH_NS",
    "E_ANCHOR",
    "E_CHAIN",
    "E_DUR",
    "E_HOSTWAIT",
    "E_INST",
    "E_LAUNCH",
    "E_STREAM",
    "E_SYNC",
    "E_TAIL",
    "E_UNEXPLAINED",
    "E_WAIT",
    "HOST",
    "INST",
    "MAX_LAUNCH_NS",
    "P2P",
    "ROUND_NS",
    "STREAM_SLACK_NS",
    "SYNC_API",
    "WAIT_NS",
    "Graph",
    "RankSpan",
    "build",
]


@dataclass
class RankSpan:
    rank: int
    start_ns: int  # window start (the anchor)
    end_ns: int  # window end
    n_steps: int
    end_edges: list[tuple[int, int]] = field(default_factory=list)  # (node, lag from its end)
    steps: list[tuple[int, int]] = field(default_factory=list)  # (start, end) of each step
    main_tid: int | None = None


@dataclass
class Graph:
    cpu: bool  # a CPU run: the host is the device
    rank: list[int] = field(default_factory=list)
    lane: list[str] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    ts: list[int] = field(default_factory=list)  # measured start
    end: list[int] = field(default_factory=list)  # measured end
    dur: list[float] = field(default_factory=list)  # own duration (start → end)
    starts: list[list[tuple]] = field(default_factory=list)  # (src, src_end, lag, ekind)
    ends: list[list[tuple]] = field(default_factory=list)  # (src, lag, ekind): src end → end
    coll: list[str | None] = field(default_factory=list)
    nbytes: list[int | None] = field(default_factory=list)
    group: list[int | None] = field(default_factory=list)
    inst: list[int] = field(default_factory=list)  # member → its instance node (−1)
    backward: list[bool] = field(default_factory=list)  # compute of the backward pass
    # a host wait: the blocking API a host node waits in (a blocking copy's device work:
    # the API that launched it), None elsewhere; and the device work it waited for (−1)
    sync_api: list[str | None] = field(default_factory=list)
    awaited: list[int] = field(default_factory=list)
    sync_span: dict[int, tuple[int, int]] = field(default_factory=dict)  # host → its call
    spans: dict[int, RankSpan] = field(default_factory=dict)
    # rank → the data loader's fetches (start, end) in its window (`no-input-wait`)
    input_spans: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    dropped: int = 0  # edges the measured order cannot hold (none expected)
    origin: int = 0  # ns since the epoch of time 0 (the earliest window start)
    _step_starts: dict[int, list[int]] = field(default_factory=dict, repr=False)  # step_of's

    def add(self, rank, lane, kind, name, ts, end, dur) -> int:
        self.rank.append(rank)
        self.lane.append(lane)
        self.kind.append(kind)
        self.name.append(name)
        self.ts.append(int(ts))
        self.end.append(int(end))
        self.dur.append(float(dur))
        self.starts.append([])
        self.ends.append([])
        self.coll.append(None)
        self.nbytes.append(None)
        self.group.append(None)
        self.inst.append(-1)
        self.backward.append(False)
        self.sync_api.append(None)
        self.awaited.append(-1)
        return len(self.rank) - 1

    def extend(self, rank, lane, kind, name, ts, end, dur) -> range:
        """Many nodes at once (columns of equal length; `kind` one value for all), as
        `add` would add them one by one; returns their ids."""
        i0, m = len(self.rank), len(rank)
        self.rank += rank
        self.lane += lane
        self.kind += [kind] * m
        self.name += name
        self.ts += ts
        self.end += end
        self.dur += dur
        self.starts += [[] for _ in range(m)]
        self.ends += [[] for _ in range(m)]
        self.coll += [None] * m
        self.nbytes += [None] * m
        self.group += [None] * m
        self.inst += [-1] * m
        self.backward += [False] * m
        self.sync_api += [None] * m
        self.awaited += [-1] * m
        return range(i0, i0 + m)

    @property
    def n(self) -> int:
        return len(self.rank)

    def step_starts(self, r: int) -> list[int]:
        """Rank `r`'s step starts in order (made once a rank: `step_of` and `overlap:`
        bisect them)."""
        starts = self._step_starts.get(r)
        if starts is None:
            starts = self._step_starts[r] = [s for s, _ in self.spans[r].steps]
        return starts

    def step_of(self, i: int) -> int:
        """Index of the step (of its rank) node `i` starts in (0 before the first)."""
        k = bisect_right(self.step_starts(self.rank[i]), self.ts[i]) - 1
        return k if k > 0 else 0


def build(run, windows: str) -> Graph:
    """The graph of each rank's window (`windows`: SQL rows rank, wid, start_ns, end_ns, n)."""
    run.step_tables()  # the inputs the ingest left out, computed once for the queries below
    con = run.con
    wrows = con.sql(f"SELECT rank, start_ns, end_ns, n FROM ({windows})").fetchall()
    steps = con.sql(sql.query("stepmodel.graph", "steps", windows=windows)).fetchall()
    # times relative to the earliest window start: ns since the epoch (~1.8e18) are beyond
    # a float's exact integers (2^53), and the replay adds floats
    o = min((int(s) for _r, s, _e, _n in wrows if s is not None), default=0)
    # the two large inputs as columns (tens of thousands of rows: tuples per row and their
    # transposition cost more than the query's numpy result), times made relative there
    hcols = rows.host(con, windows, o)
    dcols = rows.device(con, windows, o)
    g = Graph(cpu=bool(np.all(dcols.arrays[4])))  # every device row a gloo span
    g.origin = o

    def rel(x):
        return None if x is None else int(x) - o

    steps = [(r, st, rel(s), rel(e), tid) for r, st, s, e, tid in steps]
    for rank, s, e, n in wrows:
        if s is not None:
            g.spans[rank] = RankSpan(rank, rel(s), rel(e), max(int(n), 1))
    for rank, _step, s, e, tid in steps:
        sp = g.spans.get(rank)
        if sp is not None:
            sp.steps.append((int(s), int(e)))
            sp.main_tid = sp.main_tid if sp.main_tid is not None else tid
    for sp in g.spans.values():
        if not sp.steps:
            sp.steps = [(sp.start_ns, sp.end_ns)]
    for rank, s, e in con.sql(
        sql.query("stepmodel.graph", "input_spans", windows=windows)
    ).fetchall():
        g.input_spans.setdefault(rank, []).append((rel(s), rel(e)))

    # ---- host: top-level events per thread (what they contain acts through them)
    h_rank, h_tid, h_name, h_ts, h_end = hcols[0], hcols[1], hcols[4], hcols[2], hcols[3]
    ids = g.extend(
        h_rank,
        [f"thread {tid}" for tid in h_tid],
        HOST,
        h_name,
        h_ts,
        h_end,
        [float(e - t) for t, e in zip(h_ts, h_end, strict=True)],
    )
    main_of = {r: sp.main_tid for r, sp in g.spans.items()}
    g.backward[ids.start : ids.stop] = [
        name.startswith("autograd::engine") or (main is not None and tid != main)
        for name, tid, main in zip(h_name, h_tid, (main_of.get(r) for r in h_rank), strict=True)
    ]
    # host node → (the blocking call in it, its start, its end, the stream it waited for)
    sync_of: dict[int, tuple[str, int, int, int | None]] = {
        i: (api, cs, ce, stream)
        for i, api, cs, ce, stream in zip(ids, *hcols[5:9], strict=True)
        if api is not None
    }
    host_nodes: dict[int, list[int]] = {}  # rank → host nodes (any thread), by start
    for i, rank in zip(ids, h_rank, strict=True):
        host_nodes.setdefault(rank, []).append(i)
    # ---- device work and gloo spans (the rows' arrays: `dcols.arrays`)
    dev_nodes: dict[int, list[int]] = {}
    by_instance: dict[str, list[int]] = {}
    for v in host_nodes.values():  # by (start, id): ids are appended in increasing order
        v.sort(key=g.ts.__getitem__)
    blocking: dict[int, int] = {}  # host node → the device work its call waited for
    d_ts, d_end = dcols[2], dcols[3]
    da = dcols.arrays
    ts_a = np.ma.getdata(da[2]).astype(np.int64)
    end_a = np.ma.getdata(da[3]).astype(np.int64)
    # a gloo span is a lane of its own even where it sits on the main thread (send and
    # recv): the thread's next op waits for it, it is not its predecessor
    lane_keys = list(zip(dcols[1], dcols[4], strict=True))
    lane_of = {k: f"gloo {k[0]}" if k[1] else f"stream {k[0]}" for k in dict.fromkeys(lane_keys)}
    lanes = list(map(lane_of.__getitem__, lane_keys))
    ids = g.extend(
        dcols[0], lanes, COMPUTE, dcols[5], d_ts, d_end, (end_a - ts_a).astype(float).tolist()
    )
    a, b, m = ids.start, ids.stop, len(lanes)
    comm = np.ma.filled(da[6], False).astype(bool)
    g.kind[a:b] = np.where(comm, COMM, COMPUTE).tolist()
    g.coll[a:b], g.nbytes[a:b], g.group[a:b] = dcols[10], dcols[12], dcols[13]
    launcher = np.asarray(edges.launchers(g, host_nodes, da[0], da[8]), np.int64)
    rank_a = np.asarray(da[0], np.int64)
    # each rank's rows (the query's rows come by rank): its nodes, in that order for now
    cut = np.flatnonzero(np.r_[True, rank_a[1:] != rank_a[:-1], True])
    for x, y in zip(cut[:-1].tolist(), cut[1:].tolist(), strict=True):
        dev_nodes[int(rank_a[x])] = list(range(a + x, a + y))
    for k in np.flatnonzero(~np.ma.getmaskarray(da[11])).tolist():
        by_instance.setdefault(dcols[11][k], []).append(a + k)
    launched = np.flatnonzero(launcher >= 0)
    lts_l, lend_l, lname_l = dcols[8], dcols[9], dcols[14]
    h_l = launcher.tolist()
    # device node → (its launching host node, the launch's ts)
    launch_of = {a + k: (h_l[k], lts_l[k]) for k in launched.tolist()}
    # a call that returns only once its own work is done (a blocking copy) waited for it
    lend_a = np.ma.filled(da[9].astype(np.int64), np.iinfo(np.int64).min)
    lts_a = np.ma.filled(da[8].astype(np.int64), 0)
    held = launched[
        ~np.ma.getmaskarray(da[9])[launched]
        & (lts_a[launched] <= end_a[launched])
        & (end_a[launched] <= lend_a[launched])
    ]
    for k in held.tolist():
        i, h = a + k, h_l[k]
        if g.end[i] >= g.end[blocking.get(h, i)]:
            blocking[h] = i
            lname = lname_l[k]
            if lname is not None and SYNC_API.search(lname):
                # a blocking copy: the host waits in its call for this device work
                g.sync_api[i] = g.sync_api[h] = lname
                g.awaited[i] = i
                g.sync_span[i] = g.sync_span[h] = (lts_l[k], lend_l[k])
    host_bwd = np.fromiter(g.backward, bool, g.n)
    bwd = np.zeros(m, bool)
    bwd[launched] = host_bwd[launcher[launched]] & ~comm[launched]
    g.backward[a:b] = bwd.tolist()
    # ---- cross-stream waits the trace records (CUDA sync events): consumer → producer
    waited = waits.recorded(con, windows, g, dev_nodes, o)
    # ... and those the runtime calls imply where no sync event records them
    for consumer, producer in waits.from_calls(con, windows, g, dcols, ids, o).items():
        waited.setdefault(consumer, producer)
    # ---- stream order and launch edges
    host_lanes = {(g.rank[i], g.lane[i]) for v in host_nodes.values() for i in v}
    # the device nodes `_on_host_thread` (gloo send/recv on a host thread: posted in host
    # order, not queued behind the span before them)
    on_host = {
        i for v in dev_nodes.values() for i in v
        if g.lane[i][:5] == "gloo " and edges.on_host_thread(g, i, host_lanes)
    }  # fmt: skip
    on_host_a = np.zeros(m, bool)
    on_host_a[np.asarray(sorted(on_host), np.int64) - a] = True
    # each rank's nodes by (lane, start, node): the lanes' names in sorted order as codes
    names = sorted(set(lanes))
    code_of = {k: names.index(v) for k, v in lane_of.items()}
    lane_code = np.fromiter(map(code_of.__getitem__, lane_keys), np.int64, m)
    srt = np.lexsort((np.arange(m), ts_a, lane_code, rank_a))
    for x, y in zip(cut[:-1].tolist(), cut[1:].tolist(), strict=True):
        loc = srt[x:y]
        dev_nodes[int(rank_a[x])] = (loc + a).tolist()
        edges.device_edges(
            g, loc, a, ts_a, end_a, lane_code, on_host_a, launcher, lts_a, waited.get
        )
    # ---- a collective's data: the compute its rank had launched before issuing it (what
    # the event a process group records on the current stream and waits for captures):
    # of each rank's launched compute by (launch, node), the last launched at or before it
    for x, y in zip(cut[:-1].tolist(), cut[1:].tolist(), strict=True):
        rows_ = np.arange(x, y)
        rows_ = rows_[launcher[x:y] >= 0]
        comp = rows_[~comm[rows_]]
        comp = comp[np.lexsort((comp, lts_a[comp]))]
        coll_rows = rows_[comm[rows_]]
        k = np.searchsorted(lts_a[comp], lts_a[coll_rows], side="right") - 1
        coll_rows, d_rows = coll_rows[k >= 0], comp[k[k >= 0]]
        near = end_a[d_rows] <= ts_a[coll_rows] + ROUND_NS
        for i, d in zip((coll_rows[near] + a).tolist(), (d_rows[near] + a).tolist(), strict=True):
            if not any(s == d for s, *_ in g.starts[i]):
                g.starts[i].append((d, True, min(g.ts[i] - g.end[d], 0), E_WAIT))
    # ---- host order, blocking syncs, host waits
    all_ends: dict[int, tuple[list[int], list[int]]] = {}
    for rank in g.spans:
        nodes = sorted(host_nodes.get(rank, []) + dev_nodes.get(rank, []), key=g.end.__getitem__)
        all_ends[rank] = (nodes, [g.end[i] for i in nodes])
    csrt = {
        r: sorted((i for i in v if g.kind[i] == COMM), key=g.end.__getitem__)
        for r, v in dev_nodes.items()
    }
    ctimes = {r: [g.end[i] for i in v] for r, v in csrt.items()}
    hsrt = {r: sorted(v, key=g.end.__getitem__) for r, v in host_nodes.items()}
    htimes = {r: [g.end[i] for i in v] for r, v in hsrt.items()}
    # a send/recv span on a host thread lasts until the thread waits for it: its transfer
    # ended with its pair's first member (the span may end much later, at that wait)
    sent = {
        m: min(g.end[x] for x in pair)
        for key, pair in by_instance.items()
        if key.startswith("p2p:")
        for m in pair
    }
    for rank, nodes in host_nodes.items():
        by_thread: dict[str, int] = {}
        dev_sorted = sorted(dev_nodes.get(rank, []), key=g.end.__getitem__)
        dev_ends = [g.end[i] for i in dev_sorted]
        for i in nodes:  # in start order
            p = by_thread.get(g.lane[i])
            by_thread[g.lane[i]] = i
            prev_end = g.end[p] if p is not None else g.spans[rank].start_ns
            w = None
            if p is None or g.ts[i] - prev_end > WAIT_NS:
                srt, times = all_ends[rank]
                w = edges.latest_before(
                    srt, times, g.ts[i], exclude_lane=g.lane[i], g=g, after=prev_end
                )
                if w is None and csrt.get(rank):  # a wait for a collective (gloo's
                    # Work.wait() is not traced; the waiter wakes up tens of µs after it ends)
                    w = edges.latest_before(
                        csrt[rank],
                        ctimes[rank],
                        g.ts[i],
                        exclude_lane=g.lane[i],
                        g=g,
                        after=prev_end,
                        within=COMM_WAKE_NS,
                    )
                if w is None and csrt.get(rank):  # a collective or p2p transfer that was
                    # in flight when the thread went idle and ended during the gap: the
                    # thread waited for it (its wake-up measured, however long)
                    w = edges.in_flight(csrt[rank], ctimes[rank], g, prev_end, g.ts[i], sent)
                if w is None:  # else the thread waited for another thread of its rank
                    w = edges.latest_before(
                        hsrt[rank],
                        htimes[rank],
                        g.ts[i],
                        exclude_lane=g.lane[i],
                        g=g,
                        after=prev_end,
                        within=None,
                    )
                if w is not None:  # the gap was a wait for it: the thread was free before
                    g.starts[i].append((w, True, g.ts[i] - g.end[w], E_HOSTWAIT))
            if p is not None:
                g.starts[i].append((p, True, 0 if w is not None else g.ts[i] - g.end[p], E_CHAIN))
            d = blocking.get(i)
            if d is None and i in sync_of:
                api, cs, ce, stream = sync_of[i]
                g.sync_api[i] = g.sync_api[i] or api
                g.sync_span[i] = (cs, ce)
                # the host event ends no earlier than the last device work that ended in it
                # (on the stream a Stream Sync event names, where it does)
                if stream is not None:
                    d = edges.last_ending(
                        g, dev_sorted, dev_ends, g.ts[i], g.end[i], f"stream {stream}"
                    )
                if d is None:
                    d = edges.last_ending(g, dev_sorted, dev_ends, g.ts[i], g.end[i])
            if d is not None:
                if g.sync_api[i] is not None:
                    g.awaited[i] = d
                g.ends[i].append((d, g.end[i] - g.end[d], E_SYNC))
                # its own time: up to the blocking call, and the tail after the device
                # work it waited for
                before = max(launch_of[d][1] - g.ts[i], 0) if d in blocking.values() else 0
                g.dur[i] = min(g.dur[i], before + g.end[i] - g.end[d])
    # ---- collectives matched across ranks: the instance node
    instances.add(g, by_instance)
    # ---- each rank's window end: its step thread's last host event, or its last work
    instances.window_ends(g, host_nodes, dev_nodes, on_host)
    return g
