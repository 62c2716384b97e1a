"""Whether an ingest builds the step model's inputs (`rank.step_device`, `rank.step_host`,
`rank.step_marks`): only for a run the step model can cover. At 1,024 small ranks they
cost 2.9 s of the cold ingest's 28.7 s of CPU, and the model is never built there (one
step passes MAX_STEP_NODES). A batch without them stays valid: the store computes them
from its events with the same SQL modules (`tracekit.store.run`), correct but slower."""

from __future__ import annotations

from tracekit import sql

STEP_TABLES = ("step_device", "step_host", "step_marks")

# one step of every rank above this (estimated nodes: twice the device work and runtime
# calls of a step, `tracekit.analysis.whatif_plan.plan`) is not modeled: the graph's build
# and replays would cost seconds per 100,000 nodes (docs/step-model.md, "Cost"); twice the
# 8-rank benchmark's step (≈ 207,000 estimated, 45,804 built)
MAX_STEP_NODES = 400_000


def worth_building(con, run_ranks: int) -> bool:
    """Can the step model cover a run of `run_ranks` ranks like the batch in `con`? Its
    step's nodes estimated as `plan()` does (twice the device work and runtime calls of
    the busiest rank count of steps), over the whole trace rather than the analysed
    windows, the batch's ranks scaled to the run's. `run_ranks` 0: unknown, built."""
    ranks, work, steps = con.execute(sql.query("ingest.step_tables", "step_model_size")).fetchone()
    if run_ranks <= 0 or not ranks:
        return True
    return 2 * work / ranks * run_ranks / max(steps or 0, 1) <= MAX_STEP_NODES
