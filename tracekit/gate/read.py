"""Reading the reports: the one place where the gate maps a metric to the report keys
that hold its figure (a run metric's summary / per-rank key, a family's table column and
its per-step samples' column) and reads them. The gate computes no figure of its own:
a side's value is the mean over its runs of the run's report figure.

Every entity is named by its key — a rank, a collective's (name, group size, bytes), a
kernel's name, a region's (kind, path) — and its label is made from the key for display
only, never parsed back."""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import fmean
from typing import Any

from tracekit.gate import metrics as M
from tracekit.model import figures as F

STEP_MS = F.STEP_TIME_MS.key
# the parts of the step, per rank-step in samples.ranks[] (ms)
LEVEL_KEYS = (STEP_MS, F.COMPUTE_MS.key, F.EXPOSED_COMM_MS.key, "other_ms", "idle_ms")
HOST_BOUND_MS = "host_bound_ms"  # samples.ranks[]: the host-bound gaps, part of idle
# a family's figure: (its column in the report's table, its column in the samples)
COLUMNS: dict[str, tuple[str, str]] = {
    "collective_time": (F.TIME_MS_PER_STEP.key, "time_ms"),
    "busbw": (F.BUSBW_GBPS.key, F.BUSBW_GBPS.key),
    "exposed": (F.EXPOSED_MS.key, F.EXPOSED_MS.key),  # a collective's, for the cause
    "kernel_time": (F.TIME_MS_PER_STEP.key, "time_ms"),
}
# a collective's exposure per rank in the report's table (the cause names the ranks)
EXPOSED_BY_RANK = "exposed_ms_by_rank"


def num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def values(reports: list[dict], get: Callable[[dict], float | None]) -> list[float]:
    """Each run's figure (runs without it left out)."""
    return [x for x in (get(r) for r in reports) if x is not None]


def avg(reports: list[dict], get: Callable[[dict], float | None]) -> float | None:
    """The mean over a side's runs of one run's figure (None where no run has it)."""
    vals = values(reports, get)
    return fmean(vals) if vals else None


def _samples(report: dict) -> dict:
    return report.get("samples") or {}


def sampled_steps(report: dict) -> list:
    return _samples(report).get("steps") or []


# ---------------------------------------------------------------- run metrics and ranks


def point(report: dict, m: M.Metric) -> float | None:
    """A run metric's value: the summary's key, or the mean over ranks of its per-rank key
    (the contract makes them the same). A metric with per-step samples takes the ranks'
    mean first, so its point value and its samples measure one quantity."""
    summary = num((report.get("summary") or {}).get(m.summary)) if m.summary else None
    ranks = None
    if m.rank_key:
        vals = [num(r.get(m.rank_key)) for r in report.get("ranks") or []]
        vals = [x for x in vals if x is not None]
        ranks = fmean(vals) if vals else None
    if m.sample and ranks is not None:
        return ranks
    return summary if summary is not None else ranks


def sample_ranks(report: dict) -> list[dict]:
    return _samples(report).get("ranks") or []


def step_series(report: dict, key: str) -> list[float]:
    """Per step, the mean over ranks of a per-rank sample (the step's run-level value)."""
    by_step: dict[int, list[float]] = {}
    for r in sample_ranks(report):
        for s, v in zip(r.get("step") or [], r.get(key) or [], strict=False):
            if num(v) is not None:
                by_step.setdefault(s, []).append(v)
    return [fmean(v) for _, v in sorted(by_step.items())]


def level_means(report: dict) -> dict[str, float]:
    """Mean per rank-step of each part of the step (ms)."""
    out = {}
    for key in LEVEL_KEYS:
        vals = [v for r in sample_ranks(report) for v in r.get(key) or [] if num(v) is not None]
        if vals:
            out[key] = fmean(vals)
    return out


def mean_sample(report: dict, key: str) -> float | None:
    vals = [v for r in sample_ranks(report) for v in r.get(key) or [] if num(v) is not None]
    return fmean(vals) if vals else None


def rank_step(report: dict, rank: Any) -> float | None:
    """A rank's step time (ranks[].step_time_ms)."""
    row = next((r for r in report.get("ranks") or [] if r.get("rank") == rank), None)
    return num(row.get(STEP_MS)) if row else None


def rank_step_samples(report: dict | None) -> dict:
    """Each rank's per-step step times (samples.ranks[])."""
    return {r["rank"]: r.get(STEP_MS) for r in sample_ranks(report)} if report else {}


def peak_reserved(report: dict) -> dict:
    """Each rank's peak reserved bytes (ranks[])."""
    key = F.PEAK_RESERVED_BYTES.key
    return {r.get("rank"): r[key] for r in report.get("ranks") or [] if num(r.get(key)) is not None}


def stragglers(report: dict) -> set:
    return set((report.get("summary") or {}).get(F.STRAGGLER_RANKS.key) or [])


# ---------------------------------------------------------------- collectives, kernels


def full_series(entry: dict, key: str, steps: list[int]) -> list[float]:
    """An entity's per-step values over all the run's steps (0 where it did not run)."""
    got = dict(zip(entry.get("step") or [], entry.get(key) or [], strict=False))
    if key == F.BUSBW_GBPS.key:
        return [v for s in steps if num(v := got.get(s)) is not None]
    return [float(got.get(s) or 0.0) for s in steps]


def coll_key(c: dict) -> tuple:
    return (c.get("name"), c.get("group_size"), c.get(F.COLL_BYTES.key))


def coll_label(key: tuple) -> str:
    """A collective's name in a metric, from its key: `all_reduce 201 MB ×4`."""
    name, group, size = key
    size_text = f" {size / 1e6:.3g} MB" if size else ""
    group_text = f" ×{group}" if group else ""
    return f"{name}{size_text}{group_text}"


def collectives(rep: dict) -> tuple[dict, dict, list]:
    """(the report's collectives table by key, the samples' by key, the sampled steps)."""
    sam = {coll_key(c): c for c in _samples(rep).get("collectives") or []}
    table = {coll_key(c): c for c in rep.get("collectives") or []}
    return table, sam, sampled_steps(rep)


def coll_figure(rep: dict, key: tuple, column: str) -> float | None:
    """A collective's figure (`COLUMNS[column]`) in one run: the report's; the samples'
    mean only for a collective the report's table left out (a baseline keeps the top 20)
    — never in place of a null: where the report cannot know a figure, the gate does not
    judge it."""
    rep_key, sam_key = COLUMNS[column]
    table, sam, steps = collectives(rep)
    if key in table:
        return num(table[key].get(rep_key))
    if key in sam:
        series = full_series(sam[key], sam_key, steps)
        return fmean(series) if series else None
    return None


def coll_series(rep: dict, key: tuple, column: str) -> list[float] | None:
    """A collective's per-step samples of `COLUMNS[column]` (None where it has none)."""
    _, sam, steps = collectives(rep)
    return full_series(sam[key], COLUMNS[column][1], steps) if key in sam else None


def kernels(rep: dict) -> dict[str, dict]:
    """samples.kernels by name."""
    return {k["name"]: k for k in _samples(rep).get("kernels") or []}


def kernel_series(rep: dict, name: str) -> list[float]:
    return full_series(kernels(rep)[name], COLUMNS["kernel_time"][1], sampled_steps(rep))


def kernel_figure(rep: dict, name: str) -> float | None:
    k = next((k for k in _samples(rep).get("kernels") or [] if k["name"] == name), None)
    if k is None:
        return None
    return fmean(full_series(k, COLUMNS["kernel_time"][1], sampled_steps(rep)) or [0])


def kernel_label(name: str) -> str:
    """A kernel's name in a metric (long names cut)."""
    return name if len(name) <= 60 else name[:57] + "…"


# ---------------------------------------------------------------- regions


def region_samples(rep: dict) -> dict[tuple, dict]:
    """samples.regions by (kind, path)."""
    return {
        (g.get("kind"), tuple(g.get("path") or [])): g
        for g in _samples(rep).get("regions") or []
    }


def region_series(rep: dict | None, key: tuple, cpu: bool = False) -> list[float] | None:
    """A region's time per step over all the run's steps: its device time, its CPU time
    where the run has no device time (a CPU run); None where the samples lack it. `cpu`:
    its CPU time on a GPU run (region_cpu_time), None on a CPU run (its region_time is
    already the CPU time)."""
    g = region_samples(rep).get(key) if rep is not None else None
    if g is None:
        return None
    device = F.DEVICE_MS.key
    on_device = any(num(x) is not None for x in g.get(device) or [])
    if cpu and not on_device:
        return None
    col = device if on_device and not cpu else "cpu_ms"
    return full_series(g, col, sampled_steps(rep))


def region_label(key: tuple) -> str:
    """A region's name in a metric: its own name first (a table cuts long names at the
    end), then the regions it is in, innermost first: `layers.2 in DDP.forward`."""
    *up, leaf = key[1] or [""]
    text = leaf + (" in " + " / ".join(reversed(up)) if up else "")
    return text if len(text) <= 60 else text[:59] + "…"
