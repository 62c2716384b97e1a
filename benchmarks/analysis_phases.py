"""Where a recompute's CPU goes: each phase of the analysis (the report from the cached
tables, no decode), in CPU seconds of this process, beside the msgspec decode floor and
HTA's load when given.

    python benchmarks/analysis_phases.py RUN [--floor S] [--hta S] [--repeat N] [--json PATH]

RUN must have its tables cached (`tracekit ingest RUN`, or a cold `analyze`; the runs
`benchmarks/ingest.py --keep DIR` builds). The run is opened from its cache, then
`diagnosers.assemble.analyze` runs with the phases' functions wrapped (nothing in them
changed), the step model built on this thread where it is first asked for (not beside
the analysis: `TRACEKIT_STEP_MODEL_THREAD=0`). A phase's time is exclusive: CPU spent in
a phase nested inside another (the step model built where a rule first asks for it)
counts for the inner one only.

Phases:
- `open`: opening the run from its cache, the derived tables, the per-rank breakdown;
- `stepmodel_build`: the dependency graph (`tracekit.stepmodel.graph.build`);
- `replays`: every replay (the base and each what-if: vertex order, pruning, the forward
  run and the critical path's backtrack, `tracekit.stepmodel.replay`);
- `stepmodel_path`: the critical path summed by kind and rank, the collectives' slack;
- `whatif_candidates`: the findings' candidate remedies (each rule's candidates, the
  changes applied to the graph; their replays are in `replays`);
- `attribution`: the uncounted-compute attribution (`kernel_attribution`);
- `levels`: the four levels' facts and figures (less the phases above);
- `rules`: the rules' findings (less the phases above);
- `regions`: the regions;
- `samples`: the per-step samples;
- `assemble`: the rest of `analyze` (tables, summary, verdicts).

CPU seconds are `time.process_time()` (user + system of this process: the figure that
moves least when other work shares the machine); `--floor` / `--hta` are the CPU or wall
seconds of those phases measured elsewhere in the same run (`benchmarks/ingest.py`
passes its own), the ratios printed against them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

PHASES = (
    "open",
    "stepmodel_build",
    "replays",
    "stepmodel_path",
    "whatif_candidates",
    "attribution",
    "levels",
    "rules",
    "regions",
    "samples",
    "assemble",
)
STEP_MODEL = ("stepmodel_build", "replays", "stepmodel_path", "whatif_candidates")


class Timer:
    """Exclusive CPU seconds per phase: a stack of the phases running."""

    def __init__(self):
        self.spent = dict.fromkeys(PHASES, 0.0)
        self.calls = dict.fromkeys(PHASES, 0)
        self.stack: list[str] = []
        self.mark = time.process_time()

    def _switch(self) -> None:
        now = time.process_time()
        if self.stack:
            self.spent[self.stack[-1]] += now - self.mark
        self.mark = now

    def wrap(self, phase: str, fn):
        def timed(*args, **kw):
            self._switch()
            self.stack.append(phase)
            self.calls[phase] += 1
            try:
                return fn(*args, **kw)
            finally:
                self._switch()
                self.stack.pop()

        timed.__wrapped__ = fn
        return timed


def patch(t: Timer):
    """Wrap the phases' functions; returns what undoes it."""
    from diagnosers import assemble
    from diagnosers import impact as SM
    from diagnosers import levels as L
    from tracekit.analysis import uncounted as U
    from tracekit.stepmodel import graph as G
    from tracekit.stepmodel import model as M
    from tracekit.stepmodel import replay as R
    names = {
        G: ["build"],
        R: ["ordered", "prune", "run", "toposort"],
        M.StepModel: ["__init__", "critical_path", "collective_slack_ms"],
        SM: ["impacts"],
        U: ["facts"],
        assemble: ["run_rules", "_regions", "per_step", "analyze"],
    }
    saved = [(obj, n, getattr(obj, n)) for obj, ns in names.items() for n in ns]
    saved_levels = dict(L.BUILDERS)
    G.build = t.wrap("stepmodel_build", G.build)
    M.StepModel.__init__ = t.wrap("stepmodel_build", M.StepModel.__init__)  # its edges
    for name in ("ordered", "prune", "run", "toposort"):
        setattr(R, name, t.wrap("replays", getattr(R, name)))
    M.StepModel.critical_path = t.wrap("stepmodel_path", M.StepModel.critical_path)
    M.StepModel.collective_slack_ms = t.wrap("stepmodel_path", M.StepModel.collective_slack_ms)
    SM.impacts = t.wrap("whatif_candidates", SM.impacts)
    U.facts = t.wrap("attribution", U.facts)
    for name, build in list(L.BUILDERS.items()):
        L.BUILDERS[name] = t.wrap("levels", build)
    assemble.run_rules = t.wrap("rules", assemble.run_rules)
    assemble._regions = t.wrap("regions", assemble._regions)
    assemble.per_step = t.wrap("samples", assemble.per_step)
    assemble.analyze = t.wrap("assemble", assemble.analyze)

    def undo() -> None:
        for obj, n, fn in saved:
            setattr(obj, n, fn)
        L.BUILDERS.update(saved_levels)

    return undo


def measure(run_dir: Path, workers: int = 1) -> dict:
    """{phase: CPU seconds, "total": …, "queries": DuckDB statements} of one recompute."""
    from diagnosers import assemble
    from tracekit.analysis.whatif_plan import THREAD_ENV
    from tracekit.options import AnalysisOptions
    from tracekit.store.open import open_run

    # the step model where it is first asked for, on this thread: a phase's CPU is this
    # process's, and a thread beside would count in whichever phase runs meanwhile
    saved_env = os.environ.get(THREAD_ENV)
    os.environ[THREAD_ENV] = "0"
    t = Timer()
    undo = patch(t)
    t._switch()
    t.stack.append("open")
    c0 = time.process_time()
    try:
        with open_run(run_dir, workers=workers) as run:
            assemble.analyze(run, AnalysisOptions())
    finally:
        t._switch()
        t.stack.pop()
        undo()
        if saved_env is None:
            os.environ.pop(THREAD_ENV, None)
        else:
            os.environ[THREAD_ENV] = saved_env
    out = {k: round(v, 3) for k, v in t.spent.items()}
    out["total"] = round(time.process_time() - c0, 3)
    out["step_model"] = round(sum(t.spent[p] for p in STEP_MODEL), 3)
    out["replay_calls"] = t.calls["replays"]
    return out


def show(fig: dict, floor: float | None, hta: float | None, cold: float | None = None) -> str:
    lines = []

    def rel(v: float) -> str:
        s = f"{v / floor:6.3f}× floor" if floor else ""
        if hta:
            s += f"  {v / hta:6.3f}× HTA"
        if cold:
            s += f"  {v / cold:6.1%} of cold"
        return s

    for p in (*PHASES, "step_model", "total"):
        lines.append(f"  {p:18} {fig[p]:7.2f} s CPU   {rel(fig[p])}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--floor", type=float, help="the decode floor's seconds (for ratios)")
    ap.add_argument("--hta", type=float, help="HTA's load seconds (for ratios)")
    ap.add_argument("--cold", type=float, help="a cold analyze's CPU seconds (for shares)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    a = ap.parse_args()
    if not (a.run / ".tracekit").is_dir():
        raise SystemExit(f"{a.run}: no cache; run `tracekit ingest {a.run}` first")
    cache = a.run / ".tracekit"
    for kept in (*cache.glob("*/reports"), *cache.glob("*/answers")):
        shutil.rmtree(kept)  # else the report cache answers
    os.environ["TRACEKIT_NO_PROGRESS"] = "1"
    fig = measure(a.run)
    load = os.getloadavg()[0]
    print(f"analysis phases of {a.run} (recompute, exclusive CPU seconds; load {load:.1f}):")
    print(show(fig, a.floor, a.hta, a.cold))
    if a.json:
        a.json.write_text(json.dumps(fig, indent=2) + "\n")
    else:
        print("PHASES " + json.dumps(fig), file=sys.stderr)


if __name__ == "__main__":
    main()
