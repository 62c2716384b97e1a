"""The TUI's data layer: the run, its report, and the queries the screens make.

No Textual here: the screens call these from workers, the benchmark and the tests call
them directly. Every figure shown as the report's comes from
`diagnosers.report.full_report` (what `tracekit analyze --format json` prints); the
drill-down queries read the store's documented views. One lock serialises the DuckDB
connection, which is not safe to share between threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tracekit.errors import TracekitError
from tracekit.options import AnalysisOptions, OpenOptions

CATEGORIES = ("compute", "communication", "memcpy", "memset", "host_wait")


@dataclass
class Frame:
    """One timeline viewport aggregated to columns.

    `cover[lane][category]` is a list of ns of that category in each column (summed over
    the lane's streams, so it may exceed the column on a busy multi-stream rank);
    `hits[lane]` is a set of columns holding an event whose name matches the highlight."""

    t0: int
    t1: int
    ncols: int
    lanes: list[tuple[int, Any]]
    cover: dict[tuple[int, Any], dict[str, list[int]]] = field(default_factory=dict)
    hits: dict[tuple[int, Any], set[int]] = field(default_factory=dict)

    @property
    def col_ns(self) -> float:
        return (self.t1 - self.t0) / self.ncols


class Session:
    """A run opened for the TUI: `load()` ingests and builds the report (slow; call it
    from a worker), the other methods are the screens' queries."""

    def __init__(
        self,
        inputs: list[str | Path],
        options: AnalysisOptions | None = None,
        open_options: OpenOptions | None = None,
        display_path: str | None = None,
        workers: int | None = None,
    ):
        self.inputs = [str(p) for p in inputs]
        self.options = options or AnalysisOptions()
        self.window = self.options.window
        self.steps = self.options.steps
        self.open_options = open_options or OpenOptions()
        if workers is not None:
            self.open_options = replace(self.open_options, workers=workers)
        self.display_path = display_path or " ".join(self.inputs)
        self.run = None
        self.report: dict[str, Any] = {}
        self.report_error: str | None = None
        self.lock = threading.RLock()  # the screens' connection
        self.run_lock = threading.RLock()  # the run's own (diagnosers, SQL console)
        self.cur = None
        self._lanes: dict[int, list] | None = None
        self._windows: dict[int, list[tuple[int, int, int]]] | None = None
        self._context = None  # the diagnosers' Context of the what-ifs (its step model)

    # loading ---------------------------------------------------------------------
    def open(self, progress: Callable[[str], None] = lambda _msg: None) -> None:
        """Ingest what the cache lacks and open the store; the report so far is the run's
        facts (`tracekit.report.run_info`), enough for the timeline and the SQL console."""
        from tracekit.report.runinfo import run_info
        from tracekit.report.schema import to_dict
        from tracekit.store.open import open_run

        if self.run is not None:  # opened already (the tests share one session)
            return
        # the ingest's own progress bar would draw over the screen; the app shows progress
        os.environ["TRACEKIT_NO_PROGRESS"] = "1"
        progress(f"ingesting {self.display_path} …")
        self.run = open_run(*self.inputs, options=self.open_options)
        # the screens' queries get their own connection to the same database, so they
        # run while the diagnosers hold the run's (one lock per connection)
        self.cur = self.run.con.cursor()
        with self.run_lock:
            self.report = {"run": to_dict(run_info(self.run)), "window": {"kind": self.window}}

    @property
    def diagnosed(self) -> bool:
        return "ranks" in self.report

    def diagnose(self) -> None:
        """The full report, as `tracekit analyze --format json` builds it."""
        if self.diagnosed:
            return
        from diagnosers import assemble
        from tracekit.report.schema import to_dict

        with self.run_lock:
            try:
                rep = assemble.cached(self.run, self.options)
            except TracekitError:
                raise
            except Exception as exc:  # a diagnoser bug must not stop the drill-down
                self.report_error = f"{type(exc).__name__}: {exc}"
                rep = assemble.analyze(self.run, self.options.with_(levels=False))
        self.report = to_dict(rep)

    def load(self, progress: Callable[[str], None] = lambda _msg: None) -> None:
        self.open(progress)
        progress("running the diagnosers …")
        self.diagnose()

    def close(self) -> None:
        if self.run is not None:
            with self.lock, self.run_lock:
                if self.cur is not None:
                    self.cur.close()
                self.run.close()

    # plain queries ----------------------------------------------------------------
    def query(self, sql: str, params: dict | list | None = None) -> tuple[list[str], list[tuple]]:
        with self.lock:
            rel = self.cur.sql(sql, params=params) if params is not None else self.cur.sql(sql)
            return list(rel.columns), rel.fetchall()

    def user_query(self, sql: str, limit: int = 5000) -> tuple[list[str], list[tuple], int]:
        """The SQL console: the same read-only rule as `tracekit query`."""
        with self.run_lock:
            rel = self.run.readonly_sql(sql)
            cols = list(rel.columns)
            rows = rel.limit(limit + 1).fetchall()
        more = len(rows) > limit
        return cols, rows[:limit], more

    def rows(self, sql: str, params: dict | list | None = None) -> list[dict]:
        cols, rows = self.query(sql, params)
        return [dict(zip(cols, r, strict=True)) for r in rows]

    @property
    def ranks(self) -> list[int]:
        return list(self.report.get("run", {}).get("ranks", []))

    @property
    def steps_list(self) -> list[int]:
        return list(self.report.get("run", {}).get("steps", []))

    def views(self) -> dict[str, Any]:
        from tracekit.sql import docs

        return docs()

    # timeline ---------------------------------------------------------------------
    def lanes(self) -> dict[int, list]:
        """Streams / threads with device activity, per rank."""
        if self._lanes is None:
            out: dict[int, list] = {r: [] for r in self.ranks}
            for rank, lane in self.query(
                "SELECT DISTINCT rank, lane FROM device_activity ORDER BY rank, lane"
            )[1]:
                out.setdefault(rank, []).append(lane)
            self._lanes = out
        return self._lanes

    def step_windows(self) -> dict[int, list[tuple[int, int, int]]]:
        """(step, start, end) per rank."""
        if self._windows is None:
            out: dict[int, list] = {}
            for rank, step, ts, end in self.query(
                "SELECT rank, step, ts_ns, end_ns FROM steps ORDER BY rank, step"
            )[1]:
                out.setdefault(rank, []).append((step, ts, end))
            self._windows = out
        return self._windows

    def step_span(self, step: int | None, ranks: list[int] | None = None) -> tuple[int, int]:
        """The time span of ProfilerStep `step` over the ranks (the whole trace's device
        activity when the run has no steps)."""
        ranks = ranks or self.ranks
        spans = [
            (ts, end)
            for r in ranks
            for s, ts, end in self.step_windows().get(r, [])
            if step is None or s == step
        ]
        if step is not None and spans:
            return min(s for s, _ in spans), max(e for _, e in spans)
        where = f"WHERE rank IN ({', '.join(str(int(r)) for r in ranks)})" if ranks else ""
        _, rows = self.query(f"SELECT min(ts_ns), max(end_ns) FROM device_activity {where}")
        t0, t1 = rows[0]
        if t0 is None:
            _, rows = self.query("SELECT min(trace_start_ns), max(trace_end_ns) FROM rank_info")
            t0, t1 = rows[0]
        return int(t0), int(max(t1, t0 + 1))

    def frame(
        self,
        lanes: list[tuple[int, Any]],
        t0: int,
        t1: int,
        ncols: int,
        min_dur_ns: int = 0,
        highlight: str | None = None,
    ) -> Frame:
        """Aggregate device activity into `ncols` columns of [t0, t1) for each lane: one
        SQL query, whatever the number of events (each event is split over the columns it
        covers)."""
        t1 = max(t1, t0 + ncols)
        fr = Frame(t0, t1, ncols, lanes)
        if not lanes:
            return fr
        ranks = sorted({r for r, _ in lanes})
        per_stream = any(lane is not None for _, lane in lanes)
        lane_expr = "lane" if per_stream else "NULL"
        pat = f"%{highlight}%" if highlight else None
        sql = f"""
        WITH a AS (
            SELECT rank, {lane_expr} AS lane, category, name,
                   greatest(ts_ns, $t0) AS s, least(end_ns, $t1) AS e
            FROM device_activity
            WHERE rank IN ({", ".join(str(int(r)) for r in ranks)})
              AND end_ns > $t0 AND ts_ns < $t1 AND dur_ns >= $mind
        ), c AS (
            SELECT *, unnest(range(
                ((s - $t0) * $n // ($t1 - $t0))::BIGINT,
                ((greatest(e, s + 1) - 1 - $t0) * $n // ($t1 - $t0))::BIGINT + 1)) AS col
            FROM a
        )
        SELECT rank, lane, category, col,
               sum(least(e, $t0 + (col + 1) * ($t1 - $t0) // $n)
                   - greatest(s, $t0 + col * ($t1 - $t0) // $n))::BIGINT AS ns,
               coalesce(bool_or(name ILIKE $pat), false) AS hit
        FROM c GROUP BY ALL
        """
        params = {"t0": int(t0), "t1": int(t1), "n": int(ncols), "mind": int(min_dur_ns)}
        params["pat"] = pat
        _, rows = self.query(sql, params)
        wanted = set(lanes)
        for rank, lane, cat, col, ns, hit in rows:
            key = (rank, lane)
            if key not in wanted or not 0 <= col < ncols:
                continue
            cov = fr.cover.setdefault(key, {})
            arr = cov.get(cat)
            if arr is None:
                arr = cov[cat] = [0] * ncols
            arr[col] += max(0, ns)
            if hit:
                fr.hits.setdefault(key, set()).add(col)
        return fr

    def event_at(
        self,
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
        lane_sql = "" if lane is None else "AND lane = $lane"
        params = {"rank": rank, "ta": int(ta), "tb": int(tb), "mind": int(min_dur_ns)}
        params["pat"] = f"%{highlight}%" if highlight else None
        if lane is not None:
            params["lane"] = lane
        ev = self.rows(
            f"""SELECT category, kind, name, lane, correlation, ts_ns, dur_ns, end_ns
            FROM device_activity WHERE rank = $rank {lane_sql}
              AND end_ns > $ta AND ts_ns < $tb AND dur_ns >= $mind
            ORDER BY coalesce(name ILIKE $pat, false) DESC, dur_ns DESC, ts_ns LIMIT 1""",
            params,
        )
        if not ev:
            return None
        e = ev[0]
        e["rank"] = rank
        e["launched_by"] = None
        e["flops"] = None
        if e["correlation"] is not None:
            launch = self.rows(
                """SELECT r.tid, r.ts_ns, r.name AS runtime FROM events r
                WHERE r.rank = $rank AND r.kind = 'runtime' AND r.correlation = $c LIMIT 1""",
                {"rank": rank, "c": e["correlation"]},
            )
            if launch:
                op = self.rows(
                    """SELECT name, ts_ns, dur_ns FROM events
                    WHERE rank = $rank AND kind = 'cpu_op' AND tid = $tid
                      AND ts_ns <= $t AND ts_ns + dur_ns >= $t
                    ORDER BY ts_ns DESC, dur_ns LIMIT 1""",
                    {"rank": rank, "tid": launch[0]["tid"], "t": launch[0]["ts_ns"]},
                )
                e["launched_by"] = op[0]["name"] if op else launch[0]["runtime"]
                fl = self.rows(
                    """SELECT name, flops FROM op_flops WHERE rank = $rank AND tid = $tid
                      AND ts_ns <= $t AND ts_ns + dur_ns >= $t LIMIT 1""",
                    {"rank": rank, "tid": launch[0]["tid"], "t": launch[0]["ts_ns"]},
                )
                if fl:
                    e["flops"] = fl[0]["flops"]
        elif e["kind"] == "cpu_op":
            fl = self.rows(
                """SELECT flops FROM op_flops WHERE rank = $rank AND ts_ns = $t AND name = $n
                LIMIT 1""",
                {"rank": rank, "t": e["ts_ns"], "n": e["name"]},
            )
            if fl:
                e["flops"] = fl[0]["flops"]
        coll = self.rows(
            """SELECT name, issue_name, bytes, group_size, pg_name, pg_desc, wait_ns, ranks_matched
            FROM collectives WHERE rank = $rank AND ts_ns = $t AND lane = $lane LIMIT 1""",
            {"rank": rank, "t": e["ts_ns"], "lane": e["lane"]},
        )
        e["collective"] = coll[0] if coll else None
        return e

    def next_event(
        self,
        rank: int,
        lane: Any,
        after_ns: int,
        min_dur_ns: int = 0,
        highlight: str | None = None,
        backwards: bool = False,
    ) -> tuple[int, int] | None:
        """(start, end) of the next (previous) event on the lane after (before) a time."""
        lane_sql = "" if lane is None else "AND lane = $lane"
        name_sql = "AND name ILIKE $pat" if highlight else ""
        cmp, order = ("<", "DESC") if backwards else (">", "")
        params: dict[str, Any] = {"rank": rank, "t": int(after_ns), "mind": int(min_dur_ns)}
        if lane is not None:
            params["lane"] = lane
        if highlight:
            params["pat"] = f"%{highlight}%"
        _, rows = self.query(
            f"""SELECT ts_ns, end_ns FROM device_activity WHERE rank = $rank {lane_sql}
            AND ts_ns {cmp} $t AND dur_ns >= $mind {name_sql} ORDER BY ts_ns {order} LIMIT 1""",
            params,
        )
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    # the step model -----------------------------------------------------------------
    def path_spans(self) -> list[tuple[dict, int, int]]:
        """The report's critical path segments with their (start, end) on the store's
        clock — the Perfetto export's mapping (`critical_path_spans`)."""
        from tracekit.report.export import critical_path_spans

        return critical_path_spans(self.report)

    def step_of(self, rank: int, t_ns: int) -> tuple[int, int] | None:
        """(step, its start) of the rank's ProfilerStep that holds the instant (None:
        none does)."""
        for step, ts, end in self.step_windows().get(rank, []):
            if ts <= t_ns < end:
                return step, ts
        return None

    def what_if(self, specs: list[str]):
        """The run's step model replayed with the changes `specs` — `tracekit whatif`'s
        path (`diagnosers.analyses.stepmodel.what_if` over a Context of the run, with the
        report's options); the Context, and so the step model it builds, is kept for the
        session. A change that is not one, or does not apply, raises TracekitError (its
        message is the CLI's line)."""
        from diagnosers.analyses.stepmodel import what_if
        from diagnosers.context import Context
        from tracekit.stepmodel.changes import parse

        for spec in specs:  # a change that is not one fails before the model is built
            parse(spec)
        with self.run_lock:
            if self._context is None:
                self.run.materialize()
                self._context = Context(self.run, self.options)
            return what_if(self._context, list(specs))

    # collectives, ops, memory -------------------------------------------------------
    def collective_skew(self) -> dict[tuple[str, Any], dict]:
        """Mean and max skew of matched instances, per (collective, bytes)."""
        out = {}
        for name, nbytes, mean_skew, max_skew, n in self.query(
            """SELECT name, bytes, avg(skew_ns), max(skew_ns), count(*)
            FROM collective_instances GROUP BY ALL"""
        )[1]:
            out[(name, nbytes)] = {"mean_skew_ns": mean_skew, "max_skew_ns": max_skew, "n": n}
        return out

    def collective_instances(self, name: str, nbytes: Any, limit: int = 400) -> list[dict]:
        """Each instance of one collective across ranks: arrival relative to the first
        rank, time waited for the last, the last rank marked."""
        bytes_sql = "c.bytes IS NULL" if nbytes is None else "c.bytes = $bytes"
        params: dict[str, Any] = {"name": name, "lim": limit}
        if nbytes is not None:
            params["bytes"] = nbytes
        return self.rows(
            f"""SELECT c.instance_key, c.occurrence, c.rank, c.ts_ns, c.dur_ns,
                   c.ts_ns - i.first_start_ns AS arrival_ns, c.wait_ns,
                   i.last_rank = c.rank AND c.ranks_matched > 1 AS last, i.skew_ns,
                   i.transfer_ns
            FROM collectives c JOIN collective_instances i USING (instance_key)
            WHERE c.name = $name AND {bytes_sql}
            ORDER BY c.occurrence, c.rank LIMIT $lim""",
            params,
        )

    def op_kernels(self, name: str, limit: int = 200) -> list[dict]:
        """The kernels an op launched (GPU runs): launches on the op's thread within the
        op's span, joined to kernels by correlation — as `op_flops` counts them."""
        return self.rows(
            """WITH o AS (SELECT rank, tid, ts_ns, ts_ns + dur_ns AS end_ns FROM events
                         WHERE kind = 'cpu_op' AND name = $name)
            SELECT k.name, count(*) AS launches, sum(k.dur_ns) AS total_ns,
                   avg(k.dur_ns) AS mean_ns, min(k.stream) AS stream
            FROM o JOIN events r ON r.rank = o.rank AND r.tid = o.tid AND r.kind = 'runtime'
                 AND r.ts_ns >= o.ts_ns AND r.ts_ns <= o.end_ns
            JOIN events k ON k.rank = r.rank AND k.correlation = r.correlation
                 AND k.kind IN ('kernel', 'memcpy', 'memset')
            GROUP BY k.name ORDER BY total_ns DESC LIMIT $lim""",
            {"name": name, "lim": limit},
        )

    def memory_series(self, ncols: int) -> dict[int, dict[str, list]]:
        """Peak allocated / reserved per column of the run's span, per rank."""
        _, rows = self.query("SELECT min(ts_ns), max(ts_ns), count(*) FROM memory")
        t0, t1, n = rows[0]
        if not n:
            return {}
        t1 = max(t1, t0 + ncols)
        out: dict[int, dict[str, list]] = {}
        for rank, col, alloc, resv in self.query(
            """SELECT rank, ((ts_ns - $t0) * $n // ($t1 - $t0 + 1))::BIGINT AS col,
                   max(total_allocated), max(total_reserved)
            FROM memory GROUP BY ALL ORDER BY rank, col""",
            {"t0": t0, "t1": t1, "n": ncols},
        )[1]:
            d = out.setdefault(rank, {"allocated": [None] * ncols, "reserved": [None] * ncols})
            if 0 <= col < ncols:
                d["allocated"][col] = alloc
                d["reserved"][col] = resv
        out_span = {"t0": t0, "t1": t1}
        for d in out.values():
            d.update(out_span)  # type: ignore[arg-type]
        return out


def evidence(finding: dict) -> dict[str, list]:
    """Where a finding points: ranks, steps, collectives and ops named in it (its
    `details` are walked generically, so new detail keys are found too)."""
    ev: dict[str, list] = {"ranks": list(finding.get("ranks") or []), "steps": []}
    ev["collectives"] = []
    ev["ops"] = []

    def walk(x: Any, key: str = "") -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("name", "op") and isinstance(v, str) and "op" in key:
                    ev["ops"].append(v)
                elif (k in ("name",) and isinstance(v, str) and "coll" in key) or (
                    "collective" in k and isinstance(v, str)
                ):
                    ev["collectives"].append(v)
                elif k in ("step", "steps") and isinstance(v, int | list):
                    ev["steps"].extend(v if isinstance(v, list) else [v])
                else:
                    walk(v, k)
        elif isinstance(x, list):
            for v in x:
                walk(v, key)

    walk(finding.get("details") or {})
    for k in ev:
        seen: list = []
        for v in ev[k]:
            if v not in seen:
                seen.append(v)
        ev[k] = seen
    return ev
