"""Analysis windows, and clipping to them — written once for every figure.

A window is (rank, wid, start_ns, end_ns). The report uses one window per rank (its
analysed window: `--window steps|trace|hta`); the per-step samples use each selected
ProfilerStep as its own window (wid = the step number). Every figure over windows takes
such a query, so a figure and its samples share one definition.

Two ways an interval belongs to a window, each written here only:
- `overlapping`: the interval meets the window, clipped to it (`s`, `e`): time figures;
- `starting_in`: the interval starts inside the window: counts of instances and ops;
  an op's FLOPs go by where its kernels run (`ops_in`), as their time does.

With ProfilerSteps (`--window steps`) a window is the steps' windows on the device
(`device_steps`): each step runs from its CPU start (or, when later, the end of the device
work before it) to the end of the device work its CPU span launched (correlation ids),
never overlapping another; a step that launched no device work on a GPU rank (the
profiler's trailing stub) is left out.

The SQL is module `metrics.windows` (and `metrics.windows_steps`, `windows_trace`,
`step_windows`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from tracekit import sql
from tracekit.errors import TracekitError
from tracekit.options import WINDOWS
from tracekit.store.run import Run


@dataclass(frozen=True)
class StepSelection:
    """Which ProfilerSteps to analyse: all, one, or an inclusive range of step numbers."""

    first: int | None = None
    last: int | None = None

    @classmethod
    def parse(cls, spec: str | None) -> StepSelection:
        if spec is None or spec.strip().lower() in ("", "all"):
            return cls()
        m = re.fullmatch(r"\s*(\d+)\s*(?:[-:]\s*(\d+)\s*)?", spec)
        if not m:
            raise TracekitError(
                f"--steps {spec!r} is not a step selection; use all, N or A-B (step numbers)"
            )
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        if b < a:
            raise TracekitError(f"--steps {spec!r}: the range ends before it starts")
        return cls(a, b)

    def sql(self) -> str:
        if self.first is None:
            return "TRUE"
        return f"step BETWEEN {int(self.first)} AND {int(self.last)}"


@dataclass(frozen=True)
class Window:
    """One rank's analysed window."""

    rank: int
    start_ns: int
    end_ns: int
    n_steps: int  # ProfilerSteps in it (0: no steps, a trace window)
    step_ns: float | None  # mean step duration


def activity_table(window: str) -> str:
    """The device activity a window kind reads: HTA's rounded events for `hta`."""
    return "_hta_activity" if window == "hta" else "activity_islands"


def rank_windows(run: Run, window: str = "steps", steps: str | None = None) -> list[Window]:
    """Each rank's analysed window (`--window`, `--steps`)."""
    if window not in WINDOWS:
        raise TracekitError(f"--window {window!r}: use one of {', '.join(WINDOWS)}")
    sel = StepSelection.parse(steps)
    if window == "hta":
        run.con.execute(sql.module("metrics.hta_activity"))
    if window == "steps":
        query = sql.fill("metrics.windows_steps", selection=sel.sql())
    else:
        query = sql.fill("metrics.windows_trace", activity=activity_table(window))
    rows = run.sql(query + " ORDER BY rank").fetchall()
    if sel.first is not None and not rows:
        raise TracekitError(f"--steps {steps}: no ProfilerStep in that range on any rank")
    return [Window(*r) for r in rows]


def values(run: Run, windows: list[Window]) -> str:
    """SQL rows (rank, wid, start_ns, end_ns, n) of the windows (wid 0; n = steps, ≥ 1)."""
    rows = [
        (int(w.rank), 0, int(w.start_ns), int(w.end_ns), max(int(w.n_steps), 1))
        for w in windows
        if w.start_ns is not None
    ]
    return table(run, rows)


def table(run: Run, rows: list[tuple[int, int, int, int, int]]) -> str:
    """SQL rows (rank, wid, start_ns, end_ns, n) of `rows`, from a table of the run's
    database made once per distinct list. Not a VALUES literal in every query: DuckDB's
    Python API tokenizes and binds each query's text, and 1,024 windows written out took
    59 ms a query (0.7 ms from a table)."""
    import hashlib

    if not rows:
        return sql.query("metrics.windows", "no_windows")
    name = "_w_" + hashlib.sha1(repr(rows).encode()).hexdigest()
    if name not in run.window_tables:
        cols = list(zip(*rows, strict=True))
        create = sql.query("metrics.windows", "window_table", name=name)
        run.con.execute(create, [list(c) for c in cols])
        run.window_tables.add(name)
    return f"SELECT * FROM {name}"


def pieces(run: Run, windows: str, step_windows: str) -> list[tuple] | None:
    """The report's windows (`windows`) cut at the step windows (`step_windows`): rows
    (rank, wid, start_ns, end_ns, 1), a step's wid its step, a gap's negative; None
    unless every rank has one report window (wid 0) and its step windows are disjoint and
    inside it. A figure that sums clipped lengths is, over a window, the sum of its
    pieces': one query over the pieces gives the report's figures and the samples'. Cut
    once per run and windows (four figures ask)."""
    key = ("pieces", windows, step_windows)
    cut = _KEPT.get(run, {}).get(key, keep)  # `keep`: a marker, not a value kept
    if cut is keep:
        cut = _pieces(run, windows, step_windows)
        _KEPT.setdefault(run, {})[key] = cut
    return cut


def _pieces(run: Run, windows: str, step_windows: str) -> list[tuple] | None:
    report: dict[int, tuple[int, int]] = {}
    for rank, wid, start, end, _n in run.sql(windows).fetchall():
        if wid != 0 or rank in report or start is None or end is None:
            return None
        report[rank] = (start, end)
    steps: dict[int, list[tuple[int, int, int]]] = {}
    for rank, wid, start, end, _n in run.sql(step_windows).fetchall():
        if rank not in report or wid is None or wid < 0 or start is None or end is None:
            return None
        steps.setdefault(rank, []).append((start, end, wid))
    out = []
    for rank, (lo, hi) in report.items():
        at, gap = lo, -1
        mine = sorted(steps.get(rank, []))
        if len({w for _s, _e, w in mine}) != len(mine):
            return None
        for start, end, wid in mine:
            if start < at or end < start or end > hi:
                return None
            if start > at:
                out.append((rank, gap, at, start, 1))
                gap -= 1
            out.append((rank, wid, start, end, 1))
            at = end
        if hi > at:
            out.append((rank, gap, at, hi, 1))
    return out


def keep(run: Run, key: tuple, value) -> None:
    """Keep `value` for `kept(run, key)`: figures over the step windows computed with the
    report's (`pieces`), for the samples to read."""
    _KEPT.setdefault(run, {})[key] = value


def kept(run: Run, key: tuple):
    """What `keep` kept under `key` for this run, else None."""
    return _KEPT.get(run, {}).get(key)


# run → (figure, windows' SQL) → its rows
_KEPT: WeakKeyDictionary[Run, dict[tuple, object]] = WeakKeyDictionary()


def rows_of(run: Run, query: str) -> str:
    """SQL reading `query`'s rows from a table of the run's database made once per distinct
    query text (not TEMP: cursors of other threads read it too): for rows that several
    figures read over the same windows (`device_gaps`: the host-bound gaps and the data
    loader's share of them), computed once."""
    return made_once(
        run, query, lambda name: run.con.execute(f"CREATE TABLE IF NOT EXISTS {name} AS {query}")
    )


def made_once(run: Run, key: str, make) -> str:
    """SQL reading a table of the run's database named after `key`, which `make(name)`
    creates the first time the key is asked for (`rows_of`'s tables; rows computed
    another way than by one query, `breakdown.piece_work_table`)."""
    import hashlib

    name = "_q_" + hashlib.sha1(key.encode()).hexdigest()
    if name not in run.window_tables:
        make(name)
        run.window_tables.add(name)
    return f"SELECT * FROM {name}"


def step_windows(steps: str | None = None) -> str:
    """SQL rows (rank, wid, start_ns, end_ns, n): each selected ProfilerStep a window."""
    return sql.query(
        "metrics.step_windows", "step_windows", selection=StepSelection.parse(steps).sql()
    )


def ops_in(source: str, windows: str) -> str:
    """Rows of `source` (`op_flops` rows) whose work starts inside a window of `windows`:
    an op's FLOPs count in the window its first kernel runs in (`op_flops.work_ns`; the
    op's start on CPU runs), the window that counts that kernel's time — an op launched
    just before a step whose kernel runs inside it counts there, FLOPs and time alike."""
    return starting_in(source, windows, start="work_ns")


def overlapping(source: str, windows: str, *, start: str = "ts_ns", end: str = "end_ns") -> str:
    """Rows of `source` that meet a window of `windows`, with the window's columns (`wid`,
    `n` …, not its bounds) and the row clipped to it: `s`, `e` (one row per window met)."""
    # the column names first: a part filled later is not searched for their markers
    return sql.query(
        "metrics.windows", "overlapping", start=start, end=end, windows=windows, source=source
    )


def starting_in(source: str, windows: str, *, start: str = "ts_ns") -> str:
    """Rows of `source` that start inside a window of `windows`, with the window's columns
    (`wid`, `n` …, not its bounds)."""
    return sql.query("metrics.windows", "starting_in", start=start, windows=windows, source=source)
