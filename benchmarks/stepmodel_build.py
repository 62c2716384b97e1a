"""The step model's graph build alone, in CPU seconds, repeated on one run: this branch's
`tracekit.stepmodel.graph.build` against another version of the module (`--base FILE`,
e.g. `git show da356e5:tracekit/stepmodel/graph.py > /tmp/graph_base.py`), alternated so
that a loaded machine weighs on both, and the two graphs compared field by field.

    python benchmarks/stepmodel_build.py RUN [--base FILE] [--pairs N] [--profile]

RUN must have its tables cached (`benchmarks/analysis_phases.py` says how). The windows
are those a recompute builds the model of (captured from one `analyze`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import time
import types
from pathlib import Path

FIELDS = (
    *("cpu", "rank", "lane", "kind", "name", "ts", "end", "dur", "starts", "ends", "coll"),
    *("nbytes", "group", "inst", "backward", "sync_api", "awaited", "sync_span"),
    *("input_spans", "dropped", "origin"),
)


def same(a, b) -> list[str]:
    """The fields in which graphs `a` and `b` differ (the spans compared as dicts)."""
    # repr, not ==: an int where a float was (1 == 1.0) would change what the report prints
    bad = [f for f in FIELDS if repr(getattr(a, f)) != repr(getattr(b, f))]
    if repr({r: vars(s) for r, s in a.spans.items()}) != repr(
        {r: vars(s) for r, s in b.spans.items()}
    ):
        bad.append("spans")
    return bad


def _sql_of(path: Path):
    """`tracekit.sql` with module `stepmodel.graph` read from `path`."""
    from tracekit import sql

    queries: dict[str, list[str]] = {}
    cur = None
    for line in path.read_text().splitlines():
        if m := sql._HEAD.match(line):
            cur = queries.setdefault(m.group(2), []) if m.group(1) == "query" else None
        if cur is not None:
            cur.append(line)

    def query(name: str, q: str, /, **parts: str) -> str:
        if name != "stepmodel.graph":
            return sql.query(name, q, **parts)
        return sql._fill(f"{name}:{q}", "\n".join(queries[q]), parts)

    return types.SimpleNamespace(query=query)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--base", type=Path, help="another graph.py to time against")
    ap.add_argument(
        "--base-sql", type=Path, help="the stepmodel/graph.sql that --base reads (else this one)"
    )
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile one build")
    a = ap.parse_args()
    os.environ["TRACEKIT_NO_PROGRESS"] = "1"
    from diagnosers import assemble
    from tracekit.options import AnalysisOptions
    from tracekit.stepmodel import graph as G
    from tracekit.store.open import open_run

    base = None
    if a.base:
        spec = importlib.util.spec_from_file_location("graph_base", a.base)
        base = importlib.util.module_from_spec(spec)
        sys.modules["graph_base"] = base  # dataclasses look their module up
        spec.loader.exec_module(base)
        if a.base_sql:
            base.sql = _sql_of(a.base_sql)
    got = []
    build = G.build

    def capture(run, windows):
        got.append(windows)
        return build(run, windows)

    cache = a.run / ".tracekit"
    for kept in (*cache.glob("*/reports"), *cache.glob("*/answers")):
        shutil.rmtree(kept)  # else the report cache answers
    with open_run(a.run) as run:
        G.build = capture
        try:
            assemble.analyze(run, AnalysisOptions())
        finally:
            G.build = build
        windows = got[0]
        g = build(run, windows)
        print(f"{a.run}: {g.n:,} nodes, {sum(map(len, g.starts)) + sum(map(len, g.ends)):,} edges")
        if base is not None:
            diff = same(base.build(run, windows), g)
            print("graphs identical" if not diff else f"graphs DIFFER in {diff}")
        if a.profile:
            import cProfile
            import pstats

            pr = cProfile.Profile()
            pr.enable()
            build(run, windows)
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(25)
        times: dict[str, list[float]] = {"this": [], "base": []}
        for _ in range(a.pairs):
            for label, fn in (("base", base and base.build), ("this", build)):
                if fn is None:
                    continue
                c0 = time.process_time()
                fn(run, windows)
                times[label].append(time.process_time() - c0)
        if hasattr(G, "SECT"):
            print({k: round(v / (a.pairs + 2 + a.profile), 3) for k, v in G.SECT.items()})
        for label, v in times.items():
            if v:
                runs = " ".join(f"{x:.3f}" for x in v)
                print(f"  {label}: {runs}  median {statistics.median(v):.3f} s CPU")


if __name__ == "__main__":
    main()
