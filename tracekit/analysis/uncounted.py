"""Uncounted compute: the device time of compute kernels whose FLOPs tracekit cannot know
and that may carry matmul-class FLOPs — the work MFU counts.

MFU counts the ops of the FLOPs table (tracekit/model/flops.py) whose shapes the trace
gives. MFU is of matmul-class work (GEMM, attention, convolution:
tracekit/model/opclass.py); elementwise, normalization, embedding, optimizer and copy
ops have ~zero model FLOPs, are correctly zero in MFU, and are NOT uncounted. Each
compute kernel is attributed (`levels.compute:kernel_attribution`); it is uncounted
when its cause is

- `graph_replay`: a matmul-class kernel (by kernel name) a CUDA/HIP graph launch
  replayed (`cudaGraphLaunch`, `hipGraphLaunch`): no CPU op above it, so no shapes
  (vLLM/SGLang decode, xDiT, torch.compile's cudagraphs);
- `op_without_formula`: a kernel of an op tracekit has no FLOP formula for, where the
  kernel or the op is matmul-class by name (a GEMM or attention op of a library not in
  the table, e.g. `mylib::fused_attention`);
- `op_without_flops`: any kernel of a table op whose FLOPs the trace cannot give (a
  missing argument: the op's note says which);
- `no_op`: a matmul-class kernel with no launching op in the trace.

The rest of the formula-less time (elementwise, norm, embedding, optimizer, copies, and
graph replays or launcher-less kernels that are not matmul-class) is "not matmul work":
it is summed apart (`other_ms_per_step`, its ops in `other_ops`, which `top_ops` shows
with `uncounted` null) and is in neither part of the fraction's numerator.

`uncounted_compute_fraction` (per rank; summary: mean over ranks) = the uncounted
kernels' device time ÷ the device time of all compute kernels in the window (plain sums,
as `top_kernels`). On CPU runs the ops are the device: (the time of table ops without
FLOPs + the time of matmul-class ops by name that are outside every table op and hold
none, outermost only) ÷ the rank's compute time (`compute_ms`), clamped to [0, 1], for
ops starting in the window; `top_ops` lists those ops, and `top_kernels` stays empty.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracekit import sql
from tracekit.metrics import windows as W
from tracekit.metrics.breakdown import windows_of
from tracekit.model.opclass import is_matmul_kernel, is_matmul_op
from tracekit.report import schema as S

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts

CAUSES = ("graph_replay", "op_without_formula", "op_without_flops", "no_op")
CAUSE_TEXT = {
    "graph_replay": "graph replay (GEMM/attention kernels of a CUDA/HIP graph launch: no op "
    "above them)",
    "op_without_formula": "GEMM/attention/convolution ops without a FLOP formula",
    "op_without_flops": "ops whose FLOPs the trace cannot give",
    "no_op": "GEMM/attention kernels with no launching op",
}
TOP = 10


@dataclass
class UncountedFacts:
    by_rank: dict[int, float | None]  # rank → uncounted_compute_fraction
    fraction: float | None  # mean over ranks
    cause_ms_per_step: dict[str, float] = field(default_factory=dict)  # mean over ranks
    compute_ms_per_step: float | None = None  # compute kernel time, mean over ranks
    top_ops: list[S.UncountedOpRow] = field(default_factory=list)
    top_kernels: list[S.UncountedKernelRow] = field(default_factory=list)
    other_ms_per_step: float = 0.0  # formula-less time that is not matmul work, mean over ranks
    # its ops, most time first, as `top_ops` rows (`uncounted` null: not matmul work)
    other_ops: list[S.OpRow] = field(default_factory=list)

    def share(self, cause: str) -> float:
        """The cause's share of compute kernel time (0 when there is none)."""
        if not self.compute_ms_per_step:
            return 0.0
        return self.cause_ms_per_step.get(cause, 0.0) / self.compute_ms_per_step


def is_uncounted(why: str, op: str | None, kernel: str) -> bool:
    """Whether a kernel of `kernel_attribution` cause `why` counts as uncounted: a table
    op without FLOPs always; otherwise only matmul-class work (module docstring)."""
    if why == "counted":
        return False
    if why == "op_without_flops":
        return True
    if why == "op_without_formula":
        return is_matmul_kernel(kernel) or is_matmul_op(op)
    return is_matmul_kernel(kernel)  # graph_replay, no_op


def facts(ctx: Facts) -> UncountedFacts:
    if ctx.cpu:
        return _cpu(ctx)
    # the per-kernel attribution is rank-local, built at ingest (`rank.kernel_ops`): here
    # it is only clipped to the windows and summed
    windows = W.values(ctx.run, windows_of(ctx.ranks))
    cols = ctx.run.sql(by_kernel_sql(windows)).fetchnumpy()  # each list an int array
    if len(set(cols["key"].tolist())) < len(cols["key"]):  # two (why, op, kernel) share a hash
        cols = ctx.run.sql(by_kernel_sql(windows, exact=True)).fetchnumpy()
    return _sums(_Rows(cols), ctx)


def by_kernel_sql(windows: str, exact: bool = False) -> str:
    """`levels.compute:kernel_attribution_by_kernel` over `windows`, grouped by a hash of
    each kernel's (why, op, kernel), or (`exact`) by the three."""
    key = "(k.why, k.op, k.kernel)" if exact else "hash(k.why, k.op, k.kernel)"
    return sql.query("levels.compute", "kernel_attribution_by_kernel", windows=windows, key=key)


def attribution_sql(windows: str) -> str:
    """`levels.compute:kernel_attribution` over `windows`: a row per rank and kernel."""
    return sql.query("levels.compute", "kernel_attribution", by_kernel=by_kernel_sql(windows))


class _Rows:
    """`kernel_attribution`'s rows as columns in its row order (rank, why, op, kernel):
    numbers as numpy arrays, each text column as codes into its distinct values. Read
    gathered by kernel (`kernel_attribution_by_kernel`, its columns as `fetchnumpy` gives
    them: each list an array): tens of kernel names, not one per row (90,000 rows at
    1,024 ranks)."""

    def __init__(self, by_kernel: dict):
        import numpy as np

        size = [len(r) for r in by_kernel["ranks"]]
        group = np.repeat(np.arange(len(size)), size)
        flat = [
            np.concatenate([np.asarray(r, dtype=np.int64) for r in by_kernel[c]])
            if size else np.zeros(0, dtype=np.int64)
            for c in ("ranks", "ns", "n", "ops")
        ]  # fmt: skip
        # the groups come ordered (why, op, kernel), each rank's list ascending: so
        # ordered by (rank, group) the rows are `kernel_attribution`'s ORDER BY
        order = np.lexsort((group, flat[0])) if len(group) else group
        self.rank, self.ns, self.n, self.ops = (c[order] for c in flat)
        self.text: dict[str, tuple] = {}
        for name in ("why", "op", "kernel"):
            seen: dict = {}
            values = by_kernel[name].tolist()  # nulls (masked) as None
            codes = np.array([seen.setdefault(v, len(seen)) for v in values], dtype=np.int64)
            self.text[name] = ((codes[group] if len(group) else group)[order], list(seen))
        # where each row's note lies: its kernel row and its place in that row's lists
        first = np.cumsum([0, *size[:-1]]) if size else np.zeros(0, dtype=np.int64)
        of = group[order]
        self._at = (by_kernel["notes"], of, order - first[of])

    def note(self, i: int) -> str | None:
        """Row `i`'s note (read where needed: a few rows, not 90,000)."""
        import numpy as np

        notes, group, pos = self._at
        note = notes[group[i]][pos[i]]
        return None if note is np.ma.masked or note is None else str(note)


def _groups(*codes):
    """(the first row of each distinct combination of `codes`, in order of first row; each
    row's group number in that order)."""
    import numpy as np

    key = np.zeros(len(codes[0]), dtype=np.int64)
    for c in codes:
        key = key * (int(c.max()) + 1 if len(c) else 1) + c.astype(np.int64)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(len(order))
    return first[order], rank_of[inv.ravel()]


def _int_sums(groups, size: int, values):
    """Exact integer sums of `values` by group number."""
    import numpy as np

    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, groups, values)
    return out


def _sums(rows: _Rows, ctx: Facts) -> UncountedFacts:
    """The facts from the rows, summed as a loop over them in their order would (`np.bincount`
    and `np.add.accumulate` add in input order, so every float is the loop's)."""
    import numpy as np

    steps = {r.rank: max(r.steps, 1) for r in ctx.ranks}
    n_ranks = max(len(ctx.ranks), 1)
    (why_c, whys), (op_c, ops_), (k_c, kernels_) = (rows.text[c] for c in ("why", "op", "kernel"))
    rank, ns, n, n_ops = rows.rank, rows.ns, rows.n, rows.ops
    # each (why, op, kernel) classified once
    first, g = _groups(why_c, op_c, k_c)
    cls = np.array(
        [
            0 if whys[why_c[i]] == "counted"
            else 2 if is_uncounted(whys[why_c[i]], ops_[op_c[i]], kernels_[k_c[i]])
            else 1
            for i in first
        ],
        dtype=np.int8,
    )[g] if len(first) else np.zeros(0, dtype=np.int8)  # fmt: skip
    ranks_seen, rank_g = np.unique(rank, return_inverse=True)  # sorted, as the rows
    rank_g = rank_g.ravel()
    st = np.array([steps.get(int(r), 1) for r in ranks_seen], dtype=np.float64)[rank_g]
    per_ms = ns / 1e6 / st / n_ranks

    def by_rank_sum(sel) -> dict[int, int]:
        out = np.zeros(len(ranks_seen), dtype=np.int64)
        np.add.at(out, rank_g[sel], ns[sel])
        seen = np.zeros(len(ranks_seen), dtype=bool)
        seen[rank_g[sel]] = True
        return {int(r): int(v) for r, v, k in zip(ranks_seen, out, seen, strict=True) if k}

    total = by_rank_sum(slice(None))
    # not matmul work: summed apart, by op name
    o = np.flatnonzero(cls == 1)
    other_ms = float(np.add.accumulate(per_ms[o])[-1]) if len(o) else 0.0
    other: dict[str | None, dict] = {}
    if len(o):
        o_first, o_g = _groups(op_c[o])
        dev, cnt = _int_sums(o_g, len(o_first), ns[o]), _int_sums(o_g, len(o_first), n_ops[o])
        for j, i in enumerate(o[o_first]):
            name = ops_[op_c[i]] or "(no op)"
            oo = other.setdefault(name, {"name": name, "device_ns": 0, "count": 0})
            oo["device_ns"] += int(dev[j])
            oo["count"] += int(cnt[j])
    # uncounted
    u = np.flatnonzero(cls == 2)
    unc = by_rank_sum(u)
    causes: dict[str, float] = {}
    ops: list[dict] = []
    kernels: list[dict] = []
    if len(u):
        c_first, c_g = _groups(why_c[u])
        sums = np.bincount(c_g, weights=per_ms[u])
        for j, i in enumerate(u[c_first]):
            causes[whys[why_c[i]]] = float(sums[j])
        p_first, p_g = _groups(why_c[u], op_c[u])
        # an op's kernels: the op counted once per rank (its most kernels' ops), then summed
        r_first, r_g = _groups(p_g, rank[u])
        most = np.zeros(len(r_first), dtype=np.int64)
        np.maximum.at(most, r_g, n_ops[u])
        count = _int_sums(p_g[r_first], len(p_first), most)
        dev = _int_sums(p_g, len(p_first), ns[u])
        for j, i in enumerate(u[p_first]):
            ops.append({"name": ops_[op_c[i]] or "(no op)", "why": whys[why_c[i]],
                        "note": rows.note(i), "count": int(count[j]),
                        "device_ns": int(dev[j])})  # fmt: skip
        k_first, k_g = _groups(why_c[u], k_c[u])
        cps = np.bincount(k_g, weights=n[u] / st[u] / n_ranks)
        tms = np.bincount(k_g, weights=per_ms[u])
        for j, i in enumerate(u[k_first]):
            kernels.append({"name": kernels_[k_c[i]], "why": whys[why_c[i]], "op": ops_[op_c[i]],
                            "count_per_step": float(cps[j]),
                            "time_ms_per_step": float(tms[j])})  # fmt: skip
    by_rank = {
        r.rank: (unc.get(r.rank, 0) / total[r.rank] if total.get(r.rank) else None)
        for r in ctx.ranks
    }
    known = [v for v in by_rank.values() if v is not None]
    top_ops = [
        S.UncountedOpRow(
            name=o["name"],
            why=o["why"],
            note=o["note"],
            count=o["count"],
            device_ms=o["device_ns"] / 1e6,
        )
        for o in sorted(ops, key=lambda o: (-o["device_ns"], o["name"], o["why"]))[:TOP]
    ]
    other_ops = [
        _other_op(o["name"], o["count"], o["device_ns"])
        for o in sorted(other.values(), key=lambda o: (-o["device_ns"], o["name"]))[:TOP]
    ]
    top_kernels = [
        S.UncountedKernelRow(**k)
        for k in sorted(kernels, key=lambda k: (-k["time_ms_per_step"], k["name"], k["why"]))[:TOP]
    ]
    compute_ms = (
        sum(ns / 1e6 / steps.get(r, 1) for r, ns in total.items()) / n_ranks if total else None
    )
    return UncountedFacts(
        by_rank=by_rank,
        fraction=sum(known) / len(known) if known else None,
        cause_ms_per_step=causes,
        compute_ms_per_step=compute_ms,
        top_ops=top_ops,
        top_kernels=top_kernels,
        other_ms_per_step=other_ms,
        other_ops=other_ops,
    )


def _other_op(name: str, count: int, device_ns: int) -> S.OpRow:
    """A formula-less op that is not matmul work, as a `top_ops` row: no FLOPs, none
    counted, `uncounted` null."""
    return S.OpRow(name=name, dtype=None, count=count, flops=None, device_ms=device_ns / 1e6,
                   not_counted=count, achieved_tflops=None, op_peak_fraction=None)  # fmt: skip


def _count(found: dict[tuple[str, str], dict], name: str, why: str, note, ns: int) -> None:
    """One more op `name` of cause `why` (its first note kept) in `found`."""
    o = found.setdefault((name, why), {"name": name, "why": why, "note": note, "count": 0, "ns": 0})
    o["count"] += 1
    o["ns"] += ns


def _cpu(ctx: Facts) -> UncountedFacts:
    flops_rows = ctx.run.sql("SELECT rank, tid, ts_ns, ts_ns + dur_ns FROM op_flops").fetchall()
    in_win = W.ops_in("SELECT * FROM op_flops WHERE flops IS NULL", ctx.windows)
    without: dict[int, int] = {}
    found: dict[tuple[str, str], dict] = {}
    for rank, name, note, dur in ctx.run.sql(
        f"SELECT rank, name, flops_note, dur_ns FROM ({in_win})"
    ).fetchall():
        without[rank] = without.get(rank, 0) + dur
        _count(found, name, "op_without_flops", note, dur)
    # matmul-class ops by name outside every table op (innermost table ops on a thread
    # never overlap, so starts and ends are both sorted), outermost only
    table: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for rank, tid, ts, end in sorted(flops_rows, key=lambda r: r[2]):
        starts, ends = table.setdefault((rank, tid), ([], []))
        starts.append(ts)
        ends.append(end)
    names = [
        n for (n,) in ctx.run.sql(
            "SELECT DISTINCT name::VARCHAR FROM events WHERE kind = 'cpu_op'"
        ).fetchall() if is_matmul_op(n)
    ]  # fmt: skip
    matmul_ns: dict[int, int] = {}
    if names:
        src = (
            "SELECT rank, tid, name::VARCHAR AS name, ts_ns, dur_ns FROM events "
            "WHERE kind = 'cpu_op' AND name::VARCHAR IN (SELECT unnest($names))"
        )
        cand = ctx.run.sql(
            f"SELECT rank, tid, name, ts_ns, dur_ns FROM ({W.starting_in(src, ctx.windows)}) "
            "ORDER BY rank, tid, ts_ns, dur_ns DESC",
            params={"names": names},
        ).fetchall()
        cover: dict[tuple[int, int], int] = {}
        captures = ctx.run.sql(sql.query("levels.compute", "capture_spans")).fetchall()
        for rank, tid, name, ts, dur in cand:
            if any(c[0] == rank and c[1] == tid and c[2] <= ts <= c[3] for c in captures):
                continue  # recorded into a CUDA graph, not run: no work (op_flops)
            end = ts + dur
            starts, ends = table.get((rank, tid), ([], []))
            i = bisect.bisect_left(starts, end) - 1
            if i >= 0 and ends[i] > ts:
                continue  # holds or sits in a table op: its time is that op's
            if ts < cover.get((rank, tid), -1):
                continue  # inside a matmul-class op already taken
            cover[(rank, tid)] = end
            matmul_ns[rank] = matmul_ns.get(rank, 0) + dur
            _count(found, name, "op_without_formula", None, dur)
    by_rank: dict[int, float | None] = {}
    for r in ctx.ranks:
        comp_ns = (r.compute_ms or 0) * 1e6
        unc_ns = (without.get(r.rank) or 0) + matmul_ns.get(r.rank, 0)
        by_rank[r.rank] = min(1.0, max(0.0, unc_ns / comp_ns)) if comp_ns else None
    known = [v for v in by_rank.values() if v is not None]
    top_ops = [
        S.UncountedOpRow(name=o["name"], why=o["why"], note=o["note"], count=o["count"],
                         device_ms=o["ns"] / 1e6)
        for o in sorted(found.values(), key=lambda o: (-o["ns"], o["name"], o["why"]))[:TOP]
    ]  # fmt: skip
    return UncountedFacts(
        by_rank=by_rank, fraction=sum(known) / len(known) if known else None, top_ops=top_ops
    )


def describe(u: UncountedFacts) -> str:
    """'72% of compute time: graph replay 68%, ops without a FLOP formula 4% (…)'."""
    parts = []
    for cause in CAUSES:
        s = u.share(cause)
        if s >= 0.005:
            parts.append(f"{CAUSE_TEXT[cause]} {s:.0%}")
    names = [o.name for o in u.top_ops[:3]]
    tail = f" — most in {', '.join(names)}" if names else ""
    if not parts and u.fraction and not u.compute_ms_per_step:  # CPU run: no kernels
        return "CPU run: GEMM/attention/convolution ops without FLOPs" + tail
    return "; ".join(parts) + tail
