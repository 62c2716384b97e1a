"""Level 2, compute: is the device busy, and busy with useful work?

- FLOPs per op come from the signature table (tracekit/model/flops.py); each op's FLOPs
  are divided by the peak of *its* dtype (fp32, TF32, bf16/fp16, fp8): a step's
  "time at peak" is Σ_dtype FLOPs_dtype ÷ peak_dtype. TF32 is known from the op's kernels
  (`*tf32*`, `*s1688*`), cuDNN's allow_tf32 argument or job.json `allow_tf32` — never
  from speed. GPU peaks: the spec table; CPU: the calibration in job.json.
- MFU = model FLOPs' time at peak ÷ window, model FLOPs = 3 × the forward FLOPs (backward
  = 2× forward; activation recompute and attention's recomputed scores not counted —
  the PaLM / Megatron-LM convention; a trace with no backward pass: the forward alone).
- HFU = hardware FLOPs' time at peak ÷ window, hardware FLOPs = what the counted ops
  executed: forward, backward as run (output masks, flash backward 2.5×), recompute.
- GEMM efficiency = time at peak of the ops that have device time ÷ that device time:
  how fast the kernels themselves run, whatever the idle time around them. An op whose
  count would put it above its peak is left out and named in a note: a Winograd
  convolution (its kernels `*winograd*` do fewer multiplies than the exact count: Lavin &
  Gray 2016, F(4x4, 3x3) 4x fewer), else a suspect count.
- not counted: ops of the table whose FLOPs the trace cannot give (a missing argument),
  with their device time — never guessed.
- host-bound time: a device gap (no kernel, memcpy or memset on any stream) before a
  kernel launched only after the previous work had ended — the device waited for the
  host. A gap across the start of a ProfilerStep is left out: that is the previous
  step's tail (waiting on other ranks, a pipeline's cooldown), not launch overhead.
- the FLOPs predicted from job.json: tokens per step × (6N + 6hV + 12·L·H·Q·T), beside the
  model FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from tracekit import sql
from tracekit.analysis import compute_notes as N
from tracekit.analysis import uncounted as U
from tracekit.analysis.base import mean
from tracekit.metrics import windows as W
from tracekit.model import figures as F
from tracekit.model.flops import transformer_flops_per_token
from tracekit.model.hardware import dtype_class
from tracekit.report import schema as S
from tracekit.report.schema import UNSET, known
from tracekit.sql.text import sql_str

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts


def _op_class(ctx: Facts, dtype: str | None, tf32: bool) -> str | None:
    """The peak-table class of an op: its dtype's, fp32 → tf32 when TF32 ran it."""
    cls = dtype_class(dtype)
    if cls == "fp32" and (tf32 or (ctx.manifest and ctx.manifest.allow_tf32)):
        return "tf32"
    return cls


def peaks(ctx: Facts, classes) -> tuple[dict[str, float], str, dict[str, str]]:
    """Peak FLOP/s per dtype class, where they came from, and why a class has none."""
    out: dict[str, float] = {}
    missing: dict[str, str] = {}
    classes = sorted(classes, key=lambda c: (c is None, str(c)))  # one order, one report
    if ctx.overrides.peak_tflops:
        return {c: ctx.overrides.peak_tflops * 1e12 for c in classes}, "override", {}
    if ctx.cpu:
        cal = ctx.manifest.calibration if ctx.manifest else None
        if not (cal and cal.peak_flops):
            return {}, "CPU run without a job.json calibration", {}
        cal_cls = dtype_class(cal.dtype) or "fp32"
        for c in classes:
            if c == cal_cls or (c == "tf32" and cal_cls == "fp32"):
                out[c] = cal.peak_flops
            else:
                missing[str(c)] = f"the calibration measured {cal.dtype}, not {c}"
        return out, f"job.json calibration ({cal.dtype} matmul)", missing
    if ctx.spec is None:
        return {}, "device unknown to the spec table (pass --peak-tflops)", {}
    for c in classes:
        p = ctx.spec.peak(c)
        if p is None and c == "tf32":
            p = ctx.spec.peak("fp32")  # no TF32 units (V100, MI355X): fp32 runs as fp32
        if p is None:
            missing[str(c)] = f"{ctx.spec.name} has no {c} peak" if c else "dtype not traced"
        else:
            out[c] = p
    return out, f"{ctx.spec.name} peak per dtype", missing


def _host_bound(ctx: Facts) -> dict[int, dict]:
    query = sql.query(
        "levels.compute",
        "host_bound_by_rank",
        windows=ctx.windows,
        host_bound=sql.query("metrics.host_bound", "host_bound", gaps=ctx.device_gaps),
    )
    rows = ctx.run.sql(query).fetchall()
    return {
        r: {"host_bound_ns": hb, "host_gaps": g, "gap_ns": gap, "steps": n, "median_kernel_ns": mk}
        for r, n, hb, g, gap, mk in rows
    }


def _op_groups(ctx: Facts) -> tuple[list[dict], dict, str, dict]:
    """Counted ops in each rank's window, grouped by (rank, name, dtype, tf32, phase, and
    whether the op ran faster than its dtype's peak — a suspect count); the peaks."""
    ops = W.ops_in("SELECT * FROM op_flops", ctx.windows)
    kinds = ctx.run.sql(sql.query("levels.compute", "op_dtypes", ops=ops)).fetchall()
    cls = {(d, bool(t)): _op_class(ctx, d, bool(t)) for d, t in kinds}
    peak, src, missing = peaks(ctx, set(cls.values()))
    values = ", ".join(
        f"({sql_str(d) if d is not None else 'NULL'}, {bool(t)}, {peak.get(c) or 'NULL'}::DOUBLE)"
        for (d, t), c in cls.items()
    )
    p = (
        f"SELECT * FROM (VALUES {values}) AS p(dtype, tf32, peak)"
        if values
        else "SELECT NULL AS dtype, false AS tf32, NULL AS peak"
    )
    rows = ctx.run.sql(sql.query("levels.compute", "op_groups", ops=ops, peaks=p)).fetchall()
    keys = ("rank", "name", "dtype", "tf32", "phase", "suspect", "winograd", "n", "n_null")
    keys += ("flops",)
    keys += ("timed_flops", "device_ns", "null_device_ns", "note", "max_peak_ratio")
    groups = [dict(zip(keys, r, strict=True)) for r in rows]
    for g in groups:
        g["cls"] = cls.get((g["dtype"], bool(g["tf32"])))
    return groups, peak, src, missing


def _suspects(groups: list[dict]) -> dict[tuple[str, str | None], tuple[float, bool]]:
    """(op, class) → (the worst ratio to the peak among its ops that ran faster than it,
    whether every such op ran a Winograd convolution)."""
    out: dict[tuple[str, str | None], tuple[float, bool]] = {}
    for g in groups:
        if g["suspect"]:
            key = (g["name"], g["cls"])
            ratio, wino = out.get(key, (0.0, True))
            out[key] = (max(ratio, g["max_peak_ratio"] or 0.0), wino and bool(g["winograd"]))
    return out


def _rank_flops(groups: list[dict], peak: dict) -> dict[int, dict]:
    """Per rank: model and hardware FLOPs, their time at peak, GEMM efficiency inputs."""
    out: dict[int, dict] = {}
    for g in groups:
        r = out.setdefault(
            g["rank"],
            {
                "fwd": {},
                "hw": {},
                "bwd": 0,
                "at_peak_timed": 0.0,
                "timed_ns": 0,
                "n_null": 0,
                "null_ns": 0,
                "no_peak_flops": 0.0,
            },
        )
        fl = g["flops"] or 0.0
        r["hw"][g["cls"]] = r["hw"].get(g["cls"], 0.0) + fl
        if g["phase"] == "forward":
            r["fwd"][g["cls"]] = r["fwd"].get(g["cls"], 0.0) + fl
        elif g["phase"] == "backward" and fl:
            r["bwd"] += 1
        r["n_null"] += g["n_null"]
        r["null_ns"] += g["null_device_ns"] or 0
        p = peak.get(g["cls"])
        if p is None:
            r["no_peak_flops"] += fl
        elif g["timed_flops"] and g["device_ns"] and not g["suspect"]:
            r["at_peak_timed"] += g["timed_flops"] / p
            r["timed_ns"] += g["device_ns"]
    return out


def _at_peak(flops_by_class: dict, peak: dict) -> float:
    return sum(fl / peak[c] for c, fl in flops_by_class.items() if peak.get(c))


def top_ops(groups: list[dict], peak: dict, limit: int | None = 10) -> list[S.OpRow]:
    """The FLOPs table's ops by device time (`uncounted` op_without_flops where the trace
    gives none of their FLOPs)."""
    agg: dict[str, dict] = {}
    for g in groups:
        a = agg.setdefault(
            g["name"],
            {"name": g["name"], "dtype": g["dtype"], "count": 0, "flops": 0.0, "device_ns": 0,
             "not_counted": 0, "timed": 0.0, "at_peak": 0.0, "peak_ns": 0},
        )  # fmt: skip
        a["count"] += g["n"]
        a["not_counted"] += g["n_null"]
        a["flops"] += g["flops"] or 0.0
        a["device_ns"] += (g["device_ns"] or 0) + (g["null_device_ns"] or 0)
        if g["timed_flops"] and g["device_ns"] and not g["suspect"]:
            a["timed"] += g["timed_flops"]
            a["peak_ns"] += g["device_ns"]
            if peak.get(g["cls"]):
                a["at_peak"] += g["timed_flops"] / peak[g["cls"]]
    rows = []
    for a in sorted(agg.values(), key=lambda a: (-a["device_ns"], a["name"]))[:limit]:
        ns = a["peak_ns"]
        frac = a["at_peak"] / (ns * 1e-9) if ns and a["at_peak"] else None
        rows.append(
            S.OpRow(
                name=a["name"],
                dtype=a["dtype"],
                count=a["count"],
                flops=a["flops"] or None,
                device_ms=a["device_ns"] / 1e6,
                not_counted=a["not_counted"],
                achieved_tflops=a["timed"] / ns * 1e-3 if ns else None,
                op_peak_fraction=frac if frac is not None and frac <= 1 else None,
                uncounted=None if a["flops"] else "op_without_flops",
            )
        )
    return rows


# The order the compute level's `metrics.top_ops` and the low-MFU finding's `details` have
# always written an op of the FLOPs table in (`not_counted` before `device_ms`); the other
# ops are in `OpRow`'s order, the report's `top_ops[]`.
_TABLE_OP_KEYS = ("name", "dtype", "count", "flops", "not_counted", "device_ms",
                  "achieved_tflops", "peak_fraction", "uncounted")  # fmt: skip


def op_json(op: S.OpRow) -> dict[str, Any]:
    """An op row as JSON values, in the order its level has always written it."""
    row = msgspec.to_builtins(op)
    if op.flops is not None or op.uncounted == "op_without_flops":  # a FLOPs-table op
        row = {k: row[k] for k in _TABLE_OP_KEYS}
    return row


def predicted_flops_per_step(ctx: Facts) -> tuple[float | None, str | None]:
    m = ctx.manifest
    if m is None:
        return None, "no job.json"
    c = m.model
    tokens = m.tokens_per_step or ((m.global_batch or 0) * (c.seq or 0)) or None
    if not (tokens and c.params and c.layers and c.heads and c.hidden and c.seq):
        return None, "job.json lacks the model size or tokens per step"
    n = float(c.active_params or c.params) - float(c.embedding_params or 0)
    per_token = transformer_flops_per_token(
        n, c.layers, c.heads, c.hidden // c.heads, c.seq,
        hidden=c.hidden, vocab=c.vocab, causal=c.causal,
    )  # fmt: skip
    return tokens * per_token, None


# the summary's figures that stand on counted FLOPs: null together, for one reason
FLOP_FIGURES = tuple(
    f.key
    for f in (F.MFU, F.HFU, F.GEMM_EFFICIENCY, F.MODEL_FLOPS_PER_STEP, F.FLOPS_PER_STEP,
              F.PEAK_FLOPS_SOURCE)
)  # fmt: skip


@dataclass
class ComputeFacts:
    ranks: list[S.ComputeRankRow]  # per rank: mfu, hfu, gemm_efficiency, FLOPs, host-bound …
    top_ops: list[S.OpRow]
    peak_flops_by_dtype: dict[str, float]
    peak_source: str
    mfu: float | None
    hfu: float | None
    gemm_efficiency: float | None
    flops_per_step: float | None  # all ranks
    model_flops_per_step: float | None  # all ranks
    flops_by_dtype: dict[str, float]
    uncounted_ops_per_step: float | None
    idle_fraction: float | None
    host_bound_fraction: float | None
    predicted_flops_per_step: float | None
    predicted_why: str | None
    counted_over_predicted: float | None
    notes: list[str] = field(default_factory=list)
    null_reasons: dict[str, str] = field(default_factory=dict)  # summary figure → why null
    uncounted: U.UncountedFacts | None = None  # compute time whose FLOPs are unknown
    # rank → share of its analysed steps that capture CUDA/HIP graphs (launches recorded,
    # kernels not run): not a report figure, it tells the idle rule what the idle is
    capture_step_fraction: dict[int, float] = field(default_factory=dict)

    @property
    def uncounted_compute_fraction(self) -> float | None:
        return self.uncounted.fraction if self.uncounted else None


def facts(ctx: Facts) -> ComputeFacts:
    """The compute facts (`ctx.compute` caches them)."""
    groups, peak, peak_src, no_peak = _op_groups(ctx)
    suspects = _suspects(groups)
    flops = _rank_flops(groups, peak)
    hb = {} if ctx.cpu else _host_bound(ctx)
    unc = U.facts(ctx)
    shapes = N.shapes_recorded(ctx)
    capturing = N.capture_steps(ctx)
    per_rank: list[S.ComputeRankRow] = []
    over_peak: set[str] = set()  # efficiencies above 100% on some rank: never a figure
    for r in ctx.ranks:
        rank, win_s = r.rank, r.window_ms * 1e-3
        f = flops.get(rank)
        steps = max(r.steps, 1)
        row = S.ComputeRankRow(rank=rank, uncounted_compute_fraction=unc.by_rank.get(rank))
        if f:
            model = {c: 3 * v for c, v in f["fwd"].items()} if f["bwd"] else f["fwd"]
            mfu = _at_peak(model, peak) / win_s if win_s and peak else None
            hfu = _at_peak(f["hw"], peak) / win_s if win_s and peak else None
            eff = f["at_peak_timed"] / (f["timed_ns"] * 1e-9) if f["timed_ns"] else None
            row.flops_per_step = sum(f["hw"].values()) / steps
            row.model_flops_per_step = sum(model.values()) / steps
            row.flops_by_dtype = {str(c): v / steps for c, v in f["hw"].items() if v}
            row.mfu = mfu if mfu and mfu <= 1 else None
            row.hfu = hfu if hfu and hfu <= 1 else None
            row.gemm_efficiency = eff if eff and eff <= 1 else None
            row.at_peak_ms_per_step = _at_peak(f["hw"], peak) / steps * 1e3
            row.uncounted_ops_per_step = f["n_null"] / steps
            row.uncounted_device_ms_per_step = f["null_ns"] / 1e6 / steps
            over_peak |= {
                k for k, v in (("MFU", mfu), ("HFU", hfu), ("GEMM efficiency", eff)) if v and v > 1
            }
        h = hb.get(rank, {})
        win_ns = win_s * 1e9
        row.idle_fraction = r.idle_fraction
        row.compute_fraction = r.compute_fraction
        row.host_bound_fraction = (
            h.get("host_bound_ns", 0) / win_ns if win_ns and h else (None if ctx.cpu else 0)
        )
        row.host_bound_ms_per_step = h.get("host_bound_ns", 0) / 1e6 / steps if h else None
        row.host_gaps_per_step = h.get("host_gaps", 0) / steps if h else None
        row.median_kernel_us = (h.get("median_kernel_ns") or 0) / 1e3 if h else None
        per_rank.append(row)
    over = N.over_peak(over_peak)
    notes = N.sanity_notes(suspects, peak, per_rank, no_peak, calibrated=ctx.cpu, over=over)
    notes += N.capture_notes(ctx)
    mfu = mean(known(r.mfu) for r in per_rank)
    eff = mean(known(r.gemm_efficiency) for r in per_rank)
    reasons: dict[str, str] = {}  # a null figure of the summary → why
    if over:  # an efficiency above 100% is shown as unknown: its note says why
        reasons = dict.fromkeys(FLOP_FIGURES, over)
    elif mfu is None:
        counted = any(g["flops"] for g in groups)
        why = peak_src if counted else "no FLOPs counted: " + N.no_flops_cause(groups, unc, shapes)
        notes.append(f"MFU unknown: {why}")
        reasons = dict.fromkeys(FLOP_FIGURES, notes[-1])
    elif unc.fraction:
        notes.append(
            f"MFU is of the counted work: {unc.fraction:.0%} of compute time is GEMM/attention "
            f"work whose FLOPs tracekit cannot count ({U.describe(unc)})"
        )
    nsteps = max(max((r.steps for r in ctx.ranks), default=1), 1)

    def run_total(get):  # per step, all ranks (ranks without counted ops left out)
        vals = [
            get(row) * max(x.steps, 1)
            for row, x in zip(per_rank, ctx.ranks, strict=True)
            if get(row) is not UNSET
        ]
        return sum(vals) / nsteps if vals else None

    by_dtype: dict[str, float] = {}
    for r in per_rank:
        for c, v in (r.flops_by_dtype or {}).items():
            by_dtype[c] = by_dtype.get(c, 0.0) + v
    pred, pred_why = predicted_flops_per_step(ctx)
    model_total = run_total(lambda r: r.model_flops_per_step)
    uncounted = run_total(lambda r: r.uncounted_ops_per_step)
    if uncounted:
        names = sorted({(g["name"], g["note"]) for g in groups if g["n_null"]})
        notes.append(
            f"{uncounted:.0f} ops per step not counted (FLOPs unknown from the trace): "
            + "; ".join(f"{n}: {N.advice(why, shapes)}" for n, why in names[:4])
        )
    ratio = None
    if pred_why:
        notes.append(f"predicted FLOPs unknown: {pred_why}")
        reasons[F.PREDICTED_FLOPS_PER_STEP.key] = notes[-1]
    elif model_total and pred:
        ratio = model_total / pred
        if abs(ratio - 1) > 0.2:
            notes.append(
                f"model FLOPs counted are {ratio:.2f}× the 6N + 6hV + 12LHQT model: "
                "non-transformer work, or ops without recorded shapes explain the difference"
            )
    if ctx.cpu:
        reasons[F.HOST_BOUND_FRACTION.key] = (
            "CPU run: host-bound launch gaps need device kernels and their launches"
        )
    if unc.fraction is None:
        reasons[F.UNCOUNTED_COMPUTE_FRACTION.key] = "no compute time in the analysed windows"
    return ComputeFacts(
        capture_step_fraction={
            r.rank: min(1.0, capturing.get(r.rank, 0) / max(r.steps, 1)) for r in ctx.ranks
        },
        ranks=per_rank,
        top_ops=merge_top_ops(top_ops(groups, peak, limit=None), unc.top_ops, unc.other_ops),
        peak_flops_by_dtype={str(c): v for c, v in peak.items()},
        peak_source=peak_src,
        mfu=mfu,
        hfu=mean(known(r.hfu) for r in per_rank),
        gemm_efficiency=eff,
        flops_per_step=run_total(lambda r: r.flops_per_step) or None,
        model_flops_per_step=model_total or None,
        flops_by_dtype=by_dtype,
        uncounted_ops_per_step=uncounted,
        idle_fraction=mean(r.idle_fraction for r in ctx.ranks),
        host_bound_fraction=mean(r.host_bound_fraction for r in per_rank),
        predicted_flops_per_step=pred,
        predicted_why=pred_why,
        counted_over_predicted=ratio,
        notes=notes,
        null_reasons=reasons,
        uncounted=unc,
    )


def merge_top_ops(
    counted: list[S.OpRow], uncounted: list[S.UncountedOpRow], other: list[S.OpRow], limit=10
) -> list[S.OpRow]:
    """`top_ops`: every op by device time, whatever its FLOPs — the table's ops, the
    uncounted ops (and graph launches) and the formula-less ops that are not matmul work
    (`other`: `uncounted` null); FLOPs null where unknown."""
    rows = list(counted)
    for o in uncounted:
        if o.why == "op_without_flops":
            continue  # a table op: already in `counted` with its not_counted
        rows.append(
            S.OpRow(
                name=o.name,
                dtype=None,
                count=o.count,
                flops=None,
                device_ms=o.device_ms,
                not_counted=o.count,
                achieved_tflops=None,
                op_peak_fraction=None,
                uncounted=o.why,
            )
        )
    rows += other
    return sorted(rows, key=lambda a: (-a.device_ms, a.name))[:limit]
