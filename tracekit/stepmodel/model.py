"""`StepModel`: the graph of a run's analysed windows, its replay, its critical path and
what-if replays — what the report's `step_model` block and `tracekit whatif` print."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracekit.stepmodel import changes as C
from tracekit.stepmodel import graph as G
from tracekit.stepmodel import replay as R
from tracekit.stepmodel.nogc import paused

SEGMENTS = 100  # the longest segments of the path the report keeps


@dataclass
class CriticalPath:
    by_kind: dict[str, float]  # ms per step
    by_rank: dict[str, float]  # ms per step
    segments: list[dict] = field(default_factory=list)  # PathSegment's fields


@dataclass
class Outcome:
    change: list[str]
    measured_step_ms: float
    replayed_step_ms: float
    predicted_step_ms: float
    critical_path: CriticalPath | None  # None: replayed without its path (`path=False`)
    notes: list[str] = field(default_factory=list)  # what changes outside the graph did

    @property
    def saved_ms(self) -> float:
        return self.replayed_step_ms - self.predicted_step_ms


class StepModel:
    """Build once per run and windows; replay as often as asked."""

    def __init__(self, run, windows: str):
        with paused():
            self._build(run, windows)

    def _build(self, run, windows: str) -> None:
        self.graph = G.build(run, windows)
        # the graph's edges as vertex arrays, built once: a what-if that adds edges checks
        # the order against these and its changed nodes' edges only (`R.ordered`)
        self.edges = R.edge_arrays(self.graph)
        # the vertices by measured time, sorted once: a what-if changes no measured time
        self.measured = R.measured_order(self.graph) if self.graph.n else None
        self.order, measured = R.ordered(self.graph, edges=self.edges, measured=self.measured)
        # the measured order holds every edge: nothing to drop; else the edges the
        # order cannot hold are dropped, and the arrays built again
        if not measured and R.prune(self.graph, self.order):
            self.edges = R.edge_arrays(self.graph)
        self.base = R.run(self.graph, self.order)
        self.notes: list[str] = []  # what the caller chose about its windows
        self._path: CriticalPath | None = None  # the base replay's, once `prepare`d
        self._slack: dict[str, float] | None = None

    def prepare(self) -> None:
        """The base replay's critical path and the collectives' slack computed now and
        kept (the thread that builds the model computes what the report reads of it,
        `whatif_plan.start`); one that raises is computed again where it is asked for,
        and raises there."""
        try:
            with paused():
                self._path = self.critical_path()
                self._slack = self.collective_slack_ms()
        except Exception:
            return

    @property
    def empty(self) -> bool:
        return not self.graph.spans

    def critical_path(self, rp: R.Replay | None = None) -> CriticalPath:
        """The path by kind and by rank, ms per step: each rank's path (what set its
        replayed window's end, from its start) ÷ its steps, the mean over ranks — as the
        replayed step is the mean of the ranks' — so the kinds add to the replayed step
        and so do the ranks (G1, G2 of issue 29); the segments are those of the rank whose
        replayed window is longest (`Replay.path`)."""
        if rp is None and self._path is not None:  # the base's, `prepare`d
            return self._path
        rp = rp or self.base
        by_kind = {k: 0.0 for k in R.KINDS}
        by_rank: dict[str, float] = {}
        n_ranks = max(len(rp.paths), 1)
        for r, path in rp.paths.items():
            w = 1 / max(self.graph.spans[r].n_steps, 1) / n_ranks / 1e6
            for s in path:
                by_kind[s.kind] += s.ns * w
                by_rank[str(s.rank)] = by_rank.get(str(s.rank), 0.0) + s.ns * w
        longest = sorted(rp.path, key=lambda s: -s.ns)[:SEGMENTS]
        segs = [
            {
                "rank": s.rank,
                "kind": s.kind,
                "name": s.name,
                "start_ms": (s.start_ns - rp.origin_ns) / 1e6,
                "ms": s.ns / 1e6,
                "parts": s.parts,
                "name_ms": None if s.name_ns is None else s.name_ns / 1e6,
                "name_parts": s.name_parts,
            }
            for s in sorted(longest, key=lambda s: s.start_ns)
        ]
        return CriticalPath(by_kind, dict(sorted(by_rank.items(), key=lambda kv: int(kv[0]))), segs)

    def collective_slack_ms(self) -> dict[str, float]:
        """Per collective: the median over its instances of how much later it could start
        without delaying the step (0: on the critical path), ms."""
        from statistics import median

        if self._slack is not None:
            return self._slack

        by: dict[str, list[float]] = {}
        for i, ns in R.slack(self.graph, self.order, self.base).items():
            by.setdefault(self.graph.coll[i] or self.graph.name[i], []).append(ns / 1e6)
        return {k: median(v) for k, v in sorted(by.items())}

    @property
    def _in_measured_order(self) -> bool:
        """Whether the base replays in the measured order (`self.measured[1]`: each
        vertex's position in it)."""
        return self.measured is not None and self.order is self.measured[0]

    def _holds(self, added: list[tuple[int, int]]) -> bool:
        """Whether the base's order is the measured one and holds each of `added` (edges
        a what-if added, the rest of its edges ending where the base's do): then it holds
        every edge of the what-if, as `R.ordered` would find checking them all."""
        if not self._in_measured_order:
            return False
        pos = self.measured[1].tolist()  # a list: indexed per edge, faster than the array
        return all(pos[s] < pos[d] for s, d in added)

    def what_if(self, changes: list[C.Change], path: bool = True) -> Outcome:
        """Replay with `changes` applied (NotApplicable when one does not apply);
        `path=False`: without its critical path (a remedy's replay needs its step only)."""
        with paused():
            return self._what_if(changes, path)

    def _what_if(self, changes: list[C.Change], path: bool) -> Outcome:
        g = self.graph
        e = C.Edits.of(g)
        for ch in changes:
            ch.apply(g, e)
        order = self.order
        if e.reorder or (e.added and not self._holds(e.added)):
            saved = g.starts, g.ends
            g.starts, g.ends = e.starts, e.ends
            try:
                order, measured = R.ordered(g, base=(self.edges, *saved), measured=self.measured)
            finally:
                g.starts, g.ends = saved
            # a change's edges may contradict the rest (data that is not ready before the
            # collective that needs it): those are dropped
            if not measured:
                R.prune(g, order, e.starts, e.ends)
        prefix = None
        # the order is the base's, and the measured one (`self.measured` gives the
        # positions): the vertices before the first the change touched keep the base's
        # times (a remedy that changes late work replays its tail only)
        if (
            not path
            and not e.shift
            and not e.start_at
            and order is self.order
            and self._in_measured_order
        ):
            k = R.first_changed(g, order, self.measured[1], e.dur, e.starts, e.ends)
            prefix = (self.base.times, k)
        rp = R.run(
            g,
            order,
            dur=e.dur,
            starts=e.starts,
            ends=e.ends,
            shift=e.shift,
            start_at=e.start_at,
            path=path,
            prefix=prefix,
        )
        return Outcome(
            change=[c.spec for c in changes],
            measured_step_ms=self.base.measured_step_ms,
            replayed_step_ms=self.base.replayed_step_ms,
            predicted_step_ms=rp.replayed_step_ms + e.extra_ms,
            critical_path=self.critical_path(rp) if path else None,
            notes=list(e.notes),
        )
