"""Exposed communication in two groups, each adding to the whole (issue 29, item 7): by
what — exposed transfer + waiting for peers — and by cause — a slow collective's excess +
a straggler's wait + a pipeline's send/recv + what none explains. Checked from the JSON
report of every sample run and shared trace, per rank (the attribution in ms) and for the
run (the level's fractions), and on a generated straggler twin whose exposed time and
imposed wait come from tests/synth.py's schedule. The text, Markdown and HTML label the
two groups."""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path

import msgspec
import pytest

import tracekit
from tests.conftest import ROOT, SHARED_TRACES, shared_trace_names
from tests.helpers import full_report
from tests.synth import Scenario, generate
from tracekit.errors import TracekitError
from tracekit.model import figures as F
from tracekit.report import schema as S
from tracekit.report.render import to_markdown, to_text

SAMPLES = sorted(p.name for p in (ROOT / "sample_traces").iterdir() if p.is_dir())
RUNS = [pytest.param(ROOT / "sample_traces" / n, id=n) for n in SAMPLES] + [
    pytest.param(SHARED_TRACES / n, id=f"shared-{n}") for n in shared_trace_names()
]
_TMP = Path(tempfile.mkdtemp(prefix="tk-exposed-groups-"))
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)


@cache
def run_report(src: Path) -> dict | None:
    """The JSON report of a copy of `src` (never written in ../shared); None where the
    reader refuses the trace (another test's). Cached for the session: test_verdicts.py
    reads the same reports."""
    dst = _TMP / f"{src.parent.name}-{src.name}"
    if not dst.exists():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".tracekit"))
    try:
        with tracekit.open(dst) as run:
            return full_report(run)
    except TracekitError:
        return None


def _get(src: Path) -> dict:
    rep = run_report(src)
    if rep is None:
        pytest.skip(f"{src.name} is refused by the reader")
    return rep


def _comm(rep: dict) -> dict:
    return next(lv for lv in rep["levels"] if lv["level"] == "communication")


def _group_sum(measured: dict, group: str) -> float:
    """A group's parts added (a null part does not apply: a run without a pipeline has no
    pipeline send/recv)."""
    return sum(measured[k] or 0.0 for k in F.EXPOSED_PARTS[group])


def test_the_groups_are_the_parts_the_level_measures():
    parts = [k for keys in F.EXPOSED_PARTS.values() for k in keys]
    assert len(parts) == len(set(parts)) == 6
    fields = set(S.CommunicationMeasured.__struct_fields__)
    assert set(parts) <= fields and "exposed_comm_fraction" in fields


@pytest.mark.parametrize("src", RUNS)
def test_each_group_adds_to_the_exposed_total(src):
    rep = _get(src)
    m = _comm(rep)["measured"]
    total = m["exposed_comm_fraction"]
    if total is None:  # no window to measure over: every part is null too
        assert all(m[k] is None for keys in F.EXPOSED_PARTS.values() for k in keys)
        return
    for group in F.EXPOSED_PARTS:
        assert _group_sum(m, group) == pytest.approx(total, abs=1e-9), group
    # per rank: by what in ranks[], by cause in the attribution (ms per step)
    for r in rep["ranks"]:
        assert r["exposed_transfer_fraction"] + r["comm_wait_fraction"] == pytest.approx(
            r["exposed_comm_fraction"], abs=1e-9
        )
    for a in _comm(rep)["metrics"]["attribution"]:
        cause = a["slow_ms"] + a["straggler_wait_ms"] + a["p2p_ms"] + a["residual_ms"]
        assert cause == pytest.approx(a["exposed_ms"], abs=1e-9), a
        assert all(a[k] >= -1e-12 for k in ("slow_ms", "straggler_wait_ms", "p2p_ms"))
    # the whole in ms per step is the attribution's mean
    ms = [a["exposed_ms"] for a in _comm(rep)["metrics"]["attribution"]]
    assert _comm(rep)["metrics"]["exposed_ms_per_step"] == pytest.approx(sum(ms) / len(ms))


@pytest.mark.parametrize("src", RUNS)
def test_the_text_labels_two_breakdowns(src):
    rep = _get(src)
    if _comm(rep)["measured"]["exposed_comm_fraction"] is None:
        return
    report = msgspec.convert(rep, S.Report)
    text = to_text(report)
    lines = text.splitlines()
    for group, keys in F.EXPOSED_PARTS.items():
        head = next(i for i, line in enumerate(lines) if line.strip() == f"{group}:")
        shown = [lines[head + 1 + j].split()[: len(F.label(k).split())] for j, k in
                 enumerate(keys)]  # fmt: skip
        assert [" ".join(s) for s in shown] == [F.label(k) for k in keys]
        # the parts as printed add to the total as printed, within their rounding
        values = [lines[head + 1 + j].split()[len(F.label(k).split())] for j, k in
                  enumerate(keys)]  # fmt: skip
        got = sum(float(v.rstrip("%")) for v in values if v != "—")
        total = next(line for line in lines if line.split()[:1] == ["communication"])
        want = float(total.split()[3].rstrip("%"))
        assert abs(got - want) <= 0.05 * len(keys) + 1e-9, (group, values, want)
    md = to_markdown(report)
    for group in F.EXPOSED_PARTS:
        assert re.search(rf"^\|  \| \u2003+{group}: \|", md, flags=re.M), group


def test_a_straggler_twin_splits_as_its_schedule(tmp_path):
    """tests/synth.py: rank 2 computes 35% slower; every other rank waits for it at each
    all-reduce. Truth: each rank's exposed communication per step (the schedule's
    intervals) and the wait rank 2 imposes (mean over the others) — by cause, the wait
    charged to the straggler, summed over the ranks, is that imposed wait × (world − 1)."""
    sc = Scenario(name="straggler", straggler=2)
    truth = generate(sc, tmp_path / "run")
    with tracekit.open(tmp_path / "run") as run:
        rep = full_report(run)
    comm = _comm(rep)
    att = {a["rank"]: a for a in comm["metrics"]["attribution"]}
    for rank, exposed in truth.exposed_ms.items():
        assert att[rank]["exposed_ms"] == pytest.approx(exposed, rel=0.02, abs=0.02)
    imposed = truth.imposed_wait_ms[2] * (sc.world - 1)
    charged = sum(a["straggler_wait_ms"] for a in att.values())
    assert charged == pytest.approx(imposed, rel=0.05)
    assert att[2]["straggler_wait_ms"] == pytest.approx(0.0, abs=1e-9)  # it waits for no one
    m = comm["measured"]
    for group in F.EXPOSED_PARTS:
        assert _group_sum(m, group) == pytest.approx(m["exposed_comm_fraction"], abs=1e-9)
    assert m["straggler_wait_fraction"] > 0.5 * m["comm_wait_fraction"]
