"""Speed and scale benchmark: tracekit beside HTA and the decode floor, for two shapes of run.

    python benchmarks/ingest.py [--keep DIR] [--repeat N] [--skip-hta] [--quick]
        [--big-ranks 8,64] [--small-ranks 1024] [--skip-big] [--skip-small]
        [--source ../shared/traces/v100_ddp_rank1] [--small-source ../shared/traces/v100_dlrm_8rank]
        [--json PATH] [--markdown PATH]

One run answers the "Done when" of the speed issues. It builds (and keeps under `--keep
DIR`) two shapes of run, then times each phase in a fresh process, with the peak of the
summed RSS of that process tree (psutil, every 10 ms, workers included). Best of
`--repeat` for each phase.

- big ranks: N gzip copies of one big trace (`--source`, 47 MB of JSON per rank) with
  distributedInfo.rank = 0..N-1 and world_size = N, at 8 ranks and at 64 (the scaling);
- small ranks: 1,024 ranks from the 8-rank DLRM step (`--small-source`): rank R is
  trace R mod 8 with its rank and world size set (~0.9 MB of JSON per rank), as a
  big job with a few MB of trace per rank has them.

Phases:
- `hta`: HTA's `TraceAnalysis(trace_dir=RUN)`, its load alone (pandas); at 8 big and
  1,024 small ranks (`--skip-hta`: none; `--hta-at-64`: also at 64);
- `floor`: the typed decode floor every ratio is against: each file isal-gunzipped and
  decoded by `msgspec.json.Decoder(Doc)` into a minimal event struct, one process,
  sequentially (`Doc(Struct): traceEvents: list[Ev]`; `Ev(Struct)`: ph, name, cat: str,
  pid, tid: Any, ts, dur: float, args: msgspec.Raw, left undecoded);
- `floor_parallel`: the same floor over as many processes as tracekit's workers;
- `analyze_cold`, `analyze_recompute`, `analyze_warm`: a whole `python -m tracekit.cli
  analyze RUN --format json --workers W` process (interpreter start and imports
  included), with no cache; with the cached tables but no cached report (what a new
  `--steps` or override costs); and with the report cache answering;
- `analysis` (8 big and 1,024 small ranks): the recompute split into the analysis'
  phases (step model build, replays, what-if candidates, attribution, levels, rules,
  samples, assemble …) in exclusive CPU seconds, beside the floor's and HTA's CPU
  (`benchmarks/analysis_phases.py`).

`--quick` skips HTA and the 64-rank run (the 8 big and 1,024 small ranks stay): for
iterating. `--big` adds `benchmarks/bigtrace.py`: one trace of ≥ 1 GiB of JSON, cold.

Prints each phase beside its floor and HTA, then a "target / measured / met?" table;
`--json PATH` writes every figure, `--markdown PATH` the tables of docs/speed.md.
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
from dataclasses import asdict
from pathlib import Path

import benchlib
from benchlib import (
    DEFAULT_SOURCE,
    DLRM_SOURCE,
    Measured,
    best_of,
    build_run,
    build_small_run,
    evaluate,
    measure,
)

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
        "    t0, c0 = time.perf_counter(), time.process_time()\n"
        + textwrap.indent(body, "    ")
        + "\n    print('BODY_CPU', time.process_time() - c0)"
        + "\n    print('ELAPSED', time.perf_counter() - t0)\n"
        "if __name__ == '__main__':\n    main()\n"
    )


def _checked(m: Measured, what: str) -> Measured:
    if m.returncode != 0:
        raise SystemExit(f"{what} failed (exit {m.returncode}):\n{m.stderr[-3000:]}")
    return m


def run_phase(name: str, run_dir: Path, workers: int, timeout: float | None = None) -> Measured:
    """A floor or HTA phase: the seconds of its timed body (interpreter start and
    imports not included), the peak RSS of its process. Past `timeout` seconds the
    phase is stopped: its seconds are then None (and its peak RSS the peak so far)."""
    m = measure([sys.executable, "-c", phase_script(name, run_dir, workers)], timeout)
    if timeout is not None and m.returncode == -9 and m.seconds >= timeout:
        m.seconds = None
        return m
    m = _checked(m, name)
    m.seconds = float(m.stdout.split("ELAPSED")[-1])
    # this process's CPU in the timed body (not its workers'): what the analysis phases'
    # CPU seconds are set beside
    m.body_cpu_seconds = float(m.stdout.split("BODY_CPU")[-1].split()[0])
    return m


def analyze_cmd(run_dir: Path, workers: int) -> list[str]:
    cli = [sys.executable, "-m", "tracekit.cli", "analyze", str(run_dir)]
    return [*cli, "--format", "json", "--workers", str(workers)]


def run_analyze(name: str, run_dir: Path, workers: int) -> Measured:
    """A whole `tracekit analyze` process, after emptying what its kind must not find:
    cold, the whole cache; recompute, the cached reports and the run-level answers
    (`<cache>/answers/`, read before the run is opened: left in place, a "recompute"
    would time the warm answer)."""
    cache = run_dir / ".tracekit"
    if name == "analyze_cold":
        shutil.rmtree(cache, ignore_errors=True)
    elif name == "analyze_recompute":
        for kept in (*cache.glob("*/reports"), *cache.glob("*/answers")):
            shutil.rmtree(kept)
    return _checked(measure(analyze_cmd(run_dir, workers)), f"{name} of {run_dir}")


def phases_for(kind: str, skip_hta: bool, hta_at_scaled: bool) -> list[str]:
    """The phases of a run: `base` (8 big ranks) and `many` (1,024 small) get every
    phase, `scaled` (64 big) the floor, cold and warm."""
    if kind == "scaled":
        return [*(["hta"] if hta_at_scaled and not skip_hta else []), "floor", *COLD_WARM]
    return [*([] if skip_hta else ["hta"]), "floor", "floor_parallel", *ANALYZE]


COLD_WARM = ("analyze_cold", "analyze_warm")


def bench_run(
    run_dir: Path, phases: list[str], workers: int, repeat: int, hta_timeout: float
) -> dict[str, dict]:
    """{phase: {"seconds", "peak_rss_bytes"}}, each the best of `repeat`, printed as
    it comes beside the floor and HTA."""
    out: dict[str, dict] = {}
    for ph in phases:
        if ph in ANALYZE:
            runs = (run_analyze(ph, run_dir, workers) for _ in range(repeat))
        else:
            t = hta_timeout if ph == "hta" else None
            runs = (run_phase(ph, run_dir, workers, t) for _ in range(repeat))
        best = best_of(runs)
        out[ph] = best.figures()
        if getattr(best, "body_cpu_seconds", None) is not None:
            out[ph]["body_cpu_seconds"] = round(best.body_cpu_seconds, 3)
        if best.seconds is None:
            print(f"  {ph:18} stopped after {hta_timeout:.0f} s", flush=True)
            continue
        floor = out.get("floor", {}).get("seconds")
        hta = out.get("hta", {}).get("seconds")
        rel = f"{best.seconds / floor:6.2f}× floor" if floor else ""
        if hta and ph.startswith("analyze"):
            rel += f"  {hta / best.seconds:5.1f}× faster than HTA"
        cpu = f"cpu {best.cpu_seconds:7.2f} s" if best.cpu_seconds is not None else ""
        print(
            f"  {ph:18} {best.seconds:8.2f} s   {cpu}   "
            f"peak RSS {best.peak_rss_bytes / 2**20:7.0f} MiB   {rel}",
            flush=True,
        )
    return out


def analysis_phases(run_dir: Path, figs: dict) -> dict:
    """Each phase of a recompute in CPU seconds (`benchmarks/analysis_phases.py`, in a
    process of its own), printed beside the floor's and HTA's CPU seconds measured in this
    run, and as a share of the cold analyze's CPU (the process tree's)."""

    def cpu(ph: str) -> float | None:
        f = figs.get(ph) or {}
        # HTA parses ranks in a pool of processes: its process tree's CPU (imports in)
        if ph == "hta":
            return f.get("cpu_seconds")
        return f.get("body_cpu_seconds", f.get("cpu_seconds"))

    cmd = [sys.executable, str(Path(__file__).with_name("analysis_phases.py")), str(run_dir)]
    for flag, v in (("--floor", cpu("floor")), ("--hta", cpu("hta")),
                    ("--cold", cpu("analyze_cold"))):  # fmt: skip
        if v:
            cmd += [flag, str(v)]
    m = _checked(measure(cmd), f"analysis phases of {run_dir}")
    print(m.stdout.rstrip(), flush=True)
    return json.loads(m.stderr.split("PHASES ")[-1].splitlines()[0])


def describe_small(files: list[Path], source: Path) -> dict:
    srcs = [p for p in sorted(source.iterdir()) if p.name.endswith((".json", ".json.gz"))]
    per = [len(benchlib.read_doc(p)["traceEvents"]) for p in srcs]
    return {
        "ranks": len(files),
        "gzip_bytes": sum(f.stat().st_size for f in files),
        "json_bytes": sum(benchlib.gzip_text_bytes(f) for f in files),
        "events": sum(per[r % len(per)] for r in range(len(files))),
    }


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


def print_bounds(bounds: list[benchlib.Bound]) -> None:
    """The least cold analyze of each run with today's analysis (`benchlib.Bound`)."""
    if bounds:
        print("\nleast cold analyze = decode over the workers + recompute (tables free):")
    for b in bounds:
        print(
            f"  {b.run:18} {b.seconds:6.2f} s = {b.ratio:.2f}× floor; "
            f"left for building the tables within {b.limit:g}×: {b.left_seconds:+.2f} s"
        )


def parse_ranks(text: str) -> list[int]:
    try:
        ranks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--big-ranks {text!r}: give rank counts like 8,64") from None
    if not ranks or len(ranks) > 2 or any(n < 1 for n in ranks):
        raise SystemExit(f"--big-ranks {text!r}: give one or two rank counts like 8,64")
    return ranks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the big trace")
    ap.add_argument("--small-source", type=Path, default=DLRM_SOURCE, help="the small run")
    ap.add_argument("--big-ranks", default="8,64", help="big-rank runs: the base, then scaled")
    ap.add_argument("--small-ranks", type=int, default=1024)
    ap.add_argument("--skip-big", action="store_true", help="no big-rank runs")
    ap.add_argument("--skip-small", action="store_true", help="no small-rank run")
    ap.add_argument("--quick", action="store_true", help="no HTA, no 64-rank run")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=1, help="best of N for each phase")
    ap.add_argument("--skip-hta", action="store_true", help="no HTA phase")
    ap.add_argument("--hta-at-64", action="store_true", help="HTA at the scaled run too")
    ap.add_argument("--hta-timeout", type=float, default=600, help="stop HTA after S seconds")
    ap.add_argument("--big", action="store_true", help="also the ≥ 1 GiB trace (bigtrace.py)")
    ap.add_argument("--keep", type=Path, help="build/keep the runs here (reused by reruns)")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--markdown", type=Path, help="write docs/speed.md's tables here")
    args = ap.parse_args()
    big_ranks = [] if args.skip_big else parse_ranks(args.big_ranks)[: 1 if args.quick else 2]
    skip_hta = args.skip_hta or args.quick
    for src in ([args.source] if big_ranks else []) + (
        [] if args.skip_small else [args.small_source]
    ):
        if not src.exists():
            raise SystemExit(f"{src} not found; pass --source / --small-source")

    benchlib.compile_bytecode()
    root = args.keep or Path(tempfile.mkdtemp(prefix="tracekit-bench-"))
    result: dict = {
        "source": str(args.source),
        "small_source": str(args.small_source),
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "load_before": os.getloadavg(),
        },
        "workers": args.workers,
        "repeat": args.repeat,
        "runs": {},
    }
    # (name, kind, folder, files, events per file)
    plan: list[tuple[str, str, Path, int]] = []
    for i, n in enumerate(big_ranks):
        plan.append((f"{n} big ranks", "base" if i == 0 else "scaled", root / f"run{n}", n))
    if not args.skip_small:
        n = args.small_ranks
        plan.append((f"{n} small ranks", "many", root / f"small{n}", n))
    try:
        names: dict[str, str] = {}
        for name, kind, folder, n in plan:
            if kind == "many":
                files = build_small_run(args.small_source, n, folder)
                info = describe_small(files, args.small_source)
                what = f"{args.small_source.name} replicated"
            else:
                files = build_run(args.source, n, folder)
                events = len(benchlib.read_doc(benchlib.source_trace(args.source))["traceEvents"])
                info = describe_run(files, events)
                what = args.source.name
            print(
                f"{name} ({what}): {info['json_bytes'] / 1e6:.0f} MB of JSON "
                f"({info['gzip_bytes'] / 1e6:.0f} MB gzip), {info['events']:,} events; "
                f"{os.cpu_count()} cores, {args.workers} workers, best of {args.repeat}",
                flush=True,
            )
            phases = phases_for(kind, skip_hta, args.hta_at_64)
            figs = bench_run(folder, phases, args.workers, args.repeat, args.hta_timeout)
            if kind != "scaled":
                figs["analysis"] = analysis_phases(folder, figs)
            result["runs"][name] = {**info, "kind": kind, "phases": figs}
            names[kind] = name
        if args.big:
            import bigtrace

            result["big"] = bigtrace.bench(args.source, root, args.workers)
        figs = {k: v["phases"] for k, v in result["runs"].items()}
        rows = evaluate(figs, names.get("base"), names.get("scaled"), names.get("many"))
        if "big" in result:
            rows.append(benchlib.big_target(result["big"]))
        print_targets(rows)
        result["targets"] = [r.as_dict() for r in rows]
        bounds = [
            benchlib.bound(figs, names.get(kind), limit)
            for kind, limit in (("base", 2.0), ("many", 3.0))
        ]
        print_bounds([b for b in bounds if b])
        result["bounds"] = [asdict(b) for b in bounds if b]
        result["machine"]["load_after"] = os.getloadavg()
        print(
            f"load average before {result['machine']['load_before']}, after "
            f"{result['machine']['load_after']}"
        )
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
