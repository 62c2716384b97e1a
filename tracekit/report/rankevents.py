"""Each rank's traced events for the merged trace: read once a file (a merged file's
ranks apart), moved onto one clock and the rank's pids (rank × 10⁸), and its processes
named "rank N" (the host) and "rank N - <device or name>"."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from tracekit.ingest.tracefile import decode
from tracekit.store.run import Run

PID_OFFSET = 100_000_000  # TraceFusion's per-rank pid offset (tracekit.ingest.tables)
_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
_PER_RANK = ("distributedInfo", "distributedInfoByRank", "baseTimeNanoseconds", "trace_id")


def rank_events(run: Run, top: dict[str, Any]) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
    """(rank, base ns of its ts, its events) per rank, each file read once; `top` gets
    the first trace's header (device properties, schema version …), less what is per rank."""
    by_path: dict[Path, list[int]] = defaultdict(list)
    for s in run.sources:
        by_path[s.path].append(s.rank)
    for path, ranks in by_path.items():
        header, raw = decode(path)
        if isinstance(header.distributedInfo, dict) and len(ranks) == 1:
            top.setdefault("distributedInfoByRank", {})[str(ranks[0])] = header.distributedInfo
        elif isinstance(header.distributedInfoByRank, dict):  # a tracekit export, re-exported
            top.setdefault("distributedInfoByRank", {}).update(header.distributedInfoByRank)
        if "traceEvents" not in top:
            top["traceEvents"] = None  # the first header is kept; the events come later
            top.update(
                {
                    k: v
                    for k in header.__struct_fields__
                    if k not in _PER_RANK and (v := getattr(header, k)) is not None
                }
            )
        events = msgspec.json.decode(raw) if not isinstance(raw, list) else raw
        base = header.baseTimeNanoseconds or 0
        if len(ranks) == 1:
            yield ranks[0], base, events
            continue
        split: dict[int, list] = defaultdict(list)  # a merged file: its ranks apart
        for ev in events:
            args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            r = args.get("rank")
            if not isinstance(r, int):
                pid = ev.get("pid")
                r = pid // PID_OFFSET if isinstance(pid, int) else None
            if r in ranks:
                if isinstance(ev.get("pid"), int) and r:
                    ev["pid"] -= r * PID_OFFSET
                split[r].append(ev)
        for r in ranks:
            yield r, base, split[r]


def ts_us(ns: int) -> float:
    """µs since the trace's zero; exact to the ns (a double holds 3 decimals of µs for
    traces shorter than ~100 days)."""
    return ns / 1000


def rank_part(rank: int, base: int, events: list[dict], zero: int, offset: int) -> list[dict]:
    """One rank's events on the merged clock and pids, and its processes named: the one
    that holds the ProfilerSteps (else the most host events) is "rank N", every other
    "rank N - <its name, labels or pid>" (a GPU, Kineto's "Spans" …)."""
    out: list[dict] = []
    names: dict[Any, str] = {}
    labels: dict[Any, str] = {}
    original: dict[Any, Any] = {}
    steps: dict[Any, int] = defaultdict(int)
    host: dict[Any, int] = defaultdict(int)
    device: set = set()
    for ev in events:
        if not isinstance(ev, dict):
            continue
        pid = orig_pid = ev.get("pid")
        if isinstance(pid, int) and not isinstance(pid, bool) and 0 <= pid < PID_OFFSET:
            pid = rank * PID_OFFSET + pid
        elif pid is not None:
            pid = f"rank {rank} - {pid}"
        ev["pid"] = pid
        original[pid] = orig_pid
        args = ev.get("args")
        if not isinstance(args, dict):
            args = ev["args"] = {} if args is None else {"value": args}
        args["rank"] = rank
        if ev.get("ph") == "M":
            ev["ts"] = 0
            if ev.get("name") == "process_name":
                names[pid] = str(args.get("name") or "").strip()
                continue  # renamed below
            if ev.get("name") == "process_sort_index":
                continue  # ordered by rank below
            if ev.get("name") == "process_labels":
                labels[pid] = str(args.get("labels") or "").strip()
        else:
            ts = ev.get("ts")
            if isinstance(ts, int | float) and not isinstance(ts, bool):
                whole = int(ts // 1)
                ns = whole * 1000 + round((ts - whole) * 1000) + base - offset - zero
                ev["ts"] = ts_us(ns)
            if str(ev.get("name", "")).startswith("ProfilerStep#"):
                steps[pid] += 1
            elif str(ev.get("cat", "")).lower() in ("cpu_op", "user_annotation", "operator"):
                host[pid] += 1
            elif str(ev.get("cat", "")).lower() in _DEVICE_CATS:
                device.add(pid)
        out.append(ev)
    pids = sorted((p for p in original if p is not None), key=str)
    main = max(pids, key=lambda p: (steps[p], host[p]), default=None)
    for i, pid in enumerate(pids):
        what = (labels.get(pid) if labels.get(pid) not in (None, "", "CPU") else None) or names.get(
            pid
        )
        what = what or (f"GPU {original[pid]}" if pid in device else f"pid {original[pid]!s}")
        name = f"rank {rank}" if pid == main else f"rank {rank} - {what}"
        sort = rank * 1000 + (0 if pid == main else i + 1)
        out.append(
            {"ph": "M", "name": "process_name", "pid": pid, "ts": 0,
             "args": {"name": name, "rank": rank}}
        )  # fmt: skip
        out.append(
            {"ph": "M", "name": "process_sort_index", "pid": pid, "ts": 0,
             "args": {"sort_index": sort, "rank": rank}}
        )  # fmt: skip
    return out
