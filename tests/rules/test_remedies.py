"""Remedies the replay proves (issue 29, item 4) and savings that can be had (issue 34,
item 7).

Each rule names its candidate changes; every warning or critical finding replays them,
carries `remedies[]` best first and its `impact_ms` is the best saving. The truths here
come from the raw trace JSON (device idle from the kernels' union, by hand) or from the
generator's schedule (tests/synth.py), never from tracekit's tables.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

import tracekit
from diagnosers import assemble
from diagnosers.context import Context
from tests.snapshot_reports import SYNTH as SNAPSHOT_SYNTH
from tests.synth import Scenario, generate, merge_intervals
from tracekit.analysis.whatif_plan import what_if
from tracekit.errors import TracekitError
from tracekit.model.pipeline import bubble_fraction, simulate
from tracekit.options import AnalysisOptions
from tracekit.stepmodel import changes as C
from tracekit.stepmodel.pipeline import interleaved_orders

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
LEVELS = ("compute", "communication", "scaling")


def _report(path: Path):
    with tracekit.open(path) as run:
        return assemble.analyze(run, AnalysisOptions())


def _events(path: Path) -> list[dict]:
    out = []
    for f in sorted(path.glob("*.json.gz")):
        with gzip.open(f) as fh:
            out += [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    return out


def _union_us(iv: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in merge_intervals(iv))


def _idle_ms_per_step(events: list[dict]) -> list[float]:
    """Per ProfilerStep, in order: its span less the union of the device work (kernels,
    copies, memsets) inside it, ms — by hand from the raw events."""
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if str(e.get("name", "")).startswith("ProfilerStep#")
    )
    dev = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    out = []
    for a, b in steps:
        busy = _union_us([(max(x, a), min(y, b)) for x, y in dev if min(y, b) > max(x, a)])
        out.append((b - a - busy) / 1e3)
    return out


def check_remedies(report) -> None:
    """Every warning/critical finding at compute, communication or scaling carries its
    candidates replayed, best first, and its impact is the best saving (≥ 0); a critical
    one leads with a change that wins."""
    for f in report.findings:
        if f.level not in LEVELS or f.severity not in ("warning", "critical"):
            continue
        assert f.remedies or "does not apply" in f.remedy, (f.code, f.remedy)
        saved = [r.saved_ms for r in f.remedies]
        assert saved == sorted(saved, reverse=True), f.code
        best = max(saved[0], 0.0) if saved else 0.0
        assert f.impact_ms == pytest.approx(best, abs=1e-9), f.code
        assert f.remedy.startswith("replayed, "), f.code
        if f.severity == "critical":
            assert saved and saved[0] > 0, (f.code, saved)
            assert f.remedy.startswith(f"replayed, {f.remedies[0].change} saves"), f.code
        if saved and saved[0] <= 0:
            assert f.remedy.startswith("replayed, none of the candidate changes"), f.code
        if f.remedies and f.remedy.startswith("replayed, none of the candidate changes"):
            # its replay refutes both claims
            assert "would win" not in f.title, (f.code, f.title)
            assert "compute could hide" not in f.title, (f.code, f.title)
    impacts = [f.impact_ms or 0 for f in report.findings]
    assert impacts == sorted(impacts, reverse=True)


# ------------------------------------------------------------------ interleave=V


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 4, 3), (3, 6, 4)])
def test_interleaved_schedule_has_megatrons_bubble(p, m, v):
    """Equal chunks, no hops: the interleaved 1F1B order's idle share is (P−1)/(V·M+P−1)
    (Narayanan et al. 2021), and every rank runs each of its chunks' F and B once per
    microbatch."""
    orders = interleaved_orders(p, m, v)
    for r, ops in orders.items():
        assert sorted(ops) == sorted(
            (k, c * p + r, i) for k in "FB" for c in range(v) for i in range(m)
        )
    dur = {op: 1.0 / v for ops in orders.values() for op in ops}
    sim = simulate(orders, dur, {s: s % p for s in range(p * v)})
    assert sim.bubble() == pytest.approx(bubble_fraction(p, m, v))


def test_interleave_needs_a_pipeline_and_m_a_multiple_of_p():
    ch = C.parse("interleave=2")
    with pytest.raises(C.NotApplicable):
        ch.apply(None, None)
    ch.pipeline = C.PipelineShape(2, 3, "1f1b", {0: 0, 1: 1}, {}, {}, 0.0)
    with pytest.raises(C.NotApplicable, match="multiple"):
        ch.apply(None, None)
    with pytest.raises(TracekitError):
        C.parse("interleave=0")


def _truth_span_us(f_us: dict, b_us: dict, hop_us: float, p: int, m: int, v: int) -> float:
    """The pipeline's span by hand: each rank runs its operations in order (1F1B, or
    Megatron's interleaved order: chunk (k mod P·V)//P of microbatch (k//(P·V))·P + k mod
    P, warm-up (P−r−1)·2 + (V−1)·P), a chunk's forward after the previous chunk's (+ the
    hop), a backward after the next chunk's; a chunk does 1/V of its stage's work."""
    n = p * v
    seqs = {}
    for r in range(p):
        total = m * v
        warm = min((p - r - 1) * 2 + (v - 1) * p, total) if v > 1 else min(p - r - 1, m)

        def op(kind, k, r=r):
            c = (k % n) // p if v > 1 else 0
            c = v - 1 - c if kind == "B" else c
            return (kind, c * p + r, (k // n) * p + k % p if v > 1 else k)

        seq = [op("F", k) for k in range(warm)]
        for i in range(total - warm):
            seq += [op("F", warm + i), op("B", i)]
        seqs[r] = seq + [op("B", k) for k in range(total - warm, total)]
    end: dict = {}
    free = dict.fromkeys(seqs, 0.0)
    pos = dict.fromkeys(seqs, 0)
    while any(pos[r] < len(s) for r, s in seqs.items()):
        for r, seq in seqs.items():
            while pos[r] < len(seq):
                kind, s, i = seq[pos[r]]
                dep = (
                    ("F", s - 1, i) if kind == "F" and s > 0
                    else ("B", s + 1, i) if kind == "B" and s < n - 1
                    else ("F", s, i) if kind == "B" else None
                )  # fmt: skip
                if dep is not None and dep not in end:
                    break
                ready = end[dep] + (hop_us if dep[1] % p != r else 0) if dep else 0.0
                work = (f_us if kind == "F" else b_us)[s % p] / v
                end[(kind, s, i)] = free[r] = max(free[r], ready) + work
                pos[r] += 1
    return max(free.values())


def test_a_host_bound_pipeline_wins_by_interleaving_and_loses_with_more_microbatches(tmp_path):
    """The twin: 1F1B, P = 2, M = 4, host-bound operations (45 µs of host per launch).
    More microbatches at the same global batch cost (each operation's launches stay, the
    twin at M = 8 runs longer: measured from its trace); interleaving wins (the truth:
    the schedule run by hand with each stage's measured operations split in two, the
    hop the generator's). The finding offers interleave=2 first."""
    sc = Scenario(
        name="pp_host", pipeline=(2, 4), layers=8, tokens=1024, hidden=512, host_op_us=45.0
    )
    generate(sc, tmp_path / "m4")
    generate(replace(sc, pipeline=(2, 8), tokens=512), tmp_path / "m8")
    rep = _report(tmp_path / "m4")
    f = next(x for x in rep.findings if x.code == "TK-S401")
    by = {r.change: r for r in f.remedies}
    assert [r.change for r in f.remedies] == ["interleave=2", "microbatches=8"]
    assert f.remedy.startswith("replayed, interleave=2 saves")
    assert "microbatches=8 makes the step" in f.remedy
    assert f.impact_ms == pytest.approx(by["interleave=2"].saved_ms)
    check_remedies(rep)

    # truth 1: the twin at M = 8 (the same global batch) is slower, as predicted
    def step_ms(path):
        ev = _events(path)
        st = [e["dur"] for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
        return sum(st) / len(st) / 1e3

    m4, m8 = step_ms(tmp_path / "m4") * 2 / 2, step_ms(tmp_path / "m8")
    assert m8 > m4 * 1.1
    assert by["microbatches=8"].predicted_step_ms == pytest.approx(m8, rel=0.10)

    # truth 2: the schedule by hand, from each stage's operations in the raw trace
    ops: dict[tuple[str, int], list[float]] = {}
    for e in _events(tmp_path / "m4"):
        if m := re.fullmatch(r"PP:(\d)([FB])(\d+)", str(e.get("name", ""))):
            ops.setdefault((m.group(2), int(m.group(1))), []).append(e["dur"])
    f_us = {s: sum(ops[("F", s)]) / len(ops[("F", s)]) for s in range(2)}
    b_us = {s: sum(ops[("B", s)]) / len(ops[("B", s)]) for s in range(2)}
    hop = sc.alpha_us + sc.tokens * sc.hidden * 2 / (sc.busbw_GBps * 1e9) * 1e6
    truth = (
        _truth_span_us(f_us, b_us, hop, 2, 4, 1) - _truth_span_us(f_us, b_us, hop, 2, 4, 2)
    ) / 1e3
    assert truth > 0
    assert by["interleave=2"].saved_ms == pytest.approx(truth, rel=0.15)


def test_pp_1f1b_sample_leads_with_the_change_that_wins(tmp_path):
    """The recorded 1F1B sample: microbatches=8 makes the step longer (the finding was
    CRITICAL with impact 0 and that remedy); it now leads with interleave=2, which wins,
    and says what microbatches=8 costs."""
    shutil.copytree(SAMPLES / "pp_1f1b", tmp_path / "pp")
    rep = _report(tmp_path / "pp")
    f = next(x for x in rep.findings if x.code == "TK-S401")
    assert f.remedies[0].change == "interleave=2" and f.remedies[0].saved_ms > 0
    assert f.remedies[-1].change == "microbatches=8" and f.remedies[-1].saved_ms < 0
    assert "microbatches=8 makes the step" in f.remedy
    check_remedies(rep)
    rows = {(w.finding, w.change[0]) for w in rep.step_model.what_if}
    assert {("TK-S401", "interleave=2"), ("TK-S401", "microbatches=8")} <= rows


def test_whatif_cli_takes_interleave(tmp_path):
    from click.testing import CliRunner

    from tracekit.cli import main

    shutil.copytree(SAMPLES / "pp_1f1b", tmp_path / "pp")
    res = CliRunner().invoke(
        main, ["whatif", str(tmp_path / "pp"), "--change", "interleave=2", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["change"] == ["interleave=2"] and out["saved_ms"] > 0
    assert any("interleaved V=2" in n for n in out["notes"])
    res = CliRunner().invoke(
        main,
        ["whatif", str(tmp_path / "pp"), "--change", "interleave=2", "--change", "microbatches=8"],
    )
    assert res.exit_code == 2 and "do not combine" in res.output
    res = CliRunner().invoke(
        main, ["whatif", str(SAMPLES / "pp_interleaved"), "--change", "interleave=2"]
    )
    assert res.exit_code == 2 and "interleave=2" in res.output


# ------------------------------------------------------------------ severity


def test_a_finding_whose_remedies_win_nothing_is_not_critical(tmp_path):
    """A synthetic run where a rule fires but its candidate cannot win: the finding says
    so, is at most a warning and sorts after findings with a winning remedy."""
    from diagnosers.findings import Finding
    from diagnosers.impact import impacts
    from diagnosers.rules.pipeline_bubble import PipelineBubble

    shutil.copytree(SAMPLES / "pp_1f1b", tmp_path / "pp")
    with tracekit.open(tmp_path / "pp") as run:
        run.materialize()
        ctx = Context(run, AnalysisOptions())

        class OnlyMore(PipelineBubble):
            def candidates(self, ctx, finding):
                return ["microbatches=8", "overlap:no_such"]

        f = Finding(OnlyMore, "critical", "t", ranks=[0], remedy="advice")
        impacts(ctx, [f])
    assert f.severity == "warning" and f.impact_ms == 0.0
    assert f.remedy.startswith("replayed, none of the candidate changes saves time: ")
    assert "microbatches=8 makes the step" in f.remedy
    assert "overlap:no_such does not apply" in f.remedy and f.remedy.endswith("; advice")
    assert [r["change"] for r in f.remedies] == ["microbatches=8"]


def test_a_title_claims_no_gain_its_replay_refutes(tmp_path):
    """TK-N301's title says overlap would win the exposed time; once its candidates are
    replayed and none saves time it says the replay found no gain (the exposed time and
    its parts stay); where none of them could be replayed (no replay made) it is kept."""
    from diagnosers.findings import Finding
    from diagnosers.impact import impacts
    from diagnosers.rules.exposed_communication import ExposedCommunication

    title = (
        "communication is exposed 30% of the step; 30% (9.00 ms) is not explained by a "
        "straggler or a pipeline and overlap with compute would win it: 9.00 ms transfer "
        "compute could hide"
    )
    shutil.copytree(SAMPLES / "pp_1f1b", tmp_path / "pp")
    with tracekit.open(tmp_path / "pp") as run:
        run.materialize()
        ctx = Context(run, AnalysisOptions())

        class Longer(ExposedCommunication):  # a change the replay shows costs time
            def candidates(self, ctx, finding):
                return ["microbatches=8", "overlap:no_such"]

        class NoneApplies(ExposedCommunication):
            def candidates(self, ctx, finding):
                return ["overlap:no_such"]

        refuted = Finding(Longer, "critical", title, ranks=[0])
        unreplayed = Finding(NoneApplies, "warning", title, ranks=[0])
        impacts(ctx, [refuted, unreplayed])
    assert refuted.remedy.startswith("replayed, none of the candidate changes saves time")
    assert refuted.title == (
        "communication is exposed 30% of the step; 30% (9.00 ms) is not explained by a "
        "straggler or a pipeline; the replay finds no gain from overlapping it: 9.00 ms "
        "in transfer"
    )
    assert refuted.severity == "warning"  # the exposed time is measured: still a warning
    assert not unreplayed.remedies and unreplayed.title == title


def test_exposed_communication_the_replay_refutes_says_so(shared_trace):
    """a100_sendrecv_2rank: TK-N301 said "… and overlap with compute would win it" while
    every overlap replayed saved 0.00 ms; its title now says the replay found no gain,
    and keeps the exposed time it measured."""
    rep = _report(shared_trace("a100_sendrecv_2rank"))
    f = next(x for x in rep.findings if x.code == "TK-N301")
    assert f.remedies and all(r.saved_ms < 0.05 for r in f.remedies)
    assert "would win" not in f.title
    assert (
        "is not explained by a straggler or a pipeline; the replay finds no gain from "
        "overlapping it: "
    ) in f.title
    assert f.severity == "warning" and f.measured["overlap_win_ms"] > 0
    check_remedies(rep)


def test_exposed_communication_the_replay_proves_keeps_its_claim(tmp_path):
    """The synthetic exposed all-reduce (buckets reduced after backward, tests/synth.py):
    overlap wins in the replay, so the title keeps "overlap with compute would win it"."""
    generate(Scenario(**SNAPSHOT_SYNTH["exposed"]), tmp_path / "run")
    rep = _report(tmp_path / "run")
    f = next(x for x in rep.findings if x.code == "TK-N301")
    assert f.remedies[0].change == "overlap:all_reduce" and f.remedies[0].saved_ms > 1.0
    assert (
        "is not explained by a straggler or a pipeline and overlap with compute would win it: "
    ) in f.title
    check_remedies(rep)


# ------------------------------------------------------------------ graph replays


def test_host_bound_gives_no_graph_advice_to_graph_replays(tmp_path):
    """Kernels replayed by cudaGraphLaunch / hipGraphLaunch: TK-C202 names the syncs
    and the launches left, not CUDA graphs."""
    for launch in ("cudaGraphLaunch", "hipGraphLaunch"):
        sc = Scenario(
            name="graphs", hidden=512, tokens=1024, host_op_us=45.0, graph_replay="all",
            graph_launch=launch,
        )  # fmt: skip
        generate(sc, tmp_path / launch)
        rep = _report(tmp_path / launch)
        for f in rep.findings:
            if f.code == "TK-C202":
                assert "CUDA graphs" not in f.remedy and "already replay" in f.remedy
    sc = Scenario(name="eager", hidden=512, tokens=1024, host_op_us=45.0)
    generate(sc, tmp_path / "eager")
    f = next(x for x in _report(tmp_path / "eager").findings if x.code == "TK-C202")
    assert "CUDA graphs" in f.remedy


# ------------------------------------------------------------------ savings that can be had


@pytest.mark.parametrize("name", ["a100_recsys_rank3_of8", "a100_allreduce_meta_rank0"])
def test_no_host_gaps_saves_at_most_the_device_idle_time(shared_trace, name):
    """One rank: removing host gaps can take away only the time its device was idle —
    the steps the model covers, each less the union of its device work, by hand from
    the raw trace (before: 18.11 ms saved of 11.25 ms idle on a100_recsys_rank3_of8,
    174.54 of 169.9 on a100_allreduce_meta_rank0)."""
    path = shared_trace(name)
    idle = _idle_ms_per_step(_events(path))
    with tracekit.open(path) as run:
        run.materialize()
        ctx = Context(run, AnalysisOptions())
        o = what_if(ctx, ["no-host-gaps"])
        notes = ctx.step_model.notes
    k = next((int(m.group(1)) for n in notes if (m := re.search(r"last (\d+) of", n))), None)
    covered = idle[-k:] if k else idle
    truth = sum(covered) / len(covered)
    assert 0 < o.saved_ms <= truth * 1.01 + 0.05
    assert o.saved_ms >= 0.8 * truth  # still wins most of it: the device waits for launches


def test_exposed_communication_with_no_compute_saves_nothing(shared_trace):
    """cpu_gloo_rank34: two concurrent all-reduces and no compute in the step (no CPU op
    inside it, by hand): overlap has nothing to hide them behind. Before, TK-N301's
    impact was its rule's estimate (the exposed time, > 170 ms); the most any change
    could win is the step less the all-reduces' union (≈ 31.3 ms, by hand)."""
    ev = _events(shared_trace("cpu_gloo_rank34"))
    (a, b), *_ = [
        (e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"].startswith("ProfilerStep#")
    ]
    assert not [e for e in ev if e.get("cat") == "cpu_op" and a <= e["ts"] < b]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"].startswith("gloo:")]
    comm = _union_us([(max(x, a), min(y, b)) for x, y in spans if min(y, b) > max(x, a)])
    bound = (b - a - comm) / 1e3
    assert bound == pytest.approx(31.3, abs=0.1)
    rep = _report(shared_trace("cpu_gloo_rank34"))
    f = next(x for x in rep.findings if x.code == "TK-N301")
    assert f.impact_ms <= bound
    assert f.severity != "critical"
    check_remedies(rep)


# ------------------------------------------------------------------ every run


# the generated runs with an injected problem (the safety net's, less the quiet ones)
SYNTH = {
    k: v
    for k, v in SNAPSHOT_SYNTH.items()
    if k in ("exposed", "slow", "straggler", "low_mfu", "host_bound", "bubble")
}


def _all_runs() -> list[tuple[str, str]]:
    from tests.conftest import shared_trace_names

    return (
        [("shared", n) for n in shared_trace_names()]
        + [("sample", p.name) for p in sorted(SAMPLES.iterdir()) if p.is_dir()]
        + [("synth", n) for n in SYNTH]
    )


@pytest.mark.slow
@pytest.mark.parametrize("where,name", _all_runs())
def test_every_warning_or_critical_finding_carries_its_replayed_remedies(
    tmp_path, shared_trace, where, name
):
    """On every shared trace, sample run and synthetic run: each warning/critical finding
    at compute, communication or scaling has `remedies[]` (or says why none applies) and
    `impact_ms` = its best saving; findings are ordered by impact."""
    if where == "shared":
        path = shared_trace(name)
    elif where == "sample":
        path = tmp_path / name
        shutil.copytree(SAMPLES / name, path)
    else:
        path = tmp_path / name
        generate(Scenario(**SYNTH[name]), path)
    check_remedies(_report(path))
