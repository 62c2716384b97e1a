"""Property-based: a real trace, mutated (keys dropped, types changed, absurd numbers,
bytes cut off), is analysed or refused with one line and exit 2 — never a traceback,
never "internal error". Bounded: a few dozen examples on small traces, derandomized so
a failure reproduces."""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT, SHARED_TRACES
from tracekit.cli import main

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

ABSURD = st.sampled_from(
    [1e300, -1e300, float("nan"), float("inf"), 2**64, -(2**63), -1, 0, 10**19, 1e-300]
)
ODD = st.one_of(
    ABSURD,
    st.none(),
    st.booleans(),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
HEADER_KEYS = ("distributedInfo", "deviceProperties", "baseTimeNanoseconds", "traceEvents")
EVENT_KEYS = ("ph", "ts", "dur", "name", "cat", "pid", "tid", "args", "id")
ARG_KEYS = (
    "External id",
    "correlation",
    "stream",
    "device",
    "Input Dims",
    "Input type",
    "Concrete Inputs",
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "Group size",
    "dtype",
    "Process Group Ranks",
    "memory bandwidth (GB/s)",
    "Total Allocated",
)


@st.composite
def mutation(draw):
    """A list of edits: (where, key, value or None to drop)."""
    edits = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["event", "event", "arg", "header", "drop_event_key"]))
        idx = draw(st.integers(0, 10_000))
        if kind == "header":
            edits.append(("header", draw(st.sampled_from(HEADER_KEYS)), draw(ODD)))
        elif kind == "arg":
            key = draw(st.sampled_from(ARG_KEYS))
            edits.append(("arg", idx, key, draw(ODD)))
        elif kind == "drop_event_key":
            edits.append(("drop", idx, draw(st.sampled_from(EVENT_KEYS))))
        else:
            edits.append(("event", idx, draw(st.sampled_from(EVENT_KEYS)), draw(ODD)))
    cut = draw(st.one_of(st.none(), st.floats(0.0, 1.0)))
    return edits, cut


def _apply(doc: dict, edits) -> dict:
    events = doc.get("traceEvents") if isinstance(doc.get("traceEvents"), list) else []
    for edit in edits:
        if edit[0] == "header":
            doc[edit[1]] = edit[2]
            events = doc["traceEvents"] if isinstance(doc.get("traceEvents"), list) else []
        elif not events:
            continue
        elif edit[0] == "drop":
            ev = events[edit[1] % len(events)]
            if isinstance(ev, dict):
                ev.pop(edit[2], None)
        elif edit[0] == "arg":  # an event that has this arg, when one does
            have = [
                e
                for e in events
                if isinstance(e, dict) and isinstance(e.get("args"), dict) and edit[2] in e["args"]
            ]
            pool = have or events
            ev = pool[edit[1] % len(pool)]
            if isinstance(ev, dict):
                args = ev.setdefault("args", {})
                if isinstance(args, dict):
                    args[edit[2]] = edit[3]
        else:
            ev = events[edit[1] % len(events)]
            if isinstance(ev, dict):
                ev[edit[2]] = edit[3]
    return doc


def _write(path: Path, doc: dict, cut: float | None) -> None:
    data = json.dumps(doc).encode()  # NaN / Infinity as Python writes them
    if cut is not None:
        data = data[: int(len(data) * cut)]
    path.write_bytes(gzip.compress(data, compresslevel=1))


def _check(folder: Path) -> None:
    res = CliRunner().invoke(main, ["analyze", str(folder), "--format", "json"])
    if res.exit_code == 0:
        json.loads(res.stdout)
        return
    assert res.exit_code == 2, (res.exit_code, res.stderr, res.exception)
    err = res.stderr
    assert err.startswith("tracekit: ") and err.count("\n") == 1, err
    assert "internal error" not in err and "Traceback" not in err, err


def _load(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


@pytest.fixture(scope="module")
def gloo_rank():
    p = SHARED_TRACES / "cpu_gloo_rank34"
    if not p.is_dir():
        pytest.skip(f"{p} not present")
    (f,) = p.glob("*.json.gz")
    return _load(f)


@given(mutation())
@SETTINGS
def test_mutated_real_trace_is_analysed_or_refused_in_one_line(gloo_rank, m):
    edits, cut = m
    with tempfile.TemporaryDirectory() as d:
        doc = _apply(json.loads(json.dumps(gloo_rank)), edits)
        _write(Path(d) / "rank-34.json.gz", doc, cut)
        _check(Path(d))


@pytest.fixture(scope="module")
def ddp_ranks():
    src = ROOT / "sample_traces" / "ddp"
    return [_load(src / f"rank-{r}.json.gz") for r in range(2)], src / "job.json"


@given(mutation())
@settings(SETTINGS, max_examples=10)
def test_one_mutated_rank_among_good_ones(ddp_ranks, m):
    """Rank 1 mutated, rank 0 intact: a partial run at worst, never a crash."""
    (r0, r1), job = ddp_ranks
    edits, cut = m
    with tempfile.TemporaryDirectory() as d:
        _write(Path(d) / "rank-0.json.gz", r0, None)
        _write(Path(d) / "rank-1.json.gz", _apply(json.loads(json.dumps(r1)), edits), cut)
        shutil.copy(job, Path(d) / "job.json")
        _check(Path(d))


@pytest.fixture(scope="module")
def nccl_rank():
    p = SHARED_TRACES / "a100_allreduce_meta_rank0"
    if not p.is_dir():
        pytest.skip(f"{p} not present")
    (f,) = p.glob("*.json.gz")
    doc = _load(f)
    # keep it small: the collectives and their issuing ops, plus every 20th other event
    ev = doc["traceEvents"]
    keep = [
        e
        for i, e in enumerate(ev)
        if i % 20 == 0 or "nccl" in str(e.get("name", "")) or "param_comms" in str(e.get("name"))
    ]
    doc["traceEvents"] = keep
    return doc


@given(mutation())
@settings(SETTINGS, max_examples=15)
def test_mutated_nccl_trace_with_collective_metadata(nccl_rank, m):
    edits, cut = m
    with tempfile.TemporaryDirectory() as d:
        doc = _apply(json.loads(json.dumps(nccl_rank)), edits)
        _write(Path(d) / "rank-0.json.gz", doc, cut)
        _check(Path(d))
