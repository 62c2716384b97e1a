"""Level 4, scaling: does it improve with more devices?

- Pipeline bubble per stage, measured as the share of the step the stage does not
  compute (1 − compute fraction), beside (P−1)/(M+P−1) or (P−1)/(V·M+P−1).
- Stragglers: the exposed wait of every matched collective charged to the rank that
  arrived last (diagnosers.stragglers); a rank charged ≥ 60% of all such wait, costing
  the others ≥ 2% of the step, is a straggler, explained by its compute or idle (host)
  time beside the median rank's, and said to be the worst in how many steps.
- Projection: step time and weak-scaling efficiency at 2× and 8× the world size —
  compute per rank stays, each data-parallel collective's time follows the α-β model
  to the new group size (in a node, then between nodes past `gpus_per_node`), and the
  communication that compute hides today stays hidden up to the same amount.
"""

from __future__ import annotations

from diagnosers.base import LevelResult, mean, pct, severity
from diagnosers.communication import predict_seconds
from diagnosers.context import Context
from diagnosers.findings import Finding
from diagnosers.pipeline import detect_pipeline, measure
from diagnosers.stragglers import attribute
from tracekit.model.pipeline import bubble_fraction, microbatches_for, simulate

BUBBLE_WARN, BUBBLE_CRIT = 0.20, 0.40
POOR_EFFICIENCY = 0.6


def _bubble(ctx: Context, res: LevelResult) -> None:
    pipe = detect_pipeline(ctx)
    if pipe is None:
        res.measured["bubble_fraction"] = None
        res.predicted["bubble_fraction"] = None
        res.predicted["modeled_bubble_fraction"] = None
        res.notes.append(
            "not a pipeline-parallel run (no job.json pp, PP labels, mesh_pp or send/recv "
            "pipeline pattern)"
        )
        return
    per_stage = [
        {"rank": r["rank"], "bubble_fraction": 1 - r["compute_fraction"]}
        for r in ctx.ranks
        if r["compute_fraction"] is not None
    ]
    measured = sum(s["bubble_fraction"] for s in per_stage) / len(per_stage) if per_stage else None
    pred = (
        bubble_fraction(pipe.stages, pipe.microbatches, pipe.virtual) if pipe.microbatches else None
    )
    model = _model(ctx, pipe, pred)
    res.measured["bubble_fraction"] = measured
    res.predicted["bubble_fraction"] = pred
    res.predicted["modeled_bubble_fraction"] = model["modeled"] if model else None
    res.metrics["pipeline"] = {
        "stages": pipe.stages,
        "microbatches": pipe.microbatches,
        "virtual_stages": pipe.virtual,
        "schedule": pipe.schedule,
        "source": pipe.source,
        "per_rank": per_stage,
        "model": model,
    }
    if model is None:
        res.notes.append(
            "modeled pipeline bubble unknown: no per-microbatch stage labels (PP:… or "
            "Forward i / Backward i) to time each stage's forward and backward"
        )
    elif measured is not None and pred is not None:
        parts = model["parts"]
        res.notes.append(
            f"pipeline bubble: measured {pct1(measured)}, formula {pct1(pred)}, modeled "
            f"{pct1(model['modeled'])} (the {pipe.schedule} schedule run with the measured "
            "stage times, plus the time outside it). Of the "
            f"{100 * (measured - pred):+.1f} points between measured and formula: stage "
            f"imbalance {100 * parts['imbalance']:+.1f}, host time between microbatch "
            f"operations {100 * parts['host_between_ops']:+.1f}, transfers between stages "
            f"{100 * parts['transfer']:+.1f}, time outside the pipeline (optimizer, loss, "
            f"data: {model['outside_ms']:.1f} ms per step) {100 * parts['outside']:+.1f}, "
            "time inside microbatch operations that is not compute (host work; waiting, where "
            f"the labels wrap the receive) {100 * parts['in_microbatch_non_compute']:+.1f}, "
            f"unexplained {100 * (measured - model['modeled']):+.1f}"
        )
    sev = severity(measured or 0, BUBBLE_WARN, BUBBLE_CRIT)
    if sev is None:
        return
    p, m, v = pipe.stages, pipe.microbatches, pipe.virtual
    step_ms = ctx.step_ms or 0
    interleaved = pipe.schedule == "interleaved" or v > 1
    sched_part = pred or 0.0
    remedies = []
    if m and m < 4 * p:
        target_m = 4 * p
        after = bubble_fraction(p, target_m, v)
        remedies.append(
            f"use M ≥ 4·P microbatches: with M = {target_m}, the schedule's bubble would drop "
            f"from {pct(pred)} to {pct(after)}"
        )
        if not interleaved:
            remedies.append(f"or interleave (V = 2: {pct(bubble_fraction(p, m, 2))} at M = {m})")
        win = (sched_part - after) * step_ms
    else:
        win = 0.0
    if model:
        parts = model["parts"]
        if parts["imbalance"] >= 0.05:
            slow = model["slowest_stage"]
            remedies.append(
                f"balance the stages: stage {slow} takes the longest per microbatch, and "
                f"imbalance costs {100 * parts['imbalance']:.0f} points of bubble"
            )
            win += parts["imbalance"] * step_ms
        host = parts["host_between_ops"] + parts["in_microbatch_non_compute"]
        if host >= 0.10:
            remedies.append(
                f"the stages spend {100 * host:.0f} points of the step on host work and "
                "waits between and inside microbatch operations: CUDA graphs or "
                "torch.compile per stage, and "
                "send/recv posted ahead (batch_isend_irecv)"
            )
        if parts["outside"] >= 0.05:
            remedies.append(
                f"shorten the {model['outside_ms']:.1f} ms per step outside the pipeline "
                f"(optimizer, loss, data): {100 * parts['outside']:.0f} points of bubble"
            )
            win += parts["outside"] * step_ms
    if not remedies:
        remedies.append(
            "the schedule already runs at M ≥ 4·P: a zero-bubble schedule (ZB-H1) or fewer "
            f"stages (M = {microbatches_for(p, 0.1, v)} would bring the formula under 10%)"
        )
    res.findings.append(
        Finding(
            "scaling.pipeline_bubble",
            sev,
            f"pipeline stages idle {pct(measured)} of the step (P = {p}, M = {m}, V = {v}, "
            f"{pipe.schedule or 'schedule unknown'}; formula {pct(pred)}"
            + (f", modeled {pct(model['modeled'])}" if model else "")
            + ")",
            ranks=[s["rank"] for s in per_stage if s["bubble_fraction"] >= BUBBLE_WARN],
            measured={"bubble_fraction": measured},
            predicted={
                "bubble_fraction": pred,
                "modeled_bubble_fraction": model["modeled"] if model else None,
            },
            impact_ms=max(min(win, (measured or 0) * step_ms), 0.0),
            remedy="; ".join(remedies),
            details={"model": model},
        )
    )


def pct1(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _model(ctx: Context, pipe, pred: float | None) -> dict | None:
    """The schedule fed with the measured stage times, and the bubble's parts."""
    meas = measure(ctx, pipe)
    if meas is None or not meas.duration:
        return None
    with_host = {op: d + meas.overhead_ms.get(op, 0.0) for op, d in meas.duration.items()}
    try:
        bare = simulate(meas.orders, meas.duration, meas.stage_rank, 0.0)
        no_hop = simulate(meas.orders, with_host, meas.stage_rank, 0.0)
        sim = simulate(
            meas.orders, with_host, meas.stage_rank, meas.hop_ms, default_latency=meas.latency_ms
        )
    except ValueError:
        return None
    ranks = [r for r in ctx.ranks if r["compute_fraction"] is not None]
    if not ranks or not sim.makespan:
        return None
    step = {r["rank"]: r["step_time_ms"] or r["window_ms"] for r in ranks}
    compute = {r["rank"]: r["compute_fraction"] * step[r["rank"]] for r in ranks}
    mean_step = sum(step.values()) / len(step)
    outside = max(mean_step - meas.span_ms, 0.0)
    occ = [meas.occupied_ms.get(r, 0.0) for r in compute]
    comp_in = [meas.compute_in_ops_ms.get(r, 0.0) for r in compute]
    mocc = sum(occ) / len(occ)
    b_imb = 1 - mocc / bare.makespan
    b_host = 1 - mocc / no_hop.makespan
    b_pipe = 1 - mocc / sim.makespan
    total = sim.makespan + outside
    # busy time: the operations, plus compute outside them
    out_comp = [compute[r] - c for r, c in zip(compute, comp_in, strict=True)]
    b_out = 1 - sum(o + x for o, x in zip(occ, out_comp, strict=True)) / len(occ) / total
    modeled = 1 - sum(compute.values()) / len(compute) / total
    base = pred if pred is not None else b_imb
    per_stage: dict[int, float] = {}
    for (_k, s, _i), d in meas.duration.items():
        per_stage[s] = per_stage.get(s, 0.0) + d
    return {
        "modeled": min(max(modeled, 0.0), 1.0),
        "span_ms": meas.span_ms,
        "simulated_span_ms": sim.makespan,
        "outside_ms": outside,
        "hop_latency_ms": meas.latency_ms,
        "stage_ms": {str(k): v for k, v in sorted(per_stage.items())},
        "slowest_stage": max(per_stage, key=per_stage.get) if per_stage else None,
        "parts": {
            "schedule": base,
            "imbalance": b_imb - base,
            "host_between_ops": b_host - b_imb,
            "transfer": b_pipe - b_host,
            "outside": b_out - b_pipe,
            "in_microbatch_non_compute": modeled - b_out,
        },
    }


def _straggler(ctx: Context, res: LevelResult) -> None:
    rows = ctx.run.sql("""
        SELECT last_rank, count(*), sum(skew_ns) FROM collective_instances
        WHERE ranks_matched >= 2 GROUP BY last_rank""").fetchall()
    res.metrics["last_arrivals"] = [
        {"rank": r, "instances": n, "skew_ms": s / 1e6} for r, n, s in sorted(rows)
    ]
    att = attribute(ctx)
    res.metrics["imposed_wait_ms"] = {str(k): v for k, v in sorted(att["imposed_ms"].items())}
    res.measured["straggler_ranks"] = [f["rank"] for f in att["found"]]
    step_ms = ctx.step_ms or 0
    for f in att["found"]:
        rank, cost_ms = f["rank"], f["imposed_ms_per_step"]
        comp_x, host, dev = f["compute_excess_ms"], f["host_late_ms"], f["device_late_ms"]
        start = f["step_start_late_ms"]
        if dev is not None and host is not None and dev > host and dev >= 0.25 * cost_ms:
            why = (
                f"at its costliest collective its device starts {dev:.1f} ms later than the "
                "median rank's once issued (its device is busy: compute"
                + (f", {comp_x:.1f} ms more per step" if comp_x and comp_x > 0 else "")
                + ")"
            )
            remedy = (
                "its device works longer: check that rank's GPU (clocks, throttling, ECC "
                "errors) and the work assigned to it (uneven sharding, sequence lengths, "
                "pipeline stage balance)"
            )
        elif host is not None and host >= 0.25 * cost_ms:
            why = (
                f"it issues its costliest collective {host:.1f} ms after the median rank "
                "(its host is late: data loading, Python, garbage collection, logging)"
                + (
                    f"; its step starts {start:.1f} ms after theirs"
                    if start is not None and start >= 0.25 * cost_ms
                    else ""
                )
            )
            remedy = (
                "its host is late: more data-loader workers or prefetching on that rank, "
                "look for host syncs, logging or checkpointing on it alone, and give its "
                "process its own cores"
            )
        elif comp_x is not None and comp_x >= 0.25 * cost_ms:
            why = f"its compute takes {comp_x:.1f} ms longer per step than the median rank's"
            remedy = (
                "its compute is slower: check that rank's GPU (clocks, throttling, ECC "
                "errors) and the work assigned to it (uneven sharding, sequence lengths, "
                "pipeline stage balance)"
            )
        else:
            why = (
                "neither its host nor its compute is visibly later: look at a slower link "
                "or NIC on that rank"
            )
            remedy = "check that rank's links (nvidia-smi topo -m, NIC counters) and its GPU"
        n, worst = f["steps"], f["steps_worst"]
        every = (
            "one step in the window: whether it is late every step is unknown"
            if n == 1
            else f"it is the worst in every one of {n} steps"
            if n and worst == n
            else f"it is the worst in {worst} of {n} steps (by step: "
            + ", ".join(map(str, f["worst_by_step"]))
            + ")"
        )
        res.findings.append(
            Finding(
                "scaling.straggler",
                "critical" if cost_ms >= 0.10 * step_ms else "warning",
                f"rank {rank} makes the others wait {cost_ms:.1f} ms per step "
                f"({pct(f['share'])} of all waiting for peers); {why}; {every}",
                ranks=[rank],
                measured={
                    "imposed_wait_ms_per_step": cost_ms,
                    "wait_share": f["share"],
                    "compute_excess_ms": comp_x,
                    "host_late_ms": host,
                    "device_late_ms": dev,
                    "step_start_late_ms": start,
                    "steps_worst": worst,
                    "steps": n,
                },
                predicted={"imposed_wait_ms_per_step": 0.0},
                impact_ms=cost_ms,
                remedy=remedy,
            )
        )


def _per_step_ms(ctx: Context, fraction_key: str) -> float:
    """Mean over ranks of a per-rank fraction, in ms of that rank's step."""
    return (
        mean(
            r[fraction_key] * (r["step_time_ms"] or r["window_ms"])
            for r in ctx.ranks
            if r[fraction_key] is not None
        )
        or 0.0
    )


def _projection(ctx: Context, res: LevelResult) -> None:
    coll = ctx.metrics.get("communication", {}).get("collectives", [])
    world = len(ctx.ranks)
    step_ms = ctx.step_ms
    if not step_ms or world < 1:
        return
    comm_ms = _per_step_ms(ctx, "comm_fraction")
    exposed_ms = _per_step_ms(ctx, "exposed_comm_fraction")
    hidden_ms = max(comm_ms - exposed_ms, 0.0)
    proj = {}
    for mult in (2, 8):
        new_comm = 0.0
        for c in coll:
            g = c["group_size"] or world
            scales = g >= world and c["name"] in (
                "all_reduce",
                "all_gather",
                "reduce_scatter",
                "all_to_all",
            )
            now = predict_seconds(ctx, c["name"], g, c["bytes"] or 0)
            later = predict_seconds(ctx, c["name"], g * mult, c["bytes"] or 0) if scales else now
            ratio = later / now if now and later else 1.0
            new_comm += c["time_ms_per_step"] * ratio
        other_comm = max(comm_ms - sum(c["time_ms_per_step"] for c in coll), 0.0)
        new_comm += other_comm
        new_step = step_ms - exposed_ms + max(new_comm - hidden_ms, 0.0)
        proj[f"{mult}x"] = {
            "world_size": world * mult,
            "step_time_ms": new_step,
            "efficiency": step_ms / new_step if new_step else None,
        }
    res.predicted["projection"] = proj
    eff2 = proj["2x"]["efficiency"]
    comm_found = any(f.level == "communication" for f in ctx.metrics.get("_findings", []))
    if eff2 is not None and eff2 < POOR_EFFICIENCY and not comm_found:
        # a projection, not a measurement: information, never a warning
        res.findings.append(
            Finding(
                "scaling.poor_projection",
                "info",
                f"at {proj['2x']['world_size']} ranks the step would take "
                f"{proj['2x']['step_time_ms']:.1f} ms (efficiency {pct(eff2)})",
                ranks=[],
                measured={"step_time_ms": step_ms},
                predicted=proj,
                impact_ms=proj["2x"]["step_time_ms"] - step_ms,
                remedy="overlap communication with compute, shard within a node (TP/HSDP), or "
                "raise the per-rank batch so compute grows with communication",
            )
        )


def diagnose(ctx: Context) -> LevelResult:
    res = LevelResult("scaling")
    _bubble(ctx, res)
    _straggler(ctx, res)
    _projection(ctx, res)
    return res
