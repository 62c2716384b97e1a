"""The gate against real run-to-run noise: recorded runs of `tracekit run ddp
--world-size 2 --steps 6` on the project's shared 2-core machine (five other engineers'
tests running: load average 8–10), six of one job and three of the job with one more
transformer block, recorded interleaved by `benchmarks/gate_noise.py record` and kept as
gzipped one-run baselines (tests/fixtures/gate_noise/, a few KB each; load.txt holds
the machine's load during each run). The run-noise prior for one-run-a-side
comparisons (tests/fixtures/gate_noise/pyproject.toml) is what `tracekit gate
calibrate` printed for other runs of the same job on the same machine — not these.

The issue's false alarms: no comparison of the same job fails — the 30 ordered pairs of
single runs, and each of three runs against a baseline of the other three."""

from __future__ import annotations

import gzip
import json
import re
from itertools import permutations
from pathlib import Path

import pytest

from tests.helpers import invoke

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gate_noise"
BASE = [FIXTURES / f"base-{i}.json.gz" for i in range(1, 7)]
VARIANT = [FIXTURES / f"variant-{i}.json.gz" for i in range(1, 4)]
CONFIG = FIXTURES / "pyproject.toml"


def compare(base, new, *extra) -> tuple[int, dict]:
    res = invoke("compare", base, new, "--config", CONFIG, "--format", "json", *extra)
    assert res.exit_code in (0, 1), res.output
    return res.exit_code, json.loads(res.output)


def _metric(doc: dict, name: str) -> dict:
    return next(m for m in doc["metrics"] if m["metric"] == name)


@pytest.fixture(scope="module")
def first_half(tmp_path_factory) -> Path:
    """A baseline of base runs 1–3, made as CI makes one (save, then add)."""
    out = tmp_path_factory.mktemp("gate-noise") / "base.json.gz"
    assert invoke("baseline", "save", BASE[0], BASE[1], "-o", out).exit_code == 0
    res = invoke("baseline", "add", out, BASE[2])
    assert res.exit_code == 0 and "baseline of 3 runs" in res.output
    return out


def test_the_recorded_runs_are_what_the_docstring_says():
    """Six runs of one job, three of a bigger one: the model's FLOPs per step are the
    same within each set and larger for the variant (one more block)."""
    flops = {}
    for p in BASE + VARIANT:
        with gzip.open(p, "rt") as fh:
            doc = json.load(fh)
        (run,) = doc["runs"]
        assert len(run["samples"]["steps"]) == 6 and len(run["ranks"]) == 2
        assert run["run"]["backend"] == "gloo"
        flops[p] = run["summary"]["model_flops_per_step"]
    assert len({flops[p] for p in BASE}) == 1 and len({flops[p] for p in VARIANT}) == 1
    assert flops[VARIANT[0]] > flops[BASE[0]]
    assert "--layers 5" in (FIXTURES / "load.txt").read_text()


def test_no_single_run_pair_of_the_same_job_fails():
    failed = []
    for a, b in permutations(BASE, 2):
        code, doc = compare(a, b)
        assert doc["noise"]["kind"] == "prior"
        if code:
            failed.append((a.name, b.name, [m["metric"] for m in doc["metrics"]
                                            if m["verdict"] == "regressed"]))  # fmt: skip
    assert failed == [], f"{len(failed)} of 30 pairs failed"


def test_no_run_of_the_same_job_fails_against_a_baseline_of_the_others(first_half):
    for run in BASE[3:]:
        code, doc = compare(first_half, run)
        assert doc["base"]["runs"] == 3 and doc["noise"]["kind"] == "measured"
        assert code == 0, [m for m in doc["metrics"] if m["verdict"] == "regressed"]
        st = _metric(doc, "step_time")
        assert st["run_test"]["method"] == "student-t over runs"
        assert st["run_test"]["n_base_runs"] == 3 and st["run_test"]["df"] == 2


def test_several_runs_on_both_sides_on_the_command_line(first_half):
    _, doc = compare(BASE[3], BASE[4], "--new", BASE[5])
    assert doc["base"]["runs"] == 1 and doc["new"]["runs"] == 2
    assert _metric(doc, "step_time")["run_test"]["df"] == 1
    code, doc = compare(first_half, BASE[3], "--new", BASE[4], "--new", BASE[5])
    assert code == 0 and _metric(doc, "step_time")["run_test"]["df"] == 4


_P = re.compile(r"p = ([0-9.e-]+) (<|≥) α = ([0-9.e-]+)")


def test_verdict_words_agree_with_the_numbers_they_show(first_half):
    """Every p-value the evidence compares with α: 'regressed'/'improved' when p < α,
    'inconclusive' when p ≥ α — the α shown is the one used (a drill-down metric's is
    shared: Bonferroni), and the p shown is on the right side of it."""
    seen = 0
    docs = [compare(a, b)[1] for a, b in list(permutations(BASE[:4], 2))[:8]]
    docs += [compare(first_half, r)[1] for r in BASE[3:] + VARIANT]
    docs += [compare(BASE[0], v)[1] for v in VARIANT]
    for doc in docs:
        for m in doc["metrics"]:
            for p, rel, alpha in _P.findall(m["evidence"]):
                seen += 1
                p, alpha = float(p), float(alpha)
                assert (p < alpha) == (rel == "<"), m["evidence"]
                assert alpha == pytest.approx(m["alpha"], rel=0.05), m
            if m["verdict"] in ("regressed", "improved") and _P.search(m["evidence"]):
                assert _P.search(m["evidence"]).group(2) == "<", m["evidence"]
            if m["verdict"] == "inconclusive" and "p = " in m["evidence"]:
                assert "≥" in m["evidence"] or "bootstrap" in m["evidence"], m["evidence"]
    assert seen > 20


def test_the_cause_line_shows_the_tables_bus_bandwidth(first_half):
    """The cause names a collective's bus bandwidth as the busbw row shows it: the
    report's figure (the mean over a side's runs), not a mean of per-step bandwidths."""
    checked = 0
    for base, new in [(BASE[0], BASE[5]), (BASE[5], BASE[0]), (first_half, VARIANT[1])]:
        _, doc = compare(base, new, "--all")
        for c in doc["cause"]["contributors"]:
            if c["kind"] != "collective_time" or not c.get("busbw_GBps"):
                continue
            row = _metric(doc, f"busbw[{c['name']}]")
            assert c["busbw_GBps"] == pytest.approx([row["base"], row["new"]])
            if "→" in c["text"]:
                assert f"{row['base']:.3g} → {row['new']:.3g} GB/s" in c["text"]
            checked += 1
    assert checked


def test_what_the_gate_says_of_the_variant(first_half):
    """One more layer: +20% step time on a quiet machine; under this machine's load the
    runs of one job spread more than that (see docs/ci-gate.md), so the gate may only
    call it regressed where the runs say so — never improved, never a pass on step
    time without saying the noise hides it. Its parameters are real: peak memory is
    exact and fails every comparison."""
    for base in [*BASE, first_half]:
        for v in VARIANT:
            code, doc = compare(base, v)
            assert code == 1 and _metric(doc, "peak_memory")["verdict"] == "regressed"
            st = _metric(doc, "step_time")
            assert st["verdict"] in ("regressed", "inconclusive", "unchanged"), st
            if st["verdict"] == "inconclusive":
                assert "run-to-run noise" in st["evidence"] or "steps" in st["evidence"]


def test_a_schema_1_baseline_reads_as_one_run_and_bad_priors_are_one_line(tmp_path):
    with gzip.open(BASE[0], "rt") as fh:
        (run,) = json.load(fh)["runs"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"tracekit_baseline": 1, **run}))
    _, doc = compare(old, BASE[1])
    assert doc["base"]["kind"] == "baseline" and doc["base"]["runs"] == 1
    (tmp_path / "pyproject.toml").write_text('[tool.tracekit.gate.run_noise]\nidle = "4ms"\n')
    for args, message in (
        (["--config", tmp_path / "pyproject.toml"], "run_noise idle=4ms: idle is in fraction"),
        (["--run-noise", "speed=4%"], "no metric 'speed'"),
    ):
        res = invoke("compare", old, BASE[1], *args)
        assert res.exit_code == 2 and message in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1
    res = invoke("gate", "calibrate", BASE[0])
    assert res.exit_code == 2 and "two runs or more" in res.output


# ------------------------------------------------ a quiet machine, the default priors
QUIET = Path(__file__).resolve().parents[1] / "fixtures" / "gate_noise_quiet"
Q_BASE = [QUIET / f"base-{i}.json.gz" for i in range(1, 7)]
Q_VARIANT = [QUIET / f"variant-{i}.json.gz" for i in range(1, 4)]


def _plain(base, new) -> tuple[int, dict]:
    """compare with tracekit's stated default priors (no config, no --run-noise)."""
    res = invoke("compare", base, new, "--format", "json")
    assert res.exit_code in (0, 1), res.output
    return res.exit_code, json.loads(res.output)


def _baseline(tmp_path, runs) -> Path:
    out = tmp_path / f"base-{runs[0].stem}.json.gz"
    assert invoke("baseline", "save", *runs, "-o", out).exit_code == 0
    return out


def test_on_a_quiet_machine_the_default_priors_pass_the_same_job_and_catch_the_variant(
    tmp_path,
):
    """The issue's "Done when", on runs recorded with nothing else running (load ≈ 1, see
    load.txt; step time 35.8–36.7 ms, the variant 43.1–45.5 ms): no comparison of the
    same job fails (30 ordered single-run pairs; each of the last three runs against a
    baseline of the first three, and the other way round), and the +20% variant fails
    every comparison on step time (18 single-run pairs, 3 against a baseline)."""
    false = [(a.name, b.name) for a, b in permutations(Q_BASE, 2) if _plain(a, b)[0]]
    halves = [_baseline(tmp_path, Q_BASE[:3]), _baseline(tmp_path, Q_BASE[3:])]
    false += [(h.name, r.name) for h, runs in zip(halves, (Q_BASE[3:], Q_BASE[:3]), strict=True)
              for r in runs if _plain(h, r)[0]]  # fmt: skip
    assert false == []
    missed = []
    for base in [*Q_BASE, halves[0]]:
        for v in Q_VARIANT:
            code, doc = _plain(base, v)
            if code != 1 or _metric(doc, "step_time")["verdict"] != "regressed":
                missed.append((base.name, v.name))
    assert missed == []
