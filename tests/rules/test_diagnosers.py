"""Diagnosers on synthetic multi-rank GPU/NCCL runs, each with one injected problem (and
healthy runs): the right kind at warning or above, no wrong kind, accurate figures.

Shapes vary — world size, model size, severity, bucket count, straggler position,
pipeline P and M — so no threshold is tuned to one trace.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

import tracekit
from diagnosers.rules import kinds
from tests.helpers import full_report
from tests.synth import SCENARIOS, Scenario, generate

V = {  # name → (scenario, expected kind)
    "healthy-4": (Scenario(), None),
    "healthy-2-small": (Scenario(world=2, hidden=1024, tokens=8192, seed=1), None),
    "healthy-8-big": (Scenario(world=8, hidden=4096, tokens=4096, layers=4, seed=2), None),
    "exposed-4": SCENARIOS["exposed_allreduce"],
    "exposed-8-2buckets": (
        replace(SCENARIOS["exposed_allreduce"][0], world=8, buckets=2, seed=3),
        "communication.exposed",
    ),
    "slow-4": SCENARIOS["slow_collective"],
    "slow-2-80GBps": (
        Scenario(world=2, busbw_GBps=80, seed=4, name="slow2"),
        "communication.slow_collective",
    ),
    "straggler-4": SCENARIOS["straggler"],
    "straggler-8-rank5": (
        Scenario(world=8, straggler=5, straggler_slowdown=1.2, seed=5, name="strag8"),
        "scaling.straggler",
    ),
    "straggler-2-rank0": (
        Scenario(world=2, straggler=0, straggler_slowdown=1.5, seed=6, name="strag2"),
        "scaling.straggler",
    ),
    "low_mfu-4": SCENARIOS["low_mfu"],
    "low_mfu-8-12pct": (
        Scenario(world=8, gemm_eff=0.12, layers=4, seed=7, name="lowmfu8"),
        "compute.low_mfu",
    ),
    "host_bound-4": SCENARIOS["host_bound"],
    "host_bound-2": (
        Scenario(world=2, hidden=256, tokens=2048, host_op_us=30.0, seed=8, name="hb2"),
        "compute.host_bound",
    ),
    "bubble-4x2": SCENARIOS["pipeline_bubble"],
    "bubble-8x4": (
        Scenario(pipeline=(8, 4), layers=16, seed=9, name="pp8"),
        "scaling.pipeline_bubble",
    ),
    "bubble-2x1": (
        Scenario(pipeline=(2, 1), layers=4, hidden=1024, seed=10, name="pp2"),
        "scaling.pipeline_bubble",
    ),
    "memory-4": SCENARIOS["memory"],
    "memory-2-98pct": (
        Scenario(world=2, memory_peak=0.98, seed=11, name="mem2"),
        "memory.near_capacity",
    ),
}
FRACTIONS = ("idle_fraction", "compute_fraction")


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            sc, kind = V[name]
            out = tmp_path_factory.mktemp(name)
            truth = generate(sc, out)
            with tracekit.open(out) as run:
                cache[name] = (sc, kind, truth, full_report(run))
        return cache[name]

    return get


@pytest.mark.parametrize("name", sorted(V))
def test_right_kind_and_no_wrong_kind(analysed, name):
    sc, kind, _truth, rep = analysed(name)
    raised = {(f["kind"], f["severity"]) for f in rep["findings"]}
    serious = {k for k, sev in raised if sev in ("warning", "critical")}
    if kind is None:
        assert not serious, f"healthy run warned: {raised}"
        return
    assert kind in serious, f"{kind} missing from {raised}"
    assert serious == {kind}, f"wrong kinds raised: {serious - {kind}}"
    if kind == "scaling.straggler":
        (f,) = [f for f in rep["findings"] if f["kind"] == kind]
        assert f["ranks"] == [sc.straggler]


@pytest.mark.parametrize("name", sorted(V))
def test_figures_match_truth(analysed, name):
    sc, _kind, truth, rep = analysed(name)
    for r in rep["ranks"]:
        for key in FRACTIONS:
            assert 100 * r[key] == pytest.approx(100 * truth.fractions[r["rank"]][key], abs=2)
    assert rep["summary"]["mfu"] == pytest.approx(truth.mfu, rel=0.10)
    if truth.busbw_GBps:
        (ar,) = [c for c in rep["collectives"] if c["name"] == "all_reduce"]
        assert ar["busbw_GBps"] == pytest.approx(truth.busbw_GBps, rel=0.10)
        assert ar["predicted_busbw_GBps"] > 0
    if truth.bubble is not None:
        assert 100 * rep["summary"]["bubble_fraction"] == pytest.approx(100 * truth.bubble, abs=3)
        p, m = sc.pipeline
        assert rep["summary"]["predicted_bubble_fraction"] == pytest.approx((p - 1) / (m + p - 1))


def test_report_contract(analysed):
    _sc, _kind, _truth, rep = analysed("straggler-4")
    assert {
        "schema",
        "tracekit_version",
        "run",
        "ranks",
        "summary",
        "levels",
        "collectives",
        "findings",
    } <= set(rep)
    assert [lv["level"] for lv in rep["levels"]] == [
        "memory",
        "compute",
        "communication",
        "scaling",
    ]
    s = rep["summary"]
    assert {
        "step_time_ms",
        "mfu",
        "bubble_fraction",
        "predicted_bubble_fraction",
        "null_reasons",
    } <= set(s)
    assert s["bubble_fraction"] is None and "pipeline" in s["null_reasons"]["bubble_fraction"]
    for c in rep["collectives"]:
        assert {
            "name",
            "group_size",
            "bytes",
            "count",
            "busbw_GBps",
            "predicted_busbw_GBps",
            "exposed_ms",
        } <= set(c)
    impacts = [f["impact_ms"] or 0 for f in rep["findings"]]
    assert impacts == sorted(impacts, reverse=True)
    for f in rep["findings"]:
        assert f["code"] == kinds()[f["kind"]].code and f["remedy"]
        assert {
            "kind",
            "code",
            "level",
            "severity",
            "title",
            "ranks",
            "measured",
            "predicted",
            "impact_ms",
            "remedy",
        } <= set(f)


def test_remedies_are_concrete(analysed):
    _sc, _k, _t, rep = analysed("bubble-4x2")
    (f,) = [f for f in rep["findings"] if f["kind"] == "scaling.pipeline_bubble"]
    assert "M ≥ 4·P" in f["remedy"] and "would drop from 60%" in f["remedy"]
    _sc, _k, _t, rep = analysed("exposed-4")
    (f,) = [f for f in rep["findings"] if f["kind"] == "communication.exposed"]
    assert "4 of 4 all-reduce buckets per step run with no compute beside them" in f["remedy"]


def test_every_kind_is_documented():
    for k in kinds().values():
        text = k.explain()
        for section in ("What it detects", "Why it matters", "Example", "Fix"):
            assert section in text
        assert k.code.startswith("TK-") and k.name == k.name.lower()
    assert len({k.code for k in kinds().values()}) == len(kinds())


def test_a_failing_level_becomes_a_finding(tmp_path, monkeypatch):
    """A level whose figures raise: one TK-E001 charged to that level, its notes say why,
    the other levels and the rules of the other levels stand."""
    from diagnosers import levels

    generate(Scenario(world=2, steps=2), tmp_path)

    def boom(ctx):
        raise KeyError("bytes")

    monkeypatch.setitem(levels.BUILDERS, "communication", boom)
    with tracekit.open(tmp_path) as run:
        rep = full_report(run)
    errs = [f for f in rep["findings"] if f["kind"] == "diagnoser.error"]
    assert len(errs) == 1 and "communication" in errs[0]["title"]
    assert [lv["level"] for lv in rep["levels"]] == [
        "memory", "compute", "communication", "scaling"
    ]  # fmt: skip
    comm = rep["levels"][2]
    assert comm["verdict"] == "warning" and "KeyError" in comm["notes"][0]
    assert "KeyError" in rep["summary"]["null_reasons"]["unexplained_exposed_fraction"]


def test_a_failing_rule_becomes_a_finding_charged_to_it(tmp_path, monkeypatch):
    from diagnosers.rules.host_bound import HostBound

    generate(Scenario(world=2, steps=2), tmp_path)

    def boom(self, ctx):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(HostBound, "check", boom)
    with tracekit.open(tmp_path) as run:
        rep = full_report(run)
    errs = [f for f in rep["findings"] if f["kind"] == "diagnoser.error"]
    assert len(errs) == 1 and "TK-C202" in errs[0]["title"]
    assert next(lv for lv in rep["levels"] if lv["level"] == "compute")["verdict"] == "warning"
