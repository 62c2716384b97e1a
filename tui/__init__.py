"""`tracekit tui`: the Textual drill-down over the same store and report as `analyze`.

Imported only by the `tui` command (lazily): `import tracekit, diagnosers` never pulls in
Textual."""
