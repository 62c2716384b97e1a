"""Level 3, communication: is the network busy, and is it hidden?

Per collective (name, group size, bytes): count, transfer time — the shortest duration
across the ranks of a matched instance, which leaves out waiting for late peers — and
bus bandwidth as nccl-tests defines it, beside the α-β prediction: t = α + S·f/B with
f the bus factor, B the device's realistic bus bandwidth in a node, or the NIC's when
the group spans nodes (diagnosers.topology) — or, on a CPU run, t = α + S/algbw from
the calibration measured in job.json.

Exposure is one quantity everywhere: `exposed_comm_fraction`, the union of
communication (and, on CPU runs, host waits for it) that no compute hides, ÷ the window
(tracekit.metrics.breakdown). It is split into causes, each charged once:

- waiting for a late peer (`comm_wait_fraction`): the straggler's, when one rank
  imposes most of it (diagnosers.stragglers);
- the excess of a slow collective over its prediction, where it is exposed
  (`exposed_slow_fraction`): communication.slow_collective's;
- send/recv in a pipeline: the bubble's (scaling.pipeline_bubble);
- the rest, exposed transfer that compute could hide: communication.exposed's — which
  also takes any wait no straggler explains, so the verdict never calls a run healthy
  while its table shows exposed communication nothing accounts for.

Per collective, `time_ms_per_step` and `exposed_ms` are unions over each rank's
intervals (concurrent sends count once), so neither exceeds the step.
"""

from __future__ import annotations

from math import fsum

from diagnosers.base import LevelResult, mean, pct, severity
from diagnosers.context import Context
from diagnosers.findings import Finding
from diagnosers.pipeline import detect_pipeline
from diagnosers.stragglers import attribute
from diagnosers.topology import topology
from tracekit.ingest.collectives import parse_ranks
from tracekit.metrics.breakdown import hidden_by_compute_sql
from tracekit.model.collectives import bus_factor

EXPOSED_WARN, EXPOSED_CRIT = 0.10, 0.25
SLOW = 0.5  # measured busbw below this share of predicted
SLOW_MIN_SHARE = 0.01  # of the step, for a slow collective to matter
P2P = ("send", "recv", "send_recv")
CAL_NAME = {
    "send": "send_recv",
    "recv": "send_recv",
    "send_recv": "send_recv",
    "broadcast": "all_reduce",
    "reduce": "all_reduce",
}


def predict_seconds(
    ctx: Context,
    name: str,
    group: int | None,
    nbytes: float,
    ranks: list[int] | None = None,
    inter_node: bool | None = None,
) -> float | None:
    """α-β time of one collective of nccl-tests size `nbytes` over `group` ranks; in a
    node or between nodes as the group's ranks sit (`inter_node` forces one)."""
    factor = bus_factor(name, group or 2)
    if factor is None or not nbytes:
        return None
    if ctx.cpu:
        cal = ctx.manifest.calibration.collectives if ctx.manifest else {}
        fit = cal.get(CAL_NAME.get(name, name)) or cal.get("all_reduce")
        if not fit or not fit.algbw_Bps:
            return None
        # the fit is per collective kind; its bus factor scales to this group size
        fit_factor = bus_factor(CAL_NAME.get(name, name), fit.group_size or 2) or factor
        return (fit.alpha_s or 0) + nbytes * factor / (fit.algbw_Bps * fit_factor)
    spec = ctx.spec
    if spec is None:
        return None
    if inter_node is None:
        inter_node = topology(ctx).spans_nodes(group, ranks)
    bw = spec.inter_node_busbw_Bps if inter_node else spec.busbw_Bps
    return spec.latency_s + nbytes * factor / bw


_KEY = "name, group_size, bytes"


def _per_key_sql(ctx: Context) -> str:
    """Per rank and (name, group size, bytes): the union of the collectives' intervals,
    the union of their waits for late peers, and what of each no compute hides — all
    clipped to the rank's window, so no figure exceeds it."""
    return f"""
    WITH w AS {ctx.window_sql()},
    iv AS (
        SELECT c.rank, c.name, c.group_size, c.bytes, 'all' AS part,
               greatest(c.ts_ns, w.start_ns) AS s, least(c.end_ns, w.end_ns) AS e
        FROM collectives c JOIN w ON c.rank = w.rank
        WHERE c.end_ns > w.start_ns AND c.ts_ns < w.end_ns
        UNION ALL
        SELECT c.rank, c.name, c.group_size, c.bytes, 'wait',
               greatest(c.ts_ns, w.start_ns), least(c.ts_ns + least(c.wait_ns, c.dur_ns), w.end_ns)
        FROM collectives c JOIN w ON c.rank = w.rank
        WHERE c.wait_ns > 0 AND c.ts_ns + c.wait_ns > w.start_ns AND c.ts_ns < w.end_ns
          AND c.matched
    ),
    flagged AS (
        SELECT *, CASE WHEN s <= max(e) OVER (
                      PARTITION BY rank, {_KEY}, part ORDER BY s, e
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                  THEN 0 ELSE 1 END AS new
        FROM iv WHERE e > s
    ),
    isl AS (
        SELECT rank, {_KEY}, part, min(s) AS s, max(e) AS e FROM (
            SELECT *, sum(new) OVER (PARTITION BY rank, {_KEY}, part ORDER BY s, e
                                     ROWS UNBOUNDED PRECEDING) AS island FROM flagged)
        GROUP BY rank, {_KEY}, part, island
    ),
    hid AS {hidden_by_compute_sql("(SELECT * FROM isl)", ctx.window_sql())}
    SELECT rank, name, group_size, bytes,
           sum(e - s) FILTER (part = 'all') AS union_ns,
           sum(e - s - hidden) FILTER (part = 'all') AS exposed_ns,
           coalesce(sum(e - s - hidden) FILTER (part = 'wait'), 0) AS wait_exposed_ns
    FROM hid GROUP BY rank, name, group_size, bytes"""


def per_key_exposure(ctx: Context) -> dict[tuple, dict[int, dict]]:
    """(name, group size, bytes) → rank → union/exposed/exposed-wait ns over the window."""
    out: dict[tuple, dict[int, dict]] = {}
    for rank, name, group, nbytes, union, exposed, wait in ctx.run.sql(
        _per_key_sql(ctx)
    ).fetchall():
        out.setdefault((name, group, nbytes), {})[rank] = {
            "union_ns": union or 0,
            "exposed_ns": max(exposed or 0, 0),
            "wait_exposed_ns": max(wait or 0, 0),
        }
    return out


def collective_table(ctx: Context) -> list[dict]:
    rows = ctx.run.sql(f"""
        WITH w AS {ctx.window_sql()},
        c AS (
            SELECT c.*, i.transfer_ns, w.n
            FROM collectives c JOIN w ON c.rank = w.rank
            LEFT JOIN collective_instances i USING (instance_key)
            WHERE c.ts_ns >= w.start_ns AND c.ts_ns < w.end_ns
        ),
        inst AS (  -- one row per instance (matched) or per rank-row (unmatched, p2p)
            SELECT name, group_size, bytes, min(dtype) AS dtype,
                   min(pg_ranks) AS pg_ranks,
                   coalesce(any_value(transfer_ns), min(dur_ns)) AS transfer_ns,
                   bool_and(transfer_ns IS NOT NULL
                            AND matched)
                       AS matched, max(n) AS n
            FROM c GROUP BY name, group_size, bytes, coalesce(instance_key, rank || '/' || ts_ns)
        )
        -- every value deterministic: the same trace gives the same report, byte for byte
        -- (one size of two dtypes, int indices and float embeddings, lists both)
        SELECT name, group_size, bytes, string_agg(DISTINCT dtype, ',' ORDER BY dtype),
               min(pg_ranks),
               count(*) AS instances, median(transfer_ns), bool_and(matched), max(n)
        FROM inst GROUP BY name, group_size, bytes""").fetchall()
    exp = per_key_exposure(ctx)
    ctx.metrics["_exposure_by_key"] = exp
    n_ranks = max(len(ctx.ranks), 1)
    steps = {r["rank"]: max(r["steps"], 1) for r in ctx.ranks}
    topo = topology(ctx) if not ctx.cpu else None
    out = []
    for name, group, nbytes, dtype, pg_ranks, count, transfer_ns, matched, n in rows:
        factor = bus_factor(name, group or 2)
        t = (transfer_ns or 0) / 1e9
        # a bandwidth needs the transfer alone: matched instances, known group size
        busbw = nbytes * factor / t if nbytes and factor and t > 0 and matched and group else None
        ranks = parse_ranks(pg_ranks)
        inter = topo.spans_nodes(group, ranks) if topo else None
        tp = predict_seconds(ctx, name, group, nbytes, ranks, inter) if nbytes else None
        pbus = nbytes * factor / tp if tp and factor else None
        per_rank = exp.get((name, group, nbytes), {})

        def per_step(field: str, per_rank: dict = per_rank) -> float:
            # fsum: exact whatever order the ranks come in
            return fsum(v[field] / steps.get(r, 1) for r, v in per_rank.items()) / 1e6 / n_ranks

        out.append(
            {
                "name": name,
                "group_size": group,
                "bytes": nbytes,
                "dtype": dtype,
                "count": count,
                "count_per_step": count
                / max(n or 1, 1)
                / (1 if name not in P2P else max(n_ranks, 1)),
                "transfer_ms": t * 1e3,
                "predicted_ms": tp * 1e3 if tp else None,
                "busbw_GBps": busbw / 1e9 if busbw else None,
                "predicted_busbw_GBps": pbus / 1e9 if pbus else None,
                "inter_node": inter,
                "time_ms_per_step": per_step("union_ns"),
                "exposed_ms": per_step("exposed_ns"),
                "exposed_wait_ms": per_step("wait_exposed_ns"),
                # unmatched (point-to-point) durations include waiting for the peer
                "matched": bool(matched),
            }
        )
    out.sort(
        key=lambda r: (
            -r["time_ms_per_step"],
            r["name"] or "",
            r["group_size"] or 0,
            r["bytes"] or 0,
        )
    )
    return out


def bare_counts(ctx: Context, name: str) -> tuple[float, float]:
    """Per rank-step: instances of `name` with (almost) no compute beside them, and all."""
    row = ctx.run.sql(f"""
        WITH w AS {ctx.window_sql()},
        cm AS (
            SELECT c.rank, c.ts_ns, greatest(c.ts_ns + coalesce(least(c.wait_ns, c.dur_ns), 0),
                                             w.start_ns) AS s,
                   least(c.end_ns, w.end_ns) AS e
            FROM collectives c JOIN w ON c.rank = w.rank
            WHERE c.name = '{name}' AND c.end_ns > w.start_ns AND c.ts_ns < w.end_ns
        ),
        ov AS {hidden_by_compute_sql("(SELECT * FROM cm)", ctx.window_sql())}
        SELECT count(*) FILTER (e > s AND e - s - hidden >= 0.9 * (e - s)), count(*)
        FROM ov""").fetchall()[0]
    rank_steps = max(sum(max(r["steps"], 1) for r in ctx.ranks), 1)
    return (row[0] or 0) / rank_steps, (row[1] or 0) / rank_steps


def diagnose(ctx: Context) -> LevelResult:
    res = LevelResult("communication")
    table = collective_table(ctx)
    exp = ctx.metrics["_exposure_by_key"]
    pipe = detect_pipeline(ctx)
    steps = {r["rank"]: max(r["steps"], 1) for r in ctx.ranks}
    res.metrics["collectives"] = table
    ctx.metrics["communication"] = {"collectives": table}

    # slow collectives: measured busbw well under the α-β prediction, and it matters
    step_ms = ctx.step_ms or 0
    # on a CPU run gloo's threads share the cores with the ranks' compute, which the
    # calibration (idle cores) did not: only a 4× shortfall there says more than that
    limit = SLOW / 2 if ctx.cpu else SLOW
    slow = [
        r
        for r in table
        if r["matched"]
        and r["busbw_GBps"]
        and r["predicted_busbw_GBps"]
        and r["busbw_GBps"] < limit * r["predicted_busbw_GBps"]
        and r["time_ms_per_step"] >= SLOW_MIN_SHARE * step_ms
    ]

    # per rank, ms per step: the exposed excess of slow collectives, exposed p2p
    def key_ms(row: dict, rank: int, field: str) -> float:
        v = exp.get((row["name"], row["group_size"], row["bytes"]), {}).get(rank)
        return v[field] / steps.get(rank, 1) / 1e6 if v else 0.0

    per_rank = []
    for r in ctx.ranks:
        rank, n = r["rank"], max(r["steps"], 1)
        step = r["step_time_ms"] or (r["window_ms"] / n if r["window_ms"] else 0)
        exposed = (r["exposed_comm_fraction"] or 0) * step
        wait = (r["comm_wait_fraction"] or 0) * step
        transfer = max(exposed - wait, 0.0)
        slow_ms = 0.0
        for row in slow:
            excess = max(0.0, row["transfer_ms"] - (row["predicted_ms"] or 0))
            own = key_ms(row, rank, "exposed_ns") - key_ms(row, rank, "wait_exposed_ns")
            slow_ms += min(excess * row["count_per_step"], max(own, 0.0))
        slow_ms = min(slow_ms, transfer)
        p2p_ms = 0.0
        if pipe:
            p2p_ms = sum(key_ms(row, rank, "exposed_ns") for row in table if row["name"] in P2P)
            p2p_ms = min(p2p_ms, exposed - slow_ms)
        unmatched = sum(key_ms(row, rank, "exposed_ns") for row in table if not row["matched"])
        names: dict[str, float] = {}
        for row in table:
            names[row["name"]] = names.get(row["name"], 0) + key_ms(row, rank, "exposed_ns")
        per_rank.append(
            {
                "rank": rank,
                "step_ms": step,
                "exposed_ms": exposed,
                "wait_ms": wait,
                "transfer_ms": transfer,
                "slow_ms": slow_ms,
                "p2p_ms": p2p_ms,
                "unmatched_ms": min(unmatched, max(transfer - slow_ms - p2p_ms, 0.0)),
                "exposed_slow_fraction": slow_ms / step if step else None,
                "top_collective": max(names, key=names.get) if names else None,
            }
        )
    res.metrics["ranks"] = per_rank

    for name in dict.fromkeys(r["name"] for r in slow):  # one finding per collective
        rows = [r for r in slow if r["name"] == name]
        r = max(rows, key=lambda x: x["time_ms_per_step"])
        ratio = r["busbw_GBps"] / r["predicted_busbw_GBps"]
        sizes = f" (and {len(rows) - 1} other sizes)" if len(rows) > 1 else ""
        excess_ms = sum(
            max(0.0, x["transfer_ms"] - (x["predicted_ms"] or 0)) * x["count_per_step"]
            for x in rows
        )
        exposed_excess = mean(
            min(
                excess_ms,
                sum(
                    key_ms(x, pr["rank"], "exposed_ns") - key_ms(x, pr["rank"], "wait_exposed_ns")
                    for x in rows
                ),
            )
            for pr in per_rank
        )
        where = "between nodes" if r.get("inter_node") else "in a node"
        res.findings.append(
            Finding(
                "communication.slow_collective",
                "critical" if ratio < SLOW / 2 * (0.5 if ctx.cpu else 1) else "warning",
                f"{name} of {r['bytes'] / 1e6:.2f} MB over {r['group_size'] or '?'} ranks"
                f"{sizes} reaches {r['busbw_GBps']:.2f} GB/s bus bandwidth, {pct(ratio)} of "
                f"the {r['predicted_busbw_GBps']:.2f} GB/s predicted"
                + ("" if ctx.cpu else f" {where}")
                + f"; {excess_ms:.1f} ms per step over the prediction, "
                f"{exposed_excess or 0:.1f} ms of it exposed",
                ranks=[pr["rank"] for pr in per_rank],
                measured={"busbw_GBps": r["busbw_GBps"], "transfer_ms": r["transfer_ms"]},
                predicted={
                    "busbw_GBps": r["predicted_busbw_GBps"],
                    "transfer_ms": r["predicted_ms"],
                },
                impact_ms=exposed_excess or 0.0,
                remedy="run nccl-tests on these nodes; check NCCL_ALGO/NCCL_PROTO, topology "
                "(nvidia-smi topo -m), link health and fabric contention"
                if not ctx.cpu
                else "check the network between hosts and gloo's interface (GLOO_SOCKET_IFNAME); "
                "on one host, give each rank its own cores (OMP_NUM_THREADS, taskset)",
                details={"sizes": rows, "excess_ms_per_step": excess_ms},
            )
        )
    if ctx.cpu:
        _calibration_notes(ctx, res, table)

    res.measured = {
        "exposed_comm_fraction": mean(r["exposed_comm_fraction"] for r in ctx.ranks),
        "exposed_transfer_fraction": mean(r["exposed_transfer_fraction"] for r in ctx.ranks),
        "comm_wait_fraction": mean(r["comm_wait_fraction"] for r in ctx.ranks),
        "exposed_slow_fraction": mean(r["exposed_slow_fraction"] for r in per_rank),
        "comm_fraction": mean(r["comm_fraction"] for r in ctx.ranks),
        "comm_overlap_fraction": mean(r["comm_overlap_fraction"] for r in ctx.ranks),
        "busbw_GBps": {r["name"]: r["busbw_GBps"] for r in table[:5]},
    }
    res.predicted = {
        "busbw_GBps": {r["name"]: r["predicted_busbw_GBps"] for r in table[:5]},
        "exposed_comm_fraction": 0.0,
    }
    if ctx.cpu and not (ctx.manifest and ctx.manifest.calibration.collectives):
        res.notes.append("predicted bus bandwidth unknown: CPU run without job.json calibration")
    elif not ctx.cpu and ctx.spec is None:
        res.notes.append("predicted bus bandwidth unknown: device not in the spec table")
    if not ctx.cpu and table:
        topo = topology(ctx)
        res.notes.append(
            f"topology: {topo.gpus_per_node} ranks per node ({topo.source}); "
            + (
                "some groups span nodes and are predicted at the inter-node bandwidth"
                if any(r["inter_node"] for r in table)
                else "every group sits in one node"
            )
        )
    _exposed(ctx, res, per_rank, pipe)
    return res


def _exposed(ctx: Context, res: LevelResult, per_rank: list[dict], pipe) -> None:
    """communication.exposed: the exposed time no other finding accounts for."""
    explained_wait = attribute(ctx)["explained_ms"]
    for r in per_rank:
        wait_left = max(r["wait_ms"] - explained_wait.get(r["rank"], 0.0), 0.0)
        r["straggler_wait_ms"] = r["wait_ms"] - wait_left
        r["unexplained_wait_ms"] = wait_left
        r["residual_ms"] = max(
            r["exposed_ms"] - r["straggler_wait_ms"] - r["slow_ms"] - r["p2p_ms"], 0.0
        )
        r["residual_fraction"] = r["residual_ms"] / r["step_ms"] if r["step_ms"] else None
    res.metrics["attribution"] = [
        {
            k: r[k]
            for k in (
                "rank",
                "exposed_ms",
                "straggler_wait_ms",
                "unexplained_wait_ms",
                "slow_ms",
                "p2p_ms",
                "residual_ms",
            )
        }
        for r in per_rank
    ]
    resid = mean(r["residual_fraction"] for r in per_rank)
    res.measured["straggler_wait_fraction"] = mean(
        r["straggler_wait_ms"] / r["step_ms"] for r in per_rank if r["step_ms"]
    )
    res.measured["exposed_pipeline_fraction"] = (
        mean(r["p2p_ms"] / r["step_ms"] for r in per_rank if r["step_ms"]) if pipe else None
    )
    res.measured["unexplained_exposed_fraction"] = resid
    if resid is None or resid < EXPOSED_WARN:
        return
    flagged = [r for r in per_rank if (r["residual_fraction"] or 0) >= EXPOSED_WARN]
    tops = [r["top_collective"] for r in flagged if r["top_collective"]]
    top = max(tops, key=tops.count) if tops else None
    ms = mean(r["residual_ms"] for r in per_rank) or 0.0
    wait_ms = mean(r["unexplained_wait_ms"] for r in per_rank) or 0.0
    exposed = res.measured["exposed_comm_fraction"]
    blind = min(mean(r["unmatched_ms"] for r in per_rank) or 0.0, max(ms - wait_ms, 0.0))
    parts = []
    if ms - wait_ms - blind >= 0.05 * ms:
        parts.append(f"{ms - wait_ms - blind:.1f} ms transfer compute could hide")
    if blind >= 0.05 * ms:
        parts.append(
            f"{blind:.1f} ms in collectives not matched across ranks (point-to-point, or "
            "peers missing from the run), where transfer and waiting cannot be told apart"
        )
    if wait_ms >= 0.05 * ms:
        parts.append(f"{wait_ms:.1f} ms waiting for peers that no single rank delays")
    res.findings.append(
        Finding(
            "communication.exposed",
            severity(resid, EXPOSED_WARN, EXPOSED_CRIT),
            f"communication is exposed {pct(exposed)} of the step"
            + (f", mostly {top}" if top else "")
            + f"; {pct(resid)} ({ms:.1f} ms) is not explained by a straggler, a slow "
            f"collective or a pipeline: {', '.join(parts)}",
            ranks=[r["rank"] for r in flagged],
            measured={
                "exposed_comm_fraction": exposed,
                "exposed_transfer_fraction": res.measured["exposed_transfer_fraction"],
                "comm_wait_fraction": res.measured["comm_wait_fraction"],
                "unexplained_exposed_fraction": resid,
            },
            predicted={"exposed_comm_fraction": 0.0},
            impact_ms=ms,
            remedy=_exposed_remedy(ctx, top, wait_ms > 0.5 * ms),
            details={
                "ranks": res.metrics["attribution"],
                "collectives": _most_exposed(res.metrics.get("collectives", [])),
            },
        )
    )


def _most_exposed(table: list[dict], n: int = 3) -> list[dict]:
    """The collectives with the most exposed time per step: where the evidence is."""
    rows = sorted(
        (c for c in table if (c.get("exposed_ms") or 0) > 0), key=lambda c: -c["exposed_ms"]
    )
    keys = ("name", "group_size", "bytes", "exposed_ms", "time_ms_per_step")
    return [{k: c.get(k) for k in keys} for c in rows[:n]]


def _calibration_notes(ctx: Context, res: LevelResult, table: list[dict]) -> None:
    cal = ctx.manifest.calibration.collectives if ctx.manifest else {}
    off = [
        r
        for r in table
        if r["matched"]
        and r["busbw_GBps"]
        and r["predicted_busbw_GBps"]
        and not 0.67 <= r["busbw_GBps"] / r["predicted_busbw_GBps"] <= 1.5
    ]
    if off:
        worst = min(off, key=lambda r: r["busbw_GBps"] / r["predicted_busbw_GBps"])
        res.notes.append(
            f"{len(off)} of {sum(r['matched'] for r in table)} matched collectives are off the "
            f"calibrated α-β prediction by more than 1.5× (worst: {worst['name']} at "
            f"{pct(worst['busbw_GBps'] / worst['predicted_busbw_GBps'])}): the calibration ran "
            "on idle cores before training, while during the step gloo's threads share the "
            "cores with every rank's compute"
        )
    groups = {f.group_size for f in cal.values() if f.group_size}
    odd = sorted({str(r["group_size"] or "?") for r in table if r["group_size"] not in groups})
    if cal and odd:
        res.notes.append(
            f"calibration measured groups of {sorted(groups)}, some collectives ran on groups of "
            f"{', '.join(odd)}: their predictions scale the fit by the bus factor only, and a "
            "gloo span's group is unknown (?) when the trace does not say"
        )


def _exposed_remedy(ctx: Context, top: str | None, mostly_wait: bool) -> str:
    strategy = ctx.manifest.strategy if ctx.manifest else None
    if mostly_wait:
        return (
            "ranks arrive at collectives at different times, each late in turn: look for "
            "uneven work between ranks (data, sequence lengths), host jitter (data loader, "
            "garbage collection, oversubscribed cores) and synchronizations inside the step"
        )
    if top == "all_reduce" and strategy in (None, "ddp", "custom"):
        bare, n = bare_counts(ctx, "all_reduce")
        lead = (
            f"{bare:.0f} of {n:.0f} all-reduce buckets per step run with no compute beside them: "
            if n
            else ""
        )
        return (
            lead + "start reduction during backward with smaller DDP buckets "
            "(bucket_cap_mb), check find_unused_parameters=False and that no hook or "
            "sync holds the buckets until backward ends"
        )
    if top == "all_reduce" and strategy in ("tp", "hybrid"):
        return (
            "tensor parallelism: its all-reduces sit on the critical path of every layer — "
            "sequence parallelism (reduce-scatter + all-gather) or async TP to overlap them "
            "with the matmuls, and keep the TP group inside a node"
        )
    if top in ("all_gather", "reduce_scatter"):
        if ctx.manifest and ctx.manifest.fsdp_prefetch:
            return (
                "FSDP prefetch is already on: reshard_after_forward=False for the last "
                "layers, larger FSDP units (fewer, bigger all-gathers), or hybrid sharding "
                "within a node"
            )
        return (
            "FSDP: enable forward/backward prefetch (set_modules_to_forward_prefetch, "
            "set_modules_to_backward_prefetch), reshard_after_forward=False for the last "
            "layers, or hybrid sharding within a node"
        )
    if top == "all_to_all":
        return "MoE: overlap dispatch/combine with expert compute, or capacity-factor tuning"
    if top in P2P:
        # not a pipeline (a pipeline's send/recv is the bubble's): point-to-point exchange
        return (
            "point-to-point transfers run with nothing beside them: post them earlier "
            "(isend/irecv) and overlap them with independent compute, or batch them"
        )
    return "overlap the collective with independent compute, or issue fewer, larger ones"
