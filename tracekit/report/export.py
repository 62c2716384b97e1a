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

The pieces: `rankevents` (each rank's events on one clock, its processes named),
`tracks` (the tracekit process), `evidence` (where a finding's evidence lies),
`perfetto` (the links that open Perfetto there, and the local server they load from).
"""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from tracekit import sql
from tracekit.errors import TracekitError
from tracekit.report.evidence import Place, base_ns, evidence, memory_timeline, step_rows
from tracekit.report.perfetto import (
    PERFETTO_UI,
    SERVE_PORT,
    SERVED_NAME,
    how_to_open,
    perfetto_url,
    serve,
    trace_server,
)
from tracekit.report.rankevents import PID_OFFSET, rank_events, rank_part
from tracekit.report.schema import Report, to_dict
from tracekit.report.tracks import Tracks, critical_path_spans, critical_path_track
from tracekit.store.run import Run

# the names callers import from here
__all__ = [
    "PERFETTO_UI",
    "PID_OFFSET",
    "SERVED_NAME",
    "SERVE_PORT",
    "Place",
    "base_ns",
    "critical_path_spans",
    "evidence",
    "how_to_open",
    "memory_timeline",
    "perfetto_url",
    "serve",
    "trace_events",
    "trace_server",
    "write_trace",
]


def trace_events(
    run: Run, report: Report, report_dict: dict | None = None, top: dict[str, Any] | None = None
) -> list[dict]:
    """Every event of the run on one clock, each rank's processes named, and tracekit's
    tracks (see the module's docstring); `top` gets the header keys to keep."""
    zero = base_ns(run)
    offsets = {int(k): v for k, v in report.run.clock_offsets_ns.items()}
    events: list[dict] = []
    for rank, base, evs in rank_events(run, top if top is not None else {}):
        events += rank_part(rank, base, evs, zero, offsets.get(rank, 0))
    top = max(run.ranks, default=0) + 1
    tracks = Tracks(top * PID_OFFSET + 1, zero)  # pid // 10⁸ names no rank of the run
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
    for rank, step, s, e in step_rows(run):
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
    critical_path_track(report_dict if report_dict is not None else to_dict(report), tracks)
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
