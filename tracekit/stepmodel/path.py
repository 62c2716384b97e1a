"""The critical path backtracked through a replay: from a rank's replayed window end,
the edge that set each vertex's time, each edge a `Segment` classified by kind
(compute, communication, waiting, sync, host, idle; docs/step-model.md), each instant
once, then merged where consecutive segments share kind and name."""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.stepmodel import graph as G


@dataclass
class Segment:
    rank: int
    kind: str
    name: str  # merged: the name with the most time in it
    start_ns: float
    ns: float
    parts: int = 1  # pieces merged into it
    name_ns: float | None = None  # merged: the time of the pieces so named
    name_parts: int = 1  # merged: how many pieces are so named


def rank_path(g: G.Graph, t, pred, r: int, end_t: float, end_v, lag: float) -> list[Segment]:
    """Rank r's critical path: from its replayed window end back to its window start, each
    instant counted once, so its segments add to its replayed window (G1 of issue 29)."""
    start = float(g.spans[r].start_ns)
    if end_v is None:  # nothing on the rank ends its window: it is the measured window
        return (
            [Segment(r, "host", "measured window", start, end_t - start)] if end_t > start else []
        )
    segs = _backtrack(g, t, pred, end_v, r, start, min(t[end_v], end_t))
    if lag > 0:  # host time from the last work to the step's end
        segs.append((r, "host", "to the step's end", t[end_v], lag))
    return _merge(segs)


def _kind(g: G.Graph, i: int, ek: int) -> str:
    if g.sync_api[i] is not None:
        # a host wait: the tail after the device work the call waited for; a blocking
        # copy's device work and its wait to start; a blocking call whose device work the
        # trace does not show (its whole time)
        if ek == G.E_SYNC:
            return "sync"
        if g.kind[i] == G.COMPUTE and ek in (G.E_DUR, G.E_LAUNCH, G.E_UNEXPLAINED):
            return "sync"
        if g.kind[i] == G.HOST and ek == G.E_DUR and g.awaited[i] < 0:
            return "sync"
    if ek == G.E_DUR:
        k = g.kind[i]
        if k == G.COMPUTE:
            return "compute"
        if k == G.INST:
            return "communication"
        if k == G.COMM:
            return "waiting" if g.coll[i] in G.P2P else "communication"
        # host events: on a CPU run the host's ops are the compute
        if g.cpu and not g.name[i].startswith(("c10d::", "gloo:", "record_param_comms")):
            return "compute"
        return "host"
    if ek == G.E_TAIL:
        return "communication"
    if ek in (G.E_STREAM, G.E_WAIT, G.E_UNEXPLAINED):
        return "idle"
    return "host"


def _backtrack(g: G.Graph, t, pred, v, r: int, lo: float, hi: float) -> list[tuple]:
    """The path from vertex v back along the edges that set each time, within [lo, hi]:
    each instant once (an edge with a negative lag — a member's tail, a lane's work past the
    window's end — would otherwise count its overlap twice), and the stretch before the
    earliest node the trace explains as its "measured start". As (rank, kind, name,
    start, ns) tuples for `_merge` (a `Segment` a piece cost more than the walk)."""
    segs: list[tuple] = []
    seen = set()
    cursor = hi  # the path covers [cursor, hi] so far
    rank, sync_api, e_dur, e_tail = g.rank, g.sync_api, G.E_DUR, G.E_TAIL
    while v is not None and v not in seen and cursor > lo:
        p = pred[v]  # asked once: a replay's `_Pred` finds it when asked
        if p is None:
            break
        seen.add(v)
        u, ek = p
        i = v >> 1
        if sync_api[i] is None and ek != e_dur and ek != e_tail:
            # a gap edge outside a sync, the usual case: its kind and name by edge kind
            pieces = ((_GAP_KINDS.get(ek, "host"), _GAP_NAMES.get(ek, "gap"), t[u], t[v]),)
        else:
            kind = _kind(g, i, ek)
            if kind == "sync":
                pieces = reversed(_sync_pieces(g, i, ek, t[u], t[v], u >> 1))
            else:  # one piece
                pieces = ((kind, _name(g, i, ek), t[u], t[v]),)
        for kind, name, a, b in pieces:
            if a < lo:  # as max(a, lo) and min(b, cursor): a tie keeps the piece's own
                a = lo
            if cursor < b:
                b = cursor
            if b > a:
                segs.append((rank[i], kind, name, a, b - a))
                cursor = a
        v = u
    if v is not None and cursor > lo:  # a node the graph does not explain
        i = v >> 1
        q = g.rank[i]
        at = min(max(float(g.spans[q].start_ns), lo), cursor)  # rank q's window start
        if cursor > at:
            segs.append((q, "host", "measured start", at, cursor - at))
        if at > lo:  # the rank it leads to begins its window later: the path's rank waits
            segs.append((r, "waiting", f"for rank {q} to start its window", lo, at - lo))
    segs.reverse()
    return segs


def _sync_pieces(g: G.Graph, i: int, ek: int, t0: float, t1: float, src: int) -> list[tuple]:
    """The stretch [t0, t1] an edge from node `src` into node i sets where it is a
    blocking call's ("sync", `_kind`), as (kind, name, start, end) pieces in time order:
    one, except where the call sits inside a top-level op with host work around it: the
    tail after the device work the call waited for is the host's up to the call, the
    call's wait ("sync"), and the host's after it; a blocking copy's wait to start is the
    host's up to the call, then the call's. (Any other edge is one piece: its kind and
    `_name`.)"""
    d = g.awaited[i]
    api = g.sync_api[i] or g.name[i]
    name = f"{api} (waits for {g.name[d]})" if d >= 0 and d != i else api
    if ek == G.E_SYNC and i in g.sync_span and d >= 0:
        cs, ce = g.sync_span[i]
        pre = max(cs - g.end[d], 0)
        wait = max(ce - max(g.end[d], cs), 0)
        a, b = min(t0 + pre, t1), min(t0 + pre + wait, t1)
        return [("host", "host work before " + api, t0, a), ("sync", name, a, b),
                ("host", "host work after " + api, b, t1)]  # fmt: skip
    if ek in (G.E_LAUNCH, G.E_UNEXPLAINED) and i in g.sync_span:
        a = min(t0 + max(g.sync_span[i][0] - g.ts[src], 0), t1)
        return [("host", "host work before " + api, t0, a), ("sync", name, a, t1)]
    return [("sync", name, t0, t1)]


_GAP_NAMES = {
    G.E_LAUNCH: "launch",
    G.E_STREAM: "stream gap",
    G.E_WAIT: "wait on another stream",
    G.E_CHAIN: "host gap",
    G.E_ANCHOR: "window start",
    G.E_SYNC: "sync",
    G.E_HOSTWAIT: "host wait",
    G.E_UNEXPLAINED: "unexplained wait",
}


# `_kind` of an edge that is neither a duration nor a tail, into a node that is no host
# wait: by the edge's kind alone
_GAP_KINDS = {G.E_STREAM: "idle", G.E_WAIT: "idle", G.E_UNEXPLAINED: "idle"}


def _name(g: G.Graph, i: int, ek: int) -> str:
    """A piece's name outside a sync: the node's own for its duration or tail, else the
    gap the edge kind stands for."""
    return g.name[i] if ek == G.E_DUR or ek == G.E_TAIL else _GAP_NAMES.get(ek, "gap")


def _merge(segs: list[tuple]) -> list[Segment]:
    """Consecutive segments (`_backtrack`'s tuples) of one rank and kind as one, named by
    the name with the most time in it (a host-bound backward is hundreds of autograd ops
    and gaps between them: the longest single piece would name it by one gap), with how
    many pieces it holds."""
    out: list[Segment] = []
    names: list[dict[str, list[float]]] = []  # per merged segment: name → [ns, pieces]
    o = None
    for rank, kind, name, start_ns, ns in segs:
        if o is not None and o.rank == rank and o.kind == kind:
            o.ns = start_ns + ns - o.start_ns
            o.parts += 1
        else:
            o = Segment(rank, kind, name, start_ns, ns)
            out.append(o)
            names.append({})
        acc = names[-1].setdefault(name, [0.0, 0])
        acc[0] += ns
        acc[1] += 1
    for o, by_name in zip(out, names, strict=True):
        if o.parts > 1:
            # the most time; at a tie the first piece's name (dicts keep insertion order)
            o.name, (o.name_ns, o.name_parts) = max(by_name.items(), key=lambda kv: kv[1][0])
    return out
