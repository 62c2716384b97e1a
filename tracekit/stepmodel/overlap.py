"""`overlap:NAME`: collectives NAME start as soon as the backward compute producing their
data is done (gradients ready evenly over the step's backward compute, buckets in issue
order), on their own lane beside compute, each contending with the compute it runs beside;
a step's one bucket is split into pieces as smaller buckets would be (`_split`)."""

from __future__ import annotations

import math
import re
from bisect import bisect_right

from tracekit.stepmodel import graph as G
from tracekit.stepmodel.edits import Change, Edits, NotApplicable, is_compute


class Overlap(Change):
    pattern = re.compile(r"overlap:(\w+)")
    syntax = "overlap:NAME"
    # set by the caller from job.json: a CPU run whose ranks have no spare core (gloo's
    # threads share the cores compute runs on), so an overlapped transfer's time is taken
    # from the compute it runs beside (`_contend`)
    contended: bool = False

    def __init__(self, spec, m):
        super().__init__(spec, m)
        self.name = m.group(1)

    def apply(self, g, e):
        comms: dict[tuple[int, int], list[int]] = {}
        bwd: dict[tuple[int, int], list[int]] = {}
        kind, coll, backward, rank, ts = g.kind, g.coll, g.backward, g.rank, g.ts
        comm, compute, name, cpu = G.COMM, G.COMPUTE, self.name, g.cpu
        # `Graph.step_of` inline (≈ 20,000 backward nodes at 8 big ranks): each rank's
        # step starts (the graph's), the step a node starts in by `bisect`, 0 before the first
        starts = {r: g.step_starts(r) for r in g.spans}
        for i in range(g.n):  # names bound once: a loop over every node
            k = kind[i]
            if k == comm and coll[i] == name:
                at = comms
            elif backward[i] and (k == compute or (cpu and is_compute(g, i))):
                at = bwd
            else:
                continue
            r = rank[i]
            step = bisect_right(starts[r], ts[i]) - 1
            at.setdefault((r, step if step > 0 else 0), []).append(i)
        if not comms:
            raise NotApplicable(
                f"--change {self.spec}: no {self.name} collective in the analysed steps"
            )
        if not bwd:
            raise NotApplicable(
                f"--change {self.spec}: no backward compute found (autograd "
                "ops or work of the backward thread) to overlap with"
            )
        one: dict[int, list[tuple[int, list[int]]]] = {}
        for key, members in comms.items():
            producers = sorted(bwd.get(key, []), key=g.end.__getitem__)
            if not producers:
                continue
            # the collectives of the backward: those that start once it has begun (an
            # FSDP forward all-gather carries no gradient)
            first = min(g.ts[i] for i in producers)
            members = sorted((i for i in members if g.ts[i] >= first), key=g.ts.__getitem__)
            if not members:
                continue
            b, n = len(members), len(producers)
            if b == 1:  # one bucket: the remedy is smaller buckets (`_split`)
                i = members[0]
                one.setdefault(g.inst[i] if g.inst[i] >= 0 else i, []).append((i, producers))
                continue
            for j, i in enumerate(members):
                at = max(math.ceil((j + 1) * n / b) - 1, 0)
                ready = producers[at]
                if g.end[ready] >= g.ts[i]:
                    continue  # it already starts before its data would be ready: as it is
                keep = [(s, se, 0, ek) for s, se, _lag, ek in e.starts[i] if ek == G.E_STREAM]
                e.starts[i] = [*keep, (ready, True, 0, G.E_WAIT)]
                e.reorder = True
                if self.contended:
                    _contend(e, producers, at, _transfer(g, e, i))
        if _split(g, e, one, self.contended):
            e.reorder = True


def _transfer(g: G.Graph, e: Edits, i: int) -> float:
    """The transfer time of collective member `i`: its instance's, else its own."""
    return e.dur[g.inst[i]] if g.inst[i] >= 0 else e.dur[i]


def _contend(e: Edits, producers: list[int], at: int, ns: float) -> None:
    """Without a spare core, a transfer of `ns` that starts once `producers[at]` is done
    runs on the core compute uses: the compute after it (its rank's next producer) takes
    `ns` longer — the time slicing of one core, in its total (`Overlap.contended`)."""
    if at + 1 < len(producers):  # after the last one nothing computes beside it
        e.dur[producers[at + 1]] += ns


DDP_BUCKET_CAP = 25 * 2**20  # DDP's default bucket_cap_mb (25 MiB)
ALPHA_NS = 10_000  # a piece's latency α (nccl-tests' small-message all-reduce: ~10 µs)
MAX_PIECES = 256  # pieces tried at most (powers of two, and the bytes over the 25 MiB cap)


TIE_NS = 1_000  # piece counts whose last piece ends this close: the fewer pieces


def _piece_at(p: int, n: int, k: int) -> int:
    """The producer (of n) at whose end piece p (1 … k) of a split bucket is ready."""
    return math.ceil(p * n / k) - 1


def _piece_sources(ready: list[int], k: int, t: float) -> list[tuple[int, float]]:
    """(producer, lag) for each of k pieces: piece p (1 … k) is ready at the end of
    producer `_piece_at(p)` and the k − p pieces after it still take their transfers."""
    n = len(ready)
    return [(ready[_piece_at(p, n, k)], (k - p) * t) for p in range(1, k + 1)]


def _split(
    g: G.Graph, e: Edits, one: dict[int, list[tuple[int, list[int]]]], contended: bool = False
) -> bool:
    """Overlap a one-bucket collective as smaller buckets would (the remedy: smaller DDP
    buckets). The bucket's bytes are produced evenly over the backward compute: split
    into k pieces, piece p ready at the end of its producer (`_piece_sources`), each
    taking t = α + (transfer − α)/k (the measured transfer's bandwidth, the α-β model
    with α = `ALPHA_NS`, at most half the transfer), one after the other; the collective
    ends at max over p of (ready_p + (k − p + 1)·t), the last piece's readiness plus its
    transfer or the chain of transfers, whichever is later. In the graph: each member's
    start waits for every piece's producer plus the transfers after that piece, and the
    transfer (the instance's, if matched across ranks) is one piece's.

    k is the count among 1, 2, 4 … `MAX_PIECES` and ⌈bytes / 25 MiB⌉ (DDP's default
    bucket cap), at most one piece per producer, whose last piece ends first over the
    instance's members (measured times): the bucket size the remedy would pick, as more
    pieces hide more of the transfer and each adds α. A collective whose pieces would not
    end before its measured end is left as it is (the change never delays one).

    `one`: transfer node (the instance, or an unmatched member) → [(member, producers)];
    `contended`: each piece's transfer is taken from the compute after its producer
    (`_contend`). Returns whether an edge changed.
    """
    changed = False
    for j, members in one.items():
        transfer = g.dur[j]
        alpha = min(ALPHA_NS, transfer / 2)
        nmin = min(len(prods) for _, prods in members)
        cands = {1 << p for p in range(9)} | {math.ceil((g.nbytes[j] or 0) / DDP_BUCKET_CAP)}
        best = None
        for k in sorted(c for c in cands if 1 <= c <= min(nmin, MAX_PIECES)):
            t = alpha + (transfer - alpha) / k
            fin = max(
                g.end[src] + lag + t
                for _, prods in members
                for src, lag in _piece_sources(prods, k, t)
            )
            if best is None or fin < best[0] - TIE_NS:
                best = (fin, k, t)
        if best is None:
            continue
        fin, k, t = best
        if fin >= g.end[j]:
            continue  # its pieces would not end before it does now: as it is
        for i, prods in members:
            src = _piece_sources(prods, k, t)
            keep = [(s, se, 0, ek) for s, se, _lag, ek in e.starts[i] if ek == G.E_STREAM]
            e.starts[i] = [*keep, *((s, True, lag, G.E_WAIT) for s, lag in src)]
            if contended:
                for p in range(1, k + 1):
                    _contend(e, prods, _piece_at(p, len(prods), k), t)
        e.dur[j] = t
        changed = True
    return changed
