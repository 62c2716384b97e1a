"""`tracekit tui`: the Textual drill-down over the same store and report as `analyze`.

- `app`      — the app: loading, and the one place navigation happens (it routes what the
  screens post)
- `messages` — what a screen asks the app for: `JumpTo(Target)`, `OpenFinding`, `ShowError` …
- `session`  — the run, its report, what the session keeps (lanes, step windows, the step model)
- `queries`  — the drill-down's questions to the store (SQL: `tracekit/sql/tui/`)
- `frame`    — one timeline viewport aggregated to columns
- `evidence` — where a finding points
- `fmt`      — values in words and units; `commands` — the Ctrl+P palette
- `screens/` — one per digit key and the pages Enter opens; `widgets/` — what they draw with
- `data`     — the old names (`Session`, `Frame`, `evidence`) for older imports

Imported only by the `tui` command (lazily): `import tracekit, diagnosers` never pulls in
Textual."""
