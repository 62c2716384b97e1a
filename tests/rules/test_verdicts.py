"""Verdicts say "unknown" (issue 29, item 3): a level is "ok" only when the figures its
question stands on are measured; otherwise, unless a finding judged it, its verdict is
"unknown" with the reason. "healthy at every level" only when every level is ok.

Checked from the JSON report of every sample run and shared trace against the level's
own figures (independent of `diagnosers.levels.HEADLINE`), against the raw traces (no
allocator events → memory unknown), on generated GPU twins with memory events (ok,
warning), and through every surface: text, Markdown, HTML, the TUI's words and the gate."""

from __future__ import annotations

import copy
import gzip
import json
import re

import msgspec
import pytest

import tracekit
from tests.conftest import SHARED_TRACES
from tests.engine.test_exposed_groups import RUNS, _get
from tests.helpers import full_report
from tests.synth import Scenario, generate
from tracekit.report import schema as S
from tracekit.report.render import healthy_text, to_markdown, to_text

SERIOUS = ("warning", "critical")


def _level(rep: dict, name: str) -> dict:
    return next(lv for lv in rep["levels"] if lv["level"] == name)


def _charged(rep: dict, name: str) -> set[str]:
    return {f["severity"] for f in rep["findings"] if f["level"] == name}


def _measured(rep: dict, name: str) -> bool:
    """Whether the level's headline figures are known, read off the report's figures."""
    lv, s = _level(rep, name), rep["summary"]
    if name == "memory":
        return s["max_peak_memory_fraction"] is not None or (
            lv["metrics"].get("measured_over_predicted") is not None
        )
    if name == "compute":
        unc = s["uncounted_compute_fraction"]
        return s["mfu"] is not None and unc is not None and unc < 0.5
    if name == "communication":
        return s["exposed_comm_fraction"] is not None
    arrivals = sum(a["instances"] for a in lv["metrics"].get("last_arrivals", []))
    return s["bubble_fraction"] is not None or (len(rep["ranks"]) >= 2 and arrivals > 0)


@pytest.mark.parametrize("src", RUNS)
def test_no_level_is_ok_on_nothing_measured(src):
    rep = _get(src)
    for lv in rep["levels"]:
        name, v = lv["level"], lv["verdict"]
        sev = _charged(rep, name)
        if v in SERIOUS:
            assert v in sev
            assert lv["verdict_reason"] is None
        elif v == "unknown":
            assert not (sev & set(SERIOUS)), (name, sev)
            assert lv["verdict_reason"], name
            assert not _measured(rep, name), name
        else:
            assert v == "ok" and _measured(rep, name), (name, lv["verdict_reason"])
    last = to_text(msgspec.convert(rep, S.Report)).rstrip().splitlines()[-1]
    if not rep["findings"]:
        verdicts = {lv["level"]: lv["verdict"] for lv in rep["levels"]}
        if set(verdicts.values()) == {"ok"}:
            assert last == "findings: none — healthy at every level"
        else:
            assert "healthy" not in last
            for name, v in verdicts.items():
                assert (name in last.split(" unknown")[0]) == (v == "unknown"), last


def _has_allocator_events(folder) -> bool:
    """By hand: any [memory] instant event with the allocator's totals in any rank."""
    for f in folder.rglob("*.json*"):
        opener = gzip.open if f.suffix == ".gz" else open
        try:
            with opener(f, "rt") as fh:
                doc = json.load(fh)
        except (OSError, ValueError):
            continue
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        for e in events:
            if e.get("name") == "[memory]" and "Total Allocated" in (e.get("args") or {}):
                return True
    return False


@pytest.mark.parametrize(
    "name",
    [
        "v100_resnet50_single",
        "a100_recsys_rank0_of16",
        "a100_recsys_rank3_of8",
        "mi300x_resnet_ddp8_rank0",
    ],
)
def test_memory_without_allocator_events_is_unknown(name):
    src = SHARED_TRACES / name
    if not src.is_dir():
        pytest.skip(f"{src} not present")
    assert not _has_allocator_events(src)
    rep = _get(src)
    mem = _level(rep, "memory")
    assert mem["measured"]["peak_bytes"] is None
    assert mem["verdict"] == "unknown"
    assert mem["verdict_reason"] == rep["summary"]["null_reasons"]["max_peak_memory_fraction"]
    assert "profile_memory=True" in mem["verdict_reason"]


def test_one_rank_of_many_cannot_measure_scaling():
    """mi300x_resnet_ddp8_rank0 is rank 0 of 8, not a pipeline: neither a bubble nor a
    straggler can be measured from one rank."""
    src = SHARED_TRACES / "mi300x_resnet_ddp8_rank0"
    if not src.is_dir():
        pytest.skip(f"{src} not present")
    rep = _get(src)
    assert len(rep["ranks"]) == 1
    scal = _level(rep, "scaling")
    assert scal["verdict"] == "unknown"
    assert "not a pipeline" in scal["verdict_reason"] and "1 rank" in scal["verdict_reason"]


def test_a_cpu_runs_host_memory_is_shown_but_not_judged():
    """A CPU run measures its host peak, but there is no device capacity to hold it
    against and the memory equation predicts device memory: memory is unknown, its
    peak bytes still shown."""
    from tests.conftest import ROOT

    rep = _get(ROOT / "sample_traces" / "ddp")
    mem = _level(rep, "memory")
    assert mem["measured"]["peak_bytes"] > 0 and mem["measured"]["peak_fraction"] is None
    assert mem["verdict"] == "unknown" and mem["verdict_reason"].startswith("CPU run")
    text = to_text(msgspec.convert(rep, S.Report))
    assert re.search(r"^memory .* unknown$", text, flags=re.M)
    assert f"unknown (memory): {mem['verdict_reason']}" in text


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    out = {}
    for name, sc in {
        "healthy": Scenario(),
        "memory": Scenario(name="memory", memory_peak=0.96),
    }.items():
        d = tmp_path_factory.mktemp(name) / "run"
        truth = generate(sc, d)
        with tracekit.open(d) as run:
            out[name] = (truth, full_report(run))
    return out


def test_generated_gpu_runs_with_memory_events_are_judged(twins):
    _, healthy = twins["healthy"]
    assert {lv["level"]: lv["verdict"] for lv in healthy["levels"]} == dict.fromkeys(
        ("memory", "compute", "communication", "scaling"), "ok"
    )
    assert all(lv["verdict_reason"] is None for lv in healthy["levels"])
    assert not healthy["findings"]
    report = msgspec.convert(healthy, S.Report)
    assert to_text(report).rstrip().endswith("findings: none — healthy at every level")
    assert "None — healthy at every level." in to_markdown(report)
    _, memory = twins["memory"]
    assert _level(memory, "memory")["verdict"] == "warning"
    assert _level(memory, "memory")["measured"]["peak_fraction"] == pytest.approx(0.96, abs=0.01)


def _unknown_memory(rep: dict) -> dict:
    """The same report as if the trace had no allocator events."""
    rep = copy.deepcopy(rep)
    mem = _level(rep, "memory")
    for k in mem["measured"]:
        mem["measured"][k] = None
    why = "no [memory] events with allocator totals: profile with profile_memory=True"
    mem["verdict"], mem["verdict_reason"] = "unknown", why
    for k in ("peak_memory_fraction", "max_peak_memory_fraction", "peak_memory_bytes"):
        rep["summary"][k] = None
        rep["summary"]["null_reasons"][k] = why
    for r in rep["ranks"]:
        r["peak_memory_fraction"] = r["peak_reserved_bytes"] = None
    return rep


def test_every_surface_says_unknown_and_why(twins):
    from tracekit.report.html import to_html

    _, healthy = twins["healthy"]
    rep = _unknown_memory(healthy)
    report = msgspec.convert(rep, S.Report)
    text = to_text(report)
    assert re.search(r"^memory .* unknown$", text, flags=re.M)
    assert "unknown (memory): no [memory] events" in text
    last = text.rstrip().splitlines()[-1]
    assert last == (
        "findings: none — memory unknown (not measured); compute, communication, scaling ok"
    )
    md = to_markdown(report)
    assert "| unknown |" in md and "None — memory unknown (not measured)" in md
    page = to_html(report)
    assert "class='badge unknown'" in page and "unknown: no [memory] events" in page
    assert "healthy at every level" not in page
    assert healthy_text({"memory": "ok", "compute": "warning"}) == "healthy at every level"


def test_the_gate_does_not_read_ok_to_unknown_as_a_change(twins, tmp_path):
    """The gate judges figures, never verdicts: a level unknown on one side is a note,
    and its null figures are not compared (no regression, no improvement)."""
    from tracekit.gate.baseline import Side
    from tracekit.gate.compare import run_compare
    from tracekit.gate.render import to_text as gate_text

    _, healthy = twins["healthy"]
    new = _unknown_memory(healthy)
    cmp = run_compare(Side("base", "report", [healthy]), Side("new", "report", [new]))
    memory = [v for v in cmp.verdicts if "memory" in v.metric]
    assert memory and all(v.verdict == "not compared" for v in memory)
    assert not cmp.failed
    assert not [v for v in cmp.verdicts if v.verdict in ("regressed", "improved")]
    (note,) = [n for n in cmp.notes if n.startswith("memory:")]
    assert "ok in base, unknown in new" in note and "profile_memory=True" in note
    assert note in gate_text(cmp)
    back = run_compare(Side("base", "report", [new]), Side("new", "report", [healthy]))
    assert any("unknown in base" in n for n in back.notes)
    same = run_compare(Side("base", "report", [healthy]), Side("new", "report", [healthy]))
    assert not [n for n in same.notes if n.startswith("memory:")]
