"""TUI benchmark: first paint on a warm 8-rank run, and timeline frames on the
216k-event rank.

    python benchmarks/tui.py [--source ../shared/traces/v100_ddp_rank1] [--ranks 8]
                             [--dest DIR] [--frames 60]

Builds the same N-rank run as `benchmarks/ingest.py` (copies of one trace with
distributedInfo.rank set to 0..N-1) under DEST, ingests it once (warm cache), then:

- first paint: a fresh `python` process runs the app headless at 120×40 and reports the
  time from process start to the overview drawn with the report's figures (imports,
  cached open, the diagnosers and the first frame all included), best of 3 processes;
- timeline frame: on the single-rank run of the source trace (the 216k-event rank) and on
  the 8-rank run, the timeline's per-viewport SQL query plus its rendering to text, for a
  whole step and while zooming in and panning across it, per rank and per stream.

Prints the numbers; nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# this file is `tui.py`: keep its folder off the path so `import tui` finds the package
sys.path = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))


def _benchlib():
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchlib", HERE / "benchlib.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["benchlib"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


_bl = _benchlib()
DEFAULT_SOURCE, build_run = _bl.DEFAULT_SOURCE, _bl.build_run

PAINT = r"""
import time
T0 = time.perf_counter()
import json, sys
from tui.app import TracekitApp
from tui.data import Session
from tui.screens import OverviewScreen
T_IMPORT = time.perf_counter()
marks = {}

async def pilot(p):
    app = p.app
    # app.painted is set by the overview's first call_after_refresh: its frame is drawn
    while not app.painted.is_set():
        await p.pause(0.002)
    marks["painted"] = time.perf_counter()
    assert isinstance(app.screen, OverviewScreen)
    while not app.loaded:
        await p.pause(0.005)
    await p.pause()
    marks["report"] = time.perf_counter()
    app.exit({"rows": sum(len(p["rows"]) for p in app.screen.shown_panels().values())})

app = TracekitApp(Session([sys.argv[1]], display_path="bench"))
res = app.run(headless=True, size=(120, 40), auto_pilot=pilot)
print(json.dumps({
    "import_s": T_IMPORT - T0,
    "first_paint_s": marks["painted"] - T0,
    "report_s": marks["report"] - T0,
    "figures": res["rows"],
}))
"""


def first_paint(run: Path, repeat: int) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "TRACEKIT_NO_PROGRESS": "1"}
    out = []
    for _ in range(repeat):
        # the diagnosers' time is measured, not the report cache's: no cached report
        for reports in run.glob(".tracekit/*/reports"):
            shutil.rmtree(reports)
        p = subprocess.run(
            [sys.executable, "-c", PAINT, str(run)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        out.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return out


def frames(run: Path, n: int, width: int = 120, per_stream: bool = False) -> dict:
    """Query + render times of timeline frames: a whole step, then zoomed 8× and panned
    across the step in 1/8 steps, on the lanes the screen shows."""
    from tui.data import Session
    from tui.widgets.timeline import LABEL_W, render_frame

    s = Session([run], workers=1)
    s.load()
    try:
        if per_stream:
            lanes = [(r, lane) for r in s.ranks for lane in s.lanes().get(r, [])]
        else:
            lanes = [(r, None) for r in s.ranks]
        t0, t1 = s.step_span(s.steps_list[0] if s.steps_list else None)
        ncols = width - LABEL_W
        _, rows = s.query(
            "SELECT count(*) FROM device_activity WHERE end_ns > $a AND ts_ns < $b",
            {"a": t0, "b": t1},
        )
        views = [(t0, t1)]
        span = (t1 - t0) // 8
        views += [(t0 + i * span // 8, t0 + i * span // 8 + span) for i in range(n - 1)]
        times = []
        for a, b in views:
            start = time.perf_counter()
            fr = s.frame(lanes, a, b, ncols)
            render_frame(fr, lanes, width, 40, ncols // 2, 0)
            times.append(time.perf_counter() - start)
        _, events = s.query("SELECT count(*) FROM events")
        return {
            "lanes": len(lanes),
            "events_in_run": events[0][0],
            "device_events_in_step": rows[0][0],
            "whole_step_ms": times[0] * 1e3,
            "median_ms": statistics.median(times) * 1e3,
            "max_ms": max(times) * 1e3,
            "frames": len(times),
        }
    finally:
        s.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--dest", type=Path, default=None, help="where to build the runs")
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    dest = args.dest or Path(tempfile.gettempdir()) / "tracekit-bench-tui"
    multi = dest / f"run{args.ranks}"
    single = dest / "rank1"
    build_run(args.source, args.ranks, multi)
    if not single.exists():
        single.mkdir(parents=True)
        for f in args.source.iterdir():
            if f.name.endswith((".json", ".json.gz")):
                shutil.copy(f, single / f.name)
    import tracekit

    for run in (multi, single):  # warm caches
        tracekit.open(run).close()

    print(f"runs under {dest}")
    paints = first_paint(multi, args.repeat)
    best = min(paints, key=lambda p: p["first_paint_s"])
    all_s = ", ".join(f"{p['first_paint_s']:.2f}" for p in paints)
    print(
        f"first paint, warm {args.ranks}-rank run, 120×40: {best['first_paint_s']:.2f} s from "
        f"process start to the overview drawn with the run's facts (imports "
        f"{best['import_s']:.2f} s; best of {len(paints)}: {all_s}); the report's "
        f"{best['figures']} figures drawn at {best['report_s']:.2f} s (the diagnosers' time)"
    )
    for label, run, per_stream in (
        ("216k-event rank, per stream", single, True),
        (f"{args.ranks}-rank run, one lane per rank", multi, False),
    ):
        r = frames(run, args.frames, per_stream=per_stream)
        print(
            f"timeline frame, {label} ({r['lanes']} lanes, {r['events_in_run']:,} events, "
            f"{r['device_events_in_step']:,} device events in the step): whole step "
            f"{r['whole_step_ms']:.1f} ms; zoomed 8× and panning: median {r['median_ms']:.1f} ms, "
            f"max {r['max_ms']:.1f} ms over {r['frames']} frames (query + render, 120 columns)"
        )


if __name__ == "__main__":
    main()
