"""Level 3, communication: is the network busy, and is it hidden?

Per collective (name, group size, bytes): count, transfer time — the shortest duration
across the ranks of a matched instance, which leaves out waiting for late peers — and
bus bandwidth as nccl-tests defines it, beside the α-β prediction: t = α + S·f/B with
f the bus factor, B the device's realistic bus bandwidth (in a node; between nodes
when the group is larger than one) — or, on a CPU run, t = α + S/algbw from the
calibration measured in job.json.

Exposure counts transfer time only: each collective's interval from the last peer's
arrival to its end, less the time compute runs beside it. Waiting for a late rank is
scaling.straggler's; the excess of a slow collective over its prediction is
communication.slow_collective's.
"""

from __future__ import annotations

from diagnosers.base import LevelResult, mean, pct, severity
from diagnosers.context import Context
from diagnosers.findings import Finding
from diagnosers.pipeline import detect_pipeline
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


def predict_seconds(ctx: Context, name: str, group: int | None, nbytes: float) -> float | None:
    """α-β time of one collective of nccl-tests size `nbytes` over `group` ranks."""
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
    bw = spec.busbw_Bps if (group or 1) <= spec.gpus_per_node else spec.inter_node_busbw_Bps
    return spec.latency_s + nbytes * factor / bw


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
            SELECT name, group_size, bytes, any_value(dtype) AS dtype,
                   coalesce(any_value(transfer_ns), min(dur_ns)) AS transfer_ns,
                   bool_and(transfer_ns IS NOT NULL) AS matched,
                   sum(dur_ns) AS dur_sum_ns, count(*) AS rank_rows, max(n) AS n
            FROM c GROUP BY name, group_size, bytes, coalesce(instance_key, rank || '/' || ts_ns)
        )
        SELECT name, group_size, bytes, any_value(dtype), count(*) AS instances,
               median(transfer_ns), sum(dur_sum_ns), bool_and(matched), max(n)
        FROM inst GROUP BY name, group_size, bytes
        ORDER BY sum(dur_sum_ns) DESC""").fetchall()
    n_ranks = max(len(ctx.ranks), 1)
    out = []
    for name, group, nbytes, dtype, count, transfer_ns, dur_sum, matched, steps in rows:
        # bus bandwidth needs the group size and a matched instance (an unmatched
        # duration includes waiting for peers that may not even be in the run)
        factor = bus_factor(name, group) if group else None
        t = (transfer_ns or 0) / 1e9
        busbw = nbytes * factor / t if matched and nbytes and factor and t > 0 else None
        tp = predict_seconds(ctx, name, group, nbytes) if nbytes else None
        pbus = nbytes * factor / tp if tp and factor else None
        out.append(
            {
                "name": name,
                "group_size": group,
                "bytes": nbytes,
                "dtype": dtype,
                "count": count,
                "count_per_step": count
                / max(steps or 1, 1)
                / (1 if name not in P2P else max(n_ranks, 1)),
                "transfer_ms": t * 1e3,
                "predicted_ms": tp * 1e3 if tp else None,
                "busbw_GBps": busbw / 1e9 if busbw else None,
                "predicted_busbw_GBps": pbus / 1e9 if pbus else None,
                "time_ms_per_step": (dur_sum or 0) / 1e6 / max(steps or 1, 1) / n_ranks,
                "exposed_ms": None,
                # unmatched (point-to-point) durations include waiting for the peer
                "matched": bool(matched),
            }
        )
    return out


def exposure(ctx: Context) -> dict[int, dict]:
    """Per rank: transfer time not under compute, total and per collective name.

    (DuckDB's least/greatest skip NULLs: a transfer with no compute beside it must be
    filtered out of the sum, not clipped against NULL.)"""
    comp = "category = 'compute'"
    rows = ctx.run.sql(f"""
        WITH w AS {ctx.window_sql()},
        comp AS (   -- merged compute intervals per rank (islands)
            SELECT rank, min(s) AS s, max(e) AS e FROM (
                SELECT rank, s, e, sum(new) OVER (PARTITION BY rank ORDER BY s, e
                                                  ROWS UNBOUNDED PRECEDING) AS isl
                FROM (SELECT a.rank, a.ts_ns AS s, a.end_ns AS e,
                             CASE WHEN a.ts_ns <= max(a.end_ns) OVER (
                                 PARTITION BY a.rank ORDER BY a.ts_ns, a.end_ns
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                             THEN 0 ELSE 1 END AS new
                      FROM device_activity a WHERE {comp}))
            GROUP BY rank, isl
        ),
        cm AS (
            SELECT c.rank, c.name, w.n,
                   greatest(c.ts_ns + coalesce(c.wait_ns, 0), w.start_ns) AS s,
                   least(c.end_ns, w.end_ns) AS e
            FROM collectives c JOIN w ON c.rank = w.rank
            WHERE c.end_ns > w.start_ns AND c.ts_ns < w.end_ns
        ),
        ov AS (
            SELECT cm.rank, cm.name, cm.n, cm.s, cm.e,
                   coalesce(sum(greatest(0, least(cm.e, comp.e) - greatest(cm.s, comp.s)))
                            FILTER (comp.s IS NOT NULL), 0)
                       AS hidden
            FROM cm LEFT JOIN comp ON comp.rank = cm.rank AND comp.s < cm.e AND comp.e > cm.s
            GROUP BY cm.rank, cm.name, cm.n, cm.s, cm.e
        )
        SELECT rank, name, any_value(n), sum(greatest(0, e - s)), sum(greatest(0, e - s - hidden)),
               count(*) FILTER (e > s AND e - s - hidden >= 0.9 * (e - s)), count(*)
        FROM ov GROUP BY rank, name""").fetchall()
    out: dict[int, dict] = {}
    for rank, name, n, transfer, exposed, bare, count in rows:
        d = out.setdefault(rank, {"steps": n, "by_name": {}})
        d["by_name"][name] = {
            "transfer_ns": transfer,
            "exposed_ns": exposed,
            "bare": bare,
            "count": count,
        }
    return out


def diagnose(ctx: Context) -> LevelResult:
    res = LevelResult("communication")
    table = collective_table(ctx)
    exp = exposure(ctx)
    pipe = detect_pipeline(ctx)
    win = {r["rank"]: r["window_ms"] for r in ctx.ranks}
    steps = {r["rank"]: max(r["steps"], 1) for r in ctx.ranks}
    n_ranks = max(len(ctx.ranks), 1)
    # exposure is measured per collective name; share it across the name's sizes by time
    name_time = {}
    for row in table:
        name_time[row["name"]] = name_time.get(row["name"], 0) + row["time_ms_per_step"]
    for row in table:
        tot = sum(
            exp.get(r, {}).get("by_name", {}).get(row["name"], {}).get("exposed_ns", 0)
            / steps.get(r, 1)
            for r in exp
        )
        share = row["time_ms_per_step"] / name_time[row["name"]] if name_time[row["name"]] else 0
        row["exposed_ms"] = tot / 1e6 / n_ranks * share
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
    slow_excess_ms = {}  # per name, per step: time lost to slowness
    by_name: dict[str, list[dict]] = {}
    for r in slow:
        excess = max(0.0, (r["transfer_ms"] - (r["predicted_ms"] or 0))) * r["count_per_step"]
        slow_excess_ms[r["name"]] = slow_excess_ms.get(r["name"], 0) + excess
        by_name.setdefault(r["name"], []).append(r)
    for name, rows in by_name.items():  # one finding per collective, its costliest size
        r = max(rows, key=lambda x: x["time_ms_per_step"])
        ratio = r["busbw_GBps"] / r["predicted_busbw_GBps"]
        sizes = f" (and {len(rows) - 1} other sizes)" if len(rows) > 1 else ""
        res.findings.append(
            Finding(
                "communication.slow_collective",
                "critical" if ratio < SLOW / 2 * (0.5 if ctx.cpu else 1) else "warning",
                f"{name} of {r['bytes'] / 1e6:.2f} MB over {r['group_size'] or '?'} ranks"
                f"{sizes} reaches {r['busbw_GBps']:.2f} GB/s bus bandwidth, {pct(ratio)} of "
                f"the {r['predicted_busbw_GBps']:.2f} GB/s predicted",
                ranks=sorted(win),
                measured={"busbw_GBps": r["busbw_GBps"], "transfer_ms": r["transfer_ms"]},
                predicted={
                    "busbw_GBps": r["predicted_busbw_GBps"],
                    "transfer_ms": r["predicted_ms"],
                },
                impact_ms=slow_excess_ms[name],
                remedy="run nccl-tests on these nodes; check NCCL_ALGO/NCCL_PROTO, topology "
                "(nvidia-smi topo -m), link health and fabric contention"
                if not ctx.cpu
                else "check the network between hosts and gloo's interface (GLOO_SOCKET_IFNAME); "
                "on one host, give each rank its own cores (OMP_NUM_THREADS, taskset)",
                details={"sizes": rows},
            )
        )
    if ctx.cpu:
        _calibration_notes(ctx, res, table)

    # exposure, transfer only; p2p in a pipeline is the bubble's, slowness is slow's
    per_rank = []
    for rank, d in sorted(exp.items()):
        names = d["by_name"]
        total = sum(v["exposed_ns"] for k, v in names.items() if not (pipe and k in P2P))
        n = steps.get(rank, 1)
        slow_part = sum(
            min(names.get(k, {}).get("exposed_ns", 0) / n / 1e6, ms)
            for k, ms in slow_excess_ms.items()
        )
        exposed_ms = max(0.0, total / n / 1e6 - slow_part)
        frac = exposed_ms / (win[rank] / n) if win.get(rank) else None
        top = max(names.items(), key=lambda kv: kv[1]["exposed_ns"])[0] if names else None
        per_rank.append(
            {
                "rank": rank,
                "exposed_ms_per_step": exposed_ms,
                "exposed_fraction": frac,
                "top_collective": top,
            }
        )
    res.metrics["ranks"] = per_rank
    fr = [r["exposed_fraction"] for r in per_rank if r["exposed_fraction"] is not None]
    mean_exposed = sum(fr) / len(fr) if fr else None
    res.measured = {
        "exposed_fraction": mean_exposed,
        "comm_fraction": mean(r["comm_fraction"] for r in ctx.ranks),
        "comm_overlap_fraction": mean(r["comm_overlap_fraction"] for r in ctx.ranks),
        "busbw_GBps": {r["name"]: r["busbw_GBps"] for r in table[:5]},
    }
    res.predicted = {"busbw_GBps": {r["name"]: r["predicted_busbw_GBps"] for r in table[:5]}}
    if ctx.cpu and not (ctx.manifest and ctx.manifest.calibration.collectives):
        res.notes.append("predicted bus bandwidth unknown: CPU run without job.json calibration")
    elif not ctx.cpu and ctx.spec is None:
        res.notes.append("predicted bus bandwidth unknown: device not in the spec table")
    flagged = [
        r for r in per_rank if r["exposed_fraction"] and r["exposed_fraction"] >= EXPOSED_WARN
    ]
    if mean_exposed is not None and mean_exposed >= EXPOSED_WARN and flagged:
        top = max(
            (r["top_collective"] for r in flagged), key=[r["top_collective"] for r in flagged].count
        )
        ms = mean(r["exposed_ms_per_step"] for r in flagged)
        res.findings.append(
            Finding(
                "communication.exposed",
                severity(mean_exposed, EXPOSED_WARN, EXPOSED_CRIT),
                f"communication is exposed {pct(mean_exposed)} of the step ({ms:.1f} ms), "
                f"mostly {top}",
                ranks=[r["rank"] for r in flagged],
                measured={"exposed_fraction": mean_exposed},
                predicted={"exposed_fraction": 0.0},
                impact_ms=ms,
                remedy=_exposed_remedy(ctx, top, exp),
                details={"ranks": per_rank},
            )
        )
    return res


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


def _exposed_remedy(ctx: Context, top: str | None, exp: dict) -> str:
    strategy = ctx.manifest.strategy if ctx.manifest else None
    if top == "all_reduce" and strategy in (None, "ddp", "custom"):
        bare = sum(d["by_name"].get("all_reduce", {}).get("bare", 0) for d in exp.values())
        n = sum(d["by_name"].get("all_reduce", {}).get("count", 0) for d in exp.values())
        per = max(sum(max(d["steps"] or 1, 1) for d in exp.values()), 1)  # rank-steps
        lead = (
            (
                f"{bare / per:.0f} of {n / per:.0f} all-reduce buckets per step run with no "
                "compute beside them: "
            )
            if n
            else ""
        )
        return (
            lead + "start reduction during backward with smaller DDP buckets "
            "(bucket_cap_mb), check find_unused_parameters=False and that no hook or "
            "sync holds the buckets until backward ends"
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
        return "pipeline: more microbatches per step or an interleaved schedule"
    return "overlap the collective with independent compute, or issue fewer, larger ones"
