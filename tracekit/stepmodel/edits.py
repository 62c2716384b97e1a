"""What a what-if change edits and how: `Edits` (a change's copy of the durations and
edges a replay reads), the `Change` base class, `NotApplicable`, and the two helpers
several changes share (`is_compute`, `keep_device_order`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from tracekit.errors import TracekitError
from tracekit.stepmodel import graph as G


class NotApplicable(TracekitError):
    """The change does not apply to this run (no such collective, no pipeline …)."""


@dataclass
class Edits:
    """A change's copy of what a replay reads; `extra_ms` is added to the predicted step
    (changes modeled outside the graph: the pipeline schedule)."""

    dur: list[float]
    starts: list[list[tuple]]
    ends: list[list[tuple]]
    reorder: bool = False  # edges were added: the vertex order must be computed again
    # (source vertex, target vertex) of edges added to lists whose other edges keep their
    # ends (`keep_device_order`): only these are checked against the base's order
    added: list[tuple[int, int]] = field(default_factory=list)
    extra_ms: float = 0.0
    # rank → ns its unexplained starts move (a late rank's window start brought forward)
    shift: dict[int, float] = field(default_factory=dict)
    # node → its start where nothing in the graph explains it (else its measured start)
    start_at: dict[int, float] = field(default_factory=dict)
    # what a change modeled outside the graph did, in a line each (`Outcome.notes`)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, g: G.Graph) -> Edits:
        return cls(list(g.dur), list(g.starts), list(g.ends))


def is_compute(g: G.Graph, i: int) -> bool:
    """Compute work: device compute; on a CPU run the host's ops (not collective issue)."""
    if g.kind[i] == G.COMPUTE:
        return True
    return (
        g.cpu
        and g.kind[i] == G.HOST
        and not g.name[i].startswith(("c10d::", "gloo:", "record_param_comms"))
    )


class Change:
    """One what-if change; `spec` is how it was written."""

    pattern: ClassVar[re.Pattern]
    syntax: ClassVar[str]

    def __init__(self, spec: str, m: re.Match):
        self.spec = spec

    def apply(self, g: G.Graph, e: Edits) -> None:
        raise NotImplementedError


def keep_device_order(g: G.Graph, e: Edits) -> None:
    """Removing host time cannot make a rank's device do more at once than it did: each
    piece of device work starts no earlier than the end of the work that ended last
    before it started (on any stream of its rank), and where it overlapped that work in
    the trace, no earlier than that work's start plus the measured offset. So each rank's
    busy device time stays at least as measured, and the change takes away only the
    time its device was idle — a saving bounded by that idle time. Without these edges
    work on other streams, launched late, ran beside work it never ran beside: the
    replay of one rank saved more than its device was idle (issue 34: 18.11 ms of 11.28
    on a100_recsys_rank3_of8).

    A collective matched across ranks is left out (neither bound nor bounding): its
    instance models the transfer and the wait for peers, and a host that launches
    sooner does overlap it with compute (the synthetic host-bound twin: its
    communication hides behind compute once the launches are quick). An unmatched one
    keeps its measured duration, the wait for peers the trace does not show included,
    so it holds its place like compute."""
    by_rank: dict[int, list[int]] = {}
    kinds, inst, lanes, ts, end, starts = g.kind, g.inst, g.lane, g.ts, g.end, e.starts
    for i in range(g.n):
        k = kinds[i]
        if (k == G.COMPUTE or (k == G.COMM and inst[i] < 0)) and lanes[i].startswith("stream "):
            by_rank.setdefault(g.rank[i], []).append(i)
    for nodes in by_rank.values():
        nodes.sort(key=ts.__getitem__)  # stable: by start, then node (they come ascending)
        last = None  # the work with the latest end so far
        for i in nodes:
            if last is not None:
                edge = (
                    (last, True, 0, G.E_STREAM)
                    if end[last] <= ts[i]
                    else (last, False, ts[i] - ts[last], G.E_STREAM)
                )
                starts[i] = [*starts[i], edge]
                e.added.append((2 * last + 1 if edge[1] else 2 * last, 2 * i))
            if last is None or end[i] > end[last]:
                last = i
