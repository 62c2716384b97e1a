"""Speed and scale benchmark: tracekit beside HTA and the decode floor, at 8 and 64 ranks.

    python benchmarks/ingest.py [--source ../shared/traces/v100_ddp_rank1] [--ranks 8,64]
        [--keep DIR] [--repeat N] [--skip-hta] [--hta-at-64] [--big] [--json PATH] [--markdown PATH]

One run answers the "Done when" of the speed-and-scale issue. From one trace it builds
an N-rank run per rank count (gzip copies with distributedInfo.rank = 0..N-1 and
world_size = N; cached under `--keep DIR`), then times each phase in a fresh process,
with the peak of the summed RSS of that process tree (psutil, every 10 ms, workers
included). Best of `--repeat` for each phase.

At the first rank count (8):
- `hta`: HTA's `TraceAnalysis(trace_dir=RUN)`, its load alone (pandas);
- `floor`: the issue's single-process typed decode floor: each file isal-gunzipped and
  decoded by `msgspec.json.Decoder(Doc)` into a minimal event struct, sequentially
  (`Doc(Struct): traceEvents: list[Ev]`; `Ev(Struct)`: ph, name, cat: str, pid, tid: Any,
  ts, dur: float, args: msgspec.Raw, left undecoded). All ratios are against this floor;
- `floor_orjson`: isal gunzip + orjson decoding the whole document into Python objects
  (context: a generic decoder's cost);
- `floor_parallel`: the msgspec floor over the same number of processes as tracekit's
  workers (the floor a parallel ingest could reach);
- `analyze_cold`, `analyze_recompute`, `analyze_warm`: a whole `python -m tracekit.cli
  analyze RUN --format json --workers W` process (interpreter start and imports
  included), with no cache; with the cached tables but no cached report (what a new
  `--steps` or override costs); and with the report cache answering.

At the second rank count (64): `floor`, `analyze_cold` and `analyze_warm` (and `hta`
with `--hta-at-64`: minutes and ~9 GB), for the scaling targets: time linear in ranks,
memory bounded by the work in flight.

`--big` adds `benchmarks/bigtrace.py`: one trace of ≥ 1 GiB of JSON, analyzed cold.

Prints each phase, then a "target / measured / met?" table for the issue's lines;
`--json PATH` writes every figure, `--markdown PATH` the speed tables of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

import benchlib
from benchlib import DEFAULT_SOURCE, Measured, best_of, build_run, evaluate, measure

# module-level helpers of the generated phase scripts (picklable for worker processes)
PRELUDE = """
from typing import Any
import msgspec


class Ev(msgspec.Struct):
    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: Any = None
    tid: Any = None
    ts: float = 0.0
    dur: float = 0.0
    args: msgspec.Raw = msgspec.Raw(b"null")


class Doc(msgspec.Struct):
    traceEvents: list[Ev]


def files():
    return [os.path.join(RUN, f) for f in sorted(os.listdir(RUN)) if f.endswith('.json.gz')]


def typed(path, dec=msgspec.json.Decoder(Doc)):
    from isal import igzip
    with open(path, 'rb') as fh:
        return len(dec.decode(igzip.decompress(fh.read())).traceEvents)
"""

PHASES = {
    "hta": """
        from hta.trace_analysis import TraceAnalysis
        TraceAnalysis(trace_dir=RUN)
    """,
    "floor": """
        n = sum(typed(f) for f in files())
    """,
    "floor_orjson": """
        import orjson
        from isal import igzip
        for f in files():
            with open(f, 'rb') as fh:
                orjson.loads(igzip.decompress(fh.read()))
    """,
    "floor_parallel": """
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(WORKERS) as pool:
            n = sum(pool.map(typed, files()))
    """,
}

ANALYZE = ("analyze_cold", "analyze_recompute", "analyze_warm")


def phase_script(name: str, run_dir: Path, workers: int) -> str:
    """A Python program that runs one phase's body and prints its seconds."""
    body = textwrap.dedent(PHASES[name])
    return (
        "import os, sys, time, logging\n"
        "logging.disable(logging.CRITICAL)\n"
        f"RUN = {str(run_dir)!r}; WORKERS = {workers}\n" + PRELUDE + "def main():\n"
        "    t0 = time.perf_counter()\n"
        + textwrap.indent(body, "    ")
        + "\n    print('ELAPSED', time.perf_counter() - t0)\n"
        "if __name__ == '__main__':\n    main()\n"
    )


def _checked(m: Measured, what: str) -> Measured:
    if m.returncode != 0:
        raise SystemExit(f"{what} failed (exit {m.returncode}):\n{m.stderr[-3000:]}")
    return m


def run_phase(name: str, run_dir: Path, workers: int) -> Measured:
    """A floor or HTA phase: the seconds of its timed body (interpreter start and
    imports not included), the peak RSS of its process."""
    m = _checked(measure([sys.executable, "-c", phase_script(name, run_dir, workers)]), name)
    m.seconds = float(m.stdout.split("ELAPSED")[-1])
    return m


def analyze_cmd(run_dir: Path, workers: int) -> list[str]:
    cli = [sys.executable, "-m", "tracekit.cli", "analyze", str(run_dir)]
    return [*cli, "--format", "json", "--workers", str(workers)]


def run_analyze(name: str, run_dir: Path, workers: int) -> Measured:
    """A whole `tracekit analyze` process, after emptying what its kind must not find:
    cold, the whole cache; recompute, the cached reports."""
    cache = run_dir / ".tracekit"
    if name == "analyze_cold":
        shutil.rmtree(cache, ignore_errors=True)
    elif name == "analyze_recompute":
        for reports in cache.glob("*/reports"):
            shutil.rmtree(reports)
    return _checked(measure(analyze_cmd(run_dir, workers)), f"{name} of {run_dir}")


def phases_for(first: bool, skip_hta: bool, hta_at_large: bool) -> list[str]:
    if first:
        hta = [] if skip_hta else ["hta"]
        return [*hta, "floor", "floor_orjson", "floor_parallel", *ANALYZE]
    return [*(["hta"] if hta_at_large else []), "floor", "analyze_cold", "analyze_warm"]


def bench_run(run_dir: Path, phases: list[str], workers: int, repeat: int) -> dict[str, dict]:
    """{phase: {"seconds", "peak_rss_bytes"}}, each the best of `repeat`, printed as
    it comes."""
    out: dict[str, dict] = {}
    for ph in phases:
        run = run_analyze if ph in ANALYZE else run_phase
        best = best_of(run(ph, run_dir, workers) for _ in range(repeat))
        out[ph] = best.figures()
        floor = out.get("floor", {}).get("seconds")
        rel = f"{best.seconds / floor:6.2f}× floor" if floor else ""
        print(
            f"  {ph:18} {best.seconds:8.2f} s   peak RSS {best.peak_rss_bytes / 2**20:7.0f} MiB"
            f"   {rel}",
            flush=True,
        )
    return out


def describe_run(files: list[Path], source_events: int) -> dict:
    return {
        "ranks": len(files),
        "gzip_bytes": sum(f.stat().st_size for f in files),
        "json_bytes": sum(benchlib.gzip_text_bytes(f) for f in files),
        "events": source_events * len(files),
    }


def print_targets(rows: list[benchlib.Target]) -> None:
    width = max(len(r.target) for r in rows)
    print(f"\n{'target':{width}}  {'measured':>12}  met?")
    for r in rows:
        met = "—" if r.met is None else ("yes" if r.met else "NO")
        print(f"{r.target:{width}}  {r.measured:>12}  {met}")


def parse_ranks(text: str) -> list[int]:
    try:
        ranks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--ranks {text!r}: give rank counts like 8,64") from None
    if not ranks or len(ranks) > 2 or any(n < 1 for n in ranks):
        raise SystemExit(f"--ranks {text!r}: give one or two rank counts like 8,64")
    return ranks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--ranks", default="8,64", help="rank counts: the base run, then the scaled")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=1, help="best of N for each phase")
    ap.add_argument("--skip-hta", action="store_true", help="no HTA at the first rank count")
    ap.add_argument("--hta-at-64", action="store_true", help="HTA at the second rank count too")
    ap.add_argument("--big", action="store_true", help="also the ≥ 1 GiB trace (bigtrace.py)")
    ap.add_argument("--keep", type=Path, help="build/keep the runs here (reused by reruns)")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--markdown", type=Path, help="write docs/benchmarks.md's tables here")
    args = ap.parse_args()
    ranks = parse_ranks(args.ranks)
    if not args.source.exists():
        raise SystemExit(f"{args.source} not found; pass --source DIR with one Kineto trace")

    root = args.keep or Path(tempfile.mkdtemp(prefix="tracekit-bench-"))
    result: dict = {
        "source": str(args.source),
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "load_before": os.getloadavg(),
        },
        "workers": args.workers,
        "repeat": args.repeat,
        "runs": {},
    }
    try:
        events = len(benchlib.read_doc(benchlib.source_trace(args.source))["traceEvents"])
        figs: dict[int, dict[str, dict]] = {}
        for i, n in enumerate(ranks):
            files = build_run(args.source, n, root / f"run{n}")
            info = describe_run(files, events)
            print(
                f"{n} ranks from {args.source.name}: {info['json_bytes'] / 1e6:.0f} MB of JSON "
                f"({info['gzip_bytes'] / 1e6:.0f} MB gzip), {info['events']:,} events; "
                f"{os.cpu_count()} cores, {args.workers} workers, best of {args.repeat}",
                flush=True,
            )
            phases = phases_for(i == 0, args.skip_hta, args.hta_at_64)
            figs[n] = bench_run(root / f"run{n}", phases, args.workers, args.repeat)
            result["runs"][str(n)] = {**info, "phases": figs[n]}
        if args.big:
            import bigtrace

            result["big"] = bigtrace.bench(args.source, root, args.workers)
        rows = evaluate(figs, ranks[0], ranks[1] if len(ranks) > 1 else None)
        if "big" in result:
            rows.append(benchlib.big_target(result["big"]))
        print_targets(rows)
        result["targets"] = [r.as_dict() for r in rows]
        result["machine"]["load_after"] = os.getloadavg()
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
            print(f"figures written to {args.json}")
        if args.markdown:
            args.markdown.write_text(benchlib.markdown(result))
            print(f"tables written to {args.markdown}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
