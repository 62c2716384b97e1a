"""What the facts read and what they are: the run, the options, and the facts derived from
them — each a typed, cached property computed on first use, so no fact depends on which
rule asked first and nothing passes through a dict of string keys.

Facts (each in a module of `tracekit/analysis/`):

| property        | what                                                              |
|-----------------|-------------------------------------------------------------------|
| `ranks`         | the per-rank breakdown over each rank's analysed window           |
| `topology`      | which node each rank sits on, whether a group spans nodes          |
| `pipeline`      | P, M, V and the schedule of a pipeline run (None otherwise)        |
| `memory`        | peak memory per rank against capacity and the memory equation      |
| `compute`       | FLOPs, MFU/HFU, GEMM efficiency, host-bound gaps, top ops          |
| `collectives`   | the collectives table (`CollectiveRow`s): time, exposure, busbw    |
| `stragglers`    | the wait for late peers charged to the rank that arrived last     |
| `communication` | exposure per rank split by cause (straggler, slow, pipeline, rest) |
| `bubble`        | the pipeline bubble: measured, formula, the schedule modeled       |
| `projection`    | step time and efficiency at 2× and 8× the world size               |
| `input_wait`    | the device idle inside the data loader's batch fetches, per rank    |
| `fusion`        | compute kernel time per rank: GEMM/attention/conv and the rest      |
| `step_model`    | the dependency graph of the steps across ranks, replayed (what-ifs) |
| `null_reasons`  | why each summary figure is null where it is, as its fact carries it |

The judges (`diagnosers.context.Context`) add what the rules raise; the facts never
read it.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING

from tracekit import sql
from tracekit.manifest import JobManifest
from tracekit.metrics import windows as W
from tracekit.metrics.breakdown import (
    RankBreakdown,
    device_gaps_with_steps,
    per_rank,
    windows_of,
)
from tracekit.model import figures as F
from tracekit.model import hardware
from tracekit.model.hardware import DeviceSpec
from tracekit.options import AnalysisOptions, Overrides
from tracekit.store.run import Run

if TYPE_CHECKING:
    from tracekit.analysis.communication import CollectiveFacts, CommunicationFacts
    from tracekit.analysis.compute import ComputeFacts
    from tracekit.analysis.memory import MemoryFacts
    from tracekit.analysis.pipeline import Pipeline
    from tracekit.analysis.scaling import BubbleFacts
    from tracekit.analysis.stragglers import Attribution
    from tracekit.analysis.topology import Topology
    from tracekit.report.schema import CollectiveRow
    from tracekit.stepmodel.model import StepModel


class Facts:
    """A run's facts for the analysis options: each property computed once, on first
    use (`diagnosers.context.Context` is this plus the judges' state)."""

    def __init__(
        self,
        run: Run,
        options: AnalysisOptions | None = None,
        ranks: list[RankBreakdown] | None = None,
    ):
        self.run = run
        self.options = options or AnalysisOptions()
        self.window = self.options.window
        self.steps = self.options.steps
        self.overrides: Overrides = self.options.overrides
        self.ranks: list[RankBreakdown] = (
            ranks if ranks is not None else per_rank(run, window=self.window, steps=self.steps)
        )

    # ------------------------------------------------------------ the run's givens
    @property
    def manifest(self) -> JobManifest | None:
        """The run's job.json, read once when the run was opened."""
        return self.run.manifest

    @cached_property
    def _device(self) -> tuple:
        """(name, memory, has device events, compute capability, SMs)."""
        rows = self.run.sql(sql.query("levels.run", "device")).fetchall()
        return rows[0] if rows else (None, None, False, None, None)

    @property
    def cpu(self) -> bool:
        """A CPU run: no device events, the host is the device."""
        return not self._device[2]

    @cached_property
    def gloo_on_gpu(self) -> bool:
        """A GPU run whose collectives (some of them) ran on a gloo process group."""
        if self.cpu:
            return False
        return bool(self.run.sql(sql.query("levels.run", "gloo_collectives")).fetchall()[0][0])

    @cached_property
    def spec(self) -> DeviceSpec | None:
        """The device's row of the spec table, with the user's overrides applied."""
        name, mem, has_dev, cc, sms = self._device
        spec = hardware.lookup(name, mem, cc, sms) if has_dev else None
        o = self.overrides
        if spec is not None and o.device_memory_GB:
            spec = replace(spec, memory_bytes=o.device_memory_GB * 1e9)
        if spec is not None and o.busbw_GBps:
            spec = replace(spec, busbw_Bps=o.busbw_GBps * 1e9)
        if spec is not None and o.latency_us:
            spec = replace(spec, latency_s=o.latency_us * 1e-6)
        return spec

    @property
    def step_ms(self) -> float | None:
        """The run's step: the mean over ranks of each rank's step (its window without steps)."""
        vals = [r.step_time_ms or r.window_ms for r in self.ranks if r.window_ms]
        return sum(vals) / len(vals) if vals else None

    @cached_property
    def windows(self) -> str:
        """SQL rows (rank, wid, start_ns, end_ns, n) of each rank's analysed window."""
        return W.values(self.run, windows_of(self.ranks))

    def window_sql(self) -> str:
        """The windows as a parenthesized subquery, for `WITH w AS …`."""
        return f"({self.windows})"

    @cached_property
    def device_gaps(self) -> str:
        """SQL rows of `metrics.host_bound:device_gaps` over the analysed windows, computed
        once (the host-bound gaps and the data loader's share of them read them)."""
        return device_gaps_with_steps(self.run, self.windows, W.step_windows(self.steps))

    # ------------------------------------------------------------ facts
    @cached_property
    def topology(self) -> Topology:
        from tracekit.analysis.topology import topology

        return topology(self)

    @cached_property
    def pipeline(self) -> Pipeline | None:
        from tracekit.analysis.pipeline import detect

        return detect(self)

    @cached_property
    def memory(self) -> MemoryFacts:
        from tracekit.analysis.memory import facts

        return facts(self)

    @cached_property
    def compute(self) -> ComputeFacts:
        from tracekit.analysis.compute import facts

        return facts(self)

    @cached_property
    def collectives(self) -> CollectiveFacts:
        from tracekit.analysis.communication import collective_facts

        return collective_facts(self)

    @cached_property
    def region_per_rank(self) -> dict:
        """(kind, path) → rank → the region's figures per step over the windows
        (`analysis.regions.per_rank_of`), built once: the regions and TK-S402 read them."""
        from tracekit.analysis.regions import per_rank_of

        return per_rank_of(self.run, self.windows)

    @cached_property
    def stragglers(self) -> Attribution:
        from tracekit.analysis.stragglers import attribute

        return attribute(self)

    @cached_property
    def communication(self) -> CommunicationFacts:
        from tracekit.analysis.communication import facts

        return facts(self)

    @cached_property
    def bubble(self) -> BubbleFacts | None:
        from tracekit.analysis.scaling import bubble

        return bubble(self)

    @cached_property
    def projection(self) -> dict | None:
        from tracekit.analysis.scaling import projection

        return projection(self)

    @property
    def null_reasons(self) -> dict[str, str]:
        """Why each summary figure is null where it is, by key, as the facts that make it
        so carry it (`summary.null_reasons` takes its null figures'; a figure without
        one is "not measurable")."""
        from tracekit.analysis.scaling import bubble_null_reasons

        out = {F.COMM_OVERLAP_FRACTION.key: "no communication in the analysed windows"}
        out |= self.compute.null_reasons
        out |= bubble_null_reasons(self.bubble)
        out |= self.memory.null_reasons
        if self.stragglers.why:
            out[F.STRAGGLER_RANKS.key] = self.stragglers.why
        out["device_spec"] = "CPU run: no device" if self.cpu else "device not in the spec table"
        return out

    @cached_property
    def input_wait(self) -> dict:
        """rank → the device idle inside the data loader's spans
        (`tracekit.analysis.dataloader`)."""
        from tracekit.analysis.dataloader import loader_idle

        return loader_idle(self)

    @cached_property
    def fusion(self) -> dict:
        """rank → its compute kernel time, GEMM-class and the rest (`tracekit.analysis.fusion`)."""
        from tracekit.analysis.fusion import fusion

        return fusion(self)

    @cached_property
    def step_model(self) -> StepModel | None:
        from tracekit.analysis.whatif_plan import model

        return model(self)

    @cached_property
    def step_model_plan(self) -> tuple[str | None, str | None]:
        """(the windows the step model covers, a note on them); windows None: the model
        is not built and the note says why (`tracekit.analysis.whatif_plan.plan`)."""
        from tracekit.analysis.whatif_plan import plan

        return plan(self)

    def key_ms(self, row: CollectiveRow, rank: int, field: str) -> float:
        """A collective's exposure figure (`field` of `tracekit.metrics.collectives.Exposure`)
        on one rank, in ms per step of that rank."""
        cells = self.collectives.exposure.get((row.name, row.group_size, row.bytes), {})
        v = cells.get(rank)
        return getattr(v, field) / self.steps_of.get(rank, 1) / 1e6 if v else 0.0

    @cached_property
    def steps_of(self) -> dict[int, int]:
        """rank → steps in its window (at least 1: a window without steps is one)."""
        return {r.rank: max(r.steps, 1) for r in self.ranks}
