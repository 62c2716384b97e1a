"""What every diagnoser reads: the store, the per-rank breakdown, the manifest, the
device spec, and user overrides. Diagnosers share figures through `ctx.metrics`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tracekit import manifest as manifest_mod
from tracekit.manifest import JobManifest
from tracekit.metrics.breakdown import per_rank
from tracekit.model import hardware
from tracekit.model.hardware import DeviceSpec
from tracekit.store.run import Run


@dataclass
class Overrides:
    """Figures the user states instead of the tables (CLI flags or a config)."""

    peak_tflops: float | None = None
    busbw_GBps: float | None = None
    device_memory_GB: float | None = None
    latency_us: float | None = None
    gpus_per_node: int | None = None


@dataclass
class Context:
    run: Run
    ranks: list[dict]
    window: str
    steps: str | None
    manifest: JobManifest | None
    spec: DeviceSpec | None
    cpu: bool
    overrides: Overrides
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)  # why a figure is null

    @property
    def step_ms(self) -> float | None:
        vals = [r["step_time_ms"] or r["window_ms"] for r in self.ranks if r["window_ms"]]
        return sum(vals) / len(vals) if vals else None

    def window_sql(self) -> str:
        """A VALUES list of each rank's analysed window: (rank, start_ns, end_ns, steps)."""
        rows = [
            f"({r['rank']}, {r['window_start_ns']}, "
            f"{r['window_start_ns'] + round(r['window_ms'] * 1e6)}, {max(r['steps'], 1)})"
            for r in self.ranks
            if r["window_start_ns"] is not None
        ]
        if not rows:
            return "(SELECT NULL::INT AS rank, 0::BIGINT AS start_ns, 0::BIGINT AS end_ns, 1 AS n)"
        return f"(SELECT * FROM (VALUES {', '.join(rows)}) AS w(rank, start_ns, end_ns, n))"


def build(
    run: Run, window: str = "steps", steps: str | None = None, overrides: Overrides | None = None
) -> Context:
    overrides = overrides or Overrides()
    ranks = per_rank(run, window=window, steps=steps)
    man = manifest_mod.load(run.root)
    info = run.sql(
        "SELECT device_name, max(device_memory_bytes), bool_or(has_device_events) "
        "FROM rank_info GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
    ).fetchall()
    name, mem, has_dev = info[0] if info else (None, None, False)
    spec = hardware.lookup(name, mem) if has_dev else None
    if spec is not None and overrides.device_memory_GB:
        spec = replace(spec, memory_bytes=overrides.device_memory_GB * 1e9)
    if spec is not None and overrides.busbw_GBps:
        spec = replace(spec, busbw_Bps=overrides.busbw_GBps * 1e9)
    if spec is not None and overrides.latency_us:
        spec = replace(spec, latency_s=overrides.latency_us * 1e-6)
    return Context(
        run=run,
        ranks=ranks,
        window=window,
        steps=steps,
        manifest=man,
        spec=spec,
        cpu=not has_dev,
        overrides=overrides,
    )
