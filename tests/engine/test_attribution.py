"""Attribution that adds up: one exposure everywhere, each cause charged once.

Synthetic runs (tests/synth.py) carry their truth from their own schedule: the wait each
late arrival imposes, each rank's exposed communication. Every sample run and every
shared trace (copied to a temporary folder) must keep fractions in [0, 1], the summary
equal to the mean of the ranks, no collective longer than the step, and no healthy
verdict while communication is exposed.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

import tracekit
from tests.conftest import ROOT, shared_trace_names
from tests.helpers import full_report
from tests.synth import Scenario, generate
from tracekit.errors import TracekitError

SAMPLES = sorted(p.name for p in (ROOT / "sample_traces").iterdir() if p.is_dir())
EXPOSURE_KEYS = ("exposed_comm_fraction", "exposed_transfer_fraction", "comm_wait_fraction")
# per-rank keys whose summary figure is the mean over ranks
MEAN_KEYS = (
    "idle_fraction",
    "compute_fraction",
    "non_compute_fraction",
    "comm_fraction",
    "comm_overlap_fraction",
    *EXPOSURE_KEYS,
    "exposed_slow_fraction",
    "host_bound_fraction",
)
EXPLAINING = {
    "communication.exposed",
    "communication.slow_collective",
    "scaling.straggler",
    "scaling.pipeline_bubble",
}


def _step(path: Path) -> float:
    """A generated run's measured step: each rank's analysed window ÷ its steps, mean over
    ranks, from the steps table."""
    with tracekit.open(path) as run:
        rows = run.sql(
            "SELECT (max(end_ns) - min(ts_ns)) / count(*) FROM steps GROUP BY rank"
        ).fetchall()
    return sum(v for (v,) in rows) / len(rows) / 1e6


def _twin_step(tmp_path: Path, sc: Scenario, **without) -> float:
    """The measured step of the scenario written again without its problem."""
    from dataclasses import replace

    out = tmp_path.parent / (tmp_path.name + "-twin-" + "-".join(sorted(without)))
    generate(replace(sc, **without), out)
    return _step(out)


def _report(path: Path) -> dict:
    with tracekit.open(path) as run:
        return full_report(run)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _mean(vals):
    vals = [v for v in vals if v is not None]
    return sum(vals) / len(vals) if vals else None


# ------------------------------------------------------------------ synthetic truths


def test_straggler_behind_queued_collectives(tmp_path):
    """Rank 1's host stalls 3 ms a step; all four buckets are issued back to back after
    backward, so only the first waits for it and the others queue behind it."""
    sc = Scenario(
        name="queued",
        world=4,
        straggler=1,
        straggler_slowdown=1.0,
        straggler_host_us=3000,
        buckets_after_backward=True,
        seed=12,
    )
    truth = generate(sc, tmp_path)
    rep = _report(tmp_path)
    (f,) = [f for f in rep["findings"] if f["kind"] == "scaling.straggler"]
    assert f["ranks"] == [1] and rep["summary"]["straggler_ranks"] == [1]
    assert f["measured"]["imposed_wait_ms_per_step"] == pytest.approx(
        truth.imposed_wait_ms[1], rel=0.10
    )
    # its impact is its remedy replayed (the step model): the step the twin without the
    # straggler takes
    twin = _twin_step(tmp_path, sc, straggler=None)
    assert f["impact_ms"] == pytest.approx(_step(tmp_path) - twin, rel=0.10)
    assert "host is late" in f["title"] and "every one of 3 steps" in f["title"]
    assert f["measured"]["host_late_ms"] == pytest.approx(3.0, rel=0.15)
    # counting last arrivals would miss it: at the queued buckets who is last is chance
    scal = next(lv for lv in rep["levels"] if lv["level"] == "scaling")
    last = {a["rank"]: a["instances"] for a in scal["metrics"]["last_arrivals"]}
    assert last.get(1, 0) / sum(last.values()) < 0.6
    # the wait is the straggler's, not the exposed finding's: the two add up to the
    # exposed time the generator wrote (mean over ranks), and do not exceed it
    exposed_truth = sum(truth.exposed_ms.values()) / sc.world
    waiting = truth.imposed_wait_ms[1] * (sc.world - 1) / sc.world  # over all ranks
    (e,) = [f for f in rep["findings"] if f["kind"] == "communication.exposed"]
    unexplained_ms = e["measured"]["unexplained_exposed_fraction"] * rep["summary"]["step_time_ms"]
    assert unexplained_ms + waiting == pytest.approx(exposed_truth, rel=0.05)


def test_compute_straggler_is_explained_by_its_device(tmp_path):
    sc = Scenario(world=4, straggler=3, straggler_slowdown=1.3, seed=14, name="slowdev")
    truth = generate(sc, tmp_path)
    rep = _report(tmp_path)
    (f,) = [f for f in rep["findings"] if f["kind"] == "scaling.straggler"]
    assert f["ranks"] == [3]
    assert f["measured"]["imposed_wait_ms_per_step"] == pytest.approx(
        truth.imposed_wait_ms[3], rel=0.10
    )
    twin = _twin_step(tmp_path, sc, straggler=None)
    assert f["impact_ms"] == pytest.approx(_step(tmp_path) - twin, rel=0.10)
    assert "device" in f["title"] and "host is late" not in f["title"]


def test_slow_and_unoverlapped_raise_both_each_with_its_own_win(tmp_path):
    """All-reduce at 150 GB/s (36% of H100's 420) issued after backward: the bandwidth
    fix wins the excess over the prediction; the overlap fix wins all of the exposure —
    overlapped, the slow collective is hidden too. Causes are not exclusive (issue 17):
    the two impacts overlap by the excess, and each is what its own fix would win."""
    sc = Scenario(
        name="slowexp", world=4, busbw_GBps=150, hidden=4096, buckets_after_backward=True, seed=13
    )
    truth = generate(sc, tmp_path)
    rep = _report(tmp_path)
    kinds = {f["kind"]: f for f in rep["findings"]}
    slow, exposed = kinds["communication.slow_collective"], kinds["communication.exposed"]
    # by hand: bucket = 12·h²·L/buckets bf16 gradients; all-reduce factor 2(n−1)/n
    bucket = 12 * 4096 * 4096 * 8 // 4 * 2
    f = 2 * 3 / 4
    t_meas = 12e-6 + bucket * f / 150e9  # the generator's α and bandwidth
    t_pred = 10e-6 + bucket * f / 420e9  # H100 spec: α 10 µs, 420 GB/s in a node
    excess_ms = (t_meas - t_pred) * 4 * 1e3
    assert slow["details"]["excess_ms_per_step"] == pytest.approx(excess_ms, rel=0.05)
    exposed_truth = sum(truth.exposed_ms.values()) / sc.world
    assert "bucket_cap_mb" in exposed["remedy"]
    unexplained_ms = (
        exposed["measured"]["unexplained_exposed_fraction"] * rep["summary"]["step_time_ms"]
    )
    assert unexplained_ms == pytest.approx(exposed_truth - excess_ms, rel=0.10)
    # the impacts are the remedies replayed (the step model), each against the twin the
    # generator writes without that problem: the H100's 420 GB/s (α 10 µs, the prediction's
    # own), and the buckets issued during backward
    step = _step(tmp_path)
    twin_bw = _twin_step(tmp_path, sc, busbw_GBps=420, alpha_us=10.0)
    assert slow["impact_ms"] == pytest.approx(step - twin_bw, rel=0.10)
    twin_overlap = _twin_step(tmp_path, sc, buckets_after_backward=False)
    assert exposed["impact_ms"] == pytest.approx(step - twin_overlap, rel=0.10)
    assert rep["summary"]["exposed_slow_fraction"] == pytest.approx(
        excess_ms / rep["summary"]["step_time_ms"], rel=0.05
    )


def _all_reduce(rep: dict) -> dict:
    (c,) = [c for c in rep["collectives"] if c["name"] == "all_reduce"]
    return c


@pytest.mark.parametrize("source", ["--gpus-per-node", "job.json", "host names"])
def test_group_spanning_nodes_is_predicted_between_nodes(tmp_path, source):
    """Four ranks, two per node: the all-reduce over all four crosses nodes, whatever
    says so; alone, the device table's 8 GPUs per node keeps it in one node."""
    generate(Scenario(world=4, seed=15, name="nodes"), tmp_path)
    from tracekit.options import Overrides

    with tracekit.open(tmp_path) as run:
        one = full_report(run)
    overrides = None
    if source == "--gpus-per-node":
        overrides = Overrides(gpus_per_node=2)
    elif source == "job.json":
        man = {"schema": 1, "strategy": "ddp", "world_size": 4, "gpus_per_node": 2}
        man["mesh"] = {"dp": 4, "tp": 1, "pp": 1, "ep": 1}
        (tmp_path / "job.json").write_text(json.dumps(man))
    else:
        for f in sorted(tmp_path.glob("rank-*.json.gz")):
            doc = json.loads(gzip.decompress(f.read_bytes()))
            doc["host_name"] = "node-a" if doc["distributedInfo"]["rank"] < 2 else "node-b"
            f.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with tracekit.open(tmp_path) as run:
        two = full_report(run, overrides=overrides)
    a, b = _all_reduce(one), _all_reduce(two)
    assert a["inter_node"] is False and b["inter_node"] is True
    # H100: 420 GB/s in a node, 45 GB/s between nodes (one 400 Gb/s NIC); α = 10 µs
    f = 2 * 3 / 4
    t_in = 10e-6 + a["bytes"] * f / 420e9
    t_out = 10e-6 + a["bytes"] * f / 45e9
    assert a["predicted_ms"] == pytest.approx(t_in * 1e3, rel=1e-6)
    assert b["predicted_ms"] == pytest.approx(t_out * 1e3, rel=1e-6)


# ----------------------------------------------------- every sample run, every trace


def _copied(src: Path, tmp: Path) -> Path:
    dst = tmp / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".tracekit"))
    return dst


def _reports():
    out = [pytest.param("sample", n, ROOT / "sample_traces" / n, id=n) for n in SAMPLES]
    shared = ROOT.parent / "shared" / "traces"
    for n in shared_trace_names():
        out.append(pytest.param("shared", n, shared / n, id=f"shared-{n}"))
    return out


@pytest.fixture(scope="module")
def every_report(tmp_path_factory):
    cache: dict[str, dict | None] = {}

    def get(kind: str, name: str, src: Path) -> dict:
        key = f"{kind}/{name}"
        if key not in cache:
            try:
                cache[key] = _report(_copied(src, tmp_path_factory.mktemp(name)))
            except TracekitError as exc:  # a trace the reader refuses is another test's
                cache[key] = None
                pytest.skip(f"{name}: {exc}")
        if cache[key] is None:
            pytest.skip(f"{name} is refused by the reader")
        return cache[key]

    return get


@pytest.mark.parametrize(("kind", "name", "src"), _reports())
def test_one_exposure_everywhere(every_report, kind, name, src):
    rep = every_report(kind, name, src)
    for r in rep["ranks"]:
        for k, v in r.items():
            if k.endswith("_fraction") and v is not None:
                assert -1e-9 <= v <= 1 + 1e-9, (r["rank"], k, v)
        if r["exposed_comm_fraction"] is not None:
            parts = r["exposed_transfer_fraction"] + r["comm_wait_fraction"]
            assert parts == pytest.approx(r["exposed_comm_fraction"], abs=1e-9)
            assert r["exposed_comm_fraction"] <= r["comm_fraction"] + 1e-9
    s = rep["summary"]
    # one name, one quantity: every per-rank key the summary repeats is its mean
    shared = {k for r in rep["ranks"] for k, v in r.items() if k in s and _number(v)}
    for k in sorted(shared | set(MEAN_KEYS)):
        expected = _mean(r.get(k) for r in rep["ranks"])
        assert s[k] == pytest.approx(expected, abs=1e-12), k
    for k, v in s.items():
        if k.endswith("_fraction") and v is not None:
            assert 0 <= v <= 1, (k, v)
    comm = next(lv for lv in rep["levels"] if lv["level"] == "communication")
    if "exposed_comm_fraction" in comm["measured"]:
        assert comm["measured"]["exposed_comm_fraction"] == s["exposed_comm_fraction"]
    step = max((r["step_time_ms"] or r["window_ms"]) for r in rep["ranks"])
    for c in rep["collectives"]:
        assert c["time_ms_per_step"] <= step * (1 + 1e-9), c
        assert c["exposed_ms"] <= c["time_ms_per_step"] * (1 + 1e-9) + 1e-9, c
    for f in rep["findings"]:
        if f["kind"] == "communication.exposed":
            assert f["measured"]["exposed_comm_fraction"] == s["exposed_comm_fraction"]


@pytest.mark.parametrize(("kind", "name", "src"), _reports())
def test_no_healthy_verdict_with_exposed_comm(every_report, kind, name, src):
    rep = every_report(kind, name, src)
    exposed = rep["summary"]["exposed_comm_fraction"]
    if exposed is None or exposed < 0.10:
        return
    serious = {f["kind"] for f in rep["findings"] if f["severity"] in ("warning", "critical")}
    assert serious & EXPLAINING, (exposed, serious)
    comm = next(lv for lv in rep["levels"] if lv["level"] == "communication")
    scal = next(lv for lv in rep["levels"] if lv["level"] == "scaling")
    assert comm["verdict"] != "ok" or scal["verdict"] != "ok"


def test_dlrm_names_its_straggler(shared_trace, tmp_path):
    """By hand from the trace: rank 7 begins its step ~4.5 ms after the median rank and
    issues the first all-to-all ~4.7 ms after them (its device starts it at once);
    the others wait 0.5–7.6 ms for it there, and at the three all-to-alls queued behind
    it: ≈ 5.1 ms per rank (mean over the 7 others), 76% of all waiting for peers."""
    run_dir = _copied(shared_trace("v100_dlrm_8rank"), tmp_path)
    with tracekit.open(run_dir) as run:
        matched = run.sql(
            "SELECT count(*) FROM collectives WHERE name = 'all_to_all' AND matched"
        ).fetchall()[0][0]
        rep = full_report(run)
    assert matched == 8 * 5  # 5 all-to-alls per rank, each matched across the 8 ranks
    assert rep["summary"]["straggler_ranks"] == [7]
    (f,) = [f for f in rep["findings"] if f["kind"] == "scaling.straggler"]
    assert f["measured"]["imposed_wait_ms_per_step"] == pytest.approx(5.1, rel=0.10)
    # its impact is no-straggler replayed: rank 7 and the ranks that start late start with
    # the median rank (a one-step trace: what made them late lies before it)
    (w,) = [w for w in rep["step_model"]["what_if"] if w["finding"] == f["code"]]
    assert w["change"] == ["no-straggler"] and f["impact_ms"] == pytest.approx(w["saved_ms"])
    assert f["measured"]["host_late_ms"] == pytest.approx(4.67, abs=0.05)
    assert "host is late" in f["title"]
