"""The analysis' phase benchmark (benchmarks/analysis_phases.py) and the replay benchmark's
numpy level sweep (benchmarks/stepmodel_replay.py): exclusive phase times by a hand clock,
a real recompute split into phases that add up, the wrapped functions restored, and the
numpy sweep's times equal to the step model's own replay."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    # by path: putting benchmarks/ on sys.path would let benchmarks/tui.py shadow `tui`
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


ap = _load("analysis_phases")


@pytest.fixture
def ddp_run(tmp_path):
    src = ROOT / "sample_traces" / "ddp"
    dst = tmp_path / "ddp"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".tracekit"))
    return dst


def test_timer_is_exclusive_by_a_hand_clock(monkeypatch):
    """Outer 0→10 with inner 2→7 nested: inner 5, outer 10 − 5 = 5."""
    now = [0.0]
    monkeypatch.setattr(ap.time, "process_time", lambda: now[0])
    t = ap.Timer()

    def inner():
        now[0] += 5

    inner_t = t.wrap("replays", inner)

    def outer():
        now[0] += 2
        inner_t()
        now[0] += 3

    t.wrap("stepmodel_build", outer)()
    assert t.spent["replays"] == 5
    assert t.spent["stepmodel_build"] == 5
    assert t.calls == {**dict.fromkeys(ap.PHASES, 0), "replays": 1, "stepmodel_build": 1}


def test_phases_of_a_real_recompute_add_up_and_are_restored(ddp_run):
    from diagnosers import assemble
    from tracekit.stepmodel import graph as G
    from tracekit.stepmodel import replay as R
    from tracekit.store.open import open_run

    with open_run(ddp_run, workers=1):  # the cached tables
        pass
    before = (G.build, R.run, assemble.analyze, assemble.per_step)
    fig = ap.measure(ddp_run)
    assert (G.build, R.run, assemble.analyze, assemble.per_step) == before
    assert all(fig[p] >= 0 for p in ap.PHASES)
    assert abs(sum(fig[p] for p in ap.PHASES) - fig["total"]) < 0.02
    assert fig["stepmodel_build"] > 0 and fig["replay_calls"] >= 1
    assert fig["step_model"] == pytest.approx(sum(fig[p] for p in ap.STEP_MODEL), abs=0.005)


def test_numpy_level_sweep_equals_the_replay(ddp_run):
    """The vectorized sweep the replay benchmark sets beside the Python loop gives the
    same times, float for float."""
    import numpy as np

    from tracekit.stepmodel import replay as R
    from tracekit.stepmodel.model import StepModel
    from tracekit.store.open import open_run

    sr = _load("stepmodel_replay")
    with open_run(ddp_run, workers=1) as run:
        sm = StepModel(run, _windows(run))
    g = sm.graph
    src, dst, lag = sr.vertex_edges(g)
    depth = sr.levels(2 * g.n, src, dst, sm.order)
    t = sr.numpy_sweep(g, src, dst, lag, depth)
    assert np.array_equal(t, np.asarray(R.run(g, sm.order, path=False).times))
    assert np.array_equal(t, np.asarray(sm.base.times))


def _windows(run) -> str:
    from diagnosers.context import Context
    from tracekit.options import AnalysisOptions

    return Context(run, AnalysisOptions()).windows
