"""Findings as rules: each rule alone on typed facts (cases as data, at its thresholds),
each rule alone on a run that must and must not raise it, --select / --ignore and
[tool.tracekit], the docs table written from the rules, and a plugin rule installed
from its own package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

import tracekit
from diagnosers.findings import Finding
from diagnosers.rules import lookup, markdown_table, registry, selected
from diagnosers.rules.base import SECTIONS
from diagnosers.rules.fp32_gemms import Fp32Matmuls
from tests.conftest import ROOT
from tests.helpers import full_report
from tests.rules.given import Given, rank_exposure, rank_row
from tests.synth import SCENARIOS, Scenario, generate
from tracekit.analysis.communication import CollectiveFacts, CommunicationFacts
from tracekit.analysis.compute import ComputeFacts
from tracekit.analysis.memory import MemoryFacts, MemoryRank
from tracekit.analysis.pipeline import Pipeline
from tracekit.analysis.scaling import BubbleFacts
from tracekit.analysis.stragglers import Attribution, Straggler
from tracekit.cli import main
from tracekit.errors import TracekitError
from tracekit.metrics.collectives import Exposure
from tracekit.report.schema import CollectiveRow

# ---------------------------------------------------------------- the registry and docs


def test_every_rule_is_documented_and_coded_once():
    rules = registry()
    assert len({r.code for r in rules}) == len(rules) == len({r.kind for r in rules})
    for r in rules:
        docs = r.docs()
        assert set(docs) == set(SECTIONS), r.code
        assert all(len(text) > 20 for text in docs.values()), r.code
        assert r.code.startswith("TK-") and r.name == r.name.lower() and " " not in r.name
        assert r.when() and "{" not in r.when()
        assert r.level in ("memory", "compute", "communication", "scaling")


def test_the_readme_table_is_the_rules():
    for page in ("docs/findings.md", "docs/reference/rules.md"):
        assert markdown_table() in (ROOT / page).read_text(), page


def test_explain_prints_the_rule_with_its_thresholds():
    res = CliRunner().invoke(main, ["explain", "TK-N301"])
    assert res.exit_code == 0
    for section in (*SECTIONS, "Raised when"):
        assert section in res.output
    assert "≥ 10% of the step (critical ≥ 25%)" in " ".join(res.output.split())
    assert lookup("communication.exposed") is lookup("exposed-communication") is lookup("tk-n301")
    res = CliRunner().invoke(main, ["explain"])
    assert all(r.code in res.output for r in registry())


# ---------------------------------------------------------------- each rule on typed facts
# Each case is a `Given` context (tests/rules/given.py): the real Context over facts of the
# types `tracekit.analysis` computes, set at the thresholds, with the severities expected.


def _run(code: str, ctx) -> list:
    rule = lookup(code)
    return list(rule().check(ctx))


def _mem_rank(rank, fraction, reserved=70e9, allocated=69e9):
    return MemoryRank(rank=rank, fraction=fraction, peak_reserved_bytes=int(reserved),
                      peak_allocated_bytes=int(allocated), capacity_bytes=80e9)  # fmt: skip


def _mem(*ranks, over=None, peak=None, predicted=None):
    reserved = max((r.peak_reserved_bytes for r in ranks), default=None)
    peak = int(peak) if peak is not None else max((r.peak_allocated_bytes for r in ranks),
                                                  default=None)  # fmt: skip
    worst = max((r for r in ranks if r.fraction is not None), key=lambda r: r.fraction,
                default=None)  # fmt: skip
    return Given(memory=MemoryFacts(
        ranks=list(ranks), peak_allocated_bytes=peak, peak_reserved_bytes=reserved,
        peak_bytes=max(peak or 0, reserved or 0) or None, worst=worst, predicted=predicted,
        predicted_why=None if predicted else "no job.json", measured_over_predicted=over,
    ))  # fmt: skip


def _compute_rank(rank, **kw):
    from tracekit.report.schema import ComputeRankRow

    base = dict(rank=rank, mfu=0.4, gemm_efficiency=0.7, at_peak_ms_per_step=10.0,
                host_bound_fraction=0.0, host_bound_ms_per_step=0.0, host_gaps_per_step=0,
                median_kernel_us=20.0, idle_fraction=0.05)  # fmt: skip
    return ComputeRankRow(**(base | kw))


def _compute_facts(ranks, mfu=0.4, eff=0.7, unc=None) -> ComputeFacts:
    from tracekit.analysis.uncounted import UncountedFacts

    graph = {"graph_replay": unc * 10.0} if unc else {}
    return ComputeFacts(
        ranks=ranks,
        top_ops=[],
        peak_flops_by_dtype={"bf16": 989e12},
        peak_source="datasheet",
        mfu=mfu,
        hfu=mfu,
        gemm_efficiency=eff,
        flops_per_step=None,
        model_flops_per_step=None,
        flops_by_dtype={},
        uncounted_ops_per_step=None,
        idle_fraction=None,
        host_bound_fraction=None,
        predicted_flops_per_step=None,
        predicted_why="no job.json",
        counted_over_predicted=None,
        uncounted=UncountedFacts({0: unc}, unc, graph, 10.0),
    )


def _pipe(p: int, m: int, v: int = 1, schedule: str = "1f1b") -> Pipeline:
    return Pipeline(stages=p, microbatches=m, virtual=v, schedule=schedule, source="job.json")


def _compute(ranks, mfu=0.4, eff=0.7, cpu=False, pipeline=None, unc=None):
    return Given(compute=_compute_facts(ranks, mfu, eff, unc), cpu=cpu, pipeline=pipeline)


def _fp32(share: float, cpu: bool = False, tf32: bool = True, dtype: str = "fp32"):
    """One rank with fp32 GEMMs taking `share` of a 100 ms step at 50% efficiency, on an
    H100-like device (fp32 67, TF32 495 TFLOP/s) or one without TF32."""
    from tracekit.model.hardware import DeviceSpec

    peaks = {"fp32": 66.9e12, "bf16": 989e12} | ({"tf32": 494.7e12} if tf32 else {})
    flops = share * 100e-3 * 0.5 * 66.9e12  # ms = flops / peak / eff
    rank = _compute_rank(0, flops_by_dtype={dtype: flops}, gemm_efficiency=0.5)
    return Given([rank_row(0, compute=0.9)], compute=_compute_facts([rank]), cpu=cpu,
                 spec=DeviceSpec("gpu", 80e9, 3e12, peaks, None, 400e9))  # fmt: skip


# (code, facts, expected severities) — at, above and below each threshold
CASES = [
    ("TK-C206", _fp32(0.10), ["warning"]),
    ("TK-C206", _fp32(0.5), ["critical"]),
    ("TK-C206", _fp32(0.09), []),
    ("TK-C206", _fp32(0.9, tf32=False), []),  # V100: no TF32 to move to
    ("TK-C206", _fp32(0.9, cpu=True), []),
    ("TK-C206", _fp32(0.9, dtype="tf32"), []),  # TF32 already
    ("TK-C206", _fp32(0.9, dtype="bf16"), []),
    ("TK-M101", _mem(_mem_rank(0, 0.95)), ["warning"]),
    ("TK-M101", _mem(_mem_rank(0, 0.89), _mem_rank(1, 0.97)), ["critical"]),
    ("TK-M101", _mem(_mem_rank(0, 0.899)), []),
    ("TK-M101", _mem(_mem_rank(0, None)), []),
    ("TK-M102", _mem(over=1.6, peak=10e9, predicted={"total_bytes": 6e9}), ["warning"]),
    ("TK-M102", _mem(over=1.6, peak=4e9, predicted={"total_bytes": 2.5e9}), []),  # < 2 GB
    ("TK-M102", _mem(over=1.4, peak=14e9, predicted={"total_bytes": 10e9}), []),
    (
        "TK-C201",
        _compute([_compute_rank(0, mfu=0.2, gemm_efficiency=0.3)], 0.2, 0.3),
        ["warning"],
    ),
    (
        "TK-C201",
        _compute([_compute_rank(0, mfu=0.05, gemm_efficiency=0.1)], 0.05, 0.1),
        ["critical"],
    ),
    ("TK-C201", _compute([_compute_rank(0)], 0.2, 0.45), []),  # idle explains it
    # half or more of compute uncounted (graph replay): an info note, never a warning
    (
        "TK-C201",
        _compute([_compute_rank(0, mfu=0.05, gemm_efficiency=0.1)], 0.05, 0.1, unc=0.5),
        ["info"],
    ),
    (
        "TK-C201",
        _compute([_compute_rank(0, mfu=0.05, gemm_efficiency=0.1)], 0.05, 0.1, unc=0.49),
        ["critical"],
    ),
    ("TK-C201", _compute([_compute_rank(0)], 0.26, 0.3), []),
    ("TK-C202", _compute([_compute_rank(0, host_bound_fraction=0.12)]), ["warning"]),
    ("TK-C202", _compute([_compute_rank(0, host_bound_fraction=0.3)]), ["critical"]),
    ("TK-C202", _compute([_compute_rank(0, host_bound_fraction=0.3)], cpu=True), []),
    ("TK-C202", _compute([_compute_rank(0, host_bound_fraction=0.09)]), []),
    ("TK-C203", _compute([_compute_rank(0, idle_fraction=0.3)]), ["warning"]),
    ("TK-C203", _compute([_compute_rank(0, idle_fraction=0.6)]), ["critical"]),
    ("TK-C203", _compute([_compute_rank(0, idle_fraction=0.3, host_bound_fraction=0.1)]), []),
    ("TK-C203", _compute([_compute_rank(0, idle_fraction=0.6)], pipeline=_pipe(4, 4)), []),
]


def _input(idle_ms: float, step_idle_ms: float | None = 50.0):
    from tracekit.analysis.dataloader import LoaderIdle

    r = LoaderIdle(rank=0, spans_per_step=1.0, loader_ms=idle_ms + 5, idle_ms=idle_ms,
                   host_bound_ms=idle_ms / 2, step_idle_ms=step_idle_ms)  # fmt: skip
    return Given(input_wait={0: r})


def _fusion(share: float, other_ms: float, mfu: float = 0.12, eff: float = 0.6):
    from tracekit.analysis.fusion import RankFusion

    f = RankFusion(rank=0, compute_ms=other_ms / share, other_ms=other_ms, top=[("k", other_ms)])
    return Given(fusion={0: f}, compute=_compute_facts([_compute_rank(0)], mfu, eff))


CASES += [
    ("TK-C204", _input(10.0), ["warning"]),
    ("TK-C204", _input(30.0), ["critical"]),
    ("TK-C204", _input(9.9), []),
    ("TK-C204", Given(input_wait={}), []),
    ("TK-C205", _fusion(0.5, 25.0), ["warning"]),
    ("TK-C205", _fusion(0.8, 60.0), ["critical"]),
    ("TK-C205", _fusion(0.49, 40.0), []),
    ("TK-C205", _fusion(0.9, 24.0), []),
    ("TK-C205", _fusion(0.8, 60.0, mfu=0.01, eff=0.1), []),
]


def _exposure(resid: float, wait_ms: float = 0.0):
    step = 100.0
    rank = rank_exposure(0, step, exposed_ms=resid * step, transfer_ms=resid * step,
                         top_collective="x", unexplained_wait_ms=wait_ms,
                         residual_ms=resid * step, residual_fraction=resid)  # fmt: skip
    comm = CommunicationFacts(slow=[], slow_limit=0.5, ranks=[rank],
                              unexplained_exposed_fraction=resid, straggler_wait_fraction=None,
                              exposed_pipeline_fraction=None)  # fmt: skip
    none = CollectiveFacts(table=[], exposure={})
    return Given([rank_row(0, step, compute=0.5, comm=resid, exposed=resid)],
                 communication=comm, collectives=none)  # fmt: skip


CASES += [
    ("TK-N301", _exposure(0.10), ["warning"]),
    ("TK-N301", _exposure(0.25), ["critical"]),
    ("TK-N301", _exposure(0.099), []),
]


def _slow(ratio: float, cpu: bool = False, time_ms: float = 5.0, gloo: bool = False):
    limit = 0.25 if cpu else 0.5
    row = CollectiveRow(name="all_reduce", bytes=100_000_000, group_size=8, dtype=None,
                        count=1, busbw_GBps=ratio * 400, predicted_busbw_GBps=400.0,
                        transfer_ms=2.0, predicted_ms=1.0, count_per_step=1.0,
                        time_ms_per_step=time_ms, inter_node=False, exposed_ms=1.0,
                        exposed_wait_ms=0.0, matched=True)  # fmt: skip
    slow = [row] if ratio < limit else []
    comm = CommunicationFacts(slow=slow, slow_limit=limit, ranks=[rank_exposure(0)],
                              unexplained_exposed_fraction=None, straggler_wait_fraction=None,
                              exposed_pipeline_fraction=None)  # fmt: skip
    # 1 ms of it exposed per step on rank 0 (4 steps), none of it waiting for peers
    seen = {(row.name, row.group_size, row.bytes): {0: Exposure(8_000_000, 4_000_000, 0)}}
    return Given(communication=comm, collectives=CollectiveFacts(table=[row], exposure=seen),
                 cpu=cpu, gloo_on_gpu=gloo and not cpu)  # fmt: skip


CASES += [
    ("TK-N302", _slow(0.4), ["warning"]),
    ("TK-N302", _slow(0.2), ["critical"]),
    ("TK-N302", _slow(0.2, cpu=True), ["warning"]),
    ("TK-N302", _slow(0.6), []),
    ("TK-N302", _slow(0.2, gloo=True), ["critical"]),
]


def _bubble(measured: float, m: int = 4, p: int = 4):
    pred = (p - 1) / (m + p - 1)
    stages = [{"rank": 0, "bubble_fraction": measured}]
    return Given(bubble=BubbleFacts(pipe=_pipe(p, m), measured=measured, predicted=pred,
                                    model=None, per_stage=stages))  # fmt: skip


CASES += [
    ("TK-S401", _bubble(0.2), ["warning"]),
    ("TK-S401", _bubble(0.45), ["critical"]),
    ("TK-S401", _bubble(0.19), []),
    ("TK-S401", Given(bubble=None), []),
]


def _straggler(cost_ms: float, host_ms: float = 5.0):
    f = Straggler(rank=3, imposed_ms_per_step=cost_ms, share=0.8, steps=4, steps_worst=4,
                  worst_by_step=[3, 3, 3, 3], compute_excess_ms=0.0, host_late_ms=host_ms,
                  device_late_ms=0.0, step_start_late_ms=0.0)  # fmt: skip
    return Given(stragglers=Attribution(imposed_ms={3: cost_ms}, found=[f]))


CASES += [
    ("TK-S402", _straggler(5.0), ["warning"]),
    ("TK-S402", _straggler(12.0), ["critical"]),
    ("TK-S402", Given(stragglers=Attribution()), []),
]


def _projection(eff2: float, raised=()):
    proj = {"2x": {"world_size": 16, "step_time_ms": 100 / eff2, "efficiency": eff2},
            "8x": {"world_size": 64, "step_time_ms": 300.0, "efficiency": 0.3}}  # fmt: skip
    return Given(projection=proj, raised=raised)


CASES += [
    ("TK-S403", _projection(0.5), ["info"]),
    ("TK-S403", _projection(0.6), []),
    # a communication finding explains the cost: no projection finding beside it
    ("TK-S403", _projection(0.5, raised=[Finding(lookup("TK-N301"), "warning", "t", [0])]), []),
]


@pytest.mark.parametrize("code,ctx,expect", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_rule_alone_on_its_facts(code, ctx, expect):
    found = _run(code, ctx)
    assert [f.severity for f in found] == expect
    for f in found:
        assert f.code == code and f.title and f.remedy


def test_slow_collective_remedy_by_backend():
    """nccl-tests for NCCL on GPUs; on a GPU run whose collectives run on gloo, the nccl
    backend (gloo reduces CUDA tensors through host memory); gloo's interface on CPU."""
    nccl, gloo, cpu = (_run("TK-N302", _slow(0.2, **kw))[0].remedy
                       for kw in ({}, {"gloo": True}, {"cpu": True}))  # fmt: skip
    assert "nccl-tests" in nccl and "gloo" not in nccl
    assert "nccl backend" in gloo and "nccl-tests" not in gloo
    assert "GLOO_SOCKET_IFNAME" in cpu


def test_fp32_matmuls_impact():
    """fp32 GEMMs of 60 ms at the fp32 peak's efficiency take 60 × 66.9/494.7 = 8.1 ms on
    TF32's: the impact is the difference; the candidate speeds compute up by it."""
    ctx = _fp32(0.6)
    (f,) = _run("TK-C206", ctx)
    assert f.measured["fp32_gemm_ms_per_step"] == pytest.approx(60.0)
    assert f.impact_ms == pytest.approx(60.0 * (1 - 66.9 / 494.7))
    (change,) = Fp32Matmuls().candidates(ctx, f)
    assert change == f"compute-speed={90.0 / (90.0 - f.impact_ms):.3g}"


def test_every_rule_has_cases():
    assert {c[0] for c in CASES} == {r.code for r in registry()} - {"TK-E001"}


# ---------------------------------------------------------------- each rule alone on a run


@pytest.fixture(scope="module")
def synth_runs(tmp_path_factory):
    out = {}
    for name in ("exposed_allreduce", "straggler", "host_bound", "memory"):
        d = tmp_path_factory.mktemp(name)
        generate(SCENARIOS[name][0], d)
        out[name] = d
    return out


@pytest.mark.parametrize(
    "run,code,kind",
    [
        ("exposed_allreduce", "TK-N301", "communication.exposed"),
        ("straggler", "TK-S402", "scaling.straggler"),
        ("host_bound", "TK-C202", "compute.host_bound"),
        ("memory", "TK-M101", "memory.near_capacity"),
    ],
)
def test_select_runs_one_rule_and_ignore_leaves_it_out(synth_runs, run, code, kind):
    with tracekit.open(synth_runs[run]) as r:
        everything = full_report(r)
        alone = full_report(r, select=(code,))
        without = full_report(r, ignore=(code,))
    assert kind in {f["kind"] for f in everything["findings"]}
    assert {f["kind"] for f in alone["findings"]} == {kind}
    assert kind not in {f["kind"] for f in without["findings"]}
    # a rule left out changes no figure: only its finding and its level's verdict
    for rep in (alone, without):
        assert rep["summary"] == everything["summary"]
        assert rep["collectives"] == everything["collectives"]
        assert rep["samples"] == everything["samples"]


def test_prefixes_kinds_and_names_select():
    assert {r.code for r in selected(["TK-N"])} == {"TK-N301", "TK-N302"}
    assert [r.code for r in selected(["scaling.straggler"])] == ["TK-S402"]
    assert [r.code for r in selected(["pipeline-bubble"])] == ["TK-S401"]
    assert "TK-C202" not in {r.code for r in selected(ignore=["TK-C202"])}
    with pytest.raises(TracekitError, match="no rule matches 'TK-X999'"):
        selected(["TK-X999"])


def test_cli_select_ignore_and_pyproject(tmp_path):
    run = tmp_path / "run"
    generate(SCENARIOS["exposed_allreduce"][0], run)
    cli = CliRunner()
    res = cli.invoke(main, ["analyze", str(run), "--format", "json", "--select", "TK-S,TK-C"])
    assert res.exit_code == 0, res.output
    assert "communication.exposed" not in res.output
    res = cli.invoke(main, ["analyze", str(run), "--select", "TK-Q1"])
    assert res.exit_code == 2 and "no rule matches 'TK-Q1'" in res.output
    (run / "pyproject.toml").write_text('[tool.tracekit]\nignore = ["TK-N301"]\n')
    res = cli.invoke(main, ["analyze", str(run), "--format", "json"])
    assert res.exit_code == 0 and "communication.exposed" not in res.output
    # a flag on the command line replaces the file's value
    res = cli.invoke(main, ["analyze", str(run), "--format", "json", "--ignore", "TK-S403"])
    assert res.exit_code == 0 and "communication.exposed" in res.output
    (run / "pyproject.toml").write_text('[tool.tracekit]\nignore = "TK-N301"\n')
    res = cli.invoke(main, ["analyze", str(run)])
    assert res.exit_code == 2 and "ignore must be a list of strings" in res.output


# ---------------------------------------------------------------- a plugin, installed


PLUGIN = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "tk-plugin-demo"
        version = "0.1"

        [project.entry-points."tracekit.rules"]
        long-steps = "tk_plugin_demo:LongSteps"
        broken = "tk_plugin_demo:Broken"

        [tool.setuptools]
        py-modules = ["tk_plugin_demo"]
    """,
    "tk_plugin_demo.py": '''
        """A team's own rule: steps longer than 1 ms."""
        from diagnosers.rules.base import Rule


        class LongSteps(Rule):
            """What it detects
            A step longer than the team's budget of 1 ms on some rank.

            Why it matters
            Our job has a latency budget per step that this run exceeds.

            Example
            rank 0 takes 31.8 ms per step against a 1 ms budget.

            Fix
            Profile the step and cut what exceeds the budget.
            """

            code = "TK-X900"
            kind = "team.long_steps"
            name = "long-steps"
            level = "compute"
            budget_ms = 1.0
            raised_when = "a rank's step ≥ {budget_ms:g} ms"

            def check(self, ctx):
                slow = [r.rank for r in ctx.ranks if (r.step_time_ms or 0) >= self.budget_ms]
                if slow:
                    yield self.finding("warning", f"steps over {self.budget_ms} ms",
                                       ranks=slow, remedy="cut the step")


        class Broken(Rule):
            """What it detects
            Nothing: it raises, to show a broken rule is charged, not fatal.

            Why it matters
            A plugin must never take the report down with it.

            Example
            ZeroDivisionError.

            Fix
            Fix the plugin.
            """

            code = "TK-X901"
            kind = "team.broken"
            name = "broken"
            level = "scaling"

            def check(self, ctx):
                return [1 / 0]
    ''',
}


@pytest.mark.slow
def test_a_plugin_rule_from_its_own_package(tmp_path):
    src = tmp_path / "plugin"
    src.mkdir()
    for name, text in PLUGIN.items():
        (src / name).write_text(textwrap.dedent(text).lstrip())
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
           "--no-index", "--target", str(site), str(src)]  # fmt: skip
    res = subprocess.run(pip, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    run = shutil.copytree(
        ROOT / "sample_traces" / "ddp", tmp_path / "run", ignore=shutil.ignore_patterns(".tracekit")
    )
    env = {**__import__("os").environ, "PYTHONPATH": f"{site}:{ROOT}"}
    cmd = [sys.executable, "-m", "tracekit", "analyze", str(run), "--format", "json"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    import json

    rep = json.loads(res.stdout)
    by = {f["code"]: f for f in rep["findings"]}
    assert by["TK-X900"]["kind"] == "team.long_steps" and by["TK-X900"]["ranks"] == [0, 1]
    assert by["TK-E001"]["title"].startswith("the TK-X901 rule (broken) failed: ZeroDivision")
    compute = next(lv for lv in rep["levels"] if lv["level"] == "compute")
    assert compute["verdict"] == "warning"
    # selectable like a built-in one, and documented by `explain`
    res = subprocess.run([*cmd, "--select", "TK-X900"], capture_output=True, text=True, env=env)
    assert [f["code"] for f in json.loads(res.stdout)["findings"]] == ["TK-X900"]
    res = subprocess.run(
        [sys.executable, "-m", "tracekit", "explain", "TK-X900"], capture_output=True,
        text=True, env=env,
    )  # fmt: skip
    assert "a rank's step ≥ 1 ms" in res.stdout


def test_an_unknown_rule_in_scenario_is_exit_2(tmp_path):
    generate(Scenario(world=2, steps=2), tmp_path)
    res = CliRunner().invoke(main, ["analyze", str(tmp_path), "--ignore", "nonsense"])
    assert res.exit_code == 2


# ---------------------------------------------------------------- each rule's candidates


def _finding(code, **kw):
    from diagnosers.findings import Finding

    return Finding(lookup(code), "warning", "t", ranks=[0], **kw)


def test_each_rule_names_its_candidate_changes():
    """A rule owns the what-if changes its remedy makes (the step model replays them)."""
    ctx = Given([rank_row(0, compute=0.5)], pipeline=_pipe(4, 4))
    assert lookup("TK-S401")().candidates(ctx, _finding("TK-S401")) == [
        "microbatches=16",
        "interleave=2",
    ]
    # already interleaved, and M ≥ 4·P: nothing the replay can try
    inter = Given(pipeline=_pipe(2, 8, 2, "interleaved"))
    assert lookup("TK-S401")().candidates(inter, _finding("TK-S401")) == []
    assert lookup("TK-C202")().candidates(ctx, _finding("TK-C202")) == ["no-host-gaps"]
    assert lookup("TK-C203")().candidates(ctx, _finding("TK-C203")) == ["no-host-gaps"]
    assert lookup("TK-S402")().candidates(ctx, _finding("TK-S402")) == ["no-straggler"]
    rows = [{"name": "all_reduce"}, {"name": "all_gather"}, {"name": "all_reduce"}]
    f = _finding("TK-N301", details={"collectives": rows})
    assert lookup("TK-N301")().candidates(ctx, f) == ["overlap:all_reduce", "overlap:all_gather"]
    f = _finding("TK-N302", details={"sizes": [{"name": "all_to_all"}]},
                 predicted={"busbw_GBps": 71.49661})  # fmt: skip
    assert lookup("TK-N302")().candidates(ctx, f) == ["bandwidth:all_to_all=71.4966"]
    # low MFU: the GEMMs' lost 10 ms taken from 50 ms of compute: 50 / 40 = 1.25× faster
    f = _finding("TK-C201", impact_ms=10.0)
    assert lookup("TK-C201")().candidates(ctx, f) == ["compute-speed=1.25"]
    assert lookup("TK-M101")().candidates(ctx, _finding("TK-M101")) == []
