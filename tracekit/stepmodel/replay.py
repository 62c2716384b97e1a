"""Replay: run the graph forward, and backtrack the critical path that sets the step.

Each node's start is the latest of its start edges (the source's start or end plus the
lag), its end the later of its start plus its duration and its end edges; a node with no
start edge starts at its rank's window start plus its measured offset. Vertices (a node's
start, its end) run in measured-time order, which every edge respects (an edge the
measured order cannot hold is dropped and counted in `Graph.dropped`).

A rank's replayed window ends at the latest of its end edges (its step thread's last
host event, each lane's last work, plus their measured distance to the window end); its
replayed step is that window ÷ its steps, and the run's step is the mean over ranks, as
`summary.step_time_ms` is the mean of the ranks' measured steps.

The critical path starts at the end of a rank's replayed window and
follows, from each vertex, the edge that set its time; each edge is a segment of the path
classified by kind (docs/step-model.md): compute (device compute, on CPU runs the host's
ops), communication (a collective's transfer), waiting (point-to-point transfers the graph
does not pair: their duration is mostly the wait for the peer), sync (the host waiting in a
blocking call, named by it and the device work it waited for), host (host work, launch
latency) and idle (gaps on a lane with nothing on the path to explain them). Each rank
has its path, from its window start to its replayed end, each instant once: they add to
its replayed window (`model.StepModel.critical_path` averages them over ranks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from operator import is_not, itemgetter

from tracekit.stepmodel import graph as G
from tracekit.stepmodel.path import Segment, rank_path

__all__ = [
    "COLOURS",
    "KINDS",
    "Replay",
    "Segment",
    "edge_arrays",
    "first_changed",
    "order",
    "ordered",
    "prune",
    "run",
    "slack",
    "toposort",
]

ROUND_NS = 1_000  # replayed ends this close are a tie
KINDS = ("compute", "communication", "waiting", "sync", "host", "idle")
# one colour per kind, for every chart that draws the path (the HTML report's, the TUI's)
COLOURS = {
    "compute": "#4c78a8",
    "communication": "#e45756",
    "waiting": "#b279a2",
    "sync": "#f58518",
    "host": "#72b7b2",
    "idle": "#bab0ac",
}


@dataclass
class Replay:
    measured_step_ms: float
    replayed_step_ms: float
    by_rank_step_ms: dict[int, float]  # replayed step per rank
    path: list[Segment] = field(default_factory=list)  # in time order
    # each rank's path: what set its replayed window end, from its window start (in time
    # order); `path` is the one of the rank whose replayed window is longest
    paths: dict[int, list[Segment]] = field(default_factory=dict, repr=False)
    origin_ns: float = 0.0  # the earliest window start: segments' time zero
    steps: int = 1  # steps of the rank whose end the path starts from
    times: list[float] = field(default_factory=list, repr=False)  # each vertex's time
    end_ns: float = 0.0  # the latest rank's replayed window end

    @property
    def replay_error(self) -> float | None:
        if not self.measured_step_ms:
            return None
        return self.replayed_step_ms / self.measured_step_ms - 1


def order(g: G.Graph) -> list[int]:
    """Vertices (2·node: start, 2·node+1: end) in an order every edge respects: measured
    time (at one instant an instance's end, nodes' ends, nodes' starts and zero-length
    ends by vertex, instances' starts, then instances' zero-length ends) when that order
    holds every edge — the usual case — else a topological sort (`toposort`)."""
    return ordered(g)[0]


def ordered(g: G.Graph, base=None, edges=None, measured=None) -> tuple[list[int], bool]:
    """`order`, and whether it is the measured order (which holds every edge: `prune`
    then drops nothing). `base`: (`edge_arrays` of a graph, its starts, its ends) of which
    `g`'s edges are an edit (a what-if: `Edits` replaces the lists of the nodes it
    changes): the edges are those arrays less the changed nodes', plus theirs; `edges`:
    `edge_arrays(g)` where the caller has them; `measured`: `measured_order(g)` where
    the caller has it (a what-if changes edges and durations, not measured times).

    A zero-length node's end sorts with the starts of its instant, by vertex: after its
    own start (2·i < 2·i+1) and before the start of what follows it on its thread (added
    after it). Any topological order replays to the same times (the latest of each
    node's edges does not depend on the order), so this only decides whether the
    measured order holds or `toposort` is needed."""
    if not g.n:
        return [], True
    vorder, pos = measured if measured is not None else measured_order(g)
    if edges is not None:
        src, dst = edges
    else:
        src, dst = edge_arrays(g) if base is None else _edited_arrays(g, *base)
    if src.size and not (pos[src] < pos[dst]).all():
        return toposort(g), False
    return vorder, True


def measured_order(g: G.Graph):
    """(the vertices in measured-time order as a list, each vertex's position in it as
    an array): `ordered`'s order before its edges are checked."""
    import numpy as np

    n = g.n
    ts = np.asarray(g.ts, dtype=np.int64)
    end = np.asarray(g.end, dtype=np.int64)
    inst = np.asarray(g.kind, dtype=np.int8) == G.INST
    zero = end <= ts
    time = np.empty(2 * n, dtype=np.int64)
    time[0::2], time[1::2] = ts, end
    tie = np.empty(2 * n, dtype=np.int8)
    tie[0::2] = np.where(inst, 3, 2)
    tie[1::2] = np.where(inst, np.where(zero, 5, 0), np.where(zero, 2, 1))
    vorder = np.lexsort((np.arange(2 * n), tie, time))
    pos = np.empty(2 * n, dtype=np.int64)
    pos[vorder] = np.arange(2 * n)
    return vorder.tolist(), pos


def edge_arrays(g: G.Graph, nodes=None):
    """Every edge (of `nodes` only, when given) as (source vertex, target vertex) arrays:
    start edges end at 2·i, end edges at 2·i+1."""
    import numpy as np

    if nodes is None:
        starts, ends, ids = g.starts, g.ends, np.arange(g.n, dtype=np.int64)
    else:
        starts = [g.starts[i] for i in nodes]
        ends = [g.ends[i] for i in nodes]
        ids = np.asarray(nodes, dtype=np.int64)
    # the edge lists flattened in node order (a start edge: (source, from its end, …))
    s_src, s_end, s_dst = _flat(starts, ids, 2)
    e_src, _e_end, e_dst = _flat(ends, ids, 1)
    src = np.concatenate([2 * s_src + s_end, 2 * e_src + 1])
    dst = np.concatenate([2 * s_dst, 2 * e_dst + 1])
    return src, dst


def _flat(lists: list[list[tuple]], ids, fields: int):
    """Each edge of `lists` (one list a node of `ids`): its source, its second field as
    0/1 where `fields` is 2 (a start edge's from-its-end), and its node."""
    import numpy as np

    counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = list(chain.from_iterable(lists))
    src = np.fromiter(map(itemgetter(0), flat), dtype=np.int64, count=len(flat))
    second = (
        np.fromiter(map(bool, map(itemgetter(1), flat)), dtype=np.int64, count=len(flat))
        if fields == 2
        else None
    )
    return src, second, np.repeat(ids, counts)


def _edited_arrays(g: G.Graph, arrays, starts, ends):
    """`edge_arrays(g)` from the arrays of the graph whose `starts`, `ends` g's edit: its
    edges less those into the nodes whose lists were replaced, plus theirs (a what-if
    replaces a few thousand of tens of thousands: built whole, the arrays were a third
    of the replays' time)."""
    import numpy as np

    src, dst = arrays
    changed = _replaced(g.n, (g.starts, starts), (g.ends, ends)).tolist()
    if not changed:
        return src, dst
    if 2 * len(changed) > g.n:  # most nodes (no-host-gaps): built whole is cheaper
        return edge_arrays(g)
    hit = np.zeros(2 * g.n, dtype=bool)
    hit[2 * np.asarray(changed)] = True
    hit[2 * np.asarray(changed) + 1] = True
    keep = ~hit[dst]
    s2, d2 = edge_arrays(g, changed)
    return np.concatenate([src[keep], s2]), np.concatenate([dst[keep], d2])


def _replaced(n: int, *pairs):
    """The indices (ascending, an array) where a list of each pair holds another object
    than the other (a what-if's copy: what a change replaced), by identity."""
    import numpy as np

    hit = np.zeros(n, dtype=bool)
    for a, b in pairs:
        hit |= np.fromiter(map(is_not, a, b), dtype=bool, count=n)
    return np.flatnonzero(hit)


def first_changed(g: G.Graph, vorder: list[int], pos, dur, starts, ends) -> int:
    """The position in `vorder` (`pos`: each vertex's) of the first vertex of a node
    whose duration or edges a what-if replaced (`dur`, `starts`, `ends`: its copies of
    the graph's; by identity, so a value rewritten equal, or an int made a float, counts
    as changed); the order's length when none. A node's start comes before its end."""
    g_dur, g_starts, g_ends = g.dur, g.starts, g.ends
    for k, v in enumerate(vorder[:2048]):  # most changes touch early work: looked at first
        i = v >> 1
        if dur[i] is not g_dur[i] or starts[i] is not g_starts[i] or ends[i] is not g_ends[i]:
            return k
    changed = _replaced(g.n, (g_dur, dur), (g_starts, starts), (g_ends, ends))
    return int(pos[2 * changed].min()) if changed.size else 2 * g.n


def toposort(g: G.Graph) -> list[int]:
    """Vertices (2·node: start, 2·node+1: end) in a topological order of the edges, the
    earliest measured time first among those ready (Kahn's algorithm with a heap); edges
    closing a cycle (the measured order cannot hold them) are dropped and counted in
    `g.dropped`."""
    import heapq

    nv = 2 * g.n
    indeg = [0] * nv
    out: list[list[int]] = [[] for _ in range(nv)]
    for i in range(g.n):
        out[2 * i].append(2 * i + 1)
        indeg[2 * i + 1] += 1
        for src, src_end, *_ in g.starts[i]:
            out[2 * src + (1 if src_end else 0)].append(2 * i)
            indeg[2 * i] += 1
        for src, *_ in g.ends[i]:
            out[2 * src + 1].append(2 * i + 1)
            indeg[2 * i + 1] += 1
    ts, end = g.ts, g.end

    def key(v: int) -> tuple[int, int]:
        return (end[v >> 1] if v & 1 else ts[v >> 1], v)

    heap = [key(v) for v in range(nv) if indeg[v] == 0]
    heapq.heapify(heap)
    seen = [False] * nv
    result: list[int] = []
    by_time: list[tuple[int, int]] | None = None  # every vertex by measured time, for cycles
    nxt = 0
    while len(result) < nv:
        if not heap:  # a cycle: release its earliest vertex, its late edges dropped below
            if by_time is None:
                by_time = sorted(key(u) for u in range(nv))
            while seen[by_time[nxt][1]]:
                nxt += 1
            v = by_time[nxt][1]
            indeg[v] = 0
            heapq.heappush(heap, key(v))
        _, v = heapq.heappop(heap)
        if seen[v]:
            continue
        seen[v] = True
        result.append(v)
        for w in out[v]:
            indeg[w] -= 1
            if indeg[w] == 0 and not seen[w]:
                heapq.heappush(heap, key(w))
    return result


def prune(g: G.Graph, vorder: list[int], starts=None, ends=None) -> int:
    """Drop the edges the order cannot hold (from `starts`/`ends`, the graph's own by
    default, where they are counted in `g.dropped`); returns how many."""
    own = starts is None
    starts = g.starts if starts is None else starts
    ends = g.ends if ends is None else ends
    pos = [0] * (2 * g.n)
    for k, v in enumerate(vorder):
        pos[v] = k
    dropped = 0
    for i in range(g.n):
        keep = [e for e in starts[i] if pos[2 * e[0] + (1 if e[1] else 0)] < pos[2 * i]]
        if len(keep) != len(starts[i]):
            dropped += len(starts[i]) - len(keep)
            starts[i] = keep
        keep = [e for e in ends[i] if pos[2 * e[0] + 1] < pos[2 * i + 1]]
        if len(keep) != len(ends[i]):
            dropped += len(ends[i]) - len(keep)
            ends[i] = keep
    if own:
        g.dropped += dropped
    return dropped


def run(
    g: G.Graph,
    vorder: list[int],
    *,
    dur: list[float] | None = None,
    starts: list[list[tuple]] | None = None,
    ends: list[list[tuple]] | None = None,
    path: bool = True,
    shift: dict[int, float] | None = None,
    start_at: dict[int, float] | None = None,
    prefix: tuple[list[float], int] | None = None,
) -> Replay:
    """Replay `g` (with a change's durations / edges in place of its own). `prefix`:
    (the times of a replay of `g` in this order, k) where the first k vertices of
    `vorder` are those of nodes the change leaves as they were (a what-if's, without its
    path: `first_changed`): their times are that replay's, and the sweep starts at k."""
    dur = dur if dur is not None else g.dur
    starts = starts if starts is not None else g.starts
    ends = ends if ends is not None else g.ends
    t = _times(g, vorder, dur, starts, ends, shift, start_at, None if path else prefix)
    return _finish(g, t, _Pred(t, dur, starts, ends) if path else [], path)


def _times(g: G.Graph, vorder, dur, starts, ends, shift, start_at, prefix=None) -> list[float]:
    """Each vertex's replayed time (the edge that set it: `_Pred`, where the path is
    asked for). (Names bound locally: the loop runs once a vertex, ~90,000 times
    at 8 big ranks.) `prefix`: `run`'s."""
    if prefix is not None:
        # each vertex's time depends on those before it in the order only: the first k,
        # of nodes the change left alone, are the same sums of the same numbers
        t, k = list(prefix[0]), prefix[1]
        vorder = vorder[k:] if k else vorder
    else:
        t = [0.0] * (2 * g.n)
    ts, rank = g.ts, g.rank
    for v in vorder:
        i = v >> 1
        if v & 1:
            best = t[v - 1] + dur[i]
            for src, lag, _ek in ends[i]:
                x = t[2 * src + 1] + lag
                if x > best:
                    best = x
            t[v] = best
            continue
        st = starts[i]
        if st:
            best = None
            for src, src_end, lag, _ek in st:
                x = t[2 * src + 1 if src_end else 2 * src] + lag
                if best is None or x > best:
                    best = x
        elif start_at and i in start_at:
            best = start_at[i]
        else:
            best = ts[i] + (shift.get(rank[i], 0) if shift else 0)
        t[v] = best
    return t


class _Pred:
    """The (vertex, edge kind) that set each vertex's replayed time, found when asked
    (`pred[v]`; None for a start no edge explains): the first of its edges whose sum is
    the latest, the duration edge first for an end — as the sweep's `>` kept the first of
    a tie. The backtrack asks for the vertices of the critical paths only (≈ 20,000 of
    92,000 at 8 big ranks): a tuple per vertex made during the sweep cost more."""

    __slots__ = ("dur", "ends", "starts", "t")

    def __init__(self, t, dur, starts, ends):
        self.t, self.dur, self.starts, self.ends = t, dur, starts, ends

    def __getitem__(self, v: int) -> tuple[int, int] | None:
        t, i = self.t, v >> 1
        if v & 1:
            bv = v - 1
            best, bk = t[bv] + self.dur[i], G.E_DUR
            for src, lag, ek in self.ends[i]:
                x = t[2 * src + 1] + lag
                if x > best:
                    best, bv, bk = x, 2 * src + 1, ek
            return bv, bk
        best = None
        for src, src_end, lag, ek in self.starts[i]:
            sv = 2 * src + 1 if src_end else 2 * src
            x = t[sv] + lag
            if best is None or x > best:
                best, bv, bk = x, sv, ek
        return None if best is None else (bv, bk)


def _finish(g: G.Graph, t: list[float], pred: list, path: bool) -> Replay:
    """The replay of vertex times `t`: each rank's window end, its step, and (`path`)
    the critical paths from `pred`."""
    per_rank: dict[int, float] = {}
    measured: dict[int, float] = {}
    ends: dict[int, tuple[float, int | None, float]] = {}  # rank → (end, vertex, lag)
    last_rank, last_t = None, None
    for r, sp in g.spans.items():
        # the latest end; at a tie the work closest to the window's end (the step's)
        cands = [(t[2 * i + 1] + lag, -lag, 2 * i + 1) for i, lag in sp.end_edges]
        end_t, end_lag, end_v = float(sp.end_ns), 0, None
        if cands:
            end_t = max(c[0] for c in cands)
            _, end_lag, end_v = max(c for c in cands if c[0] >= end_t - ROUND_NS)
        per_rank[r] = (end_t - sp.start_ns) / sp.n_steps / 1e6
        measured[r] = (sp.end_ns - sp.start_ns) / sp.n_steps / 1e6
        ends[r] = (end_t, end_v, -end_lag)
        if last_t is None or end_t - sp.start_ns > last_t:
            last_rank, last_t = r, end_t - sp.start_ns
    n = max(len(per_rank), 1)
    out = Replay(
        measured_step_ms=sum(measured.values()) / n,
        replayed_step_ms=sum(per_rank.values()) / n,
        by_rank_step_ms=per_rank,
        origin_ns=min((sp.start_ns for sp in g.spans.values()), default=0),
        steps=g.spans[last_rank].n_steps if last_rank is not None else 1,
    )
    out.times = t
    out.end_ns = max(
        (per_rank[r] * sp.n_steps * 1e6 + sp.start_ns for r, sp in g.spans.items()), default=0
    )
    if path:
        for r, (end_t, end_v, lag) in ends.items():
            out.paths[r] = rank_path(g, t, pred, r, end_t, end_v, lag)
        out.path = out.paths.get(last_rank, [])
    return out


def slack(g: G.Graph, vorder: list[int], rp: Replay) -> dict[int, float]:
    """Slack of each collective instance, ns: how much later it could start without
    delaying the step's end (the latest rank's replayed window end) — the latest start a
    backward pass over the edges allows, less its replayed start; 0 on the critical path.
    (A comparison in place of `min`: the same value kept at a tie, as `min` keeps its
    first argument.)"""
    inf = float("inf")
    late = [inf] * (2 * g.n)
    for sp in g.spans.values():
        for i, lag in sp.end_edges:
            late[2 * i + 1] = min(late[2 * i + 1], rp.end_ns - lag)
    dur, g_starts, g_ends, kind, inst = g.dur, g.starts, g.ends, g.kind, G.INST
    # the pass stops at the first instance's start: a vertex's latest time depends on
    # those after it only, and what comes before that start sets no instance's slack
    first = next((k for k, v in enumerate(vorder) if not v & 1 and kind[v >> 1] == inst), None)
    if first is None:
        return {}
    for v in reversed(vorder[first:]):
        lv = late[v]
        if lv == inf:
            continue
        i = v >> 1
        if v & 1:
            x = lv - dur[i]
            if x < late[v - 1]:
                late[v - 1] = x
            for src, lag, _ek in g_ends[i]:
                x = lv - lag
                if x < late[2 * src + 1]:
                    late[2 * src + 1] = x
        else:
            for src, src_end, lag, _ek in g_starts[i]:
                u = 2 * src + 1 if src_end else 2 * src
                x = lv - lag
                if x < late[u]:
                    late[u] = x
    times = rp.times
    return {
        i: max(late[2 * i] - times[2 * i], 0.0)
        for i in range(g.n)
        if kind[i] == inst and late[2 * i] != inf
    }
