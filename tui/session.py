"""A run opened for the TUI: the store, its report, and what the screens keep for the
session (lanes, step windows, the what-ifs' step model).

No Textual here: the app loads it from a worker, the screens call it from workers, the
benchmark and the tests call it directly. The report is the typed one
(`tracekit.report.schema.Report`), built once by `diagnosers.assemble` (what `tracekit
analyze --format json` prints) or a stored one read back once (`read_report`: one that
does not decode against the schema is one line, not a traceback); the screens read it
by attribute. The drill-down's
questions are `tui.queries` over the screens' own connection (`Db`), which one lock
serialises — the run's connection has its own, held by the diagnosers and the SQL
console.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec

from tracekit.errors import TracekitError
from tracekit.options import AnalysisOptions, OpenOptions
from tracekit.report.schema import (
    UNSET,
    PathSegment,
    Region,
    Report,
    RunInfo,
    StepModelBlock,
    decode,
    to_dict,
)
from tui import queries
from tui.frame import Frame
from tui.queries import Db


def read_report(path: str | Path) -> Report:
    """A stored report (`tracekit analyze --format json`) as its type, decoded once; a
    file that is not one of this version's reports raises TracekitError, one line that
    says where it does not fit the schema."""
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise TracekitError(f"cannot read the report {path}: {exc.strerror or exc}") from None
    try:
        return decode(text)
    except msgspec.ValidationError as exc:
        raise TracekitError(
            f"{path} is not a report of this tracekit version (tracekit analyze --format "
            f"json writes one): {exc}"
        ) from None
    except msgspec.DecodeError as exc:
        raise TracekitError(f"{path} is not a JSON report: {exc}") from None


class Session:
    """A run opened for the TUI: `load()` ingests and builds the report (slow; call it
    from a worker), the other methods are what the screens ask."""

    def __init__(
        self,
        inputs: list[str | Path],
        options: AnalysisOptions | None = None,
        open_options: OpenOptions | None = None,
        display_path: str | None = None,
        workers: int | None = None,
        report: Report | str | Path | None = None,
    ):
        self.inputs = [str(p) for p in inputs]
        self.options = options or AnalysisOptions()
        self.window = self.options.window
        self.steps = self.options.steps
        self.open_options = open_options or OpenOptions()
        if workers is not None:
            self.open_options = replace(self.open_options, workers=workers)
        self.display_path = display_path or " ".join(self.inputs)
        # a stored report to show instead of computing one: read by `open`
        self.report_path = None if isinstance(report, Report | None) else Path(report)
        self.run = None
        self.facts: RunInfo | None = None  # the run's facts, once the store is open
        # the report, once diagnosed (or read back)
        self.report: Report | None = report if isinstance(report, Report) else None
        self.report_error: str | None = None
        self.lock = threading.RLock()  # the screens' connection
        self.run_lock = threading.RLock()  # the run's own (diagnosers, SQL console)
        self.cur = None
        self._db: Db | None = None
        self._lanes: dict[int, list] | None = None
        self._windows: dict[int, list[tuple[int, int, int]]] | None = None
        self._context = None  # the diagnosers' Context of the what-ifs (its step model)

    # loading ---------------------------------------------------------------------
    def open(self, progress: Callable[[str], None] = lambda _msg: None) -> None:
        """Read the stored report when given one, ingest what the cache lacks and open the
        store; the run's facts (`tracekit.report.run_info`) are enough for the timeline and
        the SQL console."""
        from tracekit.report.runinfo import run_info
        from tracekit.store.open import open_run
        from tracekit.store.run import load_before_threads

        if self.run is not None:  # opened already (the tests share one session)
            return
        if self.report_path is not None and self.report is None:
            # a stored report is read first: one that does not decode fails before the ingest
            self.report = read_report(self.report_path)
        # the ingest's own progress bar would draw over the screen; the app shows progress
        os.environ["TRACEKIT_NO_PROGRESS"] = "1"
        progress(f"ingesting {self.display_path} …")
        self.run = open_run(*self.inputs, options=self.open_options)
        load_before_threads()  # the screens' workers and the diagnosis query on threads
        # the screens' queries get their own connection to the same database, so they
        # run while the diagnosers hold the run's (one lock per connection)
        self.cur = self.run.con.cursor()
        self._db = Db(self.cur, self.lock)
        with self.run_lock:
            self.facts = run_info(self.run)

    @property
    def diagnosed(self) -> bool:
        return self.report is not None

    @property
    def run_info(self) -> RunInfo | None:
        """The run's facts: the report's once it is in, the store's before."""
        return self.report.run if self.report is not None else self.facts

    def diagnose(self) -> None:
        """The full report, as `tracekit analyze --format json` builds it (a stored one
        given was read by `open`)."""
        if self.diagnosed:
            return
        from diagnosers import assemble

        with self.run_lock:
            try:
                rep = assemble.cached(self.run, self.options)
            except TracekitError:
                raise
            except Exception as exc:  # a diagnoser bug must not stop the drill-down
                self.report_error = f"{type(exc).__name__}: {exc}"
                rep = assemble.analyze(self.run, self.options.with_(levels=False))
        self.report = rep

    def step_model(self) -> StepModelBlock | None:
        """The report's step model; None without one."""
        rep = self.report
        return None if rep is None or rep.step_model is UNSET else rep.step_model

    def load(self, progress: Callable[[str], None] = lambda _msg: None) -> None:
        self.open(progress)
        progress("running the diagnosers …")
        self.diagnose()

    def close(self) -> None:
        if self.run is not None:
            with self.lock, self.run_lock:
                if self.cur is not None:
                    self.cur.close()
                self.run.close()

    @property
    def db(self) -> Db:
        """The screens' connection (the run must be open)."""
        if self._db is None:
            raise TracekitError("the run is not open yet")
        return self._db

    # the report ------------------------------------------------------------------
    @property
    def ranks(self) -> list[int]:
        return list(self.run_info.ranks) if self.run_info is not None else []

    @property
    def steps_list(self) -> list[int]:
        return list(self.run_info.steps) if self.run_info is not None else []

    def path_spans(self) -> list[tuple[PathSegment, int, int]]:
        """The report's critical path segments with their (start, end) on the store's
        clock — the Perfetto export's mapping (`critical_path_spans`, which reads the
        report's JSON: one (start, end) per segment, in order, or none)."""
        from tracekit.report.export import critical_path_spans

        model = self.step_model()
        if model is None or model.critical_path is None or self.report is None:
            return []
        spans = critical_path_spans(to_dict(self.report))
        if not spans:  # no time zero for the segments (an older report)
            return []
        segments = model.critical_path.segments
        return [(seg, s, e) for seg, (_, s, e) in zip(segments, spans, strict=True)]

    # plain queries ---------------------------------------------------------------
    def query(self, sql: str, params: dict | list | None = None) -> tuple[list[str], list[tuple]]:
        return self.db.query(sql, params)

    def rows(self, sql: str, params: dict | list | None = None) -> list[dict]:
        return self.db.rows(sql, params)

    def user_query(self, sql: str, limit: int = 5000) -> tuple[list[str], list[tuple], int]:
        """The SQL console: the same read-only rule as `tracekit query`."""
        with self.run_lock:
            rel = self.run.readonly_sql(sql)
            cols = list(rel.columns)
            rows = rel.limit(limit + 1).fetchall()
        more = len(rows) > limit
        return cols, rows[:limit], more

    def views(self) -> dict[str, Any]:
        from tracekit.sql import docs

        return docs()

    # timeline --------------------------------------------------------------------
    def lanes(self) -> dict[int, list]:
        """Streams / threads with device activity, per rank (kept for the session)."""
        if self._lanes is None:
            self._lanes = queries.lanes(self.db, self.ranks)
        return self._lanes

    def step_windows(self) -> dict[int, list[tuple[int, int, int]]]:
        """(step, start, end) per rank (kept for the session)."""
        if self._windows is None:
            self._windows = queries.step_windows(self.db)
        return self._windows

    def step_span(self, step: int | None, ranks: list[int] | None = None) -> tuple[int, int]:
        """The time span of ProfilerStep `step` over the ranks (the whole trace's device
        activity when the run has no steps)."""
        ranks = ranks or self.ranks
        spans = [
            (ts, end)
            for r in ranks
            for s, ts, end in self.step_windows().get(r, [])
            if step is None or s == step
        ]
        if step is not None and spans:
            return min(s for s, _ in spans), max(e for _, e in spans)
        return queries.activity_span(self.db, ranks)

    def step_of(self, rank: int, t_ns: int) -> tuple[int, int] | None:
        """(step, its start) of the rank's ProfilerStep that holds the instant (None:
        none does)."""
        for step, ts, end in self.step_windows().get(rank, []):
            if ts <= t_ns < end:
                return step, ts
        return None

    # each of these is the `tui.queries` function of its name on the session's connection
    def frame(self, *args: Any, **kw: Any) -> Frame:
        """`queries.frame(lanes, t0, t1, ncols, min_dur_ns, highlight)`: the viewport
        aggregated to columns."""
        return queries.frame(self.db, *args, **kw)

    def event_at(self, *args: Any, **kw: Any) -> dict | None:
        """`queries.event_at(rank, lane, ta, tb, min_dur_ns, highlight)`: the event under
        the cursor, what launched it."""
        return queries.event_at(self.db, *args, **kw)

    def next_event(self, *args: Any, **kw: Any) -> tuple[int, int] | None:
        """`queries.next_event(rank, lane, after_ns, min_dur_ns, highlight, backwards)`."""
        return queries.next_event(self.db, *args, **kw)

    def collective_target(self, rank: int, step: int | None, name: str) -> dict[str, Any]:
        """Where a jump to a collective on a rank puts the timeline: the longest instance
        of the collective on the rank, in the step when given (else the rank's first),
        its name highlighted on its lane."""
        lo, hi = self.step_span(step, [rank]) if step is not None else (None, None)
        if step is None and self.steps_list:
            step = next((st for st, _, _ in self.step_windows().get(rank, [])), self.steps_list[0])
            lo, hi = self.step_span(step, [rank])
        target: dict[str, Any] = {"rank": rank, "step": step}
        row = queries.longest_collective(self.db, rank, name, lo, hi)
        if row is not None:
            target.update(at_ns=row["ts_ns"], highlight=row["raw_name"], lane=row["lane"])
        return target

    # the step model --------------------------------------------------------------
    def region_target(self, region: Region) -> dict[str, Any] | None:
        """Where a region first runs in the analysed steps, on the rank with the most
        device time in it (else the first rank): {rank, step, at_ns}; None where it
        never runs there."""
        by = region.device_ms_by_rank
        rank = max(by, key=lambda r: by[r]) if by else (self.ranks or [0])[0]
        steps = [s for s in self.steps_list if s is not None]
        start = self.step_span(steps[0], [rank])[0] if steps else 0
        hit = queries.region_first(self.db, rank, region.path, start)
        if hit is None:
            return None
        return {"rank": rank, "step": hit["step"], "at_ns": int(hit["ts_ns"])}

    def region_ops(self, region: Region) -> list[str]:
        """The names of the ops that ran inside the region, heaviest first."""
        return [r["name"] for r in queries.region_ops(self.db, region.path)]

    def what_if(self, specs: list[str]):
        """The run's step model replayed with the changes `specs` — `tracekit whatif`'s
        path (`tracekit.analysis.whatif_plan.what_if` over a Context of the run, with the
        report's options); the Context, and so the step model it builds, is kept for the
        session. A change that is not one, or does not apply, raises TracekitError (its
        message is the CLI's line)."""
        from diagnosers.context import Context
        from tracekit.analysis.whatif_plan import what_if
        from tracekit.stepmodel.changes import parse

        for spec in specs:  # a change that is not one fails before the model is built
            parse(spec)
        with self.run_lock:
            if self._context is None:
                self.run.materialize()
                self._context = Context(self.run, self.options)
            return what_if(self._context, list(specs))

    # collectives, ops, memory ----------------------------------------------------
    def collective_skew(self) -> dict[tuple[str, Any], dict]:
        return queries.collective_skew(self.db)

    def collective_instances(self, name: str, nbytes: Any, limit: int = 400) -> list[dict]:
        return queries.collective_instances(self.db, name, nbytes, limit)

    def op_kernels(self, name: str, limit: int = 200) -> list[dict]:
        return queries.op_kernels(self.db, name, limit)

    def memory_series(self, ncols: int) -> dict[int, dict[str, list]]:
        return queries.memory_series(self.db, ncols)

    def profile_memory(self) -> dict[int, bool]:
        return queries.profile_memory(self.db)
