"""The step model's inputs read from the run as columns: the host's top-level events, the
device work with its launch (both built at ingest, or by the store where the ingest left
them out, `rank.step_host`, `rank.step_device`, and clipped here to the windows), the
steps, the data loader's fetches.

Times are made relative to the graph's origin here: ns since the epoch (~1.8e18) are
beyond a float's exact integers (2^53), and the replay adds floats."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from tracekit import sql

DEV_TIMES = (2, 3, 8, 9)  # the device query's columns in ns since the epoch
HOST_TIMES = (2, 3, 6, 7)  # the host query's


class Columns(list):
    """A query's columns as Python lists (`columns`), with the numpy arrays they came from
    in `arrays` (masked where a column holds NULLs): the build's vectorised steps read
    those, its per-node loops the lists."""

    arrays: list[np.ndarray]


def columns(con, query: str, origin: int, times: tuple[int, ...]) -> Columns:
    """The query's result as one Python list per column (NULL: None), the columns
    `times` (ns since the epoch) less `origin`: as `fetchall` would give them, transposed,
    built from DuckDB's numpy result."""
    cols, arrays = Columns(), []
    for k, v in enumerate(con.sql(query).fetchnumpy().values()):
        if k in times:
            v = v - origin
        arrays.append(v)
        cols.append(v.tolist())
    cols.arrays = arrays
    return cols


def device(con, windows: str, origin: int) -> Columns:
    """`stepmodel.graph:device`'s columns (times less `origin`)."""
    return columns(con, sql.query("stepmodel.graph", "device", windows=windows), origin, DEV_TIMES)


def host(con, windows: str, origin: int) -> list[list]:
    """The top-level host events of each thread in its window, as columns (`top_level`'s):
    from `step_host` (grouped at ingest over the whole trace); the ranks where a group
    crosses a window edge (`stepmodel.graph:host_cut`) grouped again from their window's
    events alone, as the window sees them."""
    cols = columns(con, sql.query("stepmodel.graph", "host", windows=windows), origin, HOST_TIMES)
    cut = con.sql(sql.query("stepmodel.graph", "host_cut", windows=windows)).fetchall()
    if not cut:
        return cols
    keep = {r for (r,) in cut}
    mine = [k for k, r in enumerate(cols[0]) if r not in keep]
    cols = [[c[k] for k in mine] for c in cols]
    ranks = ", ".join(str(int(r)) for r in sorted(keep))
    again = top_level(
        con.sql(
            sql.query(
                "stepmodel.graph",
                "host_events",
                windows=f"SELECT * FROM ({windows}) WHERE rank IN ({ranks})",
            )
        ),
        origin,
    )
    # each source in (rank, thread, order); their ranks apart: a stable sort by
    # (rank, thread) interleaves them as one query would have
    order = np.lexsort(
        (np.array(cols[1] + again[1], np.int64), np.array(cols[0] + again[0], np.int64))
    ).tolist()
    return [[(a + b)[k] for k in order] for a, b in zip(cols, again, strict=True)]


def top_level(rel, origin: int) -> list[list]:
    """The top-level host events of each thread (`stepmodel.graph:host_events`' rows, in
    each thread's time order, the outer first), as columns: rank, tid, start, end, name
    (those of its top-level event), and of the blocking call inside it that started last
    (None without one): its name, start and end, and the stream it waited for (of the last
    one that names a stream). Times less `origin`. `rank.step_host` groups them so at
    ingest, over the whole trace.

    An event is top-level where it starts at or after the end of every earlier event of
    its thread; the events after it, up to the next top-level one, are inside it."""
    c = rel.fetchnumpy()
    rank, tid, name, sync = c["rank"], c["tid"], c["name"], np.asarray(c["is_sync"], bool)
    ts = np.asarray(c["ts_ns"], np.int64) - origin
    end = np.asarray(c["end_ns"], np.int64) - origin
    stream = np.ma.asarray(c["sync_stream"])
    n = len(ts)
    new = np.ones(n, bool)  # a thread's first event
    new[1:] = (rank[1:] != rank[:-1]) | (tid[1:] != tid[:-1])
    top = new.copy()
    bounds = np.append(np.flatnonzero(new), n)
    for a, b in pairwise(bounds):  # one thread: its cover so far
        cover = np.maximum.accumulate(end[a:b])
        top[a + 1 : b] = ts[a + 1 : b] >= cover[:-1]
    first = np.flatnonzero(top)
    group = np.cumsum(top) - 1  # each event's top-level event, as a group index
    out_name = [None] * len(first)
    out_ts, out_end, out_stream = list(out_name), list(out_name), list(out_name)

    def last_of(rows):  # the last row of `rows` (ascending) in each group: (group, row)
        g = group[rows]
        keep = np.ones(len(rows), bool)
        keep[:-1] = g[1:] != g[:-1]
        return g[keep].tolist(), rows[keep]

    k, rows = last_of(np.flatnonzero(sync))
    for j, x, t, e in zip(k, name[rows].tolist(), ts[rows].tolist(), end[rows].tolist(),
                          strict=True):  # fmt: skip
        out_name[j], out_ts[j], out_end[j] = x, t, e
    k, rows = last_of(np.flatnonzero(sync & ~np.ma.getmaskarray(stream)))
    for j, x in zip(k, stream[rows].tolist(), strict=True):
        out_stream[j] = x
    return [
        rank[first].tolist(),
        tid[first].tolist(),
        ts[first].tolist(),
        end[first].tolist(),
        name[first].tolist(),
        out_name,
        out_ts,
        out_end,
        out_stream,
    ]
