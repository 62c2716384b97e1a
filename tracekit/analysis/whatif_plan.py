"""The step model of the run (`tracekit.stepmodel`) and its what-if replays, planned.

`plan(ctx)` picks the windows the graph covers within its node budget (or says why it is
not built); `model(ctx)` builds the graph of those windows once (`ctx.step_model`);
`what_if(ctx, specs)` replays it with changes — `microbatches=M` and `interleave=V` get the
pipeline's measured operations (`pipeline_shape`, from `tracekit.analysis.pipeline`),
`overlap` whether the run's cores are contended. What each finding's remedy wins is
judged in `diagnosers.impact`.

`start(ctx)` builds the model on a thread beside the analysis (`Run.beside`): its graph
and replays are Python holding the GIL, the levels mostly DuckDB queries that release
it; `model(ctx)` then takes the thread's result. TRACEKIT_STEP_MODEL_THREAD=0 builds it
where it is first asked for instead (the same model). `replay_beside` replays the
findings' remedies on a thread too, once the model is built, with their changes
`prepared` on the caller's thread.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from tracekit.ingest.steptables import MAX_STEP_NODES  # the ingest's test too
from tracekit.metrics import windows as W
from tracekit.metrics.breakdown import windows_of
from tracekit.stepmodel.nogc import Held  # gc, threading: no step model loaded

if TYPE_CHECKING:
    from concurrent.futures import Future

    from tracekit.analysis.facts import Facts
    from tracekit.stepmodel import changes as C
    from tracekit.stepmodel.model import Outcome, StepModel
    from tracekit.store.run import Run


NODE_BUDGET = 40_000  # the graph's size the report builds (Python loops: ~10 µs a node)
SWITCH_S = 0.0005  # the GIL's switch interval while the remedies replay (`replay_beside`)
THREAD_ENV = "TRACEKIT_STEP_MODEL_THREAD"  # "0": no thread (`start` does nothing)
_BESIDE: WeakKeyDictionary[Facts, Future] = WeakKeyDictionary()  # `start`'s builds


def model(ctx: Facts) -> StepModel | None:
    """The step model of the run's analysed windows — or, where the graph of all of them
    would pass NODE_BUDGET nodes, of each rank's last analysed steps that fit (a note says
    which): a replay is a loop over nodes, and the report replays once per remedy. None
    when no rank has a window, or when one step of every rank passes MAX_STEP_NODES
    (`plan(ctx)` says why). The model `start(ctx)` built, where it did (what it raised
    is raised here, as building it here would)."""
    job = _BESIDE.pop(ctx, None)
    if job is not None:
        made, sm = job.result()
        vars(ctx).setdefault("step_model_plan", made)  # the thread's plan: not made again
        return sm
    windows, note = ctx.step_model_plan
    if windows is None:
        return None
    return _build(ctx.run, windows, note, prepare=False)


def start(ctx: Facts) -> None:
    """Start planning and building `ctx`'s step model on a thread (`Run.beside`), for
    `model(ctx)` to take. The plan's inputs are read here, on the caller's thread: the
    thread reads nothing of `ctx` (a cached property computed on two threads at once
    would be computed twice, or wait on a lock the waiting thread holds); its queries
    (a count of the windows' events, 30 ms at 8 big ranks) run on the thread. What the
    thread raises is raised where the model is asked for."""
    if os.environ.get(THREAD_ENV, "1") == "0" or ctx in _BESIDE or "step_model" in vars(ctx):
        return
    if "step_model_plan" in vars(ctx):
        windows, note = ctx.step_model_plan
        if windows is not None:
            _BESIDE[ctx] = ctx.run.beside(_planned, ctx.run, (windows, note))
        return
    try:
        given = _given(ctx)
    except Exception:
        return
    _BESIDE[ctx] = ctx.run.beside(_planned, ctx.run, None, given)


def _planned(run: Run, made: tuple | None, given: tuple = ()) -> tuple:
    """(the plan, the model of its windows or None): the plan `made`, else made from
    `given` (`_given`)."""
    windows, note = made = made or _plan(run, *given)
    return made, None if windows is None else _build(run, windows, note)


def _build(run: Run, windows: str, note: str | None, prepare: bool = True) -> StepModel | None:
    """The model of `windows` (None when empty); `prepare`: with its base path and the
    collectives' slack computed now (`StepModel.prepare`)."""
    # imported here, on the thread that builds it: the step model's modules load while
    # the caller's levels run (numpy and numpy.ma are loaded before the thread starts:
    # `Run.beside` calls `load_before_threads`)
    from tracekit.stepmodel.model import StepModel

    sm = StepModel(run, windows)
    if sm.empty:
        return None
    sm.notes = [note] if note else []
    if prepare:
        sm.prepare()
    return sm


def plan(ctx: Facts) -> tuple[str | None, str | None]:
    """(the windows the step model covers as SQL rows, a note on them); windows None
    when the model is not built, the note saying why."""
    return _plan(ctx.run, *_given(ctx))


def _given(ctx: Facts) -> tuple:
    """What the plan reads of `ctx`: the analysed windows (as `Window`s and as SQL rows),
    the window's kind."""
    return windows_of(ctx.ranks), ctx.windows, ctx.window


def _plan(run: Run, ranks_windows: list, windows: str, window: str) -> tuple:
    """`plan` of the windows `_given` read."""
    wins = [w for w in ranks_windows if w.start_ns is not None]
    if not wins:
        return None, "no rank has an analysed window to replay"
    steps = max((w.n_steps for w in wins), default=0)
    (n,) = run.sql(
        f"""WITH w AS ({windows})
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
        return windows, None
    keep = max(int(NODE_BUDGET // max(per_step, 1)), 1)
    if keep >= steps:
        return windows, None
    # the steps as the window has them: on the device for `steps` (`device_steps`)
    steps_of = "(SELECT * FROM device_steps WHERE analysed)" if window == "steps" else "steps"
    rows = run.sql(
        f"""WITH w AS ({windows}),
        s AS (SELECT st.rank, st.ts_ns, w.end_ns,
                     row_number() OVER (PARTITION BY st.rank ORDER BY st.ts_ns DESC) AS k
              FROM {steps_of} st JOIN w ON st.rank = w.rank
              WHERE st.ts_ns >= w.start_ns AND st.ts_ns < w.end_ns)
        SELECT rank, min(ts_ns), any_value(end_ns), count(*) FROM s WHERE k <= {keep}
        GROUP BY rank ORDER BY rank"""
    ).fetchall()
    sql_rows = W.table(run, [(int(r), 0, int(a), int(b), int(c)) for r, a, b, c in rows])
    return sql_rows, (
        f"the step model covers each rank's last {keep} of {steps} analysed steps "
        f"(≈ {per_step:,.0f} nodes a step; at most {NODE_BUDGET:,} are replayed)"
    )


def not_built(ctx: Facts, default: str) -> str:
    """Why the run has no step model: the plan's reason, else `default`."""
    windows, note = ctx.step_model_plan
    return note if windows is None and note else default


def pipeline_shape(ctx: Facts) -> C.PipelineShape | None:
    """The pipeline's measured operations, split into the part that scales with the
    microbatch's size (GPU runs: compute kernels with counted FLOPs; CPU runs: the ops'
    work beyond their dispatch, `_cpu_work`) and the per-operation rest (host work,
    launches), with the measured hop (`tracekit.stepmodel.pipeline`)."""
    from tracekit.analysis.pipeline import measure
    from tracekit.stepmodel import changes as C

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


def _flop_share(ctx: Facts, meas) -> dict[int, float]:
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


def _cpu_work(ctx: Facts, meas) -> dict[tuple[str, int], float]:
    """(F|B, stage) → the mean work (ms) of a CPU run's operations of that kind
    (`tracekit.stepmodel.pipeline.operation_work`), for the kinds whose labels have ops
    on their own thread (the others' split is the FLOP share)."""
    from tracekit import sql
    from tracekit.analysis.pipeline import operation_key
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


def what_if(ctx: Facts, specs: list[str], path: bool = True) -> Outcome:
    """The replay with the changes `specs` (TracekitError / NotApplicable: exit 2);
    `path=False`: without the critical path of the replay."""
    from tracekit.stepmodel import changes as C

    changes = _parsed(specs)
    sm = ctx.step_model
    if sm is None:
        raise C.NotApplicable(not_built(ctx, "the run has no analysed window to replay"))
    return sm.what_if(_filled(ctx, changes), path=path)


def prepared(ctx: Facts, specs: list[str]) -> list[C.Change]:
    """The changes `specs` name, with what they read of the run filled in, for
    `replay_beside` (what `what_if` raises for them, it raises)."""
    return _filled(ctx, _parsed(specs))


def _parsed(specs: list[str]) -> list[C.Change]:
    from tracekit.stepmodel import changes as C

    changes = [C.parse(s) for s in specs]
    if {type(c) for c in changes} >= {C.Microbatches, C.Interleave}:
        raise C.NotApplicable("--change microbatches=M and interleave=V do not combine (yet)")
    return changes


def _filled(ctx: Facts, changes: list[C.Change]) -> list[C.Change]:
    """`changes` with what they read of `ctx`: the pipeline's measured operations
    (`microbatches=M`, `interleave=V`), whether the cores are contended (`overlap`)."""
    from tracekit.stepmodel import changes as C

    for ch in changes:
        if isinstance(ch, C.Microbatches | C.Interleave):
            ch.pipeline = pipeline_shape(ctx)
        if isinstance(ch, C.Overlap):
            ch.contended = contended(ctx)
    return changes


def replay_beside(ctx: Facts, jobs: list, path: bool = False) -> Future | None:
    """Replay each of `jobs` (a list of changes `prepared` on the caller's thread, or the
    exception preparing it raised) on a thread, once the model is built: the replays are
    Python holding the GIL, which the caller's queries release. The future's result is
    one item a job, in order: its `Outcome` or what it raised (the replays stop after an
    error that is not `NotApplicable`, as a loop of `what_if` would); None when the run
    has no model. The thread reads nothing of `ctx`. None (replay where asked, with
    `what_if`) where the model has no thread (TRACEKIT_STEP_MODEL_THREAD=0)."""
    if not replays_beside(ctx):
        return None
    job = _BESIDE.get(ctx)
    if job is None:
        return ctx.run.beside(_replays, None, ctx.step_model, jobs, path)
    return ctx.run.beside(_replays, job, None, jobs, path)


def replays_beside(ctx: Facts) -> bool:
    """Whether `replay_beside` replays on a thread: the model has threads (not
    TRACEKIT_STEP_MODEL_THREAD=0) and was started on one or is built; not when `start`'s
    inputs failed and the model is built where it is asked for."""
    if os.environ.get(THREAD_ENV, "1") == "0":
        return False
    return ctx in _BESIDE or "step_model" in vars(ctx)


def _replays(job: Future | None, sm: StepModel | None, jobs: list, path: bool) -> list | None:
    """`replay_beside`'s work: the model `job` built (what it raised is raised) or `sm`."""
    if job is not None:
        _made, sm = job.result()
    if sm is None:
        return None
    with _short_switch():
        return _replay_all(sm, jobs, path)


def _short_switch_on() -> float:
    """The GIL's switch interval SWITCH_S (the one found returned): the caller's queries
    beside the replays are many and short, and each returns to wait for the GIL these
    replays hold, up to the interval (5 ms by default)."""
    was = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_S)
    return was


_short_switch = Held(_short_switch_on, sys.setswitchinterval)


def _replay_all(sm: StepModel, jobs: list, path: bool) -> list:
    """Each job's `Outcome` or what it raised, in order, to the first error that is not
    `NotApplicable` (a job that is an exception is that error)."""
    from tracekit.stepmodel import changes as C

    out: list = []
    for changes in jobs:
        if isinstance(changes, BaseException):
            out.append(changes)
        else:
            try:
                out.append(sm.what_if(changes, path=path))
            except Exception as exc:  # raised where the caller takes it
                out.append(exc)
        if isinstance(out[-1], BaseException) and not isinstance(out[-1], C.NotApplicable):
            break  # no replay after an error that is not NotApplicable
    return out


def contended(ctx: Facts) -> bool:
    """A CPU run whose ranks have no spare core (job.json's `cpu_cores_per_rank` < 2):
    gloo's communication threads share the cores compute runs on. Without job.json the
    trace does not say, and overlap is modeled as free."""
    man = ctx.manifest
    cores = man.cpu_cores_per_rank if man is not None else None
    return bool(ctx.cpu and cores is not None and cores < 2)
