"""What-if changes: each a small class that edits a copy of the graph's durations and
edges before a replay (`tracekit whatif RUN --change C`, and each finding's remedy).

- `overlap:NAME`: collectives NAME start as soon as the backward compute producing their
  data is done (gradients ready evenly over the step's backward compute, buckets in issue
  order), on their own lane beside compute; their launch and inferred waits are dropped
  (one that already starts before that stays as it is); a step's one bucket is split
  into pieces as smaller buckets would be (`_split`);
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

import math
import re
from dataclasses import dataclass, field
from statistics import median
from typing import ClassVar

from tracekit.errors import TracekitError
from tracekit.model.collectives import bus_factor
from tracekit.model.opclass import is_unfused_kernel
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
        for i in range(g.n):
            if g.kind[i] == G.COMM and g.coll[i] == self.name:
                comms.setdefault((g.rank[i], g.step_of(i)), []).append(i)
            elif g.backward[i] and is_compute(g, i):
                bwd.setdefault((g.rank[i], g.step_of(i)), []).append(i)
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
            producers = sorted(bwd.get(key, []), key=lambda i: g.end[i])
            if not producers:
                continue
            # the collectives of the backward: those that start once it has begun (an
            # FSDP forward all-gather carries no gradient)
            first = min(g.ts[i] for i in producers)
            members = sorted((i for i in members if g.ts[i] >= first), key=lambda i: g.ts[i])
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
                seqs = [sorted(host[k], key=lambda i: g.ts[i]) for k in keys]
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
        kinds, g_ends, starts = g.kind, g.ends, e.starts
        for i in range(g.n):
            k = kinds[i]
            if k == G.HOST:
                e.dur[i] = 0.0 if not g_ends[i] else e.dur[i]
                gaps = host_gaps
            elif k in (G.COMPUTE, G.COMM):  # no later than the (instant) host gets there
                gaps = dev_gaps
            else:
                continue
            st = starts[i]
            for _s, _se, lag, ek in st:
                if lag and ek in gaps:
                    starts[i] = [(s, se, 0 if ek in gaps else lag, ek) for s, se, lag, ek in st]
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
                e.reorder = True
            if last is None or end[i] > end[last]:
                last = i


@dataclass
class PipelineShape:
    """What `microbatches=M` needs of a pipeline (the diagnosers measure it): the
    schedule's operations and their measured parts, for `tracekit.stepmodel.pipeline`."""

    stages: int
    microbatches: int
    schedule: str  # 1f1b or gpipe
    stage_rank: dict[int, int]
    scaled_ms: dict[tuple[str, int], float]  # (F|B, stage) → work that scales with FLOPs
    fixed_ms: dict[tuple[str, int], float]  # (F|B, stage) → per-operation host/launch work
    hop_ms: float  # between stages on different ranks, as measured
    notes: list[str] = field(default_factory=list)


class _PipelineChange(Change):
    """A change of the pipeline's schedule, simulated outside the graph
    (`tracekit.stepmodel.pipeline`); its count (M, V) is the spec's number, ≥ 1."""

    pipeline: PipelineShape | None = None  # set by the caller that measured the pipeline
    letter: ClassVar[str]
    absent: ClassVar[str]  # why there is nothing to change, after "no pipeline to …"

    def __init__(self, spec, m):
        super().__init__(spec, m)
        self.count = int(m.group(1))
        if self.count < 1:
            raise TracekitError(f"--change {spec}: {self.letter} must be ≥ 1")

    def shape(self) -> PipelineShape:
        if self.pipeline is None:
            raise NotApplicable(f"--change {self.spec}: no pipeline to {self.absent}")
        return self.pipeline


class Microbatches(_PipelineChange):
    pattern = re.compile(r"microbatches=(\d+)")
    syntax = "microbatches=M"
    letter = "M"
    absent = (
        "change: the run has no 1F1B or GPipe pipeline of one chunk per stage with a known "
        "microbatch count (an interleaved one is not modeled)"
    )

    @property
    def m(self) -> int:
        return self.count

    def apply(self, g, e):
        from tracekit.stepmodel import pipeline

        p = self.shape()
        before, after = pipeline.span_ms(p, p.microbatches), pipeline.span_ms(p, self.m)
        e.extra_ms += after - before
        e.notes.append(pipeline.explain(p, self.m, before, after))


class Interleave(_PipelineChange):
    """The pipeline's schedule interleaved: each stage's work per microbatch split into V
    virtual chunks (Megatron-LM's interleaved 1F1B, Narayanan et al. 2021: the bubble
    (P−1)/(V·M+P−1), about V× smaller), a hop between consecutive chunks (V× the
    point-to-point hops), at the measured M (`tracekit.stepmodel.pipeline.span_ms`)."""

    pattern = re.compile(r"interleave=(\d+)")
    syntax = "interleave=V"
    letter = "V"
    absent = (
        "interleave: the run has no 1F1B pipeline of one chunk per stage with a known "
        "microbatch count (an interleaved one is interleaved already)"
    )

    @property
    def v(self) -> int:
        return self.count

    def apply(self, g, e):
        from tracekit.stepmodel import pipeline

        p = self.shape()
        if p.schedule != "1f1b":
            raise NotApplicable(f"--change {self.spec}: interleaving is a 1F1B schedule's")
        if p.microbatches % p.stages:
            raise NotApplicable(
                f"--change {self.spec}: an interleaved schedule needs M ({p.microbatches}) "
                f"a multiple of P ({p.stages})"
            )
        before = pipeline.span_ms(p, p.microbatches)
        after = pipeline.span_ms(p, p.microbatches, self.v)
        e.extra_ms += after - before
        e.notes.append(
            f"pipeline interleaved V={self.v} ({p.stages} stages, M={p.microbatches}; each "
            f"operation split into {self.v} chunks, {p.hop_ms:.2f} ms a hop, {self.v}× the "
            f"hops): the schedule's span {before:.2f} → {after:.2f} ms a step "
            f"({after - before:+.2f} ms)"
        )


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
