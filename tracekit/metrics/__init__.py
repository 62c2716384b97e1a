"""Figures over analysis windows, each defined once: the report takes them with each
rank's analysed window, the per-step samples with each ProfilerStep as the window.

- `breakdown` — windows, and per window: idle, compute, communication, overlap,
                exposed communication and its parts, host-bound gaps
- `samples`   — the report's `samples`: the same figures, one value per step
"""
