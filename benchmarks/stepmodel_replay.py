"""The step model's replay: the Python sweep it uses beside a numpy level sweep (and
rustworkx, where it is installed), on one run's graph, in CPU seconds.

    python benchmarks/stepmodel_replay.py RUN [--repeat 3]

RUN must have its tables cached (`tracekit ingest RUN`; `benchmarks/ingest.py --keep
DIR` builds DIR/run8). Prints the graph's size, its build, the base replay with and
without the critical path, each finding's candidate remedies replayed (as the report
does), and the forward sweep three ways:

- `python`: `tracekit.stepmodel.replay.run` (a loop over vertices in measured order);
- `numpy levels`: vertices grouped by depth (the longest chain of edges into them), each
  level's times one `np.maximum.at` over its in-edges — as many numpy calls as the graph
  is deep;
- `python CSR`: the same loop over the edges as flat lists (each vertex's in-edges an
  offset range into a source-vertex list and a lag list, built once from the graph's
  per-node edge lists, as arrays of a CSR graph would be): no tuple unpacking, no
  source vertex computed per edge;
- `rustworkx`: `dag_longest_path_length` over the same edges (skipped when not
  installed; it is not a dependency of tracekit).

The numpy sweep's times are checked equal to the Python sweep's.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np


def cpu() -> float:
    return time.process_time()


def vertex_edges(g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source vertex, target vertex, lag) of every edge, the duration edges included."""
    src, dst, lag = [], [], []
    for i in range(g.n):
        for s, se, lg, _ek in g.starts[i]:
            src.append(2 * s + (1 if se else 0))
            dst.append(2 * i)
            lag.append(lg)
        src.append(2 * i)
        dst.append(2 * i + 1)
        lag.append(g.dur[i])
        for s, lg, _ek in g.ends[i]:
            src.append(2 * s + 1)
            dst.append(2 * i + 1)
            lag.append(lg)
    return np.asarray(src), np.asarray(dst), np.asarray(lag, dtype=float)


def levels(nv: int, src: np.ndarray, dst: np.ndarray, order: list[int]) -> np.ndarray:
    """Each vertex's depth, by one pass in topological order (what a level sweep builds
    once per graph)."""
    depth = np.zeros(nv, dtype=np.int64)
    by_dst: list[list[int]] = [[] for _ in range(nv)]
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        by_dst[d].append(s)
    dl = depth.tolist()
    for v in order:
        p = by_dst[v]
        if p:
            dl[v] = 1 + max(dl[u] for u in p)
    return np.asarray(dl)


def numpy_sweep(g, src, dst, lag, depth) -> np.ndarray:
    nv = 2 * g.n
    t = np.full(nv, -np.inf)
    has_start = np.zeros(nv, dtype=bool)
    has_start[dst] = True
    free = np.flatnonzero(~has_start)  # start vertices no edge explains: measured start
    t[free] = np.asarray(g.ts, dtype=float)[free >> 1]
    edepth = depth[dst]
    order = np.argsort(edepth, kind="stable")
    bounds = np.searchsorted(edepth[order], np.arange(1, depth.max() + 2))
    for k in range(len(bounds) - 1):
        sel = order[bounds[k] : bounds[k + 1]]
        np.maximum.at(t, dst[sel], t[src[sel]] + lag[sel])
    return t


def csr(g) -> tuple[list[int], list[int], list]:
    """Each vertex's in-edges (the duration edge left out) as an offset range into flat
    source-vertex and lag lists."""
    off, src, lag = [0] * (2 * g.n + 1), [], []
    for i in range(g.n):
        off[2 * i] = len(src)
        for s, se, lg, _ek in g.starts[i]:
            src.append(2 * s + 1 if se else 2 * s)
            lag.append(lg)
        off[2 * i + 1] = len(src)
        for s, lg, _ek in g.ends[i]:
            src.append(2 * s + 1)
            lag.append(lg)
    off[2 * g.n] = len(src)
    return off, src, lag


def csr_sweep(g, order: list[int], off, src, lag) -> list:
    """`replay._times` (no change, no prefix) over `csr`'s lists."""
    t = [0.0] * (2 * g.n)
    dur, ts = g.dur, g.ts
    for v in order:
        a, b = off[v], off[v + 1]
        if v & 1:
            best = t[v - 1] + dur[v >> 1]
        elif a == b:
            t[v] = ts[v >> 1]
            continue
        else:
            best = t[src[a]] + lag[a]
            a += 1
        while a < b:
            x = t[src[a]] + lag[a]
            if x > best:
                best = x
            a += 1
        t[v] = best
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    os.environ["TRACEKIT_NO_PROGRESS"] = "1"
    from diagnosers import impact as SM
    from diagnosers.context import Context
    from tracekit.options import AnalysisOptions
    from tracekit.stepmodel import replay as R
    from tracekit.stepmodel.model import StepModel
    from tracekit.store.open import open_run

    run = open_run(a.run, workers=1)
    run.materialize()
    ctx = Context(run, AnalysisOptions())
    windows, _note = ctx.step_model_plan
    c = cpu()
    sm = StepModel(run, windows)
    build = cpu() - c
    g = sm.graph
    n_edges = sum(map(len, g.starts)) + sum(map(len, g.ends))
    print(f"graph: {g.n:,} nodes, {n_edges:,} edges, {len(g.spans)} ranks; ", end="")
    print(f"built in {build:.3f} s CPU")

    def best(fn) -> float:
        out = []
        for _ in range(a.repeat):
            c = cpu()
            fn()
            out.append(cpu() - c)
        return min(out)

    with_path = best(lambda: R.run(g, sm.order))
    no_path = best(lambda: R.run(g, sm.order, path=False))
    print(f"python sweep, with the critical path  {with_path:.3f} s CPU")
    print(f"python sweep, without                 {no_path:.3f} s CPU")
    # the candidates the report replays: every finding's, as `diagnosers.assemble` does
    from diagnosers import levels as L
    from diagnosers.rules import run_rules, selected

    for build_level in L.BUILDERS.values():  # the facts the rules read
        build_level(ctx)
    ctx.__dict__["step_model"] = sm
    findings = run_rules(ctx, selected())
    specs = [s for f in findings if f.severity in SM.REPLAYED for s in SM.candidates(ctx, f)]
    c = cpu()
    SM.impacts(ctx, findings)
    took = cpu() - c
    print(f"remedies: {len(specs)} candidates ({', '.join(specs)}) replayed in {took:.3f} s CPU")

    c = cpu()
    flat = csr(g)
    built = cpu() - c
    t_csr = best(lambda: csr_sweep(g, sm.order, *flat))
    same = csr_sweep(g, sm.order, *flat) == R.run(g, sm.order, path=False).times
    print(
        f"python CSR sweep: {t_csr:.3f} s CPU (lists built once: {built:.3f} s CPU); "
        f"times equal to the python sweep's: {same}"
    )
    src, dst, lag = vertex_edges(g)
    c = cpu()
    depth = levels(2 * g.n, src, dst, sm.order)
    lv = cpu() - c
    sweep = best(lambda: numpy_sweep(g, src, dst, lag, depth))
    t_np = numpy_sweep(g, src, dst, lag, depth)
    t_py = np.asarray(R.run(g, sm.order, path=False).times)
    same = np.array_equal(t_np, t_py)
    print(
        f"numpy level sweep: depth {int(depth.max()):,} levels (built once: {lv:.3f} s CPU); "
        f"sweep {sweep:.3f} s CPU; times equal to the python sweep's: {same}"
    )
    try:
        import rustworkx as rx
    except ImportError:
        print("rustworkx: not installed (not a dependency; not measured)")
    else:
        dag = rx.PyDiGraph()
        dag.add_nodes_from(range(2 * g.n))
        dag.add_edges_from(list(zip(src.tolist(), dst.tolist(), lag.tolist(), strict=True)))
        t = best(lambda: rx.dag_longest_path_length(dag, weight_fn=float))
        print(f"rustworkx dag_longest_path_length: {t:.3f} s CPU")


if __name__ == "__main__":
    main()
