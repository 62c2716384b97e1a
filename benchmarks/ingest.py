"""Ingest benchmark: tracekit vs Holistic Trace Analysis on the same 8-rank run.

    python benchmarks/ingest.py [--source ../shared/traces/v100_ddp_rank1] [--ranks 8]

Builds an N-rank run from one trace (copies with distributedInfo.rank set to
0..N-1), then times, each phase in a fresh subprocess so peak memory is its own:

- HTA load: `TraceAnalysis(trace_dir=…)` (pandas);
- raw floor: isal gunzip + orjson decode of the same files, nothing else,
  sequential in one process (the issue's definition) and in parallel with the same
  number of processes tracekit uses (the fair floor for a parallel ingest);
- tracekit cold: empty cache → ingest + the per-rank analyze table;
- tracekit warm: cached open + the same table;
- analyze, as a whole process (`python -m tracekit.cli analyze RUN --format json`,
  interpreter start and imports included): cold (no cache), warm (the report cache
  answers) and recompute (cached tables, the report computed again: what a new
  `--steps` or override costs).

Peak memory is the peak of the summed RSS of the phase's process tree, sampled
every 10 ms with psutil (workers included). Prints times, peak RSS and ratios.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "traces" / "v100_ddp_rank1"


def build_run(source: Path, ranks: int, dest: Path) -> list[Path]:
    src = next(p for p in sorted(source.iterdir()) if p.name.endswith((".json", ".json.gz")))
    opener = gzip.open if src.name.endswith(".gz") else open
    with opener(src, "rb") as fh:
        doc = json.loads(fh.read())
    dest.mkdir(parents=True, exist_ok=True)
    files = []
    for r in range(ranks):
        doc.setdefault("distributedInfo", {})
        doc["distributedInfo"].update(rank=r, world_size=ranks)
        out = dest / f"rank-{r}.json.gz"
        if not out.exists():
            with gzip.open(out, "wb", compresslevel=6) as fh:
                fh.write(json.dumps(doc).encode())
        files.append(out)
    return files


PHASES = {
    "hta": """
        from hta.trace_analysis import TraceAnalysis
        TraceAnalysis(trace_dir=RUN)
    """,
    "floor": """
        import orjson
        from isal import igzip
        for f in sorted(os.listdir(RUN)):
            if f.endswith('.json.gz'):
                orjson.loads(igzip.decompress(open(os.path.join(RUN, f), 'rb').read()))
    """,
    "floor_parallel": """
        from concurrent.futures import ProcessPoolExecutor
        files = [os.path.join(RUN, f) for f in sorted(os.listdir(RUN)) if f.endswith('.json.gz')]
        with ProcessPoolExecutor(WORKERS) as pool:
            list(pool.map(load, files))
    """,
    "tracekit_cold": """
        import shutil, tracekit
        from tracekit.breakdown import per_rank
        shutil.rmtree(os.path.join(RUN, '.tracekit'), ignore_errors=True)
        with tracekit.open(RUN, workers=WORKERS) as run:
            rows = per_rank(run)
        assert len(rows) == RANKS, rows
    """,
    "tracekit_warm": """
        import tracekit
        from tracekit.breakdown import per_rank
        with tracekit.open(RUN, workers=WORKERS) as run:
            rows = per_rank(run)
        assert len(rows) == RANKS, rows
    """,
}


# module-level helpers of the generated phase scripts (picklable for worker processes)
PRELUDE = """
def load(p):
    import orjson
    from isal import igzip
    with open(p, 'rb') as fh:
        orjson.loads(igzip.decompress(fh.read()))
"""


def _measure(cmd: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak RSS bytes of the process tree, stdout) of one command."""
    env = dict(os.environ, TRACEKIT_NO_PROGRESS="1")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    ps = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            procs = [ps, *ps.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in procs if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.01)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err.decode()[-3000:]}")
    return wall, peak, out.decode()


def run_phase(name: str, run_dir: Path, ranks: int, workers: int) -> tuple[float, int]:
    """(seconds of the timed body, peak RSS bytes of the process tree)."""
    body = textwrap.dedent(PHASES[name])
    code = (
        "import os, sys, time, logging\n"
        "logging.disable(logging.CRITICAL)\n"
        f"RUN = {str(run_dir)!r}; RANKS = {ranks}; WORKERS = {workers}\n"
        + PRELUDE
        + "def main():\n"
        "    t0 = time.perf_counter()\n"
        + textwrap.indent(body, "    ")
        + "\n    print('ELAPSED', time.perf_counter() - t0)\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    _, peak, out = _measure([sys.executable, "-c", code])
    return float(out.split("ELAPSED")[-1]), peak


def run_analyze(kind: str, run_dir: Path, workers: int) -> tuple[float, int]:
    """A whole `tracekit analyze` process: cold, warm (report cache) or recompute."""
    cache = run_dir / ".tracekit"
    if kind == "cold":
        shutil.rmtree(cache, ignore_errors=True)
    elif kind == "recompute":
        for reports in cache.glob("*/reports"):
            shutil.rmtree(reports)
    cmd = [sys.executable, "-m", "tracekit.cli", "analyze", str(run_dir), "--format", "json"]
    wall, peak, _ = _measure([*cmd, "--workers", str(workers)])
    return wall, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=1, help="best of N for each phase")
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--keep", type=Path, help="build/keep the run here instead of a temp dir")
    args = ap.parse_args()
    if not args.source.exists():
        raise SystemExit(f"{args.source} not found; pass --source DIR with one Kineto trace")

    run_dir = args.keep or Path(tempfile.mkdtemp(prefix="tracekit-bench-"))
    try:
        files = build_run(args.source, args.ranks, run_dir)
        size = sum(f.stat().st_size for f in files)
        print(
            f"run: {args.ranks} ranks from {args.source.name}, {size / 1e6:.1f} MB gzip, "
            f"{os.cpu_count()} cores, {args.workers} workers"
        )
        phases = ["floor", "floor_parallel", "tracekit_cold", "tracekit_warm"]
        if not args.skip_hta:
            phases.insert(0, "hta")
        res: dict[str, tuple[float, int]] = {}
        for ph in phases:
            best = min(
                (run_phase(ph, run_dir, args.ranks, args.workers) for _ in range(args.repeat)),
                key=lambda r: r[0],
            )
            res[ph] = best
            print(f"  {ph:16} {best[0]:8.2f} s   peak RSS {best[1] / 2**20:8.0f} MiB")
        for kind in ("cold", "recompute", "warm"):
            best = min(
                (run_analyze(kind, run_dir, args.workers) for _ in range(args.repeat)),
                key=lambda r: r[0],
            )
            res[f"analyze_{kind}"] = best
            print(f"  analyze {kind:9} {best[0]:7.2f} s   peak RSS {best[1] / 2**20:8.0f} MiB")
        cold, cold_mem = res["tracekit_cold"]
        warm = res["tracekit_warm"][0]
        print("ratios:")
        if "hta" in res:
            hta, hta_mem = res["hta"]
            print(f"  HTA load / tracekit cold      {hta / cold:6.1f}×   (target ≥ 15×)")
            print(f"  tracekit peak / HTA peak      {cold_mem / hta_mem:6.2f}    (target < 1)")
        print(f"  tracekit cold / raw floor     {cold / res['floor'][0]:6.2f}×   (target ≤ 2.5×)")
        print(
            f"  tracekit cold / parallel floor {cold / res['floor_parallel'][0]:5.2f}×   "
            "(same process count)"
        )
        print(f"  tracekit warm (open + table)  {warm:6.2f} s")
        a_cold = res["analyze_cold"][0]
        print(f"  analyze cold / raw floor      {a_cold / res['floor'][0]:6.2f}×   (target ≤ 1.2×)")
        if "hta" in res:
            print(f"  HTA load / analyze cold       {res['hta'][0] / a_cold:6.1f}×")
        print(
            f"  analyze warm, whole process   {res['analyze_warm'][0]:6.2f} s   "
            "(target ≤ 0.5 s at 8 ranks, ≤ 1.5 s at 64)"
        )
        print(f"  analyze recompute (no report cache) {res['analyze_recompute'][0]:6.2f} s")
    finally:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
