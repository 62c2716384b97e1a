"""Where one ingest's CPU goes: a trace (or a batch of traces) ingested by the real
`tracekit.ingest.batch.ingest_batch`, in this process, with every DuckDB statement and
the Python steps timed in CPU seconds (user + system, `getrusage`: load-robust on a
shared machine; DuckDB runs on 1 thread, as in an ingest worker beside others).

    python benchmarks/ingest_split.py [TRACE ...] [--repeat N] [--run-ranks N]

Default: one rank of `../shared/traces/v100_ddp_rank1` (47 MB of JSON). Several traces
are one batch (`ingest_batch`), as the small ranks of a run are; `--run-ranks 1024` gives
the batch the run it is part of (a 1,024-rank run's batches leave the step model's tables
out). Each step is labelled by what it builds (`read_json → raw`, `table events`,
`parquet events`, …) or the query it runs (`query issue_ops`); `python, rest`
is what no timed step covers (writing the events' text for DuckDB, the Python of the
collective rows and counted ops, building the small tables' rows). Best of `--repeat`
per step is not taken: the figures are the median run's, by total.

Nothing here changes what the ingest does: the connection is wrapped, not replaced.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

import duckdb
from benchlib import cpu_seconds

from tracekit.ingest import runner, tracefile

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "traces" / "v100_ddp_rank1"


_QUERY = re.compile(r"^-- @query (\w+)", re.MULTILINE)
_CREATE = re.compile(r"CREATE (?:OR REPLACE )?(?:TEMP )?(TABLE|VIEW) (\w+)", re.IGNORECASE)


def label(query: str) -> str:
    """What a statement of the ingest builds, in a few words."""
    q = " ".join(query.split())
    if "read_json(" in q and "raw" in q[:60]:
        return "read_json → raw"
    if "read_json(" in q:
        return "small tables (rows → JSON → DuckDB)"
    if q.startswith("COPY"):
        # `cache.write_table`'s temp name: .{key}.{table}.{pid}.{random hex}.tmp
        m = re.search(r"\.(\w+)\.\d+\.[0-9a-f]+\.tmp", q)
        return f"parquet {m.group(1) if m else '?'}"
    m = _CREATE.search(q)
    if m:
        name = m.group(2).removeprefix("_batch_").lstrip("_")
        if name == "m":  # a rank-local SQL module materialized: `CREATE TABLE _m AS … FROM x`
            name = q.rsplit(" ", 1)[-1]
        return "(views)" if m.group(1).upper() == "VIEW" else f"table {name}"
    if q.upper().startswith(("DROP", "ALTER", "SET", "BEGIN", "COMMIT", "INSERT")):
        return "(bookkeeping)"
    m = _QUERY.search(query)
    return f"query {m.group(1)}" if m else "queries (other)"


class _Timed:
    """A DuckDB connection whose statements add their CPU seconds to `spent`."""

    def __init__(self, con, spent):
        self._con, self._spent = con, spent

    def __getattr__(self, name):
        return getattr(self._con, name)

    def execute(self, query, *args, **kwargs):
        t = cpu_seconds()
        try:
            return self._con.execute(query, *args, **kwargs)
        finally:
            self._spent[label(query)] += cpu_seconds() - t

    def sql(self, query, *args, **kwargs):
        return _TimedRel(self._con.sql(query, *args, **kwargs), self._spent, label(query))

    def close(self):
        self._con.close()


class _TimedRel:
    def __init__(self, rel, spent, what):
        self._rel, self._spent, self._what = rel, spent, what

    def __getattr__(self, name):
        return getattr(self._rel, name)

    def fetchall(self):
        t = cpu_seconds()
        try:
            return self._rel.fetchall()
        finally:
            self._spent[self._what] += cpu_seconds() - t


def one_run(traces: list[Path], run_ranks: int = 0) -> dict[str, float]:
    spent: dict[str, float] = defaultdict(float)
    real_connect, real_decode = duckdb.connect, tracefile.decode

    def decode(path, *args, **kwargs):
        t = cpu_seconds()
        try:
            return real_decode(path, *args, **kwargs)
        finally:
            spent["gunzip + split (isal, msgspec)"] += cpu_seconds() - t

    work = Path(tempfile.mkdtemp(prefix="tk-split-"))
    duckdb.connect = lambda *a, **k: _Timed(real_connect(*a, **k), spent)
    tracefile.decode = decode
    try:
        t = cpu_seconds()
        out = runner.ingest_batch(
            [(p, f"k{i}") for i, p in enumerate(traces)],
            work,
            "b",
            len(traces) == 1,
            run_ranks=run_ranks,
        )
        total = cpu_seconds() - t
    finally:
        duckdb.connect, tracefile.decode = real_connect, real_decode
        shutil.rmtree(work, ignore_errors=True)
    bad = [r["error"] for r in out if "error" in r]
    if bad:
        raise SystemExit(f"ingest failed: {bad[0]}")
    spent["python, rest"] = total - sum(spent.values())
    spent["TOTAL"] = total
    return dict(spent)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--run-ranks",
        type=int,
        default=0,
        help="the ranks of the whole run the batch is part of (default 0: unknown, so the "
        "step model's tables are built; 1024 for a batch of the 1,024-small run skips them)",
    )
    a = ap.parse_args()
    traces = a.traces or sorted(DEFAULT.glob("*.json*"))[:1]
    one_run(traces, a.run_ranks)  # imports and first-use costs out of the figures
    runs = sorted((one_run(traces, a.run_ranks) for _ in range(a.repeat)), key=lambda r: r["TOTAL"])
    med = runs[len(runs) // 2]
    mb = sum(len(tracefile.read_bytes(p)) for p in traces) / 1e6
    print(f"{len(traces)} trace(s), {mb:.1f} MB of JSON; CPU seconds of the median of {a.repeat}")
    spread = {k: statistics.pstdev(r.get(k, 0.0) for r in runs) for k in med}
    for k, v in sorted(med.items(), key=lambda kv: (kv[0] == "TOTAL", -kv[1])):
        print(f"  {k:58} {v:6.3f} s  {v / med['TOTAL']:6.1%}   ± {spread[k]:.3f}")


if __name__ == "__main__":
    main()
