"""A synthetic twin of a recorded run with one op made slower in every step: each rank's
trace is time-warped so that every event of that name lasts `factor` times as long and
everything after it (and everything enclosing it) moves on by the added time — as if
that op alone ran slower. Used by tests/gate/test_gate_priors.py and the gate's measurement
(docs/ci-gate.md)."""

from __future__ import annotations

import bisect
import gzip
import json
import shutil
from pathlib import Path

from tests.synth import merge_intervals


def stretch_trace(doc: dict, name: str, factor: float) -> int:
    """Warp one rank's trace in place: f(t) = t + (factor − 1)·|{name}'s intervals ∩ (−∞, t]|
    per process. Returns the number of `name` events stretched."""
    by_pid: dict = {}
    for e in doc["traceEvents"]:
        if e.get("name") == name and e.get("ph") == "X":
            by_pid.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
    warps = {}
    for pid, iv in by_pid.items():
        u = merge_intervals(iv)
        starts = [s for s, _ in u]
        cum = [0.0]
        for s, e in u:
            cum.append(cum[-1] + (e - s))
        warps[pid] = (u, starts, cum)
    extra = factor - 1

    def warp(pid, t: float) -> float:
        if pid not in warps:
            return t
        u, starts, cum = warps[pid]
        i = bisect.bisect_right(starts, t)  # intervals starting at or before t
        if i == 0:
            return t
        s, e = u[i - 1]
        covered = cum[i - 1] + (min(t, e) - s)
        return t + extra * covered

    for e in doc["traceEvents"]:
        if "ts" not in e or e.get("ph") == "M":
            continue
        pid = e.get("pid")
        ts = float(e["ts"])
        if "dur" in e:
            end = warp(pid, ts + float(e["dur"]))
            e["ts"] = warp(pid, ts)
            e["dur"] = end - e["ts"]
        else:
            e["ts"] = warp(pid, ts)
    return sum(len(v) for v in by_pid.values())


def twin(run: Path, out: Path, name: str, factor: float = 1.3) -> Path:
    """Copy run folder `run` to `out` with `name` stretched by `factor` on every rank."""
    out.mkdir(parents=True, exist_ok=True)
    for p in Path(run).iterdir():
        if p.name.endswith(".json.gz") and p.name.startswith("rank-"):
            with gzip.open(p, "rt") as fh:
                doc = json.load(fh)
            assert stretch_trace(doc, name, factor) > 0, f"no {name} in {p}"
            with gzip.open(out / p.name, "wt") as fh:
                json.dump(doc, fh)
        elif p.is_file():
            shutil.copy(p, out / p.name)
    return out
