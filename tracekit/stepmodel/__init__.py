"""The step model: what bounds each step across ranks, and what a change would win.

- `graph`: the dependency graph of the analysed steps, across ranks, from the trace alone
  (host order, launches, streams, syncs, inferred waits, collectives matched across ranks);
- `replay`: the graph run forward (`replay_error`), and the critical path backtracked
  from the step's end across ranks;
- `changes`: what-if changes, one small class each (`overlap:NAME`, `bandwidth:NAME=GBPS`,
  `no-straggler`, `no-host-gaps`, `compute-speed=F`, `microbatches=M`), applied to the
  graph and replayed;
- `model`: `StepModel` — the graph of a run's windows, its replay, its critical path
  summed by kind and rank, and `what_if(changes)`.

An engine layer after `tracekit.metrics` (it reads the windows and the collectives
view) and before `tracekit.report` (the report types its result): the diagnosers ask it
for each finding's impact, the CLI's `whatif` for a user's change.
"""
