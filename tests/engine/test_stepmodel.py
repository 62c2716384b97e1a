"""The step model (tracekit/stepmodel): replay error, the critical path where the problem
is, and what-if predictions checked against truth — twins the generator writes without
the problem (tests/synth.py: the truth is its own schedule), never the model's own output.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

import tracekit
from diagnosers import assemble
from diagnosers.context import Context
from tests.synth import SCENARIOS, Scenario, generate
from tracekit.analysis.whatif_plan import what_if
from tracekit.cli import main
from tracekit.options import AnalysisOptions
from tracekit.stepmodel import changes as C

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"


def _report(path: Path):
    with tracekit.open(path) as run:
        return assemble.analyze(run, AnalysisOptions())


def _predict(path: Path, *specs: str) -> tuple[float, float]:
    """(replayed step, predicted step) of the run at `path` with the changes."""
    with tracekit.open(path) as run:
        run.materialize()
        o = what_if(Context(run, AnalysisOptions()), list(specs))
    return o.replayed_step_ms, o.predicted_step_ms


def _measured_step(path: Path) -> float:
    """The twin's measured step: each rank's analysed window ÷ its steps, mean over ranks
    (what the trace says, read from the steps table, not from the model)."""
    with tracekit.open(path) as run:
        rows = run.sql(
            "SELECT rank, (max(end_ns) - min(ts_ns)) / count(*) FROM steps GROUP BY rank"
        ).fetchall()
    return sum(v for _r, v in rows) / len(rows) / 1e6


# ------------------------------------------------------------------ replay error


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_replay_error_of_every_synthetic_run_is_within_3_percent(tmp_path, name):
    sc, _kind = SCENARIOS[name]
    generate(sc, tmp_path)
    sm = _report(tmp_path).step_model
    assert sm.replay_error is not None and abs(sm.replay_error) <= 0.03
    cp = sm.critical_path
    # the path covers the step it sets: its kinds add up to the replayed step (±3%)
    assert sum(cp.by_kind.values()) == pytest.approx(sm.replayed_step_ms, rel=0.03)
    assert set(cp.by_kind) == {"compute", "communication", "waiting", "sync", "host", "idle"}


@pytest.mark.parametrize("name", ["ddp", "fsdp", "tp", "pp_1f1b", "pp_interleaved", "moe"])
def test_replay_error_of_every_sample_run_is_within_5_percent(tmp_path, name):
    run_dir = tmp_path / name
    shutil.copytree(SAMPLES / name, run_dir)
    sm = _report(run_dir).step_model
    assert abs(sm.replay_error) <= 0.05


# ------------------------------------------------------------------ what-if against twins
# Each pair: a problem the generator injects, the change that removes it, and the same
# scenario written without it. The predicted step must be within 5% of the twin's
# measured one.
PAIRS = {
    "overlap": (
        Scenario(name="exposed", hidden=4096, buckets_after_backward=True),
        dict(buckets_after_backward=False),
        "overlap:all_reduce",
    ),
    "bandwidth": (
        Scenario(name="slowbw", busbw_GBps=25),
        dict(busbw_GBps=400),
        "bandwidth:all_reduce=400",
    ),
    "straggler": (
        Scenario(name="straggler", straggler=2, straggler_slowdown=1.4),
        dict(straggler=None),
        "no-straggler",
    ),
    "host_bound": (
        Scenario(name="host_bound", hidden=512, tokens=1024, host_op_us=45.0),
        dict(host_op_us=1.0),
        "no-host-gaps",
    ),
    "microbatches": (  # same global batch: twice the microbatches, half the tokens each
        Scenario(name="pp", pipeline=(4, 4), layers=8, tokens=4096),
        dict(pipeline=(4, 8), tokens=2048),
        "microbatches=8",
    ),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_predicted_step_is_within_5_percent_of_the_twin_without_the_problem(tmp_path, name):
    sc, twin, change = PAIRS[name]
    generate(sc, tmp_path / "problem")
    generate(replace(sc, **twin), tmp_path / "twin")
    _replayed, predicted = _predict(tmp_path / "problem", change)
    twin_ms = _measured_step(tmp_path / "twin")
    problem_ms = _measured_step(tmp_path / "problem")
    assert problem_ms > twin_ms * 1.05  # the problem costs something to win back
    assert predicted == pytest.approx(twin_ms, rel=0.05)


def test_overlap_of_one_bucket_is_within_5_percent_of_the_twin_with_buckets_during_backward(
    tmp_path,
):
    """One gradient bucket per step can only start once backward is done; the remedy is
    smaller buckets: `overlap` splits it into pieces produced evenly over backward. The
    twin: the same run with one bucket per layer issued during backward (truth from the
    generator's own schedule)."""
    sc = Scenario(name="onebucket", hidden=4096, buckets=1)
    generate(sc, tmp_path / "problem")
    generate(replace(sc, buckets=sc.layers), tmp_path / "twin")
    _replayed, predicted = _predict(tmp_path / "problem", "overlap:all_reduce")
    twin_ms = _measured_step(tmp_path / "twin")
    assert _measured_step(tmp_path / "problem") > twin_ms * 1.05
    assert predicted == pytest.approx(twin_ms, rel=0.05)


# ------------------------------------------------------------------ where the path lies


def test_a_stragglers_rank_carries_most_of_the_critical_path(tmp_path):
    generate(Scenario(name="straggler", straggler=2, straggler_slowdown=1.4), tmp_path)
    cp = _report(tmp_path).step_model.critical_path
    assert max(cp.by_rank, key=cp.by_rank.get) == "2"
    assert cp.by_rank["2"] > 0.5 * sum(cp.by_rank.values())


@pytest.mark.parametrize("name", ["pp_1f1b", "pp_interleaved"])
def test_a_pipelines_path_crosses_its_stages_through_send_and_recv(tmp_path, name):
    """Two stages over gloo: the last stage's forward needs the first stage's activations
    and the first stage's backward the last stage's gradients (the schedule's truth), so
    the path that sets the step runs on both ranks, through each send ↔ recv pair (the
    peer of a 2-rank group is the other rank), and the recv's wait is not host time."""
    run_dir = tmp_path / name
    shutil.copytree(SAMPLES / name, run_dir)
    sm = _report(run_dir).step_model
    assert sm.replay_error == pytest.approx(0, abs=1e-9)
    cp = sm.critical_path
    total = sum(cp.by_rank.values())
    assert set(cp.by_rank) == {"0", "1"} and min(cp.by_rank.values()) > 0.25 * total
    # the mean over both ranks' paths (the first stage's: 38% compute; the last stage's
    # ends in its wait for the first stage's transfer)
    assert cp.by_kind["compute"] > 0.25 * sum(cp.by_kind.values())
    with tracekit.open(run_dir) as run:
        from tracekit.stepmodel.graph import INST, build

        g = build(run, Context(run, AnalysisOptions()).windows)
        pairs = [i for i in range(g.n) if g.kind[i] == INST and g.coll[i] in ("send", "recv")]
        sends = run.sql("SELECT count(*) FROM collectives WHERE name = 'send'").fetchall()[0][0]
    # every send in the analysed window has its recv (the windows hold whole steps)
    assert 0 < len(pairs) <= sends


def test_an_exposed_all_reduce_is_on_the_critical_path(tmp_path):
    generate(Scenario(name="exposed", hidden=4096, buckets_after_backward=True), tmp_path)
    sm = _report(tmp_path).step_model
    on_path = [s for s in sm.critical_path.segments if s.kind == "communication"]
    # the instances (all_reduce) and the members' tails (their kernels)
    assert on_path and all(s.name == "all_reduce" or "AllReduce" in s.name for s in on_path)
    # the whole last bucket chain after backward: 4 buckets of ~3.2 ms per step
    assert sm.critical_path.by_kind["communication"] > 0.1 * sm.replayed_step_ms


def test_in_a_host_bound_run_the_host_is_most_of_the_path(tmp_path):
    sc, _ = SCENARIOS["host_bound"]
    generate(sc, tmp_path)
    cp = _report(tmp_path).step_model.critical_path
    assert cp.by_kind["host"] > 0.5 * sum(cp.by_kind.values())


def test_a_findings_impact_is_its_remedys_replay(tmp_path):
    generate(Scenario(name="exposed", hidden=4096, buckets_after_backward=True), tmp_path)
    rep = _report(tmp_path)
    (f,) = [f for f in rep.findings if f.kind == "communication.exposed"]
    (w,) = [w for w in rep.step_model.what_if if w.finding == f.code]
    assert w.change == ["overlap:all_reduce"]
    assert f.impact_ms == pytest.approx(w.saved_ms)


# ------------------------------------------------------------------ the command


def test_whatif_command_json_and_the_changes_that_do_not_apply(tmp_path):
    generate(Scenario(name="slowbw", busbw_GBps=25, steps=2), tmp_path)
    r = CliRunner().invoke(
        main, ["whatif", str(tmp_path), "--change", "bandwidth:all_reduce=400", "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) == {"change", "measured_step_ms", "replayed_step_ms", "predicted_step_ms",
                        "saved_ms", "critical_path", "notes"}  # fmt: skip
    assert out["notes"] == []  # a change inside the graph has nothing to add
    assert out["saved_ms"] == pytest.approx(out["replayed_step_ms"] - out["predicted_step_ms"])
    assert set(out["critical_path"]) == {"by_kind", "by_rank", "segments"}
    for change, says in [
        ("microbatches=8", "no pipeline"),
        ("overlap:all_to_all", "no all_to_all"),
        ("bandwidth:all_gather=100", "no all_gather"),
        ("nonsense", "is not a change"),
    ]:
        r = CliRunner().invoke(main, ["whatif", str(tmp_path), "--change", change])
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output


def test_change_syntax():
    assert isinstance(C.parse("bandwidth:all_reduce=400"), C.Bandwidth)
    assert C.parse("bandwidth:all_reduce=400").gbps == 400
    assert C.parse(" no-straggler ").spec == "no-straggler"
    with pytest.raises(tracekit.errors.TracekitError):
        C.parse("compute-speed=0")


def test_a_graph_past_the_node_budget_replays_the_last_steps_that_fit(tmp_path, monkeypatch):
    from tracekit.analysis import whatif_plan as stepmodel

    generate(Scenario(name="healthy", steps=3), tmp_path)
    monkeypatch.setattr(stepmodel, "NODE_BUDGET", 1500)  # ~970 nodes a step here
    sm = _report(tmp_path).step_model
    assert any("last 1 of 3 analysed steps" in n for n in sm.notes)
    assert abs(sm.replay_error) <= 0.03


def test_slack_of_a_collective_on_the_path_is_zero_and_of_a_hidden_one_is_positive(tmp_path):
    generate(Scenario(name="exposed", hidden=4096, buckets_after_backward=True), tmp_path / "e")
    assert _report(tmp_path / "e").step_model.collective_slack_ms == {"all_reduce": 0.0}
    # buckets reduced during backward: the early ones could start later (compute hides them)
    generate(Scenario(name="healthy", hidden=4096), tmp_path / "h")
    assert _report(tmp_path / "h").step_model.collective_slack_ms["all_reduce"] > 0.1


# ------------------------------------------------------------------ CUDA sync events
def _cross_stream_run(path: Path, sync_events: bool) -> Path:
    """One rank, one step (µs): a 100 µs GEMM on stream 7, an event recorded after it and
    awaited by stream 20, whose kernel starts 60 µs after the GEMM ends (the wait's
    resolution: more than the 20 µs an unrecorded wait is inferred within), then a
    cudaDeviceSynchronize that returns 5 µs after the last kernel. With `sync_events` the
    trace carries Kineto's `Stream Wait Event` (cat cuda_sync) naming the recording call."""
    from tests.tracegen import TraceBuilder

    b = TraceBuilder(world_size=1)
    b.step(1, 0.0, 300.0)
    b.cpu_op("aten::mm", 5.0, 8.0)
    b.kernel("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n", 12.0, 100.0, stream=7, launch_ts=10.0)
    rec = b.x("cudaEventRecord", "cuda_runtime", 14.0, 1.0, correlation=9001)
    b.x("cudaStreamWaitEvent", "cuda_runtime", 16.0, 1.0, correlation=9002)
    b.cpu_op("aten::add", 17.0, 4.0)
    b.kernel("vectorized_elementwise_kernel", 172.0, 50.0, stream=20, launch_ts=18.0)
    if sync_events:
        b.x("Stream Wait Event", "cuda_sync", 17.5, 0.0, pid=0, tid=20, device=0, stream=20,
            correlation=9002, wait_on_stream=7,
            wait_on_cuda_event_record_corr_id=rec["args"]["correlation"])  # fmt: skip
    b.x("cudaDeviceSynchronize", "cuda_runtime", 22.0, 205.0)
    b.write(path / "rank-0.json")
    return path


@pytest.mark.parametrize("sync_events", [True, False])
def test_a_recorded_stream_wait_joins_the_producer_to_the_path(tmp_path, sync_events):
    """The truth from the schedule: the consumer on stream 20 waits for the GEMM on stream
    7 (its start is the GEMM's end + 60 µs), so compute 2× faster moves the step's end by
    half the GEMM and half the consumer, 75 µs. The sync event says so; without it the
    runtime calls do (the thread records an event after launching the GEMM and makes
    stream 20 wait for it before launching the consumer). Before issue 29 the 60 µs gap,
    too long to infer a wait, was an unexplained wait: 25 µs saved, idle on the path."""
    run = _cross_stream_run(tmp_path, sync_events)
    sm = _report(run).step_model
    assert sm.replay_error == pytest.approx(0, abs=1e-9)
    replayed, predicted = _predict(run, "compute-speed=2")
    saved_us = (replayed - predicted) * 1e3 * sm_steps(run)
    assert saved_us == pytest.approx(75.0, abs=1.0)
    assert sm.critical_path.by_kind["compute"] * 1e3 == pytest.approx(150.0, abs=2.0)


def sm_steps(run: Path) -> int:
    with tracekit.open(run) as r:
        return r.sql("SELECT count(*) FROM steps").fetchall()[0][0]


# ------------------------------------------------------------------ cost at many ranks


def test_zero_length_host_ops_back_to_back_keep_the_measured_order():
    """`aten::item` → `aten::_local_scalar_dense` at one instant, each 0 ns long (as in the
    DLRM traces): the measured order holds every edge (no topological sort) and replays
    to what the edges give by hand."""
    from tracekit.stepmodel import graph as G
    from tracekit.stepmodel import replay as R

    g = G.Graph(cpu=False)
    g.spans[0] = G.RankSpan(0, 0, 100_000, 1)
    a = g.add(0, "thread 1", G.HOST, "aten::item", 10_000, 10_000, 0)
    b = g.add(0, "thread 1", G.HOST, "aten::_local_scalar_dense", 10_000, 10_000, 0)
    c = g.add(0, "thread 1", G.HOST, "aten::add", 10_000, 30_000, 20_000)
    g.starts[b].append((a, True, 0, G.E_CHAIN))
    g.starts[c].append((b, True, 0, G.E_CHAIN))
    g.spans[0].end_edges = [(c, 70_000)]
    order, measured = R.ordered(g)
    assert measured
    rp = R.run(g, order)
    # a starts at its measured 10 µs (nothing explains it), b and c follow at 0 lag, c
    # takes 20 µs, the window ends 70 µs after c: 100 µs
    assert rp.times == [10_000, 10_000, 10_000, 10_000, 10_000, 30_000]
    assert rp.replayed_step_ms == pytest.approx(0.1)
    assert R.run(g, R.toposort(g)).times == rp.times


def test_the_dlrm_trace_replays_in_its_measured_order_as_the_topological_sort_does(
    shared_trace,
):
    """v100_dlrm_8rank has zero-length host ops back to back (the case that sent the
    1,024-rank replication to the topological sort): the measured order holds, and every
    vertex replays to the same time as in a topological order of the edges."""
    from tracekit.stepmodel import replay as R
    from tracekit.stepmodel.model import StepModel

    with tracekit.open(shared_trace("v100_dlrm_8rank")) as run:
        ctx = Context(run, AnalysisOptions())
        sm = StepModel(run, ctx.step_model_plan[0])
    g = sm.graph
    _order, measured = R.ordered(g)
    assert measured and g.dropped == 0
    assert R.run(g, R.toposort(g)).times == sm.base.times
    assert abs(sm.base.replay_error) <= 0.03


def test_one_step_of_all_ranks_past_the_ceiling_is_not_modeled_and_says_why(tmp_path, monkeypatch):
    """The same job at 2 and at 8 ranks with the ceiling between their steps' sizes: 2
    ranks are modeled, 8 are not — the block says why, its figures are null, findings
    keep their rules' impact, and `whatif` exits 2 with that line."""
    from tracekit.analysis import whatif_plan as stepmodel

    # estimated nodes of one step across all ranks: ≈ 482 a rank here (964 at 2 ranks,
    # 3,856 at 8)
    monkeypatch.setattr(stepmodel, "MAX_STEP_NODES", 2_000)
    generate(Scenario(name="straggler", world=2, straggler=1, steps=2), tmp_path / "r2")
    sm2 = _report(tmp_path / "r2").step_model
    assert sm2.replayed_step_ms is not None
    assert not any("not built" in n for n in sm2.notes)
    generate(Scenario(name="straggler", world=8, straggler=1, steps=2), tmp_path / "r8")
    rep = _report(tmp_path / "r8")
    sm = rep.step_model
    note = next(n for n in sm.notes if "not built" in n)
    assert "one step of the 8 ranks is ≈ 3,856 nodes" in note and "2,000" in note
    assert sm.replayed_step_ms is None and sm.replay_error is None and not sm.what_if
    assert sm.critical_path is None or not sm.critical_path.segments
    strag = next(f for f in rep.findings if f.kind == "scaling.straggler")
    assert strag.impact_ms is not None and strag.impact_ms > 0  # the rule's own estimate
    res = CliRunner().invoke(main, ["whatif", str(tmp_path / "r8"), "--change", "no-straggler"])
    assert res.exit_code == 2 and "not built" in res.output


@pytest.mark.parametrize("cores", [None, 8.0, 1.0])
def test_overlap_on_a_cpu_run_without_a_spare_core_takes_the_transfer_from_compute(tmp_path, cores):
    """job.json's `cpu_cores_per_rank` below 2 (this machine's reference jobs: 2 cores, 2
    ranks): gloo's threads share the cores compute runs on, so overlapping the all-reduce
    with backward cannot hide its transfer — the contended replay saves less than half of
    the free one (measured here: DDP with overlap was 5% slower than without, the free
    model predicted 9% faster; docs/step-model.md). Unknown or ≥ 2 cores: free overlap."""
    run_dir = tmp_path / "ddp"
    shutil.copytree(SAMPLES / "ddp", run_dir)
    jf = run_dir / "job.json"
    doc = json.loads(jf.read_text())
    doc.pop("cpu_cores_per_rank", None)
    free_doc = dict(doc)
    if cores is not None:
        doc["cpu_cores_per_rank"] = cores
    jf.write_text(json.dumps(doc))
    replayed, predicted = _predict(run_dir, "overlap:all_reduce")
    saved = replayed - predicted
    free = tmp_path / "free"
    shutil.copytree(SAMPLES / "ddp", free)
    (free / "job.json").write_text(json.dumps(free_doc))
    r_free, p_free = _predict(free, "overlap:all_reduce")
    assert r_free - p_free > 1.0  # the sample's exposed all-reduce: ms per step to win
    if cores == 1.0:
        assert saved < (r_free - p_free) / 2
    else:
        assert saved == pytest.approx(r_free - p_free, rel=1e-9)


def test_a_change_that_lengthens_the_step_says_what_it_costs(tmp_path):
    """On the contended DDP sample overlap makes the step longer: the text says 'costs'."""
    run_dir = tmp_path / "ddp"
    shutil.copytree(SAMPLES / "ddp", run_dir)
    doc = json.loads((run_dir / "job.json").read_text())
    (run_dir / "job.json").write_text(json.dumps({**doc, "cpu_cores_per_rank": 1.0}))
    res = CliRunner().invoke(main, ["whatif", str(run_dir), "--change", "overlap:all_reduce"])
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[0]
    assert "; costs " in first and "saves" not in first


def test_a_cpu_operations_work_is_each_ops_self_time_beyond_one_dispatch():
    """`microbatches=M` on CPU runs: what scales is each op's own time past one dispatch;
    nested ops count once (the parent's self time), AccumulateGrad's subtree not at all.
    Truth by hand from the rows below (ns, dispatch 2)."""
    from tracekit.stepmodel.pipeline import operation_work

    lab = (0, "PP:0B0", 1000)
    rows = [
        (*lab, "aten::linear", 1000, 50),  # self 50 - 30 - 1 = 19 → work 17
        (*lab, "aten::mm", 1005, 30),  # leaf: 30 → 28
        (*lab, "aten::view", 1040, 1),  # leaf under linear: 1 → 0 (below dispatch)
        (*lab, "aten::add", 1100, 20),  # after linear ends: 20 → 18
        (*lab, "torch::autograd::AccumulateGrad", 1150, 40),  # parameter-sized: 0
        (*lab, "aten::add_", 1155, 30),  # under AccumulateGrad: 0
        (1, "PP:1F0", 900, "aten::gelu", 905, 12),  # another label: 12 → 10
    ]
    assert operation_work(rows, 2.0) == {
        (0, "PP:0B0", 1000): 17 + 28 + 0 + 18,
        (1, "PP:1F0", 900): 10,
    }
    assert operation_work([], 2.0) == {}


def test_a_cpu_operation_without_ops_on_its_labels_thread_falls_back_to_the_flop_share(
    tmp_path, monkeypatch
):
    """Where a kind's ops ran on another thread than its label (no work found), its split
    is the FLOP share, as it was for every operation before; the kinds with work found
    keep theirs (the CPU pp sample, its backward's work hidden)."""
    from tracekit.analysis import whatif_plan as S
    from tracekit.analysis.pipeline import measure

    run_dir = tmp_path / "pp"
    shutil.copytree(SAMPLES / "pp_1f1b", run_dir)
    with tracekit.open(run_dir) as run:
        run.materialize()
        ctx = Context(run, AnalysisOptions())
        full = S.pipeline_shape(ctx)
        work = S._cpu_work(ctx, measure(ctx, ctx.pipeline))
        assert set(work) == set(full.scaled_ms)  # every kind has ops on its own thread
        monkeypatch.setattr(S, "_cpu_work", lambda c, m: {})
        flop = S.pipeline_shape(ctx)
        monkeypatch.setattr(
            S, "_cpu_work", lambda c, m: {k: v for k, v in work.items() if k[0] == "F"}
        )
        mixed = S.pipeline_shape(ctx)
    for k in full.scaled_ms:
        want = full if k[0] == "F" else flop
        assert mixed.scaled_ms[k] == pytest.approx(want.scaled_ms[k])
        assert mixed.fixed_ms[k] == pytest.approx(want.fixed_ms[k])
    # and the two splits differ, or the check above could not fail
    assert any(
        abs(full.scaled_ms[k] - flop.scaled_ms[k]) > 0.1 for k in full.scaled_ms if k[0] == "B"
    )


def test_whatif_microbatches_says_what_scales_and_what_the_schedule_adds(tmp_path):
    """`tracekit whatif --change microbatches=M` says why: each operation's part that
    scales (and what it becomes at M), the part that stays, and the schedule's span at
    both M — whose difference is the step the change adds (the CPU pp sample)."""
    import re

    run_dir = tmp_path / "pp"
    shutil.copytree(SAMPLES / "pp_1f1b", run_dir)
    r = CliRunner().invoke(
        main, ["whatif", str(run_dir), "--change", "microbatches=8", "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    (note,) = out["notes"]
    assert note.startswith("pipeline at M=8 (measured M=4, 2 stages")
    pairs = re.findall(r"([\d.]+) ms that scales with the microbatch → ([\d.]+) ms", note)
    assert len(pairs) == 2  # forward and backward
    for before, after in pairs:
        assert float(after) == pytest.approx(float(before) * 4 / 8, abs=0.006)
    span = re.search(r"span ([\d.]+) → ([\d.]+) ms a step \(([+-][\d.]+) ms\)", note)
    added = float(span.group(2)) - float(span.group(1))
    assert added == pytest.approx(-out["saved_ms"], abs=0.011)
    assert float(span.group(3)) == pytest.approx(-out["saved_ms"], abs=0.006)
    text = CliRunner().invoke(main, ["whatif", str(run_dir), "--change", "microbatches=8"])
    assert text.exit_code == 0 and f"  {note}" in text.output.splitlines()
    # docs/step-model.md shows these two lines: they are what the command prints
    doc = (ROOT / "docs" / "step-model.md").read_text()
    assert "\n".join(text.output.splitlines()[:2]) in doc


def _p2p_in_a_group_of_three(path: Path, peers: bool) -> Path:
    """Three ranks in one NCCL group, one step (µs). Rank 0 sends its GEMM's output
    (12–112) to rank 2: the send is queued behind the GEMM on stream 7 and runs 112–142;
    rank 2's recv was posted early (12–142) and its GEMM (144–244) waits for it on its
    stream. Rank 1 computes 12–62. Each rank's step ends 5 µs after its last kernel
    (cudaDeviceSynchronize). With `peers`, record_param_comms carries "Rank" as PyTorch's
    ProcessGroupNCCL writes it for a send/recv: the peer's rank in the group."""
    from tests.tracegen import TraceBuilder, nccl_meta

    sendrecv = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
    gemm = "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n"
    for rank in range(3):
        b = TraceBuilder(rank=rank, world_size=3)
        b.step(1, 0.0, 400.0)
        if rank == 0:
            b.cpu_op("aten::mm", 5.0, 4.0)
            b.kernel(gemm, 12.0, 100.0, stream=7, launch_ts=8.0)
            meta = {**nccl_meta("send", 1024, group=3), **({"Rank": 2} if peers else {})}
            b.cpu_op("record_param_comms", 14.0, 3.0, **meta)
            b.kernel(sendrecv, 112.0, 30.0, stream=7, launch_ts=15.0, **meta)
            b.x("cudaDeviceSynchronize", "cuda_runtime", 20.0, 127.0)
        elif rank == 1:
            b.cpu_op("aten::mm", 5.0, 4.0)
            b.kernel(gemm, 12.0, 50.0, stream=7, launch_ts=8.0)
            b.x("cudaDeviceSynchronize", "cuda_runtime", 14.0, 53.0)
        else:
            meta = {**nccl_meta("recv", 1024, group=3), **({"Rank": 0} if peers else {})}
            b.cpu_op("record_param_comms", 4.0, 3.0, **meta)
            b.kernel(sendrecv, 12.0, 130.0, stream=7, launch_ts=5.0, **meta)
            b.cpu_op("aten::mm", 8.0, 4.0)
            b.kernel(gemm, 144.0, 100.0, stream=7, launch_ts=10.0)
            b.x("cudaDeviceSynchronize", "cuda_runtime", 20.0, 229.0)
        b.write(path / f"rank-{rank}.json")
    return path


@pytest.mark.parametrize("peers", [True, False])
def test_a_send_and_its_recv_pair_in_a_group_of_three_by_the_traces_peer(tmp_path, peers):
    """Truth from the schedule: with compute 2× faster, rank 0's GEMM ends 50 µs earlier,
    its send and rank 2's recv 50 µs earlier, and rank 2's GEMM starts then and ends 100
    µs earlier in all; rank 1 saves 25 µs. Only the pairing (the peer from the trace)
    carries rank 0's saving to rank 2; without "Rank" in a 3-rank group rank 2's recv
    keeps its measured end and rank 2 saves its own GEMM's 50 µs."""
    import tracekit as tk

    run = _p2p_in_a_group_of_three(tmp_path, peers)
    with tk.open(run) as r:
        got = dict(r.sql("SELECT name, peer FROM collectives ORDER BY rank").fetchall())
    assert got == ({"send": 2, "recv": 0} if peers else {"send": None, "recv": None})
    sm = _report(run).step_model
    assert sm.replay_error == pytest.approx(0, abs=1e-9)
    replayed, predicted = _predict(run, "compute-speed=2")
    saved_us = (replayed - predicted) * 1e3
    per_rank = (50 + 25 + (100 if peers else 50)) / 3  # the step: the ranks' mean
    assert saved_us == pytest.approx(per_rank, abs=1.0)
    if peers:  # rank 2's step is bound by rank 0's GEMM: the path crosses to rank 0
        assert float(sm.critical_path.by_rank.get("0", 0)) > 0


def test_a_four_stage_cpu_pipelines_path_crosses_every_stage(tmp_path):
    """The real `pp` job with 4 stages (gloo, one world group of 4; tests/runs/pp4_gloo,
    recorded by `tracekit run pp -n 4 --schedule 1f1b --microbatches 4`): each stage sends
    its activations to the next and its gradients to the previous, so a send's peer is a
    neighbour (the c10d op's Concrete Inputs), every send pairs with its recv, and the
    chain that sets the step runs through the stages — not, as when the peers of a
    4-rank group were unknown, one rank "waiting" most of its step."""
    run = tmp_path / "pp4"
    shutil.copytree(ROOT / "tests" / "runs" / "pp4_gloo", run)
    with tracekit.open(run) as r:
        peers = r.sql(
            "SELECT rank, name, list(DISTINCT peer ORDER BY peer) FROM collectives "
            "WHERE name IN ('send', 'recv') GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    neighbours = {0: [1], 1: [0, 2], 2: [1, 3], 3: [2]}
    assert peers == [(k, n, neighbours[k]) for k in range(4) for n in ("recv", "send")]
    sm = _report(run).step_model
    assert sm.replay_error == pytest.approx(0, abs=1e-9)
    path = sm.critical_path
    assert sum(1 for v in path.by_rank.values() if v > 0) >= 3
    assert path.by_kind["waiting"] < 0.05 * sm.measured_step_ms


# ------------------------------------------------------------------ a remedy from its first change


@pytest.mark.parametrize(
    ("trace", "specs"),
    [
        ("v100_dlrm_8rank", ["overlap:all_to_all"]),
        ("v100_dlrm_8rank", ["bandwidth:all_to_all=100"]),
        ("v100_dlrm_8rank", ["compute-speed=2"]),
        ("v100_ddp_rank1", ["overlap:all_reduce"]),
    ],
)
def test_a_remedys_replay_from_its_first_change_is_the_whole_replays_step(
    shared_trace, monkeypatch, trace, specs
):
    """A remedy is replayed without its path from the first vertex its change touched,
    the times before it the base's (`replay.first_changed`: these traces replay in their
    measured order, where it applies). Its step must be, to the bit, the step of a replay
    of every vertex: with the path (no prefix) and with the prefix forced
    empty."""
    from tracekit.stepmodel import replay as R

    seen: list[int] = []
    first = R.first_changed
    monkeypatch.setattr(R, "first_changed", lambda *a: seen.append(first(*a)) or seen[-1])
    with tracekit.open(shared_trace(trace)) as run:
        run.materialize()
        ctx = Context(run, AnalysisOptions())
        fast = what_if(ctx, specs, path=False).predicted_step_ms
        whole = what_if(ctx, specs, path=True).predicted_step_ms
        monkeypatch.setattr(R, "first_changed", lambda *a: 0)
        from_zero = what_if(ctx, specs, path=False).predicted_step_ms
    assert seen and seen[0] > 0  # the tail alone was replayed
    assert fast == whole == from_zero
