"""The merged trace's "tracekit" process: tracks of slices (findings, steps, exposed
communication, the critical path), overlapping slices on extra lanes."""

from __future__ import annotations

from tracekit.report.rankevents import ts_us


class Tracks:
    """The tracekit process: named threads of slices (overlapping slices of one track
    go to extra lanes, which Perfetto draws as rows). Its events never carry `args.rank`
    (a slice's rank is `of_rank`): a reader of merged files gives an event with
    `args.rank` to that rank, and these are no rank's events."""

    def __init__(self, pid: int, zero: int):
        self.pid, self.zero = pid, zero
        self.events: list[dict] = [
            {"ph": "M", "name": "process_name", "pid": pid, "ts": 0, "args": {"name": "tracekit"}},
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": pid,
                "ts": 0,
                "args": {"sort_index": -1},
            },
        ]
        self._lanes: dict[str, list[tuple[int, int]]] = {}  # track → [(tid, busy until)]
        self._next_tid = 1

    def _tid(self, track: str, start: int, end: int) -> int:
        lanes = self._lanes.setdefault(track, [])
        for i, (tid, until) in enumerate(lanes):
            if start >= until:
                lanes[i] = (tid, end)
                return tid
        tid = self._next_tid
        self._next_tid += 1
        name = track if not lanes else f"{track} ({len(lanes) + 1})"
        lanes.append((tid, end))
        self.events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": self.pid,
                "tid": tid,
                "ts": 0,
                "args": {"name": name},
            }
        )
        self.events.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": self.pid,
                "tid": tid,
                "ts": 0,
                "args": {"sort_index": tid},
            }
        )
        return tid

    def slice(
        self, track: str, name: str, start_ns: int, end_ns: int, cat: str, args: dict | None = None
    ) -> None:
        end_ns = max(end_ns, start_ns + 1)
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.pid,
                "tid": self._tid(track, start_ns, end_ns),
                "ts": ts_us(start_ns - self.zero),
                "dur": (end_ns - start_ns) / 1000,
                "args": args or {},
            }
        )


def critical_path_spans(report_dict: dict) -> list[tuple[dict, int, int]]:
    """The step model's critical path on the run's aligned clock: each segment of
    `step_model.critical_path.segments` with its (start, end), ns since the epoch — the one
    mapping the Perfetto export and the TUI's timeline share.

    A segment's `start_ms` counts from `step_model.path_origin_ns`, the earliest start of
    the windows the model replayed (each rank's last steps only, where the model covers
    those). A report written before that key existed falls back on the earliest
    `ranks[].window_start_ns`, which is the same whenever the model covers the whole
    window."""
    model = report_dict.get("step_model") or {}
    segments = (model.get("critical_path") or {}).get("segments") or []
    origin = model.get("path_origin_ns")
    if origin is None:
        starts = [
            r["window_start_ns"]
            for r in report_dict.get("ranks") or []
            if r.get("window_start_ns") is not None
        ]
        origin = min(starts, default=None)
    if not segments or origin is None:
        return []
    out = []
    for seg in segments:
        s = origin + round(float(seg["start_ms"]) * 1e6)
        out.append((seg, s, s + round(float(seg["ms"]) * 1e6)))
    return out


def critical_path_track(report_dict: dict, tracks: Tracks) -> int:
    """The step model's critical path (`critical_path_spans`) as one track; returns the
    slices drawn."""
    spans = critical_path_spans(report_dict)
    for seg, s, e in spans:
        tracks.slice(
            "critical path",
            f"{seg.get('kind', '')}: {seg.get('name', '')}",
            s,
            e,
            "tracekit.critical_path",
            {"of_rank": seg.get("rank"), "kind": seg.get("kind")},
        )
    return len(spans)
