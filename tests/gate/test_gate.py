"""The CI gate: per-step samples, `tracekit baseline save`, `tracekit compare`.

Runs come from tests/synth.py (a generator whose schedule is the truth): a run against
itself and two runs differing only by noise pass; each injected regression fails and
names its metric and cause; every output format validates."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import pytest

from tests.helpers import invoke
from tests.synth import Scenario, generate
from tracekit.cli import main

ROOT = Path(__file__).resolve().parents[2]
STEPS = 8

RUNS = {
    "base": Scenario(seed=0, steps=STEPS),
    "noise": Scenario(seed=1, steps=STEPS),
    # injected regressions
    "slower_steps": Scenario(seed=1, steps=STEPS, gemm_eff=0.5),
    "lost_overlap": Scenario(seed=1, steps=STEPS, buckets_after_backward=True),
    "slower_collective": Scenario(seed=1, steps=STEPS, busbw_GBps=60),
    "more_memory": Scenario(seed=1, steps=STEPS, memory_peak=0.70),
    "new_straggler": Scenario(seed=1, steps=STEPS, straggler=2),
    # small kernels: the host's launches set the pace when each op costs 45 µs
    "small_base": Scenario(seed=0, steps=STEPS, hidden=512, tokens=1024),
    "host_bound": Scenario(seed=1, steps=STEPS, hidden=512, tokens=1024, host_op_us=45.0),
    # pipelines: the same work in 8 microbatches, then in 4 twice the size
    "pp_base": Scenario(seed=0, steps=STEPS, pipeline=(4, 8), tokens=2048),
    "bigger_bubble": Scenario(seed=1, steps=STEPS, pipeline=(4, 4), tokens=4096),
}


class _Runs(dict):
    """Each synthetic run, generated and analysed into a JSON report on first use."""

    def __init__(self, root: Path):
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> dict:
        d = self.root / name
        truth = generate(RUNS[name], d)
        res = invoke("analyze", d, "--format", "json", "-o", self.root / f"{name}.json")
        assert res.exit_code == 0, res.output
        self[name] = {"dir": d, "report": self.root / f"{name}.json", "truth": truth}
        return self[name]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _Runs(tmp_path_factory.mktemp("gate-runs"))


SYNTH_NOISE = "kernel_time=4%,collective_time=4%,busbw=4%,mfu=4%"


def _compare(runs, base, new, *extra):
    res = invoke("compare", runs[base]["report"], runs[new]["report"], "--format", "json", *extra)
    assert res.exit_code in (0, 1), res.output
    return res.exit_code, json.loads(res.output)


def _metric(doc: dict, name: str) -> dict:
    return next(m for m in doc["metrics"] if m["metric"] == name)


# ----------------------------------------------------------------- the samples


def test_samples_match_the_generators_intervals(runs):
    """Per step, the parts add up to the step; over the steps, they give the fractions
    the generator's own intervals give (tests/synth.py Truth)."""
    rep = json.loads(runs["lost_overlap"]["report"].read_text())
    truth = runs["lost_overlap"]["truth"]
    s = rep["samples"]
    assert s["steps"] == list(range(1, STEPS + 1))
    for r in s["ranks"]:
        for i in range(len(r["step"])):
            parts = r["compute_ms"][i] + r["exposed_comm_ms"][i] + r["other_ms"][i]
            assert parts + r["idle_ms"][i] == pytest.approx(r["step_time_ms"][i], abs=1e-5)
        total = sum(r["step_time_ms"])
        t = truth.fractions[r["rank"]]
        for key in ("compute", "exposed_comm", "comm"):
            measured = sum(r[f"{key}_ms"]) / total
            assert measured == pytest.approx(t[f"{key}_fraction"], abs=0.01), key
    coll = s["collectives"][0]
    assert coll["name"] == "all_reduce" and coll["group_size"] == 4
    # the generator's bucket: 12·h² params per layer × 8 layers ÷ 4 buckets, bf16
    assert coll["bytes"] == 12 * 2048 * 2048 * 8 // 4 * 2
    # every bucket runs after backward: nothing hides it (overlap 0)
    assert sum(coll["exposed_ms"]) == pytest.approx(sum(coll["time_ms"]), rel=0.02)
    # bus bandwidth per step: the generator's transfer time S·f/busbw + α
    f = 2 * 3 / 4
    t_us = 12.0 + coll["bytes"] * f / 380e9 * 1e6
    expected = coll["bytes"] * f / (t_us * 1e3)
    assert all(bw == pytest.approx(expected, rel=0.01) for bw in coll["busbw_GBps"])


def test_host_bound_samples_are_the_compute_levels_figure(runs):
    """Per step, the compute level's host-bound definition: over the steps, the
    fraction `ranks[].host_bound_fraction` reports for the whole window."""
    rep = json.loads(runs["host_bound"]["report"].read_text())
    by_rank = {r["rank"]: r for r in rep["ranks"]}
    for r in rep["samples"]["ranks"]:
        whole = sum(r["host_bound_ms"]) / sum(r["step_time_ms"])
        assert by_rank[r["rank"]]["host_bound_fraction"] > 0.5
        assert whole == pytest.approx(by_rank[r["rank"]]["host_bound_fraction"], abs=0.01)


def test_one_step_samples_are_the_breakdown_of_that_step(tmp_path):
    """The samples use the per-rank breakdown's definitions: one step of them equals
    `per_rank(steps=N)`, the figure ranks[] reports for that window."""
    import tracekit
    from tracekit.metrics.breakdown import per_rank
    from tracekit.metrics.samples import per_step

    shutil.copytree(
        ROOT / "sample_traces" / "ddp", tmp_path / "ddp", ignore=shutil.ignore_patterns(".tracekit")
    )
    with tracekit.open(tmp_path / "ddp") as run:
        s = per_step(run)
        for i, step in enumerate(s.steps):
            for want in per_rank(run, steps=str(step)):
                got = next(r for r in s.ranks if r.rank == want.rank)
                for key in (
                    "step_time_ms",
                    "idle_fraction",
                    "compute_fraction",
                    "comm_fraction",
                    "exposed_comm_fraction",
                ):
                    assert getattr(got, key)[i] == pytest.approx(getattr(want, key), abs=1e-5)


# ----------------------------------------------------------------- verdicts


def test_a_run_against_itself_passes_in_every_format(runs, tmp_path):
    d = runs["base"]["dir"]
    res = invoke("compare", d, d)
    assert res.exit_code == 0, res.output
    assert "PASS" in res.output and "regressed" not in res.output.split("PASS")[-1]
    code, doc = _compare(runs, "base", "base")
    assert code == 0 and doc["result"] == "pass" and doc["counts"]["regressed"] == 0
    assert _metric(doc, "step_time")["verdict"] == "unchanged"
    assert _metric(doc, "step_time")["confidence"] == "high"


def test_runs_that_differ_only_by_noise_pass(runs):
    code, doc = _compare(runs, "base", "noise")
    assert code == 0, [m for m in doc["metrics"] if m["verdict"] != "unchanged"]
    assert doc["counts"]["regressed"] == 0 and doc["counts"]["inconclusive"] == 0


@pytest.mark.parametrize(
    "new,metric,cause",
    [
        ("slower_steps", "step_time", "compute +"),
        ("slower_steps", "kernel_time[sm90_xmma_gemm", "sm90_xmma_gemm"),
        ("lost_overlap", "exposed_comm", "overlap lost: 75% → 0%"),
        ("lost_overlap", "step_time", "exposed all_reduce 201 MB ×4"),
        ("slower_collective", "busbw[all_reduce 201 MB ×4]", "bus bandwidth"),
        ("slower_collective", "collective_time[all_reduce 201 MB ×4]", "all_reduce"),
        ("more_memory", "peak_memory", "peak reserved on rank"),
        ("bigger_bubble", "bubble", "pipeline bubble"),
        ("new_straggler", "step_time", "rank 2 computes"),
        ("new_straggler", "collective_time[all_reduce", "waiting for a late rank"),
        ("host_bound", "step_time", "host-bound +"),
        ("host_bound", "host_bound", "host-bound +"),
    ],
)
def test_an_injected_regression_fails_and_names_metric_and_cause(runs, new, metric, cause):
    base = {"bigger_bubble": "pp_base", "host_bound": "small_base"}.get(new, "base")
    # the synthetic runs carry the generator's step noise, not a machine's run-to-run
    # noise: the drill-down families' calibrated priors (8.5–69%) are a real runner's
    code, doc = _compare(runs, base, new, "--run-noise", SYNTH_NOISE)
    assert code == 1 and doc["result"] == "fail"
    m = next(m for m in doc["metrics"] if m["metric"].startswith(metric))
    assert m["verdict"] == "regressed", m
    assert m["confidence"] in ("high", "exact")
    assert cause in (m["cause"] or ""), m["cause"]


def test_only_the_injected_levels_regress(runs):
    """More memory moves memory alone; lost overlap does not blame compute."""
    _, doc = _compare(runs, "base", "more_memory")
    assert [m["metric"] for m in doc["metrics"] if m["verdict"] == "regressed"] == ["peak_memory"]
    _, doc = _compare(runs, "base", "lost_overlap")
    bad = {m["metric"] for m in doc["metrics"] if m["verdict"] == "regressed"}
    assert "exposed_comm" in bad and not any(b.startswith("kernel_time") for b in bad)
    levels = doc["cause"]["levels"]
    assert levels["exposed communication"] > 0.9 * doc["cause"]["step_ms_change"]


def test_the_step_time_change_is_decomposed_into_levels(runs):
    _, doc = _compare(runs, "base", "slower_steps")
    c = doc["cause"]
    # the generator slows the GEMMs alone: compute carries the whole change
    assert c["levels"]["compute"] == pytest.approx(c["step_ms_change"], rel=0.05)
    assert sum(c["levels"].values()) == pytest.approx(c["step_ms_change"], rel=1e-3)
    assert c["text"].startswith("step +")


def test_too_few_steps_or_a_report_without_samples_is_inconclusive(runs, tmp_path):
    rep = json.loads(runs["slower_steps"]["report"].read_text())
    del rep["samples"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(rep))
    res = invoke("compare", runs["base"]["report"], old, "--format", "json")
    doc = json.loads(res.output)
    st = _metric(doc, "step_time")
    assert st["verdict"] == "inconclusive" and st["confidence"] == "low"
    assert "no per-step samples" in st["evidence"]
    assert res.exit_code == 0  # inconclusive passes by default …
    res = invoke("compare", runs["base"]["report"], old, "--fail-on", "inconclusive")
    assert res.exit_code == 1  # … and fails when asked
    # peak memory needs no samples: still exact
    assert _metric(doc, "peak_memory")["verdict"] == "unchanged"


def test_noisy_steps_give_inconclusive_with_steps_to_decide(runs, tmp_path):
    """Two steps a side with a 10% change: the bootstrap cannot separate it."""
    base = json.loads(runs["base"]["report"].read_text())
    new = json.loads(runs["base"]["report"].read_text())
    for rep, vals in ((base, [10.0, 14.0]), (new, [11.5, 14.5])):
        for r in rep["samples"]["ranks"]:
            r["step"], r["step_time_ms"] = [1, 2], vals
        for r in rep["ranks"]:
            r["step_time_ms"] = sum(vals) / 2
        rep["summary"]["step_time_ms"] = sum(vals) / 2
    (tmp_path / "b.json").write_text(json.dumps(base))
    (tmp_path / "n.json").write_text(json.dumps(new))
    res = invoke("compare", tmp_path / "b.json", tmp_path / "n.json", "--format", "json")
    st = _metric(json.loads(res.output), "step_time")
    assert st["verdict"] == "inconclusive", st
    assert st["test"]["method"] == "bootstrap"
    assert st["steps_to_decide"] and st["steps_to_decide"] > 2
    assert f"≈{st['steps_to_decide']} steps per run" in st["evidence"]


# ----------------------------------------------------------------- thresholds


def test_thresholds_from_the_command_line_and_pyproject(runs, tmp_path):
    # +14% step time passes with a 20% threshold, and exposed communication switched off
    code, doc = _compare(
        runs,
        "base",
        "lost_overlap",
        "--max-regression",
        "step_time=20%,exposed_comm=off,mfu=20%,rank_step_time=20%",
    )
    assert _metric(doc, "step_time")["verdict"] == "unchanged"
    assert not _metric(doc, "exposed_comm")["gated"]
    assert code == 0, [m["metric"] for m in doc["metrics"] if m["verdict"] == "regressed"]
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text(
        '[tool.tracekit.gate]\nfail_on = "regression"\n\n'
        '[tool.tracekit.gate.max_regression]\nstep_time = "20%"\nmfu = "20%"\n'
        'rank_step_time = "20%"\nexposed_comm = "50pt"\n'
    )
    code, doc = _compare(runs, "base", "lost_overlap", "--config", cfg)
    assert code == 0 and doc["thresholds"]["exposed_comm"] == "50pt"
    # the command line wins over the file
    code, _ = _compare(runs, "base", "lost_overlap", "--config", cfg, "--max-regression", "mfu=5%",
                       "--run-noise", SYNTH_NOISE)  # fmt: skip
    assert code == 1
    # the nearest pyproject.toml of the working directory is read
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, _ = _compare(runs, "base", "lost_overlap")
    finally:
        os.chdir(cwd)
    assert code == 0


@pytest.mark.parametrize(
    "args,message",
    [
        (["--max-regression", "step_time=5"], "is not one of N%"),
        (["--max-regression", "speed=5%"], "no metric 'speed'"),
        (["--max-regression", "step_time=2pt"], "step_time is in ms; use N% or Nms"),
    ],
)
def test_bad_thresholds_are_one_line_exit_2(runs, args, message):
    res = invoke("compare", runs["base"]["report"], runs["base"]["report"], *args)
    assert res.exit_code == 2 and message in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_bad_inputs_are_one_line_exit_2(runs, tmp_path):
    good = runs["base"]["report"]
    (tmp_path / "x.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    newer = json.loads(good.read_text())
    newer["schema"] = 99
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    (tmp_path / "pyproject.toml").write_text("[tool.tracekit.gate]\nfail_on = 'always'\n")
    for args, message in (
        ([tmp_path / "missing", good], "no such file"),
        ([tmp_path / "x.json", good], "not JSON"),
        ([good, tmp_path / "list.json"], "not a tracekit"),
        ([good, tmp_path / "newer.json"], "newer than this tracekit"),
        ([good, good, "--config", tmp_path / "pyproject.toml"], "fail_on must be one of"),
    ):
        res = invoke("compare", *args)
        assert res.exit_code == 2, (args, res.output)
        assert message in res.output and len(res.output.strip().splitlines()) == 1


# ----------------------------------------------------------------- baseline files


def test_baseline_save_is_small_and_compares_like_the_run(runs, tmp_path):
    out = tmp_path / "baseline.json"
    res = invoke("baseline", "save", runs["base"]["dir"], "-o", out)
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["tracekit_baseline"] == 2 and len(doc["runs"]) == 1
    run = doc["runs"][0]
    assert "levels" not in run and "findings" not in run
    assert len(run["samples"]["ranks"]) == 4 and run["samples"]["steps"] == list(range(1, 9))
    traces = sum(p.stat().st_size for p in runs["base"]["dir"].glob("rank-*.json.gz"))
    assert out.stat().st_size < 60_000 and out.stat().st_size < traces
    # a baseline from the saved report is the same figures
    res = invoke("baseline", "save", runs["base"]["report"], "-o", tmp_path / "b2.json")
    assert res.exit_code == 0
    assert json.loads((tmp_path / "b2.json").read_text())["runs"][0]["samples"] == run["samples"]
    res = invoke("compare", out, runs["noise"]["dir"], "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["base"]["kind"] == "baseline"
    res = invoke("compare", out, runs["lost_overlap"]["report"])
    assert res.exit_code == 1 and "exposed_comm" in res.output


# ----------------------------------------------------------------- formats


def test_junit_validates_with_one_case_per_gated_metric(runs, tmp_path):
    from junitparser import Failure, JUnitXml, Skipped

    res = invoke("compare", runs["base"]["report"], runs["lost_overlap"]["report"],
                 "--format", "junit", "-o", tmp_path / "gate.xml")  # fmt: skip
    assert res.exit_code == 1
    _, doc = _compare(runs, "base", "lost_overlap")
    gated = [m for m in doc["metrics"] if m["gated"]]
    xml = JUnitXml.fromfile(str(tmp_path / "gate.xml"))
    suites = list(xml)
    assert len(suites) == 1
    cases = list(suites[0])
    assert [c.name for c in cases] == [m["metric"] for m in gated]
    failed = {c.name: c for c in cases if any(isinstance(r, Failure) for r in c.result)}
    assert set(failed) == {m["metric"] for m in gated if m["verdict"] == "regressed"}
    assert suites[0].failures == len(failed) and suites[0].tests == len(cases)
    msg = failed["exposed_comm"].result[0].message
    assert "exposed communication" in msg and "overlap lost" in msg
    # an inconclusive verdict is a skip (here: the ranks' step times, judged at the
    # drill-down's shared α against the run-to-run prior)
    skipped = {c.name for c in cases if any(isinstance(r, Skipped) for r in c.result)}
    assert skipped == {m["metric"] for m in gated if m["verdict"] == "inconclusive"}
    # the JUnit schema's required attributes and structure
    root = ET.parse(tmp_path / "gate.xml").getroot()
    assert root.tag == "testsuites"
    for suite in root:
        assert {"name", "tests", "failures", "errors"} <= set(suite.attrib)
        for case in suite.iter("testcase"):
            assert {"name", "classname"} <= set(case.attrib)
            assert len([c for c in case if c.tag in ("failure", "error", "skipped")]) <= 1


def test_markdown_is_a_table_with_every_run_metric(runs):
    res = invoke("compare", runs["base"]["report"], runs["lost_overlap"]["report"],
                 "--format", "markdown")  # fmt: skip
    lines = res.output.splitlines()
    assert lines[0].startswith("### tracekit compare: FAIL")
    table = [ln for ln in lines if ln.startswith("|")]
    header = table[0].count("|")
    assert all(ln.count("|") - ln.count("\\|") == header for ln in table)
    assert table[1].startswith("|---|")
    assert any("exposed_comm" in ln and "regressed" in ln for ln in table)
    assert "overlap lost" in res.output


def test_json_and_text_carry_the_verdicts(runs):
    _, doc = _compare(runs, "base", "slower_steps")
    assert {"result", "exit_code", "metrics", "cause", "thresholds", "counts"} <= set(doc)
    st = _metric(doc, "step_time")
    assert st["test"]["method"] == "mann-whitney" and st["test"]["p_value"] < 0.01
    assert st["relative_change"] == pytest.approx(0.226, abs=0.03)
    res = invoke("compare", runs["base"]["report"], runs["slower_steps"]["report"])
    assert res.exit_code == 1
    assert "REGRESSED step_time: Mann–Whitney U p =" in res.output
    assert res.output.rstrip().splitlines()[-1].startswith("FAIL: ")


def test_analyze_does_not_import_scipy():
    code = (
        "import sys, tracekit.cli, diagnosers.assemble, tracekit.metrics.samples; "
        "sys.exit('scipy' in sys.modules or 'numpy' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr


# ----------------------------------------------------------------- real runs


def _busy_seconds() -> float | None:
    """CPU seconds all processes have spent busy since boot (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def _children_seconds() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _run_measuring_others(cmd: list[str], **kw) -> float:
    """Run the job; return the cores other processes kept busy meanwhile (0 unknown)."""
    busy0, ours0, t0 = _busy_seconds(), _children_seconds(), time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True, **kw)
    busy1, ours1, wall = _busy_seconds(), _children_seconds(), time.monotonic() - t0
    if busy0 is None or busy1 is None or wall <= 0:
        return 0.0
    return max(0.0, (busy1 - busy0) - (ours1 - ours0)) / wall


def _ddp_pair(tmp_path: Path, tag: str) -> tuple[list[float], dict, object]:
    """Two `tracekit run ddp` jobs one after the other, and the gate's verdict on them:
    (the cores other processes kept busy during each job, the JSON, the CLI result)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    others = []
    for name in ("a", "b"):
        cmd = [sys.executable, "-m", "tracekit.cli", "run", "ddp", "-n", "2", "--steps", "5"]
        cmd += ["--no-calibrate", "--out", str(tmp_path / f"{tag}{name}")]
        others.append(_run_measuring_others(cmd, env=env, cwd=ROOT))
    res = invoke("compare", tmp_path / f"{tag}a", tmp_path / f"{tag}b", "--format", "json")
    return others, json.loads(res.output), res


MODE_SHIFT = 0.30  # a step-time change past which two runs ran on different machines


@pytest.mark.slow
def test_two_real_ddp_runs_with_the_same_options_pass(tmp_path):
    """Two `tracekit run ddp` jobs, one after the other, as CI would run them: their
    steps wander by several percent (the gloo ranks share the cores), and the gate
    must not call that a regression.

    On a machine shared with other work, one job can get half the cores the other got:
    every step is then slower — a real slowdown, which the gate rightly reports. The
    test measures, from /proc/stat, the cores other processes kept busy during each
    job, and skips when that differs between the two by more than an eighth of the
    machine (the same steady load on both is fine: that is what a CI runner sees).
    Bursts of other work inside a job escape that average (under `pytest -n 2` the
    other worker's tests come and go): a pair the gate calls regressed is run once
    more, and that second pair must pass — a false alarm rate of p² for the gate's p.
    The host's memory bandwidth also moves, by up to 1.5× in modes /proc/stat does not
    see (docs/ci-gate.md): a pair that fails with steps more than 30% apart is skipped
    as two machines."""
    pytest.importorskip("torch")
    cores = os.cpu_count() or 1
    for attempt in range(2):
        others, doc, res = _ddp_pair(tmp_path, f"try{attempt}-")
        if abs(others[0] - others[1]) > cores / 8:
            pytest.skip(
                f"other processes kept {others[0]:.1f}, then {others[1]:.1f} of {cores} "
                "cores busy: the two jobs ran on different machines, in effect"
            )
        if res.exit_code == 0:
            break
    step = _metric(doc, "step_time")["change"]
    if res.exit_code and step is not None and abs(step) > MODE_SHIFT:
        # the host's memory bandwidth moves in modes of seconds to minutes, unseen by
        # /proc/stat (benchmarks/gate_noise.py probe: 26–61 ms per round, 2026-11-27); a
        # step 30% apart is the machine changing speed, not run-to-run wander
        pytest.skip(f"the step time moved {step:+.0%} between the two jobs: the machine "
                    "changed speed (benchmarks/gate_noise.py probe), a different machine")
    assert res.exit_code == 0, [m for m in doc["metrics"] if m["verdict"] == "regressed"]
    assert _metric(doc, "step_time")["test"]["n_base"] == 5


# ----------------------------------------------------------------- the README stays true


def _readme_gate_section() -> str:
    """The gate's manual page (moved from the README to docs/compare.md)."""
    return (ROOT / "docs" / "compare.md").read_text()


def _blocks(section: str, lang: str) -> list[str]:
    parts = section.split(f"```{lang}\n")[1:]
    return [p.split("```", 1)[0] for p in parts]


def test_readme_gate_config_workflows_and_options(tmp_path):
    from tracekit.gate import config

    section = _readme_gate_section()
    (toml,) = _blocks(section, "toml")
    (tmp_path / "pyproject.toml").write_text(toml)
    cfg = config.load(str(tmp_path / "pyproject.toml"))
    assert cfg.fail_on == "regression" and str(cfg.thresholds["step_time"]) == "5%"
    yaml = pytest.importorskip("yaml")
    commands = []
    for block in _blocks(section, "yaml"):
        doc = yaml.safe_load(block)
        assert isinstance(doc, dict)
        commands += [
            line.strip().lstrip("- ").split("tracekit ", 1)[1]
            for line in block.splitlines()
            if "tracekit compare" in line or "tracekit analyze" in line
        ]
    for block in _blocks(section, "bash"):
        commands += [
            line.split("#")[0].strip().split("tracekit ", 1)[1]
            for line in block.splitlines()
            if line.startswith("tracekit ")
        ]
    assert len(commands) >= 5
    # every option the docs use exists on its command
    for cmd in [*commands, "compare a b --max-regression x --fail-on inconclusive --all"]:
        name, *args = cmd.split()
        command = main.commands[name]
        if isinstance(command, click.Group):  # baseline save
            command, args = command.commands[args[0]], args[1:]
        params = {o for p in command.params for o in p.opts}
        for a in args:
            if a.startswith("-"):
                assert a in params, (name, a)


def test_readme_cause_example_is_what_compare_prints(runs):
    section = _readme_gate_section()
    example = next(b for b in _blocks(section, "") if b.startswith("REGRESSED"))
    res = invoke("compare", runs["base"]["report"], runs["lost_overlap"]["report"])
    for line in example.strip().splitlines():
        assert line in res.output, line


def test_a_baseline_needs_profiler_steps(tmp_path):
    from tests.tracegen import TraceBuilder

    b = TraceBuilder(rank=0, world_size=1)
    b.cpu_op("aten::mm", 100.0, 10.0)
    b.kernel("gemm", 105.0, 20.0, launch_ts=101.0)
    b.write(tmp_path / "run" / "rank-0.json")
    res = invoke("baseline", "save", tmp_path / "run", "-o", tmp_path / "b.json")
    assert res.exit_code == 2 and "no ProfilerSteps" in res.output
    assert not (tmp_path / "b.json").exists()


def test_steps_select_the_compared_window_of_a_run_folder(runs):
    d = runs["base"]["dir"]
    res = invoke("compare", d, d, "--steps", "2-5", "--format", "json")
    assert res.exit_code == 0, res.output
    st = _metric(json.loads(res.output), "step_time")
    assert st["test"]["n_base"] == 4 and st["test"]["n_new"] == 4
