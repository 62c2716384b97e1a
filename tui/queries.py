"""What the screens ask the store: each question one query of the SQL modules
`tracekit/sql/tui/` (`tui.timeline`, `tui.collectives`, `tui.ops`, `tui.memory`,
`tui.regions`, their columns documented there), run on the screens' connection (`Db`),
shaped for the screen.

No Textual and no session state here: the session (`tui.session`) keeps the run, the
report and the caches, and hands its `Db` to these functions.
"""

from __future__ import annotations

import threading
from typing import Any

from tracekit import sql
from tui.frame import Frame, fold


class Db:
    """The screens' DuckDB cursor behind one lock (a cursor is not safe to share between
    threads, and the screens query from workers)."""

    def __init__(self, cur: Any, lock: threading.RLock) -> None:
        self.cur = cur
        self.lock = lock

    def query(self, text: str, params: dict | list | None = None) -> tuple[list[str], list]:
        with self.lock:
            rel = self.cur.sql(text, params=params) if params is not None else self.cur.sql(text)
            return list(rel.columns), rel.fetchall()

    def rows(self, text: str, params: dict | list | None = None) -> list[dict]:
        cols, rows = self.query(text, params)
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def named(self, name: str, params: dict | None = None, **parts: str) -> list[tuple]:
        """The rows of query `name` (`tui.timeline:frame`), placeholders filled."""
        module, query_name = name.split(":")
        return self.query(sql.query(module, query_name, **parts), params)[1]

    def named_rows(self, name: str, params: dict | None = None, **parts: str) -> list[dict]:
        module, query_name = name.split(":")
        return self.rows(sql.query(module, query_name, **parts), params)


def rank_in(ranks: list[int]) -> str:
    """The `{ranks}` predicate: `rank IN (0, 1)` (ints, so nothing to bind), TRUE for
    every rank."""
    return f"rank IN ({', '.join(str(int(r)) for r in ranks)})" if ranks else "TRUE"


def _pat(highlight: str | None) -> str | None:
    return f"%{highlight}%" if highlight else None


# timeline --------------------------------------------------------------------------
def lanes(db: Db, ranks: list[int]) -> dict[int, list]:
    """Streams / threads with device activity, per rank (every rank of `ranks` listed)."""
    out: dict[int, list] = {r: [] for r in ranks}
    for rank, lane in db.named("tui.timeline:lanes"):
        out.setdefault(rank, []).append(lane)
    return out


def step_windows(db: Db) -> dict[int, list[tuple[int, int, int]]]:
    """(step, start, end) per rank."""
    out: dict[int, list] = {}
    for rank, step, ts, end in db.named("tui.timeline:step_windows"):
        out.setdefault(rank, []).append((step, ts, end))
    return out


def activity_span(db: Db, ranks: list[int]) -> tuple[int, int]:
    """The span of the ranks' device activity (the traces' when there is none)."""
    ((t0, t1),) = db.named("tui.timeline:device_span", ranks=rank_in(ranks))
    if t0 is None:
        ((t0, t1),) = db.named("tui.timeline:trace_span")
    return int(t0), int(max(t1, t0 + 1))


def frame(
    db: Db,
    lanes: list[tuple[int, Any]],
    t0: int,
    t1: int,
    ncols: int,
    min_dur_ns: int = 0,
    highlight: str | None = None,
) -> Frame:
    """Device activity aggregated into `ncols` columns of [t0, t1) for each lane: one
    query, whatever the number of events (each event is split over the columns it
    covers)."""
    t1 = max(t1, t0 + ncols)
    fr = Frame(t0, t1, ncols, lanes)
    if not lanes:
        return fr
    per_stream = any(lane is not None for _, lane in lanes)
    params = {"t0": int(t0), "t1": int(t1), "n": int(ncols), "mind": int(min_dur_ns)}
    rows = db.named(
        "tui.timeline:frame",
        {**params, "pat": _pat(highlight)},
        ranks=rank_in(sorted({r for r, _ in lanes})),
        lane="lane" if per_stream else "NULL",
    )
    return fold(fr, rows)


def event_at(
    db: Db,
    rank: int,
    lane: Any,
    ta: int,
    tb: int,
    min_dur_ns: int = 0,
    highlight: str | None = None,
) -> dict | None:
    """The longest device event of the lane overlapping [ta, tb) (one whose name holds
    `highlight` first), with what the store knows about it: the CPU op that launched
    it, its FLOPs, its collective."""
    params = {"rank": rank, "lane": lane, "ta": int(ta), "tb": int(tb), "mind": int(min_dur_ns)}
    ev = db.named_rows("tui.timeline:event_at", {**params, "pat": _pat(highlight)})
    if not ev:
        return None
    e = ev[0]
    e["rank"] = rank
    e["launched_by"] = None
    e["flops"] = None
    if e["correlation"] is not None:
        launch = db.named_rows("tui.timeline:launch", {"rank": rank, "c": e["correlation"]})
        if launch:
            at = {"rank": rank, "tid": launch[0]["tid"], "t": launch[0]["ts_ns"]}
            op = db.named_rows("tui.timeline:launching_op", at)
            e["launched_by"] = op[0]["name"] if op else launch[0]["runtime"]
            fl = db.named_rows("tui.timeline:launch_flops", at)
            if fl:
                e["flops"] = fl[0]["flops"]
    elif e["kind"] == "cpu_op":
        fl = db.named_rows("tui.timeline:op_flops", {"rank": rank, "t": e["ts_ns"], "n": e["name"]})
        if fl:
            e["flops"] = fl[0]["flops"]
    coll = db.named_rows(
        "tui.timeline:event_collective", {"rank": rank, "t": e["ts_ns"], "lane": e["lane"]}
    )
    e["collective"] = coll[0] if coll else None
    return e


def next_event(
    db: Db,
    rank: int,
    lane: Any,
    after_ns: int,
    min_dur_ns: int = 0,
    highlight: str | None = None,
    backwards: bool = False,
) -> tuple[int, int] | None:
    """(start, end) of the next (previous) event on the lane after (before) a time."""
    params = {"rank": rank, "lane": lane, "t": int(after_ns), "mind": int(min_dur_ns)}
    name = "tui.timeline:previous_event" if backwards else "tui.timeline:next_event"
    rows = db.named(name, {**params, "pat": _pat(highlight)})
    return (int(rows[0][0]), int(rows[0][1])) if rows else None


# collectives, ops, memory ------------------------------------------------------------
def collective_skew(db: Db) -> dict[tuple[str, Any], dict]:
    """Mean and max skew of matched instances, per (collective, bytes)."""
    return {
        (name, nbytes): {"mean_skew_ns": mean_skew, "max_skew_ns": max_skew, "n": n}
        for name, nbytes, mean_skew, max_skew, n in db.named("tui.collectives:skew")
    }


def collective_instances(db: Db, name: str, nbytes: Any, limit: int = 400) -> list[dict]:
    """Each instance of one collective across ranks: arrival relative to the first
    rank, time waited for the last, the last rank marked."""
    params = {"name": name, "bytes": nbytes, "lim": limit}
    return db.named_rows("tui.collectives:instances", params)


def longest_collective(db: Db, rank: int, name: str, lo: int | None, hi: int | None) -> dict | None:
    """The rank's instance of the collective that kept it longest past its wait,
    starting in [lo, hi) when given: where a finding's jump puts the timeline."""
    params = {"rank": rank, "name": name, "lo": lo, "hi": hi}
    rows = db.named_rows("tui.collectives:longest", params)
    return rows[0] if rows else None


def op_kernels(db: Db, name: str, limit: int = 200) -> list[dict]:
    """The kernels an op launched (GPU runs)."""
    return db.named_rows("tui.ops:kernels", {"name": name, "lim": limit})


def memory_series(db: Db, ncols: int) -> dict[int, dict[str, list]]:
    """Peak allocated / reserved per column of the run's span, per rank."""
    ((t0, t1, n),) = db.named("tui.memory:span")
    if not n:
        return {}
    t1 = max(t1, t0 + ncols)
    out: dict[int, dict[str, list]] = {}
    for rank, col, alloc, resv in db.named("tui.memory:series", {"t0": t0, "t1": t1, "n": ncols}):
        d = out.setdefault(rank, {"allocated": [None] * ncols, "reserved": [None] * ncols})
        if 0 <= col < ncols:
            d["allocated"][col] = alloc
            d["reserved"][col] = resv
    for d in out.values():
        d.update({"t0": t0, "t1": t1})  # type: ignore[arg-type]
    return out


def profile_memory(db: Db) -> dict[int, bool]:
    """Per rank, whether its trace was recorded with profile_memory=True."""
    return dict(db.named("tui.memory:profile_memory"))


# regions ---------------------------------------------------------------------------
def region_first(db: Db, rank: int, path: list[str], from_ns: int) -> dict | None:
    """The region's first occurrence on the rank at or after `from_ns`: {ts_ns, step}."""
    rows = db.named_rows(
        "tui.regions:first", {"rank": rank, "path": list(path), "from_ns": from_ns}
    )
    return rows[0] if rows else None


def region_ops(db: Db, path: list[str]) -> list[dict]:
    """The CPU ops that ran inside the region, heaviest first: {name, n, cpu_ns}."""
    return db.named_rows("tui.regions:ops", {"path": list(path)})
