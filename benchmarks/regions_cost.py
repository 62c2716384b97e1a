"""What regions cost a cold analyze (issue 30: ≤ 10%): the whole cold `tracekit analyze`
of an N-rank run in CPU seconds (this process and its ingest workers), against the CPU
seconds of materializing the `rank.regions` module over the same ranks (what ingest adds
for regions) plus the analysis' region queries (the report's `regions[]`).

    python benchmarks/regions_cost.py [--source ../shared/traces/v100_ddp_rank1]
                                      [--ranks 8] [--dest DIR]

CPU seconds are user + system, the figure that moves least when other work shares the
machine; the run is built as `benchmarks/ingest.py` builds it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import benchlib


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=benchlib.DEFAULT_SOURCE)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--dest", type=Path, default=None)
    a = ap.parse_args()
    dest = a.dest or Path(tempfile.mkdtemp(prefix="tk-regions-"))
    run = dest / f"run{a.ranks}"
    benchlib.build_run(benchlib.source_trace(a.source), a.ranks, run)
    shutil.rmtree(run / ".tracekit", ignore_errors=True)
    os.environ["TRACEKIT_NO_PROGRESS"] = "1"

    import tracekit
    from diagnosers.context import Context
    from tracekit import sql
    from tracekit.analysis import regions as region_facts

    c0, k0, t0 = benchlib.cpu_seconds(), children_cpu(), time.perf_counter()
    tracekit.analyze(run)
    cold = benchlib.cpu_seconds() - c0 + children_cpu() - k0
    wall = time.perf_counter() - t0

    with tracekit.open(run) as r:
        text = sql.module("rank.regions").replace("VIEW regions", "VIEW _bench_regions", 1)
        c0 = benchlib.cpu_seconds()
        r.con.execute(text)
        n = r.con.execute("SELECT count(*) FROM (SELECT * FROM _bench_regions)").fetchall()[0][0]
        ingest = benchlib.cpu_seconds() - c0
        ctx = Context(r)
        c0 = benchlib.cpu_seconds()
        region_facts.regions(ctx)
        analysis = benchlib.cpu_seconds() - c0
    share = (ingest + analysis) / cold
    print(f"{a.ranks} ranks of {a.source.name}: cold analyze {cold:.2f} s CPU ({wall:.2f} s wall)")
    print(f"  regions at ingest: {ingest:.2f} s CPU ({n:,} region rows); in the analysis: "
          f"{analysis:.2f} s CPU")  # fmt: skip
    print(f"  regions' share of the cold analyze: {share:.1%} (target ≤ 10%)")


if __name__ == "__main__":
    main()
