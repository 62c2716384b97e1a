"""The gate's settings from `[tool.tracekit.gate]` in pyproject.toml:

```toml
[tool.tracekit.gate]
fail_on = "regression"        # or "inconclusive"
alpha = 0.05                  # significance level of the per-step test

[tool.tracekit.gate.max_regression]
step_time = "5%"
exposed_comm = "2pt"
kernel_time = "off"

[tool.tracekit.gate.run_noise]   # the prior run-to-run spread, one run a side
step_time = "4%"
exposed_comm = "3pt"
```

The nearest pyproject.toml from the working directory up is read (or `--config FILE`);
command-line options override it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tracekit.config import find_pyproject, read_toml
from tracekit.errors import TracekitError
from tracekit.gate.metrics import Threshold, parse_spec

FAIL_ON = ("regression", "inconclusive")


@dataclass
class GateConfig:
    thresholds: dict[str, Threshold] = field(default_factory=dict)
    alpha: float | None = None
    fail_on: str | None = None
    source: str | None = None
    run_noise: dict[str, Threshold] = field(default_factory=dict)


def load(path: str | None = None) -> GateConfig:
    """The `[tool.tracekit.gate]` table of `path`, or of the nearest pyproject.toml."""
    p = Path(path) if path else find_pyproject()
    if p is None:
        return GateConfig()
    if path and not p.is_file():
        raise TracekitError(f"--config {path}: no such file")
    table = read_toml(p).get("tool", {}).get("tracekit", {}).get("gate")
    if table is None:
        return GateConfig()
    where = f"{p} [tool.tracekit.gate]"
    if not isinstance(table, dict):
        raise TracekitError(f"{where} must be a table")
    unknown = set(table) - {"max_regression", "run_noise", "alpha", "fail_on"}
    if unknown:
        raise TracekitError(
            f"{where}: unknown key {sorted(unknown)[0]!r}; use max_regression, run_noise, "
            "alpha, fail_on"
        )
    mr = table.get("max_regression", {})
    if not isinstance(mr, dict):
        raise TracekitError(f'{where}: max_regression must be a table of metric = "N%"')
    rn = table.get("run_noise", {})
    if not isinstance(rn, dict):
        raise TracekitError(f'{where}: run_noise must be a table of metric = "N%"')
    alpha = table.get("alpha")
    if alpha is not None and (
        isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1
    ):
        raise TracekitError(f"{where}: alpha must be a number between 0 and 1")
    fail_on = table.get("fail_on")
    if fail_on is not None and fail_on not in FAIL_ON:
        raise TracekitError(f"{where}: fail_on must be one of {', '.join(FAIL_ON)}")
    return GateConfig(
        parse_spec(mr, f"{where} max_regression"),
        alpha,
        fail_on,
        str(p),
        parse_spec(rn, f"{where} run_noise"),
    )
