"""The step model built on a thread beside the analysis (`whatif_plan.start`, `Run.beside`):
the report is the one built without the thread (TRACEKIT_STEP_MODEL_THREAD=0), an error
in the thread reaches the report as it did, and the thread queries through a cursor of
its own. The step tables the ingest left out are made tables once, when the model is
built (`Run.step_tables`)."""

from __future__ import annotations

import json
import shutil
import threading

import pytest

import tracekit
from diagnosers import assemble
from tests.synth import Scenario, generate
from tracekit.analysis import whatif_plan
from tracekit.ingest import steptables
from tracekit.options import AnalysisOptions
from tracekit.stepmodel import graph as G


def _json(run_dir, monkeypatch, thread: bool) -> dict:
    monkeypatch.setenv(whatif_plan.THREAD_ENV, "1" if thread else "0")
    with tracekit.open(run_dir, workers=1) as run:
        rep = json.loads(assemble.analyze(run, AnalysisOptions()).to_json())
    rep.pop("tracekit_version", None)
    return rep


@pytest.fixture(scope="module")
def synth_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("beside")
    generate(Scenario(name="beside", world=4, straggler=2), root)  # a finding to replay
    return root


def _spy_build(monkeypatch, fail: Exception | None = None) -> list[str]:
    """The threads `G.build` ran on; `fail`: it raises that instead."""
    seen: list[str] = []
    build = G.build

    def spy(run, windows):
        seen.append(threading.current_thread().name)
        if fail is not None:
            raise fail
        return build(run, windows)

    monkeypatch.setattr(G, "build", spy)
    return seen


def test_the_threaded_report_is_the_unthreaded_one(synth_run, monkeypatch):
    seen = _spy_build(monkeypatch)
    threaded = _json(synth_run, monkeypatch, thread=True)
    assert seen == ["tracekit-beside"]  # built once, on the thread
    alone = _json(synth_run, monkeypatch, thread=False)
    assert seen[1:] == [threading.current_thread().name]
    assert threaded["step_model"]["critical_path"]["segments"]
    assert threaded["step_model"]["what_if"]  # the findings' remedies replayed
    assert threaded == alone


def test_a_shared_trace_reports_the_same_with_the_thread(shared_trace, monkeypatch):
    src = shared_trace("a100_sendrecv_2rank")
    assert _json(src, monkeypatch, thread=True) == _json(src, monkeypatch, thread=False)


def test_an_error_in_the_thread_reaches_the_report_as_without_it(synth_run, monkeypatch):
    seen = _spy_build(monkeypatch, fail=ValueError("no graph today"))
    threaded = _json(synth_run, monkeypatch, thread=True)
    alone = _json(synth_run, monkeypatch, thread=False)
    assert seen[0] == "tracekit-beside"
    note = "step model figures are missing: computing them raised ValueError('no graph today')"
    assert note in threaded["step_model"]["notes"]
    assert threaded == alone
    assert threaded["findings"] and threaded["levels"]  # the rest of the report stands


def test_debug_prints_the_threads_traceback(synth_run, monkeypatch, capsys):
    _spy_build(monkeypatch, fail=ValueError("no graph today"))
    monkeypatch.setenv(whatif_plan.THREAD_ENV, "1")
    with tracekit.open(synth_run, workers=1) as run:
        rep = assemble.analyze(run, AnalysisOptions(), debug=True)
    assert "ValueError('no graph today')" in " ".join(rep.step_model.notes)
    err = capsys.readouterr().err
    assert "Traceback" in err and "in spy" in err and "no graph today" in err


def test_beside_runs_on_a_cursor_with_the_runs_settings(synth_run):
    with tracekit.open(synth_run, workers=1) as run:
        main = run.con

        def work():
            assert run.con is not main
            (asof,) = run.sql("SELECT current_setting('asof_loop_join_threshold')").fetchone()
            (n,) = run.sql("SELECT count(*) FROM events").fetchone()
            return asof, n

        fut = run.beside(work)
        assert fut.result() == (0, run.sql("SELECT count(*) FROM events").fetchone()[0])
        assert run.con is main

        def fail():
            raise KeyError("x")

        with pytest.raises(KeyError):
            run.beside(fail).result()


def test_the_derived_step_tables_are_made_tables_once(tmp_path, monkeypatch):
    src = tmp_path / "src"
    generate(Scenario(name="lazy", world=2), src)
    shutil.rmtree(src / ".tracekit", ignore_errors=True)
    monkeypatch.setattr(steptables, "MAX_STEP_NODES", 0)  # the ingest leaves them out
    with tracekit.open(src, workers=1) as run:
        before = {
            t: run.sql(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
            for t in steptables.STEP_TABLES
        }
        run.step_tables()
        tables = {n for (n,) in run.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert {f"_m_{t}" for t in steptables.STEP_TABLES} <= tables
        for t, rows in before.items():
            assert run.sql(f"SELECT * FROM {t} ORDER BY ALL").fetchall() == rows
        run.step_tables()  # once
        # the SQL sandbox keeps the store's definitions (it cannot read `_m_` tables)
        ((n,),) = run.readonly_sql("SELECT count(*) FROM step_host").fetchall()
        assert n == len(before["step_host"])


def test_the_collector_pause_restores_what_it_found():
    import gc

    from tracekit.stepmodel.nogc import paused

    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()  # found off: left off
    finally:
        gc.enable()
    with pytest.raises(ValueError), paused():
        raise ValueError
    assert gc.isenabled()


def _spy_plan(monkeypatch) -> list[str]:
    """The names of the threads that make the step model's plan, as they make it."""
    seen: list[str] = []
    plan = whatif_plan._plan

    def spy(*args):
        seen.append(threading.current_thread().name)
        return plan(*args)

    monkeypatch.setattr(whatif_plan, "_plan", spy)
    return seen


def test_the_plan_is_made_once_on_the_thread(synth_run, monkeypatch):
    """The plan's queries (a count of the windows' events) run on the thread; the caller
    reads the thread's plan, and makes none of its own."""
    seen = _spy_plan(monkeypatch)
    threaded = _json(synth_run, monkeypatch, thread=True)
    assert seen == ["tracekit-beside"]
    assert threaded == _json(synth_run, monkeypatch, thread=False)


def test_a_model_the_plan_does_not_build_says_why_once(synth_run, monkeypatch):
    """Past the model's reach the thread plans and builds nothing; the report's note is
    the plan's, made once."""
    seen = _spy_build(monkeypatch)
    plans = _spy_plan(monkeypatch)
    monkeypatch.setattr(whatif_plan, "MAX_STEP_NODES", 1)
    threaded = _json(synth_run, monkeypatch, thread=True)
    assert seen == [] and plans == ["tracekit-beside"]
    assert any("the step model is not built" in n for n in threaded["step_model"]["notes"])
    assert threaded == _json(synth_run, monkeypatch, thread=False)


def _spy_what_if(monkeypatch, fail=None) -> list[tuple[str, list[str]]]:
    """(thread, change) of each remedy's replay (`StepModel.what_if`); `fail(i)`: the
    exception the i-th replay raises instead, or None."""
    from tracekit.stepmodel.model import StepModel

    seen: list[tuple[str, list[str]]] = []
    what_if = StepModel.what_if

    def spy(self, changes, path=True):
        seen.append((threading.current_thread().name, [type(c).__name__ for c in changes]))
        exc = fail(len(seen) - 1) if fail else None
        if exc is not None:
            raise exc
        return what_if(self, changes, path=path)

    monkeypatch.setattr(StepModel, "what_if", spy)
    return seen


def test_the_remedies_are_replayed_on_the_thread(synth_run, monkeypatch):
    """The findings' what-if replays run on a thread of their own after the rules (the
    caller makes the rest of the report meanwhile), in the findings' order, and the
    report is the one replayed on the caller's thread."""
    seen = _spy_what_if(monkeypatch)
    threaded = _json(synth_run, monkeypatch, thread=True)
    assert seen and {t for t, _ in seen} == {"tracekit-beside"}
    n = len(seen)
    alone = _json(synth_run, monkeypatch, thread=False)
    assert [c for _, c in seen[n:]] == [c for _, c in seen[:n]]
    assert {t for t, _ in seen[n:]} == {threading.current_thread().name}
    assert len(threaded["step_model"]["what_if"]) == n
    assert threaded == alone


@pytest.mark.parametrize("error", ["not_applicable", "value_error"])
def test_a_replay_that_raises_reaches_the_report_as_without_the_thread(
    synth_run, monkeypatch, error
):
    """A remedy that does not apply is skipped with its reason; one that raises anything
    else stops the replays and leaves the step model's note — as on the caller's thread."""
    from tracekit.stepmodel.changes import NotApplicable

    exc = NotApplicable("not on this run") if error == "not_applicable" else ValueError("no")
    seen = _spy_what_if(monkeypatch, fail=lambda i: exc if i == 0 else None)
    threaded = _json(synth_run, monkeypatch, thread=True)
    seen.clear()  # the first replay raises again
    assert threaded == _json(synth_run, monkeypatch, thread=False)
    notes, remedies = threaded["step_model"]["notes"], [f["remedy"] for f in threaded["findings"]]
    if error == "value_error":
        assert "computing them raised ValueError('no')" in " ".join(notes)
    else:
        assert any("does not apply (not on this run)" in (r or "") for r in remedies)


def test_a_remedy_that_fails_to_prepare_reaches_the_report_as_without_the_thread(
    synth_run, monkeypatch
):
    """What the changes read of the run is read on the caller's thread before the
    replays start; what that raises is raised where the replay would be."""

    def boom(ctx, changes):
        raise RuntimeError("cannot read the run")

    monkeypatch.setattr(whatif_plan, "_filled", boom)
    threaded = _json(synth_run, monkeypatch, thread=True)
    assert "RuntimeError('cannot read the run')" in " ".join(threaded["step_model"]["notes"])
    assert threaded == _json(synth_run, monkeypatch, thread=False)


def test_the_replays_shorten_the_switch_interval_and_restore_it(synth_run, monkeypatch):
    """While the remedies replay beside the caller, the GIL's switch interval is
    `SWITCH_S` (the caller's short queries get the GIL back sooner); after, as found."""
    import sys

    from tracekit.stepmodel.model import StepModel

    seen: list[float] = []
    what_if = StepModel.what_if

    def spy(self, changes, path=True):
        seen.append(sys.getswitchinterval())
        return what_if(self, changes, path=path)

    monkeypatch.setattr(StepModel, "what_if", spy)
    before = sys.getswitchinterval()
    _json(synth_run, monkeypatch, thread=True)
    assert seen and all(s == pytest.approx(whatif_plan.SWITCH_S) for s in seen)
    assert sys.getswitchinterval() == before
