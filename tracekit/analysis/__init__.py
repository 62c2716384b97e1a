"""The facts: the figures the judges (`diagnosers`) read, computed from the run's tables.

- `facts`         — `Facts`: the run, the options, and each fact a typed property cached
                    on first use (the judges' `Context` adds what the rules raised)
- `topology`, `pipeline`, `stragglers`, `memory`, `compute` (with `uncounted`),
  `communication`, `scaling` (bubble model, projection), `regions`, `dataloader`,
  `fusion` — one module a fact
- `whatif_plan`   — the step model of the run planned within its node budget, and its
                    what-if replays (`tracekit.stepmodel` is the model itself)

A threshold that defines a figure lives here with it; a rule that judges by it imports
it. Imports no diagnoser (tests/integration/test_layering.py).
"""
