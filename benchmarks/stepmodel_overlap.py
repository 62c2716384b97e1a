"""A recompute with the step model built beside the analysis (on a thread,
`tracekit.analysis.whatif_plan.start`) and without (TRACEKIT_STEP_MODEL_THREAD=0): wall
and CPU seconds of whole `tracekit analyze RUN --format json` processes (interpreter and
imports included), the two interleaved, best of N, with the load average beside each.

    python benchmarks/stepmodel_overlap.py RUN [--repeat N] [--json PATH] [-- ANALYZE ARGS]

RUN must have its tables cached; its report cache is removed before each process (else
it answers). The two reports must be equal: the script fails when they are not.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

MODES = {"thread": "1", "alone": "0"}


def recompute(run: Path, thread: str, extra: list[str]) -> tuple[float, float, bytes]:
    """(wall s, CPU s of the child, its JSON) of one recompute."""
    cache = run / ".tracekit"
    for kept in (*cache.glob("*/reports"), *cache.glob("*/answers")):
        shutil.rmtree(kept)
    env = dict(os.environ, TRACEKIT_STEP_MODEL_THREAD=thread, TRACEKIT_NO_PROGRESS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "tracekit", "analyze", str(run), "--format", "json", *extra],
        env=env,
        check=True,
        capture_output=True,
    ).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("extra", nargs="*", help="more `tracekit analyze` arguments (after --)")
    a = ap.parse_args()
    runs: dict[str, list[tuple[float, float, float]]] = {m: [] for m in MODES}
    reports: dict[str, dict] = {}
    for _ in range(a.repeat):
        for mode, flag in MODES.items():
            load = os.getloadavg()[0]
            wall, cpu, out = recompute(a.run, flag, a.extra)
            runs[mode].append((wall, cpu, load))
            rep = json.loads(out)
            rep.pop("tracekit_version", None)
            reports[mode] = rep
    if reports["thread"] != reports["alone"]:
        raise SystemExit("the reports differ with and without the thread")
    fig = {}
    for mode, rows in runs.items():
        fig[mode] = {
            "wall_s": round(min(w for w, _c, _l in rows), 3),
            "cpu_s": round(min(c for _w, c, _l in rows), 3),
            "runs": [[round(w, 3), round(c, 3), round(lo, 2)] for w, c, lo in rows],
        }
        shown = ", ".join(f"{w:.2f}/{c:.2f} (load {lo:.1f})" for w, c, lo in rows)
        print(
            f"{mode:6}  best wall {fig[mode]['wall_s']:.2f} s  CPU {fig[mode]['cpu_s']:.2f} s"
            f"   runs wall/CPU: {shown}"
        )
    if a.json:
        a.json.write_text(json.dumps(fig, indent=2) + "\n")


if __name__ == "__main__":
    main()
