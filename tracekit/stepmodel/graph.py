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

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from tracekit import sql
from tracekit.stepmodel import rows

HOST, COMPUTE, COMM, INST = 0, 1, 2, 3
# edge kinds: how a lag or a duration on the critical path is classified
(E_DUR, E_LAUNCH, E_STREAM, E_WAIT, E_CHAIN, E_ANCHOR, E_SYNC, E_INST, E_TAIL, E_HOSTWAIT,
 E_UNEXPLAINED) = range(11)  # fmt: skip
COMM_WAKE_NS = 200_000  # a thread waiting for a collective resumes within this after it
WAIT_NS = 20_000  # an unexplained start this close after other work ended waits for it
STREAM_SLACK_NS = 5_000  # device work starting this close after its stream freed was queued
MAX_LAUNCH_NS = 20_000  # launch latencies above this are waits the trace does not show
DEFAULT_LAUNCH_NS = 5_000  # launch latency when no device work waited for its launch
ROUND_NS = 10  # timestamps in µs with 3 decimals: ends and starts meet within rounding
P2P = ("send", "recv", "send_recv")
# runtime calls that block the host until device work is done (the graph SQL's `sync_name`
# lists them; a launch call of these names whose device work ended inside it is a blocking
# copy): a host wait on the path is "sync", named by its call
SYNC_API = re.compile(r"Synchroni[sz]e|Memcpy|Memset|cuda_sync", re.IGNORECASE)


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

    def step_of(self, i: int) -> int:
        """Index of the step (of its rank) node `i` starts in (0 before the first)."""
        r = self.rank[i]
        starts = self._step_starts.get(r)
        if starts is None:
            starts = self._step_starts[r] = [s for s, _ in self.spans[r].steps]
        return max(bisect_right(starts, self.ts[i]) - 1, 0)


def build(run, windows: str) -> Graph:
    """The graph of each rank's window (`windows`: SQL rows rank, wid, start_ns, end_ns, n)."""
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
    g = Graph(cpu=not any(k in ("kernel", "memcpy", "memset") for k in dcols[4]))
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
    # ---- device work and gloo spans
    dev_nodes: dict[int, list[int]] = {}
    lat_bound: dict[int, list[int]] = {}
    launch_of: dict[int, tuple[int, int]] = {}  # device node → (host node, launch ts)
    by_instance: dict[str, list[int]] = {}
    for v in host_nodes.values():
        v.sort(key=lambda i: (g.ts[i], i))
    host_ts = {r: [g.ts[i] for i in v] for r, v in host_nodes.items()}
    blocking: dict[int, int] = {}  # host node → the device work its call waited for
    d_ts, d_end = dcols[2], dcols[3]
    ids = g.extend(
        dcols[0],
        [
            # a gloo span is a lane of its own even where it sits on the main thread (send
            # and recv): the thread's next op waits for it, it is not its predecessor
            f"stream {lane}" if kind != "comm_thread" else f"gloo {lane}"
            for lane, kind in zip(dcols[1], dcols[4], strict=True)
        ],
        COMPUTE,
        dcols[5],
        d_ts,
        d_end,
        [float(e - t) for t, e in zip(d_ts, d_end, strict=True)],
    )
    a, b = ids.start, ids.stop
    g.kind[a:b] = [COMM if comm else COMPUTE for comm in dcols[6]]
    g.coll[a:b], g.nbytes[a:b], g.group[a:b] = dcols[10], dcols[12], dcols[13]
    for i, rank, lts, lend, key, lname in zip(
        ids, dcols[0], dcols[8], dcols[9], dcols[11], dcols[14], strict=True
    ):
        dev_nodes.setdefault(rank, []).append(i)
        if key is not None:
            by_instance.setdefault(key, []).append(i)
        if lts is None:
            continue
        h = _containing(g, host_nodes.get(rank, []), host_ts.get(rank, []), lts)
        if h is not None:
            launch_of[i] = (h, lts)
            end = g.end[i]
            # a call that returns only once its own work is done (a blocking copy) waited
            if lend is not None and lts <= end <= lend >= end >= g.end[blocking.get(h, i)]:
                blocking[h] = i
                if lname is not None and SYNC_API.search(lname):
                    # a blocking copy: the host waits in its call for this device work
                    g.sync_api[i] = g.sync_api[h] = lname
                    g.awaited[i] = i
                    g.sync_span[i] = g.sync_span[h] = (lts, lend)
            g.backward[i] = g.backward[h] and g.kind[i] == COMPUTE
    # ---- cross-stream waits the trace records (CUDA sync events): consumer → producer
    waits = _recorded_waits(con, windows, g, dev_nodes, o)
    # ... and those the runtime calls imply where no sync event records them
    for consumer, producer in _event_waits(con, windows, g, dcols, ids, o).items():
        waits.setdefault(consumer, producer)
    # ---- stream order and launch edges
    host_lanes = {(g.rank[i], g.lane[i]) for v in host_nodes.values() for i in v}
    # the device nodes `_on_host_thread`, found once (asked per node twice below)
    on_host = {
        i for v in dev_nodes.values() for i in v
        if g.lane[i][:5] == "gloo " and _on_host_thread(g, i, host_lanes)
    }  # fmt: skip
    for rank, nodes in dev_nodes.items():
        nodes.sort(key=lambda i: (g.lane[i], g.ts[i]))
        prev: dict[str, int] = {}
        for i in nodes:
            p = prev.get(g.lane[i])
            prev[g.lane[i]] = i
            if i in on_host:
                p = None  # gloo send/recv on a host thread: posted in host order, not queued
            if i in launch_of and (p is None or g.ts[i] - g.end[p] > STREAM_SLACK_NS):
                lat_bound.setdefault(rank, []).append(g.ts[i] - launch_of[i][1])
            g.inst[i] = -2 if p is None else p  # the stream predecessor, for now
        # the launch latency: the low end of what launch-bound work shows (its median
        # would count work that waited for something the trace does not show)
        lat = _low(lat_bound[rank]) if rank in lat_bound else DEFAULT_LAUNCH_NS
        ends_sorted = sorted(nodes, key=lambda i: g.end[i])
        end_times = [g.end[i] for i in ends_sorted]
        for i in nodes:
            p = g.inst[i]
            g.inst[i] = -1
            _device_edges(g, i, p, launch_of.get(i), lat, ends_sorted, end_times, waits.get(i))
    # ---- a collective's data: the compute its rank had launched before issuing it (what
    # the event a process group records on the current stream and waits for captures)
    for nodes in dev_nodes.values():
        comp = sorted(
            (launch_of[i][1], i) for i in nodes if i in launch_of and g.kind[i] == COMPUTE
        )
        lts_sorted = [x for x, _ in comp]
        for i in nodes:
            if g.kind[i] != COMM or i not in launch_of:
                continue
            k = bisect_right(lts_sorted, launch_of[i][1]) - 1
            if k >= 0:
                d = comp[k][1]
                if g.end[d] <= g.ts[i] + ROUND_NS and not any(s == d for s, *_ in g.starts[i]):
                    g.starts[i].append((d, True, min(g.ts[i] - g.end[d], 0), E_WAIT))
    # ---- host order, blocking syncs, host waits
    all_ends: dict[int, tuple[list[int], list[int]]] = {}
    for rank in g.spans:
        nodes = sorted(host_nodes.get(rank, []) + dev_nodes.get(rank, []), key=lambda i: g.end[i])
        all_ends[rank] = (nodes, [g.end[i] for i in nodes])
    csrt = {
        r: sorted((i for i in v if g.kind[i] == COMM), key=lambda i: g.end[i])
        for r, v in dev_nodes.items()
    }
    ctimes = {r: [g.end[i] for i in v] for r, v in csrt.items()}
    hsrt = {r: sorted(v, key=lambda i: g.end[i]) for r, v in host_nodes.items()}
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
        dev_sorted = sorted(dev_nodes.get(rank, []), key=lambda i: g.end[i])
        dev_ends = [g.end[i] for i in dev_sorted]
        for i in nodes:  # in start order
            p = by_thread.get(g.lane[i])
            by_thread[g.lane[i]] = i
            prev_end = g.end[p] if p is not None else g.spans[rank].start_ns
            w = None
            if p is None or g.ts[i] - prev_end > WAIT_NS:
                srt, times = all_ends[rank]
                w = _latest_before(srt, times, g.ts[i], exclude_lane=g.lane[i], g=g, after=prev_end)
                if w is None and csrt.get(rank):  # a wait for a collective (gloo's
                    # Work.wait() is not traced; the waiter wakes up tens of µs after it ends)
                    w = _latest_before(
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
                    w = _in_flight(csrt[rank], ctimes[rank], g, prev_end, g.ts[i], sent)
                if w is None:  # else the thread waited for another thread of its rank
                    w = _latest_before(
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
                    d = _last_ending(g, dev_sorted, dev_ends, g.ts[i], g.end[i], f"stream {stream}")
                if d is None:
                    d = _last_ending(g, dev_sorted, dev_ends, g.ts[i], g.end[i])
            if d is not None:
                if g.sync_api[i] is not None:
                    g.awaited[i] = d
                g.ends[i].append((d, g.end[i] - g.end[d], E_SYNC))
                # its own time: up to the blocking call, and the tail after the device
                # work it waited for
                before = max(launch_of[d][1] - g.ts[i], 0) if d in blocking.values() else 0
                g.dur[i] = min(g.dur[i], before + g.end[i] - g.end[d])
    # ---- collectives matched across ranks: the instance node
    for key, members in by_instance.items():
        # a send and its recv are two members, whatever the size of their group
        expect = 2 if key.startswith("p2p:") else (g.group[members[0]] or 0)
        if len(members) != expect or len({g.rank[m] for m in members}) != len(members):
            continue  # a member lies outside some rank's window
        last = max(members, key=lambda m: g.ts[m])
        first_end = min(g.end[m] for m in members)
        transfer = max(first_end - g.ts[last], 0)
        j = g.add(
            g.rank[last],
            "collective",
            INST,
            g.coll[last] or g.name[last],
            g.ts[last],
            g.ts[last] + transfer,
            transfer,
        )
        g.coll[j], g.nbytes[j], g.group[j] = g.coll[last], g.nbytes[last], g.group[last]
        for m in members:
            g.starts[j].append((m, False, 0, E_INST))
            g.inst[m] = j
            g.dur[m] = 0.0
            g.ends[m].append((j, g.end[m] - g.end[j], E_TAIL))
    # ---- each rank's window end: its step thread's last host event, or its last work
    for rank, sp in g.spans.items():
        hn = [
            i
            for i in host_nodes.get(rank, [])
            if sp.main_tid is None or g.lane[i] == f"thread {sp.main_tid}"
        ]
        tails = [hn[-1]] if hn else []
        last_by_lane: dict[str, int] = {}
        for i in dev_nodes.get(rank, []):
            if i in on_host:
                continue  # a send's span lasts until it is waited for: not the step's end
            if g.lane[i] not in last_by_lane or g.end[i] > g.end[last_by_lane[g.lane[i]]]:
                last_by_lane[g.lane[i]] = i
        # the step ends when its thread's last host event (and the gap after it) does; a
        # lane's last work bounds it only where it ran past that end (the measured lag
        # after work that ended earlier is host time, already in the host tail) ...
        sp.end_edges = [(i, sp.end_ns - g.end[i]) for i in tails] + [
            (i, min(sp.end_ns - g.end[i], 0) if tails else sp.end_ns - g.end[i])
            for i in last_by_lane.values()
        ]
        dev_last = max(
            (g.end[i] for i in last_by_lane.values() if g.lane[i].startswith("stream ")),
            default=None,
        )
        if tails and not g.cpu and dev_last is not None and dev_last > g.end[tails[0]]:
            # ... but where the device ran past the host's last event (a GPU the host runs
            # ahead of), the step ends when the device does: the time after the host's
            # last event is the device's, and only what follows the device's last work is
            # the step's tail (the host's last event ends no later than that before it)
            tail = max(sp.end_ns - dev_last, 0)
            sp.end_edges = [(i, tail) for i in tails] + [
                (i, min(sp.end_ns - g.end[i], tail)) for i in last_by_lane.values()
            ]
    return g


def _last_ending(g: Graph, srt, times, start: int, end: int, lane: str | None = None):
    """The device work (by end: `srt`, `times`) that ended last in [start, end] (within
    rounding), on `lane` when given: what a blocking call over that span waited for."""
    k = bisect_right(times, end + ROUND_NS) - 1
    while k >= 0 and times[k] >= start:
        if lane is None or g.lane[srt[k]] == lane:
            return srt[k]
        k -= 1
    return None


def _device_edges(
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
    ts = g.ts[i]
    gap_s = None
    if p >= 0:
        # overlapping on one stream (ns rounding, or a trace quirk): from the
        # predecessor's start, at the measured distance
        gap_s = ts - g.end[p] if g.end[p] <= ts + STREAM_SLACK_NS else None
    r = ts - launch[1] if launch is not None else None
    w = None
    bound_s = gap_s is not None and gap_s <= STREAM_SLACK_NS
    bound_l = r is not None and not bound_s and r <= lat + STREAM_SLACK_NS
    if not bound_s and not bound_l:
        after = max(launch[1] if launch else 0, g.end[p] if p >= 0 else 0)
        if recorded is not None and after <= g.end[recorded] <= ts + ROUND_NS:
            w = recorded
        else:
            w = _waited_for(g, srt, times, i, after)
    stream_lag = 0
    if gap_s is not None and (bound_s or (w is None and not bound_l and gap_s <= WAIT_NS)):
        stream_lag = gap_s
        bound_s = True
    if p >= 0:
        if gap_s is not None:
            g.starts[i].append((p, True, stream_lag, E_STREAM))
        else:
            g.starts[i].append((p, False, ts - g.ts[p], E_STREAM))
            bound_s = True
    if w is not None:
        g.starts[i].append((w, True, ts - g.end[w], E_WAIT))
    if launch is not None:
        h, lts = launch
        explained = bound_s or w is not None or bound_l
        lag = r if not (bound_s or w is not None) else min(r, lat)
        # started long after its launch with nothing in the trace to say why: an
        # unexplained wait, kept as measured (not host time)
        ek = E_LAUNCH if explained else E_UNEXPLAINED
        g.starts[i].append((h, False, lts - g.ts[h] + lag, ek))
    elif p >= 0 and not bound_s and w is None and gap_s is not None:
        g.starts[i][-1] = (p, True, gap_s, E_STREAM)  # nothing else explains it


def _recorded_waits(con, windows: str, g: Graph, dev_nodes: dict[int, list[int]], o: int):
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


def _event_waits(con, windows: str, g: Graph, dcols, ids: range, o: int) -> dict[int, int]:
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


def _containing(g: Graph, nodes: list[int], starts: list[int], t: int) -> int | None:
    """The top-level host node (any thread of the rank) whose span holds time `t`."""
    k = bisect_right(starts, t) - 1
    for j in range(k, max(k - 8, -1), -1):
        i = nodes[j]
        if g.ts[i] <= t <= g.end[i]:
            return i
    return nodes[k] if k >= 0 else None


def _waited_for(g: Graph, srt: list[int], times: list[int], i: int, after: int) -> int | None:
    """Work on another lane of i's rank that ended within WAIT_NS before i started and
    after `after` (what i's start waited for), else None."""
    return _latest_before(
        srt, times, g.ts[i], exclude_lane=g.lane[i], g=g, after=after, rank=g.rank[i]
    )


def _latest_before(
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


def _on_host_thread(g: Graph, i: int, host_lanes: set[tuple[int, str]]) -> bool:
    """A gloo span on a thread that runs host ops (send/recv sit on the main thread)."""
    lane = g.lane[i]
    return lane.startswith("gloo ") and (g.rank[i], "thread " + lane[5:]) in host_lanes


def _in_flight(
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


def _low(values: list[int]) -> float:
    """The launch latency: the 10th percentile of the non-negative values, at most
    MAX_LAUNCH_NS (DEFAULT_LAUNCH_NS without any): when the host runs far ahead, work that
    did not queue behind its stream waited for something else (an event), not its launch."""
    v = sorted(x for x in values if x >= 0)
    return float(min(v[len(v) // 10], MAX_LAUNCH_NS)) if v else float(DEFAULT_LAUNCH_NS)
