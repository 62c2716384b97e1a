"""The step model of the run (`tracekit.stepmodel`), and what each finding's remedy wins.

`model(ctx)` builds the graph of each rank's analysed window once (`ctx.step_model`);
`what_if(ctx, specs)` replays it with changes — `microbatches=M` and `interleave=V` get the
pipeline's measured operations from `diagnosers.analyses.pipeline`; `impacts(ctx,
findings)` replays each finding's candidate changes — its rule names them
(`Rule.candidates`: overlap for exposed communication, the predicted bus bandwidth for a
slow collective, no straggler, no host gaps, more microbatches or an interleaved schedule
for a pipeline bubble …) — so the finding's `impact_ms` is the step time the best of them
saves in the replay, not a per-finding estimate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.metrics import windows as W
from tracekit.metrics.breakdown import windows_of
from tracekit.stepmodel import changes as C
from tracekit.stepmodel.model import Outcome, StepModel

if TYPE_CHECKING:
    from diagnosers.context import Context
    from diagnosers.findings import Finding


NODE_BUDGET = 40_000  # the graph's size the report builds (Python loops: ~10 µs a node)
# one step of every rank above this (estimated nodes, as NODE_BUDGET) is not modeled: the
# graph's build and replays would cost seconds per 100,000 nodes (docs/step-model.md,
# "Cost"); twice the 8-rank benchmark's step (≈ 207,000 estimated, 45,804 built)
MAX_STEP_NODES = 400_000


def model(ctx: Context) -> StepModel | None:
    """The step model of the run's analysed windows — or, where the graph of all of them
    would pass NODE_BUDGET nodes, of each rank's last analysed steps that fit (a note says
    which): a replay is a loop over nodes, and the report replays once per remedy. None
    when no rank has a window, or when one step of every rank passes MAX_STEP_NODES
    (`plan(ctx)` says why)."""
    windows, note = ctx.step_model_plan
    if windows is None:
        return None
    sm = StepModel(ctx.run, windows)
    if sm.empty:
        return None
    sm.notes = [note] if note else []
    return sm


def plan(ctx: Context) -> tuple[str | None, str | None]:
    """(the windows the step model covers as SQL rows, a note on them); windows None
    when the model is not built, the note saying why."""
    wins = [w for w in windows_of(ctx.ranks) if w.start_ns is not None]
    if not wins:
        return None, "no rank has an analysed window to replay"
    steps = max((w.n_steps for w in wins), default=0)
    (n,) = ctx.run.sql(
        f"""WITH w AS {ctx.window_sql()}
        SELECT count(*) FROM events e JOIN w ON e.rank = w.rank
        WHERE e.kind IN ('kernel', 'memcpy', 'memset', 'comm_thread', 'runtime')
          AND e.ts_ns >= w.start_ns AND e.ts_ns < w.end_ns"""
    ).fetchall()[0]
    per_step = 2 * n / max(steps, 1)  # device work and the host events that launch it
    if per_step > MAX_STEP_NODES:
        return None, (
            f"the step model is not built: one step of the {len(wins):,} ranks is "
            f"≈ {per_step:,.0f} nodes, more than the {MAX_STEP_NODES:,} it models at most "
            "(analyse fewer ranks with --ranks to model them); findings keep their rules' "
            "impact"
        )
    if steps <= 1:
        return ctx.windows, None
    keep = max(int(NODE_BUDGET // max(per_step, 1)), 1)
    if keep >= steps:
        return ctx.windows, None
    # the steps as the window has them: on the device for `steps` (`device_steps`)
    steps_of = "(SELECT * FROM device_steps WHERE analysed)" if ctx.window == "steps" else "steps"
    rows = ctx.run.sql(
        f"""WITH w AS {ctx.window_sql()},
        s AS (SELECT st.rank, st.ts_ns, w.end_ns,
                     row_number() OVER (PARTITION BY st.rank ORDER BY st.ts_ns DESC) AS k
              FROM {steps_of} st JOIN w ON st.rank = w.rank
              WHERE st.ts_ns >= w.start_ns AND st.ts_ns < w.end_ns)
        SELECT rank, min(ts_ns), any_value(end_ns), count(*) FROM s WHERE k <= {keep}
        GROUP BY rank ORDER BY rank"""
    ).fetchall()
    sql_rows = W.table(ctx.run, [(int(r), 0, int(a), int(b), int(c)) for r, a, b, c in rows])
    return sql_rows, (
        f"the step model covers each rank's last {keep} of {steps} analysed steps "
        f"(≈ {per_step:,.0f} nodes a step; at most {NODE_BUDGET:,} are replayed)"
    )


def not_built(ctx: Context, default: str) -> str:
    """Why the run has no step model: the plan's reason, else `default`."""
    windows, note = ctx.step_model_plan
    return note if windows is None and note else default


def pipeline_shape(ctx: Context) -> C.PipelineShape | None:
    """The pipeline's measured operations, split into the part that scales with the
    microbatch's size (GPU runs: compute kernels with counted FLOPs; CPU runs: the ops'
    work beyond their dispatch, `_cpu_work`) and the per-operation rest (host work,
    launches), with the measured hop (`tracekit.stepmodel.pipeline`)."""
    from diagnosers.analyses.pipeline import measure

    pipe = ctx.pipeline
    if pipe is None or not pipe.microbatches or pipe.virtual != 1:
        return None
    if (pipe.schedule or "1f1b").lower() not in ("1f1b", "gpipe"):
        return None
    meas = measure(ctx, pipe)
    if meas is None or not meas.duration:
        return None
    work = _cpu_work(ctx, meas) if ctx.cpu else {}
    ops = [op for op in meas.duration if op[0] in ("F", "B")]
    # an operation whose ops ran on another thread than its label has no work found: its
    # split is the FLOP share, as on GPU runs
    share = _flop_share(ctx, meas) if any(op[:2] not in work for op in ops) else {}
    scaled: dict[tuple[str, int], list[float]] = {}
    fixed: dict[tuple[str, int], list[float]] = {}
    for op in ops:
        d = meas.duration[op]
        kind, stage, _mb = op
        if (kind, stage) in work:
            w = min(work[(kind, stage)], d)
        else:
            w = d * share.get(meas.stage_rank.get(stage, stage), 0.0)
        scaled.setdefault((kind, stage), []).append(w)
        fixed.setdefault((kind, stage), []).append(d - w + meas.overhead_ms.get(op, 0.0))

    def mean(v: list[float]) -> float:
        return sum(v) / len(v) if v else 0.0

    return C.PipelineShape(
        stages=pipe.stages,
        microbatches=pipe.microbatches,
        schedule=(pipe.schedule or "1f1b").lower(),
        stage_rank=meas.stage_rank,
        scaled_ms={k: mean(v) for k, v in scaled.items()},
        fixed_ms={k: mean(v) for k, v in fixed.items()},
        hop_ms=max(meas.latency_ms, 0.0),
    )


def _flop_share(ctx: Context, meas) -> dict[int, float]:
    """Per rank: the share of its time inside operations that counted-FLOP work takes."""
    flop_ns = dict(
        ctx.run.sql(
            "SELECT rank, sum(device_ns) FROM ("
            + W.ops_in("SELECT * FROM op_flops WHERE flops IS NOT NULL", ctx.windows)
            + ") GROUP BY rank"
        ).fetchall()
    )
    share = {}
    for rank, occ in meas.occupied_ms.items():
        steps = ctx.steps_of.get(rank, 1)
        flop_ms = (flop_ns.get(rank) or 0) / steps / 1e6
        share[rank] = min(flop_ms / occ, 1.0) if occ else 0.0
    return share


def _cpu_work(ctx: Context, meas) -> dict[tuple[str, int], float]:
    """(F|B, stage) → the mean work (ms) of a CPU run's operations of that kind
    (`tracekit.stepmodel.pipeline.operation_work`), for the kinds whose labels have ops
    on their own thread (the others' split is the FLOP share)."""
    from diagnosers.analyses.pipeline import operation_key
    from tracekit import sql
    from tracekit.model.opclass import VIEW_OPS
    from tracekit.sql.text import sql_str
    from tracekit.stepmodel.pipeline import operation_work

    evs = W.starting_in("SELECT * FROM events", ctx.windows)
    names = ", ".join(sql_str(n) for n in sorted(VIEW_OPS))
    (dispatch,) = ctx.run.sql(
        sql.query("levels.pipeline", "dispatch_ns", ops=evs, names=names)
    ).fetchall()[0]
    rows = ctx.run.sql(sql.query("levels.pipeline", "operation_host_ops", labels=evs)).fetchall()
    stage_of = {rank: stage for stage, rank in meas.stage_rank.items()}
    sums: dict[tuple[str, int], list[float]] = {}
    for (rank, label, _ts), w in operation_work(rows, dispatch or 0.0).items():
        op = operation_key(label, stage_of.get(rank, 0))
        if op is None or op[0] not in ("F", "B"):
            continue
        acc = sums.setdefault(op[:2], [0.0, 0])
        acc[0] += w / 1e6
        acc[1] += 1
    return {k: t / n for k, (t, n) in sums.items()}


def what_if(ctx: Context, specs: list[str], path: bool = True) -> Outcome:
    """The replay with the changes `specs` (TracekitError / NotApplicable: exit 2);
    `path=False`: without the critical path of the replay."""
    changes = [C.parse(s) for s in specs]
    if {type(c) for c in changes} >= {C.Microbatches, C.Interleave}:
        raise C.NotApplicable("--change microbatches=M and interleave=V do not combine (yet)")
    sm = ctx.step_model
    if sm is None:
        raise C.NotApplicable(not_built(ctx, "the run has no analysed window to replay"))
    for ch in changes:
        if isinstance(ch, C.Microbatches | C.Interleave):
            ch.pipeline = pipeline_shape(ctx)
        if isinstance(ch, C.Overlap):
            ch.contended = contended(ctx)
    return sm.what_if(changes, path=path)


def contended(ctx: Context) -> bool:
    """A CPU run whose ranks have no spare core (job.json's `cpu_cores_per_rank` < 2):
    gloo's communication threads share the cores compute runs on. Without job.json the
    trace does not say, and overlap is modeled as free."""
    man = ctx.manifest
    cores = man.cpu_cores_per_rank if man is not None else None
    return bool(ctx.cpu and cores is not None and cores < 2)


GAIN_MS = 0.05  # a change saving less than this …
GAIN_SHARE = 0.005  # … or than this share of the replayed step wins nothing
# a critical finding claims the fix to do first: its best replayed remedy saves at least
# this share of the replayed step, else it is a warning (a straggler finding on
# v100_dlrm_8rank was critical on 0.51 ms of a 16 ms step)
CRITICAL_SHARE = 0.05
REPLAYED = ("warning", "critical")  # the severities whose candidates are replayed


def candidates(ctx: Context, f: Finding) -> list[str]:
    """The changes a finding's remedy would make: its rule's `candidates` (each rule owns
    them, `diagnosers.rules.base.Rule.candidates`), without repeats."""
    try:
        specs = f.rule().candidates(ctx, f)
    except Exception:  # a rule's candidates must not break the report
        return []
    return list(dict.fromkeys(s for s in specs or [] if s))


def gainful(o: Outcome) -> bool:
    """Whether a replayed change saves time worth naming (≥ GAIN_MS and ≥ GAIN_SHARE of
    the replayed step)."""
    return o.saved_ms >= max(GAIN_MS, GAIN_SHARE * o.replayed_step_ms)


def impacts(ctx: Context, findings: list[Finding]) -> list[tuple[Finding, Outcome]]:
    """Each warning or critical finding's candidate changes replayed. The finding gets
    `remedies` (each change, its predicted step and saving, best first) and `impact_ms`
    = the best saving (≥ 0; 0 when no candidate applies). Its remedy text leads with the
    replay: the best change and what it saves, or that none saves time and what each
    cost. A finding none of whose candidates wins is not critical on a remedy the replay
    refutes: its severity is capped at warning (docs/findings.md). Returns every
    (finding, replay)."""
    out = []
    if ctx.step_model is None:
        return out
    for f in findings:
        if f.severity not in REPLAYED:
            continue
        specs = candidates(ctx, f)
        if not specs:
            continue
        done: list[Outcome] = []
        skipped: list[str] = []
        for spec in specs:
            try:
                done.append(what_if(ctx, [spec], path=False))  # the report shows no path
            except C.NotApplicable as exc:
                why = str(exc).removeprefix(f"--change {spec}: ")
                skipped.append(f"{spec} does not apply ({why})")
        done.sort(key=lambda o: -o.saved_ms)
        f.remedies = [
            {
                "change": " + ".join(o.change),
                "predicted_step_ms": o.predicted_step_ms,
                "saved_ms": o.saved_ms,
            }
            for o in done
        ]
        f.impact_ms = max(done[0].saved_ms, 0.0) if done else 0.0
        f.remedy = lead(done, skipped) + ("; " + f.remedy if f.remedy else "")
        if f.severity == "critical" and not (
            done
            and gainful(done[0])
            and done[0].saved_ms >= CRITICAL_SHARE * done[0].replayed_step_ms
        ):
            f.severity = "warning"
        out += [(f, o) for o in done]
    _same_change(findings)
    return out


def _same_change(findings: list[Finding]) -> None:
    """Two findings whose best remedy is the same change claim one saving, not two: the
    later ones (by impact) say so, naming the first (a100_sendrecv_2rank: TK-C202 and
    TK-C203 each claimed no-host-gaps' 202.4 ms)."""
    first: dict[str, Finding] = {}
    ranked = [f for f in findings if f.remedies and (f.impact_ms or 0) > 0]
    for f in sorted(ranked, key=lambda f: -(f.impact_ms or 0)):
        change = f.remedies[0]["change"]
        if change in first:
            f.remedy += (
                f"; the same change as {first[change].code}'s remedy: one saving, "
                "not two"
            )
        else:
            first[change] = f


def lead(done: list[Outcome], skipped: list[str]) -> str:
    """The remedy's first words: the best replayed change and what it saves, then what
    each other candidate did — or that none saves time."""

    def what(o: Outcome) -> str:
        spec = " + ".join(o.change)
        if o.saved_ms < 0:
            return f"{spec} makes the step {-o.saved_ms:.2f} ms longer"
        return f"{spec} saves {o.saved_ms:.2f} ms"

    parts = [what(o) for o in done]
    parts += skipped
    if done and gainful(done[0]):
        return (
            f"replayed, {what(done[0])} a step ({done[0].replayed_step_ms:.2f} → "
            f"{done[0].predicted_step_ms:.2f} ms)" + "".join(f"; {p}" for p in parts[1:])
        )
    return "replayed, none of the candidate changes saves time: " + "; ".join(parts)
