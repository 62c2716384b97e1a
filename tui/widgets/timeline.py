"""The timeline: one lane per rank (or per stream / thread), device activity aggregated
into the columns on screen by one SQL query per viewport.

Reusable: it needs a `source` with `frame(lanes, t0, t1, ncols, min_dur_ns, highlight)`
returning a `tui.frame.Frame` and `next_event(rank, lane, after_ns, min_dur_ns, highlight,
backwards)`. It posts `Timeline.CursorMoved` when the cursor lands somewhere new; the
screen decides what to show about it.

Each cell is one column of time. Its height (▁▂▃▄▅▆▇█) is how much of the column the
lane was busy — sub-cell resolution — and its colour what kind of work: compute (green),
communication with no compute beside it (exposed, red), communication under compute
(yellow), memcpy/memset (magenta), host waits on CPU runs (blue); idle is `·`. Under
NO_COLOR the kinds get their own glyphs instead (█ compute, X exposed, x overlapped,
m memcpy, w wait).

The step model's critical path (`path_spans`: the report's segments on the aligned clock,
`tracekit.report.export.critical_path_spans`), when shown, is a row of its own above the
lanes — in each column the rank the path is on, coloured by the segment's kind — and a
background (an overline under NO_COLOR) on the cells of that rank's lane.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.worker import Worker, WorkerState, get_current_worker

from tracekit.report.schema import PathSegment
from tracekit.stepmodel.replay import COLOURS as PATH_COLOURS
from tui.frame import Frame

EIGHTHS = " ▁▂▃▄▅▆▇█"
STYLES = {
    "compute": "green",
    "exposed": "bold red",
    "overlap": "yellow",
    "memcpy": "magenta",
    "host_wait": "blue",
    "idle": "grey42",
}
MONO = {"compute": "█", "exposed": "X", "overlap": "x", "memcpy": "m", "host_wait": "w"}
LABEL_W = 9
# the critical path: its segments' kinds, one colour each (the HTML report's too)
PATH_STYLES = {kind: f"bold {colour}" for kind, colour in PATH_COLOURS.items()}
PATH_MARK = "on purple4"
PATH_MARK_MONO = "overline"
PATH_LABEL = "path"

# per lane: {column: the kind of the path segment covering most of it}
PathMarks = dict[tuple[int, Any], dict[int, str]]


def path_marks(
    spans: list[tuple[PathSegment, int, int]],
    lanes: list[tuple[int, Any]],
    t0: int,
    t1: int,
    ncols: int,
) -> tuple[PathMarks, list[tuple[int, str] | None]]:
    """Where the critical path lies in the view [t0, t1) of `ncols` columns: per lane of
    the segment's rank (every stream of it, per stream), the columns it covers and their
    kind; and per column the (rank, kind) of the segment covering most of it (None: no
    segment). `spans`: (segment, start_ns, end_ns)."""
    col_ns = (t1 - t0) / ncols
    best: list[tuple[float, int, str] | None] = [None] * ncols
    for seg, s, e in spans:
        if e <= t0 or s >= t1:
            continue
        a = max(0, int((max(s, t0) - t0) / col_ns))
        b = min(ncols - 1, int((min(e, t1) - 1 - t0) / col_ns))
        for c in range(a, b + 1):
            lo, hi = t0 + c * col_ns, t0 + (c + 1) * col_ns
            cover = min(e, hi) - max(s, lo)
            if cover > 0 and (best[c] is None or cover > best[c][0]):
                best[c] = (cover, seg.rank, seg.kind)
    by_rank: dict[int, list] = {}
    for key in lanes:
        by_rank.setdefault(key[0], []).append(key)
    marks: PathMarks = {}
    row: list[tuple[int, str] | None] = []
    for c, b in enumerate(best):
        row.append(None if b is None else (b[1], b[2]))
        if b is not None:
            for key in by_rank.get(b[1], []):
                marks.setdefault(key, {})[c] = b[2]
    return marks, row


def lane_label(key: tuple[int, Any]) -> str:
    rank, lane = key
    return f"r{rank}" if lane is None else f"r{rank}:{lane}"


def classify(cov: dict[str, list[int]] | None, col: int, col_ns: float) -> tuple[str, float]:
    """(kind, busy fraction) of one cell."""
    if not cov:
        return "idle", 0.0

    def part(*cats: str) -> float:
        return sum(cov[c][col] for c in cats if c in cov) / col_ns

    comp, comm = part("compute"), part("communication")
    mem, wait = part("memcpy", "memset"), part("host_wait")
    busy = min(1.0, max(comp + mem, comm, wait))
    if comm > 0 and comp <= 0:
        return "exposed", busy
    if comm > 0:
        return "overlap", busy
    if comp > 0:
        return "compute", busy
    if mem > 0:
        return "memcpy", busy
    if wait > 0:
        return "host_wait", busy
    return "idle", 0.0


def render_frame(
    frame: Frame | None,
    lanes: list[tuple[int, Any]],
    width: int,
    height: int,
    cursor: int,
    lane_index: int,
    lane_offset: int = 0,
    mono: bool = False,
    path: tuple[PathMarks, list[tuple[int, str] | None]] | None = None,
) -> Text:
    """The widget's picture as Rich text (a pure function: the benchmark times it).
    `path`: `path_marks` of the view, or None to draw no critical path."""
    out = Text(no_wrap=True, overflow="crop")
    ncols = max(1, width - LABEL_W)
    rows = max(1, height - 2 - (path is not None))
    marker = [" "] * ncols
    if 0 <= cursor < ncols:
        marker[cursor] = "▼"
    out.append(" " * LABEL_W + "".join(marker) + "\n", style="bold")
    marks: PathMarks = {}
    if path is not None:
        marks, row = path
        out.append(f"{PATH_LABEL:>{LABEL_W - 1}} ", style="bold")
        for c in range(ncols):
            cell = row[c] if c < len(row) else None
            if cell is None:
                out.append(" ")
            else:
                out.append(str(cell[0])[-1], style=PATH_STYLES.get(cell[1], "bold"))
        out.append("\n")
    mark_style = " " + (PATH_MARK_MONO if mono else PATH_MARK)
    shown = lanes[lane_offset : lane_offset + rows]
    for i, key in enumerate(shown):
        idx = lane_offset + i
        sel = idx == lane_index
        out.append(f"{lane_label(key):>{LABEL_W - 1}} ", style="bold reverse" if sel else "bold")
        cov = frame.cover.get(key) if frame is not None and frame.ncols == ncols else None
        hits = frame.hits.get(key, set()) if frame is not None and frame.ncols == ncols else set()
        col_ns = frame.col_ns if frame is not None else 1.0
        on_path = marks.get(key, {})
        for c in range(ncols):
            kind, busy = classify(cov, c, col_ns)
            if kind == "idle":
                ch = "·"
            elif mono:
                ch = MONO[kind]
            else:
                ch = EIGHTHS[max(1, min(8, round(busy * 8)))]
            style = STYLES[kind]
            if c in hits:
                style += " underline on grey23"
            elif c in on_path:
                style += mark_style
            if sel and c == cursor:
                style += " reverse"
            out.append(ch, style=style)
        out.append("\n")
    if frame is not None:
        span = frame.t1 - frame.t0
        left = "+0 ms"
        right = f"+{span / 1e6:,.3f} ms"
        mid = f"col {span / ncols / 1e3:,.1f} µs"
        gap = max(1, ncols - len(left) - len(right) - len(mid))
        axis = left + " " * (gap // 2) + mid + " " * (gap - gap // 2) + right
        out.append(" " * LABEL_W + axis[:ncols], style="dim")
    return out


class Timeline(Widget, can_focus=True):
    """Lanes of device activity over [t0, t1); see the module docstring."""

    DEFAULT_CSS = """
    Timeline { height: 1fr; width: 1fr; min-height: 4; }
    Timeline:focus { background: $boost; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "zoom(0.5)", "zoom in", key_display="+"),
        Binding("minus", "zoom(2)", "zoom out", key_display="-"),
        Binding("left", "move(-1)", "←", show=False),
        Binding("right", "move(1)", "→", show=False),
        Binding("shift+left", "pan(-0.5)", "pan ←", show=False),
        Binding("shift+right", "pan(0.5)", "pan →", show=False),
        Binding("up", "lane(-1)", "lane ↑", show=False),
        Binding("down", "lane(1)", "lane ↓", show=False),
        Binding("tab", "next_event(False)", "next event"),
        Binding("shift+tab", "next_event(True)", "prev event", show=False),
        Binding("0", "fit", "fit", show=False),
    ]

    class CursorMoved(Message):
        def __init__(self, timeline: Timeline, key: tuple[int, Any], ta: int, tb: int) -> None:
            super().__init__()
            self.timeline = timeline
            self.key = key
            self.ta = ta
            self.tb = tb

    class Failed(Message):
        """A frame or a search failed (the widget keeps its last frame)."""

        def __init__(self, timeline: Timeline, error: BaseException | None) -> None:
            super().__init__()
            self.timeline = timeline
            self.error = error

    def __init__(self, source: Any, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.source = source
        self.lanes: list[tuple[int, Any]] = []
        self.bounds = (0, 1)
        self.t0 = 0
        self.t1 = 1
        self.cursor = 0
        self.lane_index = 0
        self.lane_offset = 0
        self.min_dur_ns = 0
        self.highlight: str | None = None
        self.frame: Frame | None = None
        self.path_spans: list[tuple[PathSegment, int, int]] = []  # the path's segments
        self.show_path = True
        self._path_cache: tuple[tuple, Any] | None = None

    # state from the screen -------------------------------------------------------
    def show(
        self,
        lanes: list[tuple[int, Any]],
        t0: int,
        t1: int,
        bounds: tuple[int, int] | None = None,
        lane_key: tuple[int, Any] | None = None,
        at_ns: int | None = None,
    ) -> None:
        self.lanes = lanes
        self.bounds = bounds or (t0, t1)
        self.t0, self.t1 = t0, max(t1, t0 + 1)
        if lane_key in lanes:
            self.lane_index = lanes.index(lane_key)
        self.lane_index = min(self.lane_index, max(0, len(lanes) - 1))
        self.cursor = self.ncols // 2 if at_ns is None else self._col_of(at_ns)
        if at_ns is not None and not self.t0 <= at_ns < self.t1:
            self._center_on(at_ns)
        self.refresh_frame()

    @property
    def ncols(self) -> int:
        return max(1, self.size.width - LABEL_W)

    @property
    def lane_key(self) -> tuple[int, Any] | None:
        return self.lanes[self.lane_index] if self.lanes else None

    @property
    def col_ns(self) -> float:
        return (self.t1 - self.t0) / self.ncols

    def cursor_span(self) -> tuple[int, int]:
        return int(self.t0 + self.cursor * self.col_ns), int(
            self.t0 + (self.cursor + 1) * self.col_ns
        )

    def path_view(self) -> tuple[PathMarks, list[tuple[int, str] | None]] | None:
        """The critical path in the view (`path_marks`), None when it is hidden or the
        report has none."""
        if not (self.show_path and self.path_spans):
            return None
        key = (id(self.path_spans), tuple(self.lanes), self.t0, self.t1, self.ncols)
        if self._path_cache is None or self._path_cache[0] != key:  # not at each cursor move
            view = path_marks(self.path_spans, self.lanes, self.t0, self.t1, self.ncols)
            self._path_cache = (key, view)
        return self._path_cache[1]

    def _col_of(self, t: int) -> int:
        return max(0, min(self.ncols - 1, int((t - self.t0) / self.col_ns)))

    def _center_on(self, t: int) -> None:
        span = self.t1 - self.t0
        self.t0 = int(t - span / 2)
        self.t1 = self.t0 + span
        self.cursor = self._col_of(t)

    # rendering -------------------------------------------------------------------
    def refresh_frame(self) -> None:
        if self.lanes and self.size.width > LABEL_W:
            self._load(
                list(self.lanes), self.t0, self.t1, self.ncols, self.min_dur_ns, self.highlight
            )
        self.refresh()

    @work(thread=True, exclusive=True, group="timeline-frame", exit_on_error=False)
    def _load(self, lanes, t0, t1, ncols, min_dur, highlight) -> None:
        fr = self.source.frame(lanes, t0, t1, ncols, min_dur, highlight)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._apply, fr)

    def _apply(self, fr: Frame) -> None:
        self.frame = fr
        self.refresh()
        self._announce()

    def _announce(self) -> None:
        if self.lane_key is not None:
            ta, tb = self.cursor_span()
            self.post_message(self.CursorMoved(self, self.lane_key, ta, tb))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # messages up: the screen (and the app's error modal) decide
        event.stop()
        if event.state == WorkerState.ERROR:
            self.post_message(self.Failed(self, event.worker.error))

    def on_resize(self) -> None:
        self.cursor = min(self.cursor, self.ncols - 1)
        self.refresh_frame()

    def render(self) -> Text:
        path = self.path_view()
        rows = max(1, self.size.height - 2 - (path is not None))
        if self.lane_index < self.lane_offset:
            self.lane_offset = self.lane_index
        elif self.lane_index >= self.lane_offset + rows:
            self.lane_offset = self.lane_index - rows + 1
        return render_frame(
            self.frame,
            self.lanes,
            self.size.width,
            self.size.height,
            self.cursor,
            self.lane_index,
            self.lane_offset,
            mono=self.app.no_color,
            path=path,
        )

    # actions ---------------------------------------------------------------------
    def action_zoom(self, factor: float) -> None:
        ta, tb = self.cursor_span()
        tc = (ta + tb) // 2
        span = self.t1 - self.t0
        lo, hi = self.bounds
        new = int(min(max(span * factor, self.ncols * 10), max(hi - lo, self.ncols) * 4))
        frac = (tc - self.t0) / span
        self.t0 = int(tc - frac * new)
        self.t1 = self.t0 + new
        self.cursor = self._col_of(tc)
        self.refresh_frame()

    def action_pan(self, frac: float) -> None:
        shift = int((self.t1 - self.t0) * frac)
        self.t0 += shift
        self.t1 += shift
        self.refresh_frame()

    def action_move(self, step: int) -> None:
        c = self.cursor + step
        if c < 0 or c >= self.ncols:
            self.action_pan(0.5 if step > 0 else -0.5)
            self.cursor = self.ncols // 2 + step
            return
        self.cursor = c
        self.refresh()
        self._announce()

    def action_lane(self, step: int) -> None:
        if self.lanes:
            self.lane_index = max(0, min(len(self.lanes) - 1, self.lane_index + step))
            self.refresh()
            self._announce()

    def action_fit(self) -> None:
        self.t0, self.t1 = self.bounds
        self.refresh_frame()

    def action_next_event(self, backwards: bool) -> None:
        key = self.lane_key
        if key is not None:
            ta, tb = self.cursor_span()
            self._find_next(key, tb if not backwards else ta, backwards)

    @work(thread=True, exclusive=True, group="timeline-next", exit_on_error=False)
    def _find_next(self, key, after: int, backwards: bool) -> None:
        hit = self.source.next_event(
            key[0], key[1], after, self.min_dur_ns, self.highlight, backwards
        )
        if hit is not None:
            self.app.call_from_thread(self.go_to, hit[0])
        else:
            self.app.call_from_thread(self.notify, "no further event on this lane")

    def go_to(self, t: int, lane_key: tuple[int, Any] | None = None) -> None:
        """Put the cursor at time t (re-centring when it is off screen)."""
        if lane_key in self.lanes:
            self.lane_index = self.lanes.index(lane_key)
        if self.t0 <= t < self.t1:
            self.cursor = self._col_of(t)
            self.refresh()
            self._announce()
        else:
            self._center_on(t)
            self.refresh_frame()
