"""The run as one Chrome-JSON trace for Perfetto (`tracekit export RUN -o merged.json.gz`),
with tracekit's findings in it, and the links that open Perfetto at a finding.

Every event of every rank's trace is kept as traced, but for three things: its time is
moved onto one clock (each rank's `baseTimeNanoseconds` + `ts`, less the rank's clock
offset as `tracekit.store.clocks` estimates it, less the merged trace's zero `base_ns`),
its pid gets the rank's offset (rank × 10⁸, TraceLens TraceFusion's convention, so ranks
never collide) and its `args` name the rank. Each rank's processes are named
"rank N" (the host) and "rank N - GPU 0" (its devices; the traced process names and
sort indices give way to these). A "tracekit" process adds the
tracks: the findings (a slice over each finding's evidence interval, named by code and
title), each rank's exposed communication and steps, and the critical path when the
report has a step model. tracekit reads the file back as a merged multi-rank trace
(`tracekit.ingest.tables.merged_ranks`).

Perfetto takes `visStart` / `visEnd` (ns on the trace's clock) in its URL and opens there
(perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui); a JSON trace's clock is
its `ts` in µs × 1000, so a place is `ns since the epoch − base_ns`. The UI loads a trace
by `url=` from http://127.0.0.1:9001, which `tracekit export --serve` serves.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import msgspec

from tracekit import sql
from tracekit.errors import TracekitError
from tracekit.ingest.tracefile import decode
from tracekit.report.schema import FindingRow, Report, to_dict
from tracekit.store.run import Run

PID_OFFSET = 100_000_000  # TraceFusion's per-rank pid offset (tracekit.ingest.tables)
_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
PERFETTO_UI = "https://ui.perfetto.dev/"
SERVE_PORT = 9001  # the one local origin ui.perfetto.dev fetches a trace from
_PER_RANK = ("distributedInfo", "distributedInfoByRank", "baseTimeNanoseconds", "trace_id")


@dataclass(frozen=True)
class Place:
    """Where a finding's evidence lies: an interval, ns since the epoch (aligned), and
    what it is (shown beside the link)."""

    start_ns: int
    end_ns: int
    what: str


def base_ns(run: Run) -> int:
    """The merged trace's zero: its earliest event, floored to a whole µs."""
    ((b,),) = run.sql(sql.query("report.export", "base")).fetchall()
    return int(b or 0) // 1000 * 1000


def _ranks(f: FindingRow, report: Report) -> list[int]:
    return list(f.ranks) or list(report.run.ranks)


def _steps(run: Run) -> list[tuple[int, int, int, int]]:
    return run.sql(sql.query("report.export", "steps")).fetchall()


def _slowest_step(steps, ranks: list[int]) -> Place | None:
    mine = [s for s in steps if s[0] in ranks]
    if not mine:
        return None
    rank, step, s, e = max(mine, key=lambda r: (r[3] - r[2], -r[2]))
    return Place(s, e, f"the slowest step, ProfilerStep#{step} on rank {rank}")


def _named_collective(f: FindingRow) -> dict[str, Any] | None:
    for key in ("collectives", "sizes"):
        rows = f.details.get(key)
        if isinstance(rows, list) and rows and isinstance(rows[0], dict) and rows[0].get("name"):
            return rows[0]
    return None


def evidence(run: Run, report: Report) -> list[Place | None]:
    """One place per finding (None where the run has nothing to point at): the longest
    instance of the collective a communication finding names first, the step holding the
    allocator's peak for a memory finding, else the slowest step of the finding's ranks
    (a straggler, a host-bound or low-MFU step, a pipeline's bubble all show there)."""
    steps = _steps(run)
    out: list[Place | None] = []
    for f in report.findings or []:
        ranks = _ranks(f, report)
        place = None
        coll = _named_collective(f)
        if coll is not None:
            rows = run.sql(
                sql.query("report.export", "collective"),
                {"name": coll["name"], "ranks": ranks, "bytes": coll.get("bytes")},
            ).fetchall()
            if rows:
                rank, s, e = rows[0]
                pad = max((e - s) // 2, 1000)
                place = Place(s - pad, e + pad, f"the longest {coll['name']} on rank {rank}")
        elif f.level == "memory":
            rows = run.sql(sql.query("report.export", "memory_peak"), {"ranks": ranks}).fetchall()
            if rows:
                rank, t = rows[0]
                hold = [s for s in steps if s[0] == rank and s[2] <= t < s[3]]
                s, e = (hold[0][2], hold[0][3]) if hold else (t - 1_000_000, t + 1_000_000)
                place = Place(s, e, f"the allocator's peak on rank {rank}")
        out.append(place or _slowest_step(steps, ranks))
    return out


SERVED_NAME = "trace.json.gz"  # the name links use; `serve` answers every path with the file


def memory_timeline(run: Run, buckets: int = 300) -> list[dict[str, Any]]:
    """Each rank's allocator total over time (ms from the merged trace's zero), the
    highest in each of `buckets` spans; empty when the trace has no memory events."""
    zero = base_ns(run)
    rows = run.sql(sql.query("report.export", "memory_timeline"), {"buckets": buckets}).fetchall()
    return [
        {"rank": r, "t_ms": (t - zero) / 1e6, "allocated_bytes": a, "reserved_bytes": res}
        for r, t, a, res in rows
    ]


def perfetto_url(place: Place, base: int, served: bool = True) -> str:
    """ui.perfetto.dev opened at `place`, loading the export from `tracekit export --serve`
    (`served`), else the bare view to open the file in by hand."""
    params = {}
    if served:
        params["url"] = f"http://127.0.0.1:{SERVE_PORT}/{quote(SERVED_NAME)}"
    params["visStart"] = str(place.start_ns - base)
    params["visEnd"] = str(place.end_ns - base)
    return PERFETTO_UI + "?" + urlencode(params, safe=":/")


def how_to_open() -> str:
    """The one line that says how to open the export at a finding."""
    return (
        "see a finding in Perfetto: tracekit export RUN -o merged.json.gz --serve "
        "(prints each finding's ui.perfetto.dev link, visStart/visEnd at its evidence)"
    )


# ---------------------------------------------------------------- the merged trace


def _rank_events(run: Run, top: dict[str, Any]) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
    """(rank, base ns of its ts, its events) per rank, each file read once; `top` gets
    the first trace's header (device properties, schema version …), less what is per rank."""
    by_path: dict[Path, list[int]] = defaultdict(list)
    for s in run.sources:
        by_path[s.path].append(s.rank)
    for path, ranks in by_path.items():
        header, raw = decode(path)
        if isinstance(header.distributedInfo, dict) and len(ranks) == 1:
            top.setdefault("distributedInfoByRank", {})[str(ranks[0])] = header.distributedInfo
        elif isinstance(header.distributedInfoByRank, dict):  # a tracekit export, re-exported
            top.setdefault("distributedInfoByRank", {}).update(header.distributedInfoByRank)
        if "traceEvents" not in top:
            top["traceEvents"] = None  # the first header is kept; the events come later
            top.update(
                {
                    k: v
                    for k in header.__struct_fields__
                    if k not in _PER_RANK and (v := getattr(header, k)) is not None
                }
            )
        events = msgspec.json.decode(raw) if not isinstance(raw, list) else raw
        base = header.baseTimeNanoseconds or 0
        if len(ranks) == 1:
            yield ranks[0], base, events
            continue
        split: dict[int, list] = defaultdict(list)  # a merged file: its ranks apart
        for ev in events:
            args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            r = args.get("rank")
            if not isinstance(r, int):
                pid = ev.get("pid")
                r = pid // PID_OFFSET if isinstance(pid, int) else None
            if r in ranks:
                if isinstance(ev.get("pid"), int) and r:
                    ev["pid"] -= r * PID_OFFSET
                split[r].append(ev)
        for r in ranks:
            yield r, base, split[r]


def _ts_us(ns: int) -> float:
    """µs since the trace's zero; exact to the ns (a double holds 3 decimals of µs for
    traces shorter than ~100 days)."""
    return ns / 1000


def _rank_part(rank: int, base: int, events: list[dict], zero: int, offset: int) -> list[dict]:
    """One rank's events on the merged clock and pids, and its processes named: the one
    that holds the ProfilerSteps (else the most host events) is "rank N", every other
    "rank N - <its name, labels or pid>" (a GPU, Kineto's "Spans" …)."""
    out: list[dict] = []
    names: dict[Any, str] = {}
    labels: dict[Any, str] = {}
    original: dict[Any, Any] = {}
    steps: dict[Any, int] = defaultdict(int)
    host: dict[Any, int] = defaultdict(int)
    device: set = set()
    for ev in events:
        if not isinstance(ev, dict):
            continue
        pid = orig_pid = ev.get("pid")
        if isinstance(pid, int) and not isinstance(pid, bool) and 0 <= pid < PID_OFFSET:
            pid = rank * PID_OFFSET + pid
        elif pid is not None:
            pid = f"rank {rank} - {pid}"
        ev["pid"] = pid
        original[pid] = orig_pid
        args = ev.get("args")
        if not isinstance(args, dict):
            args = ev["args"] = {} if args is None else {"value": args}
        args["rank"] = rank
        if ev.get("ph") == "M":
            ev["ts"] = 0
            if ev.get("name") == "process_name":
                names[pid] = str(args.get("name") or "").strip()
                continue  # renamed below
            if ev.get("name") == "process_sort_index":
                continue  # ordered by rank below
            if ev.get("name") == "process_labels":
                labels[pid] = str(args.get("labels") or "").strip()
        else:
            ts = ev.get("ts")
            if isinstance(ts, int | float) and not isinstance(ts, bool):
                whole = int(ts // 1)
                ns = whole * 1000 + round((ts - whole) * 1000) + base - offset - zero
                ev["ts"] = _ts_us(ns)
            if str(ev.get("name", "")).startswith("ProfilerStep#"):
                steps[pid] += 1
            elif str(ev.get("cat", "")).lower() in ("cpu_op", "user_annotation", "operator"):
                host[pid] += 1
            elif str(ev.get("cat", "")).lower() in _DEVICE_CATS:
                device.add(pid)
        out.append(ev)
    pids = sorted((p for p in original if p is not None), key=str)
    main = max(pids, key=lambda p: (steps[p], host[p]), default=None)
    for i, pid in enumerate(pids):
        what = (labels.get(pid) if labels.get(pid) not in (None, "", "CPU") else None) or names.get(
            pid
        )
        what = what or (f"GPU {original[pid]}" if pid in device else f"pid {original[pid]!s}")
        name = f"rank {rank}" if pid == main else f"rank {rank} - {what}"
        sort = rank * 1000 + (0 if pid == main else i + 1)
        out.append(
            {"ph": "M", "name": "process_name", "pid": pid, "ts": 0,
             "args": {"name": name, "rank": rank}}
        )  # fmt: skip
        out.append(
            {"ph": "M", "name": "process_sort_index", "pid": pid, "ts": 0,
             "args": {"sort_index": sort, "rank": rank}}
        )  # fmt: skip
    return out


class _Tracks:
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
                "ts": _ts_us(start_ns - self.zero),
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


def _critical_path(report_dict: dict, tracks: _Tracks) -> int:
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


def trace_events(
    run: Run, report: Report, report_dict: dict | None = None, top: dict[str, Any] | None = None
) -> list[dict]:
    """Every event of the run on one clock, each rank's processes named, and tracekit's
    tracks (see the module's docstring); `top` gets the header keys to keep."""
    zero = base_ns(run)
    offsets = {int(k): v for k, v in report.run.clock_offsets_ns.items()}
    events: list[dict] = []
    for rank, base, evs in _rank_events(run, top if top is not None else {}):
        events += _rank_part(rank, base, evs, zero, offsets.get(rank, 0))
    top = max(run.ranks, default=0) + 1
    tracks = _Tracks(top * PID_OFFSET + 1, zero)  # pid // 10⁸ names no rank of the run
    for f, place in zip(report.findings or [], evidence(run, report), strict=True):
        if place is None:
            continue
        tracks.slice(
            "findings",
            f"{f.code} {f.title}",
            place.start_ns,
            place.end_ns,
            "tracekit.finding",
            {
                "kind": f.kind,
                "severity": f.severity,
                "level": f.level,
                "ranks": list(f.ranks),
                "remedy": f.remedy,
                "evidence": place.what,
                "impact_ms_per_step": f.impact_ms,
            },
        )
    for rank, step, s, e in _steps(run):
        tracks.slice(
            f"steps · rank {rank}",
            f"ProfilerStep#{step}",
            s,
            e,
            "tracekit.step",
            {"of_rank": rank, "step": step},
        )
    for rank, s, e in run.sql(sql.query("report.export", "exposed")).fetchall():
        tracks.slice(
            f"exposed communication · rank {rank}",
            "exposed communication",
            s,
            e,
            "tracekit.exposed_comm",
            {"of_rank": rank},
        )
    _critical_path(report_dict if report_dict is not None else to_dict(report), tracks)
    return events + tracks.events


def write_trace(run: Run, report: Report, dest: Path, report_dict: dict | None = None) -> int:
    """Write the merged trace to `dest` (gzip when it ends in .gz), atomically; returns
    the number of events written."""
    top: dict[str, Any] = {}
    events = trace_events(run, report, report_dict, top)
    doc = {
        **top,
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": base_ns(run),
        "tracekit": {"version": report.tracekit_version, "ranks": list(run.ranks)},
    }
    data = msgspec.json.encode(doc)
    dest = Path(dest)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            if dest.name.endswith(".gz"):
                with gzip.GzipFile(fileobj=fh, mode="wb", compresslevel=6, mtime=0) as gz:
                    gz.write(data)
            else:
                fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise TracekitError(f"-o {dest}: cannot write ({exc.strerror or exc})") from exc
    return len(events)


def trace_server(path: Path, port: int = SERVE_PORT):
    """An HTTP server on 127.0.0.1:`port` that answers every path with the file at `path`,
    to ui.perfetto.dev (which may fetch a trace from that one local origin)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    data = Path(path).read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def _head(self) -> None:
            self.send_response(200)
            self.send_header("Access-Control-Allow-Origin", "https://ui.perfetto.dev")
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()

        def do_HEAD(self) -> None:
            self._head()

        def do_GET(self) -> None:
            self._head()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    try:
        return ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise TracekitError(f"cannot serve on 127.0.0.1:{port} ({exc.strerror or exc})") from exc


def serve(path: Path, port: int = SERVE_PORT) -> None:
    """Serve the trace at `path` for ui.perfetto.dev until Ctrl-C."""
    with trace_server(path, port) as server, contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
