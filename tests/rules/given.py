"""A rule's context with its facts given, not computed: cases as data over the typed facts.

`Given` is the real `diagnosers.context.Context` with no trace behind it: each fact a case
names is set where `Facts` caches what it computes, and must be the type
`tracekit.analysis` gives it (`FACT_TYPES`); `step_ms`, `steps_of` and `key_ms` are the
real ones, over the given ranks and collectives. A fact no case gives would be read from
the run, which is absent (None), so it raises instead of guessing. The run's own givens —
whether it ran on a CPU, its job.json — are plain attributes here."""

from __future__ import annotations

from diagnosers.context import Context
from tracekit.analysis.communication import CollectiveFacts, CommunicationFacts, RankExposure
from tracekit.analysis.compute import ComputeFacts
from tracekit.analysis.dataloader import LoaderIdle
from tracekit.analysis.fusion import RankFusion
from tracekit.analysis.memory import MemoryFacts
from tracekit.analysis.pipeline import Pipeline
from tracekit.analysis.scaling import BubbleFacts
from tracekit.analysis.stragglers import Attribution
from tracekit.manifest import JobManifest
from tracekit.metrics.breakdown import RankBreakdown
from tracekit.model.hardware import DeviceSpec

NONE = type(None)

# fact → the type(s) `tracekit.analysis` computes it as (`Facts`' properties); dict facts
# by the type of their values
FACT_TYPES: dict[str, tuple[type, ...]] = {
    "memory": (MemoryFacts,),
    "compute": (ComputeFacts,),
    "collectives": (CollectiveFacts,),
    "communication": (CommunicationFacts,),
    "stragglers": (Attribution,),
    "pipeline": (Pipeline, NONE),
    "bubble": (BubbleFacts, NONE),
    "projection": (dict, NONE),
    "spec": (DeviceSpec, NONE),
    "gloo_on_gpu": (bool,),
    "input_wait": (dict,),
    "fusion": (dict,),
}
DICT_VALUES = {"input_wait": LoaderIdle, "fusion": RankFusion}


def rank_row(rank: int = 0, step_ms: float = 100.0, steps: int = 4, compute: float = 0.9,
             comm: float = 0.0, exposed: float = 0.0, wait: float = 0.0) -> RankBreakdown:
    """One rank's breakdown over `steps` steps of `step_ms`, its fractions of the window
    consistent with each other (exposed ≤ comm; transfer = exposed − wait)."""  # fmt: skip
    win = steps * step_ms
    idle = max(1.0 - compute - exposed, 0.0)
    return RankBreakdown(
        rank=rank, window="steps", steps=steps, step_time_ms=step_ms, window_start_ns=0,
        window_ms=win, busy_ms=(1 - idle) * win, compute_ms=compute * win, comm_ms=comm * win,
        overlap_ms=(comm - exposed) * win, exposed_comm_ms=exposed * win,
        comm_wait_ms=wait * win, idle_fraction=idle, compute_fraction=compute,
        non_compute_fraction=1 - compute, comm_fraction=comm,
        comm_overlap_fraction=(comm - exposed) / comm if comm else None,
        exposed_comm_fraction=exposed, exposed_transfer_fraction=exposed - wait,
        comm_wait_fraction=wait,
    )  # fmt: skip


def rank_exposure(rank: int = 0, step_ms: float = 100.0, **kw) -> RankExposure:
    """One rank's exposed communication per step, nothing exposed unless `kw` says."""
    base = dict(rank=rank, step_ms=step_ms, exposed_ms=0.0, wait_ms=0.0, transfer_ms=0.0,
                slow_ms=0.0, p2p_ms=0.0, unmatched_ms=0.0, exposed_slow_fraction=None,
                top_collective=None)  # fmt: skip
    return RankExposure(**(base | kw))


class Given(Context):
    """`Context` over given facts (see the module's docstring)."""

    cpu: bool = False  # the run's: no device events
    manifest: JobManifest | None = None  # the run's job.json

    def __init__(self, ranks: list[RankBreakdown] | None = None, *, cpu: bool = False,
                 manifest: JobManifest | None = None, raised=(), run=None, **facts):  # fmt: skip
        super().__init__(run, ranks=list(ranks) if ranks is not None else [rank_row()])
        assert all(isinstance(r, RankBreakdown) for r in self.ranks)
        assert manifest is None or isinstance(manifest, JobManifest)
        self.cpu, self.manifest, self.raised = cpu, manifest, list(raised)
        for name, value in facts.items():
            assert isinstance(value, FACT_TYPES[name]), (name, type(value))
            if name in DICT_VALUES:
                assert all(isinstance(v, DICT_VALUES[name]) for v in value.values()), name
            setattr(self, name, value)  # where `Facts` caches the fact it computes
