"""What-if changes: each a small class that edits a copy of the graph's durations and
edges before a replay (`tracekit whatif RUN --change C`, and each finding's remedy).

- `overlap:NAME`: collectives NAME start as soon as the backward compute producing their
  data is done (gradients ready evenly over the step's backward compute, buckets in issue
  order), on their own lane beside compute; their launch and inferred waits are dropped
  (one that already starts before that stays as it is); a step's one bucket is split
  into pieces as smaller buckets would be (`overlap._split`);
- `bandwidth:NAME=GBPS`: collectives NAME transfer at that bus bandwidth, t = S·factor ÷
  busbw (nccl-tests' definition, `tracekit.model.collectives.bus_factor`);
- `no-straggler`: every rank in each step at the median rank's pace in that step: its
  compute, and on GPU runs its host time;
- `no-host-gaps`: host work, launches and host gaps take no time: device work starts as
  soon as its stream (and what it waits for) allows, and no earlier than the device's
  measured order across streams allows (`keep_device_order`: the saving is at most the
  device's idle time); syncs still wait for the device;
- `no-input-wait`: the host's work inside the data loader's fetches (`enumerate(DataLoader)`
  spans) takes no time — batches ready when asked for, as with enough loader workers —,
  the device's measured order kept (`keep_device_order`);
- `compute-speed=F`: compute F× faster (device compute; on CPU runs the host's ops);
- `fuse=F`: the unfused memory-bound kernels (elementwise, copy, cast, norm …:
  `tracekit.model.opclass.is_unfused_kernel`) F× faster — a fused kernel makes one round
  trip to memory where a chain of eager kernels makes one per op;
- `microbatches=M`: the pipeline with M microbatches and the same global batch
  (`tracekit.stepmodel.pipeline`);
- `interleave=V`: the pipeline's stages split into V virtual chunks each (interleaved
  1F1B), p2p hops ×V (`tracekit.stepmodel.pipeline`).

A change that does not apply to the run raises `NotApplicable` (one line: the CLI exits 2).
"""

from __future__ import annotations

import re
from statistics import median
from typing import ClassVar

from tracekit.errors import TracekitError
from tracekit.model.collectives import bus_factor
from tracekit.model.opclass import is_unfused_kernel
from tracekit.stepmodel import graph as G
from tracekit.stepmodel.edits import (
    Change,
    Edits,
    NotApplicable,
    is_compute,
    keep_device_order,
)
from tracekit.stepmodel.overlap import Overlap
from tracekit.stepmodel.pipeline import Interleave, Microbatches, PipelineShape

# the classes moved to their own modules stay importable from here (callers read C.X)
__all__ = [
    "CHANGES", "Change", "Edits", "Interleave", "Microbatches", "NotApplicable", "Overlap",
    "PipelineShape", "is_compute", "keep_device_order", "parse",
]  # fmt: skip


class _SpeedUp(Change):
    """Some work F× faster: the nodes `target` picks (`missing` says what the run lacks)."""

    missing: ClassVar[str]

    def __init__(self, spec, m):
        super().__init__(spec, m)
        self.factor = float(m.group(1))
        if not self.factor > 0:
            raise TracekitError(f"--change {spec}: the speed-up F must be > 0")

    def target(self, g: G.Graph, i: int) -> bool:
        raise NotImplementedError

    def apply(self, g, e):
        hit = False
        for i in range(g.n):
            if self.target(g, i):
                e.dur[i] = e.dur[i] / self.factor
                hit = True
        if not hit:
            raise NotApplicable(f"--change {self.spec}: the run has no {self.missing}")


class ComputeSpeed(_SpeedUp):
    pattern = re.compile(r"compute-speed=([0-9.]+)")
    syntax = "compute-speed=F"
    missing = "compute work"

    def target(self, g, i):
        return is_compute(g, i)


class Fuse(_SpeedUp):
    pattern = re.compile(r"fuse=([0-9.]+)")
    syntax = "fuse=F"
    missing = "unfused memory-bound kernels"

    def target(self, g, i):
        return g.kind[i] == G.COMPUTE and not g.cpu and is_unfused_kernel(g.name[i] or "")


class Bandwidth(Change):
    pattern = re.compile(r"bandwidth:(\w+)=([0-9.]+)")
    syntax = "bandwidth:NAME=GBPS"

    def __init__(self, spec, m):
        super().__init__(spec, m)
        self.name, self.gbps = m.group(1), float(m.group(2))
        if not self.gbps > 0:
            raise TracekitError(f"--change {spec}: the bandwidth must be > 0 GB/s")

    def apply(self, g, e):
        hit = False
        for i in range(g.n):
            if g.coll[i] != self.name or g.inst[i] >= 0 or g.kind[i] not in (G.COMM, G.INST):
                continue  # a matched member's transfer is its instance's
            f = bus_factor(self.name, g.group[i])
            if f is None or not g.nbytes[i]:
                continue
            e.dur[i] = g.nbytes[i] * f / (self.gbps * 1e9) * 1e9
            hit = True
        if not hit:
            raise NotApplicable(
                f"--change {self.spec}: no {self.name} collective with a known size in the "
                "analysed steps"
            )


class NoStraggler(Change):
    """Every rank at the median rank's pace, step by step: its compute (device compute; on
    CPU runs the host's ops) and, on GPU runs, its own host time (host work and the gaps
    between host events that no wait explains) scaled to the median of that step; a rank
    whose analysed window starts after the median rank's starts with it (its lateness
    came from its pace before the window)."""

    pattern = re.compile(r"no-straggler")
    syntax = "no-straggler"

    def apply(self, g, e):
        if len(g.spans) < 2:
            raise NotApplicable(f"--change {self.spec}: one rank in the run, no straggler")
        comp: dict[tuple[int, int], list[int]] = {}
        host: dict[tuple[int, int], list[int]] = {}
        for i in range(g.n):
            key = (g.rank[i], g.step_of(i))
            if is_compute(g, i):
                comp.setdefault(key, []).append(i)
            elif g.kind[i] == G.HOST:
                host.setdefault(key, []).append(i)

        def compute_time(nodes):
            return sum(g.dur[i] for i in nodes)

        def host_time(nodes):
            return sum(
                g.dur[i] + sum(lag for *_, lag, ek in g.starts[i] if ek == G.E_CHAIN) for i in nodes
            )

        def scale(groups, time, edit):
            for s in {st for _r, st in groups}:
                keys = [k for k in groups if k[1] == s]
                if len(keys) < 2:
                    continue
                vals = {k: time(groups[k]) for k in keys}
                med = median(vals.values())
                for k in keys:
                    if vals[k] > 0:
                        for i in groups[k]:
                            edit(i, med / vals[k])

        def edit_compute(i, f):
            e.dur[i] = e.dur[i] * f

        def edit_host(i, f):
            e.dur[i] = e.dur[i] * f
            e.starts[i] = [
                (s, se, lag * f if ek == G.E_CHAIN else lag, ek) for s, se, lag, ek in e.starts[i]
            ]

        scale(comp, compute_time, edit_compute)
        if not g.cpu:
            # ranks that run the same host program step by step (the same number of host
            # events): each host event and the gap before it at the median over ranks of
            # that event's; else the rank's host time scaled to the median
            steps = {st for _r, st in host}
            for st in steps:
                keys = sorted(k for k in host if k[1] == st)
                seqs = [sorted(host[k], key=g.ts.__getitem__) for k in keys]
                if len(seqs) < 2 or len({len(q) for q in seqs}) != 1:
                    scale({k: host[k] for k in keys}, host_time, edit_host)
                    continue
                for pos in zip(*seqs, strict=True):
                    med_d = median(g.dur[i] for i in pos)
                    med_l = median(_chain_lag(g, i) for i in pos)
                    if not any(g.starts[i] for i in pos):  # first on its thread: its offset
                        off = median(g.ts[i] - g.spans[g.rank[i]].start_ns for i in pos)
                        for i in pos:
                            e.start_at[i] = g.spans[g.rank[i]].start_ns + off
                    for i in pos:
                        e.dur[i] = med_d
                        e.starts[i] = [
                            (s, se, med_l if ek == G.E_CHAIN else lag, ek)
                            for s, se, lag, ek in e.starts[i]
                        ]
        med = median(sp.start_ns for sp in g.spans.values())
        for r, sp in g.spans.items():
            if sp.start_ns > med:
                e.shift[r] = med - sp.start_ns


def _chain_lag(g: G.Graph, i: int) -> float:
    return next((lag for *_, lag, ek in g.starts[i] if ek == G.E_CHAIN), 0)


class NoHostGaps(Change):
    pattern = re.compile(r"no-host-gaps")
    syntax = "no-host-gaps"

    def apply(self, g, e):
        if g.cpu:
            raise NotApplicable(
                f"--change {self.spec}: a CPU run has no device to launch "
                "work on; its host time is the work"
            )
        host_gaps, dev_gaps = (G.E_CHAIN, G.E_HOSTWAIT), (G.E_STREAM, G.E_LAUNCH)
        kinds, g_ends, starts, dur = g.kind, g.ends, e.starts, e.dur
        host, device = G.HOST, (G.COMPUTE, G.COMM)
        for i, k in enumerate(kinds):  # names bound once: a loop over every node
            if k == host:
                if not g_ends[i]:
                    dur[i] = 0.0
                gaps = host_gaps
            elif k in device:  # no later than the (instant) host gets there
                gaps = dev_gaps
            else:
                continue
            st = starts[i]
            for _s, _se, lag, ek in st:
                if lag and ek in gaps:
                    # the gap edges at lag 0, the others kept as they are
                    starts[i] = [(x[0], x[1], 0, x[3]) if x[3] in gaps else x for x in st]
                    break
        keep_device_order(g, e)


class NoInputWait(Change):
    pattern = re.compile(r"no-input-wait")
    syntax = "no-input-wait"

    def apply(self, g, e):
        if not g.input_spans:
            raise NotApplicable(
                f"--change {self.spec}: the run records no data loader fetches "
                "(enumerate(DataLoader) spans)"
            )
        gaps = (G.E_CHAIN, G.E_HOSTWAIT)
        for i in range(g.n):
            if g.kind[i] != G.HOST or not _inside(g.input_spans.get(g.rank[i]), g.ts[i], g.end[i]):
                continue
            e.dur[i] = 0.0 if not g.ends[i] else e.dur[i]
            st = e.starts[i]
            if any(lag and ek in gaps for _s, _se, lag, ek in st):
                e.starts[i] = [(s, se, 0 if ek in gaps else lag, ek) for s, se, lag, ek in st]
        if not g.cpu:
            keep_device_order(g, e)


def _inside(spans: list[tuple[int, int]] | None, ts: int, end: int) -> bool:
    """Whether [ts, end] lies within one of `spans`."""
    return any(s <= ts and end <= e for s, e in spans or ())


CHANGES: tuple[type[Change], ...] = (
    Overlap,
    Bandwidth,
    NoStraggler,
    NoHostGaps,
    NoInputWait,
    ComputeSpeed,
    Fuse,
    Microbatches,
    Interleave,
)


def parse(spec: str) -> Change:
    """The change `spec` names (TracekitError, exit 2, when it names none)."""
    text = spec.strip()
    for cls in CHANGES:
        if m := cls.pattern.fullmatch(text):
            return cls(text, m)
    raise TracekitError(
        f"--change {spec!r} is not a change; use one of: " + ", ".join(c.syntax for c in CHANGES)
    )
