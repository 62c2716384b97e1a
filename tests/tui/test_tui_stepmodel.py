"""The TUI's step model: the critical path marked on the timeline (`p` toggles it, `c`
lists its segments) and the what-if page (`w` on the overview).

Truth comes from the generator (tests/synth.py): in its straggler run rank 2 computes
1.4× slower, so the others wait for it and the chain that sets the step lies on rank 2's
kernels — the path's segments must land on rank 2's lane, on kernels the trace has there.
The what-if page must give what `tracekit whatif --format json` gives for the same change
(the same code path), and a change that does not apply the CLI's one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("textual")

from click.testing import CliRunner

from tests.synth import Scenario, generate
from tests.tui.test_tui import _copy, _screen_lines, make_app, press, settle, still, sync
from tracekit.cli import main
from tracekit.report import units
from tracekit.report.schema import PathSegment, decode
from tui.data import Session
from tui.screens import ErrorScreen, OverviewScreen, PathScreen, TimelineScreen, WhatIfScreen
from tui.screens.whatif import suggestions
from tui.widgets import Timeline
from tui.widgets.timeline import PATH_LABEL, PATH_MARK, path_marks

SLOW = 2  # the generator's straggler


@pytest.fixture(scope="module")
def straggler(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tui-straggler")
    generate(Scenario(name="straggler", straggler=SLOW, straggler_slowdown=1.4, steps=2), d)
    return d


@pytest.fixture(scope="module")
def session(straggler):
    s = Session([straggler], workers=1, display_path="straggler")
    s.load()
    yield s
    s.close()


def _marked_lines(text) -> list[str]:
    """The labels of the timeline's lines that carry the path's mark."""
    out = []
    for line in text.split("\n"):
        if any(PATH_MARK in str(span.style) for span in line.spans):
            out.append(line.plain[:9].strip())
    return out


# --- the path on the timeline -----------------------------------------------------------


def test_the_path_lands_on_the_stragglers_kernels(session):
    """Each segment mapped to the store's clock (`Session.path_spans`, the export's
    mapping) lies on its rank's trace: the compute segments on kernels of that rank and
    name, covering them — the replay of this run is exact, so a wrong origin (a step or
    a window off) would miss them."""
    spans = session.path_spans()
    assert spans
    on_slow = sum(seg.ms for seg, _, _ in spans if seg.rank == SLOW)
    assert on_slow > 0.9 * sum(seg.ms for seg, _, _ in spans)
    compute = [(seg, s, e) for seg, s, e in spans if seg.kind == "compute"]
    assert compute
    for seg, s, e in compute:
        # a segment is consecutive compute merged, named by its longest kernel
        _, rows = session.query(
            "SELECT sum(least(end_ns, $e) - greatest(ts_ns, $s)), "
            "max(least(end_ns, $e) - greatest(ts_ns, $s)) FILTER (WHERE name = $n) "
            "FROM device_activity WHERE rank = $r AND category = 'compute' "
            "AND end_ns > $s AND ts_ns < $e",
            {"r": seg.rank, "n": seg.name, "s": s, "e": e},
        )
        covered, named = rows[0]
        assert covered is not None and covered >= 0.99 * (e - s), seg
        assert named is not None and named > 0, seg


def test_a_model_of_the_last_steps_only_is_drawn_on_those_steps(tmp_path, monkeypatch):
    """Where the graph would pass its node budget the model replays each rank's last
    steps only: the segments then count from those steps' start
    (`step_model.path_origin_ns`), not from the window's — every one lies in its rank's
    last step (the steps table), on compute the trace has there."""
    from tracekit.analysis import whatif_plan as stepmodel

    generate(Scenario(name="straggler", straggler=SLOW, straggler_slowdown=1.4), tmp_path)
    monkeypatch.setattr(stepmodel, "NODE_BUDGET", 1500)  # ~1,900 nodes a step: 1 step kept
    s = Session([tmp_path], workers=1)
    s.load()
    try:
        model = s.report.step_model
        assert any("last 1 of 3 analysed steps" in n for n in model.notes)
        spans = s.path_spans()
        assert spans
        for seg, a, b in spans:
            _step, ts, end = s.step_windows()[seg.rank][-1]
            assert ts <= a and b <= end + 1000, seg
            if seg.kind == "compute":
                _, rows = s.query(
                    "SELECT sum(least(end_ns, $b) - greatest(ts_ns, $a)) FROM device_activity "
                    "WHERE rank = $r AND category = 'compute' AND end_ns > $a AND ts_ns < $b",
                    {"r": seg.rank, "a": a, "b": b},
                )
                assert rows[0][0] is not None and rows[0][0] >= 0.99 * (b - a), seg
    finally:
        s.close()


def test_path_marks_pick_the_segment_covering_most_of_a_column():
    seg = PathSegment(rank=3, kind="compute", name="mm", start_ms=0.0, ms=4.6e-4)
    other = PathSegment(rank=1, kind="communication", name="ar", start_ms=4.6e-4, ms=5.4e-4)
    # 10 columns of 100 ns: rank 3 over [0, 460), rank 1 over [460, 1000) — column 4 is
    # 60 ns rank 3's, 40 ns rank 1's
    lanes = [(1, None), (3, None)]
    marks, row = path_marks([(seg, 0, 460), (other, 460, 1000)], lanes, 0, 1000, 10)
    assert row == [(3, "compute")] * 5 + [(1, "communication")] * 5
    assert sorted(marks[(3, None)]) == [0, 1, 2, 3, 4]
    assert sorted(marks[(1, None)]) == [5, 6, 7, 8, 9]
    # per stream: every stream of the rank is marked; a view off the path marks nothing
    marks, _ = path_marks([(seg, 0, 450)], [(3, 7), (3, 20)], 0, 1000, 10)
    assert set(marks) == {(3, 7), (3, 20)}
    assert path_marks([(seg, 0, 450)], [(3, None)], 2000, 3000, 10) == ({}, [None] * 10)


@sync
async def test_timeline_marks_the_stragglers_lane_and_p_toggles_it(session):
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        scr = app.screen
        assert isinstance(scr, TimelineScreen)
        tl = scr.query_one(Timeline)
        view = tl.path_view()
        assert view is not None
        marks, row = view
        assert set(marks) == {(SLOW, None)}
        covered = [c for c in row if c is not None]
        assert len(covered) >= 0.9 * tl.ncols  # the path spans the step
        assert sum(c[0] == SLOW for c in covered) >= 0.9 * len(covered)
        text = tl.render()
        assert text.plain.split("\n")[1].strip().startswith(PATH_LABEL)
        assert _marked_lines(text) == [f"r{SLOW}"]
        legend = str(scr.query_one("#tl-legend").render())
        assert "critical path" in legend
        await press(pilot, "p")
        assert tl.path_view() is None
        text = tl.render()
        assert _marked_lines(text) == [] and PATH_LABEL not in text.plain
        assert "path hidden" in str(scr.query_one("#tl-status").render())
        assert "critical path" not in str(scr.query_one("#tl-legend").render())
        await press(pilot, "p")
        assert _marked_lines(tl.render()) == [f"r{SLOW}"]


@sync
async def test_path_list_sums_and_jumps_to_a_segment(session):
    model = session.report.step_model
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await press(pilot, "3", "c")
        page = app.screen
        assert isinstance(page, PathScreen)
        rows = page.segments()
        segs = model.critical_path.segments
        assert len(rows) == len(segs)
        assert [r["ms"] for r in rows] == sorted((s.ms for s in segs), reverse=True)
        head = str(page.query_one("#path-head").render())
        by_kind = model.critical_path.by_kind
        assert f"compute {units.fmt(by_kind['compute'], 'ms')}" in head
        assert f"r{SLOW} " in head
        top = rows[0]
        await press(pilot, "enter")
        scr = app.screen
        assert isinstance(scr, TimelineScreen)
        tl = scr.query_one(Timeline)
        assert tl.lane_key == (top["rank"], None)
        assert scr.step == top["step"]
        ta, tb = tl.cursor_span()
        assert ta <= top["start_ns"] < tb


# --- the what-if page ------------------------------------------------------------------


def _cli_whatif(run: Path, *changes: str):
    args = ["whatif", str(run), "--format", "json"]
    for c in changes:
        args += ["--change", c]
    return CliRunner().invoke(main, args)


async def _replay(pilot, typed: str = "", pick: int | None = None) -> WhatIfScreen:
    app = pilot.app
    await press(pilot, "w")
    page = app.screen
    assert isinstance(page, WhatIfScreen)
    if pick is not None:
        for _ in range(pick):
            await press(pilot, "down")
        await press(pilot, "space")
    if typed:
        await press(pilot, "i")
        await pilot.press(*typed)
    await press(pilot, "enter" if typed else "r")
    return page


@sync
async def test_whatif_gives_the_clis_prediction(session, straggler):
    r = _cli_whatif(straggler, "no-straggler")
    assert r.exit_code == 0, r.output
    cli = json.loads(r.stdout)
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        assert "what-if" in _screen_lines(app)[-1]  # the key is in the footer
        page = await _replay(pilot, pick=0)  # the first offered: the finding's remedy
        assert page.specs == ["no-straggler"]
        o = page.outcome
        assert o is not None and page.message is None
        assert o.predicted_step_ms == pytest.approx(cli["predicted_step_ms"], rel=1e-12)
        assert o.saved_ms == pytest.approx(cli["saved_ms"], rel=1e-12)
        assert o.replayed_step_ms == pytest.approx(cli["replayed_step_ms"], rel=1e-12)
        for k, v in cli["critical_path"]["by_kind"].items():
            assert o.critical_path.by_kind[k] == pytest.approx(v, rel=1e-9, abs=1e-12)
        # the truth: without the straggler the step is the others' pace, below measured
        assert o.predicted_step_ms < 0.9 * o.measured_step_ms
        # on the screen at 80×24: the table whole, the prediction and the saving
        screen = "\n".join(_screen_lines(app))
        assert units.fmt(cli["predicted_step_ms"], "ms") in screen
        assert units.fmt(cli["saved_ms"], "ms") in screen
        for k in ("compute", "communication", "waiting", "host", "idle", "predicted"):
            assert k in screen, k
        assert "--change no-straggler" in screen
        # a second replay reuses the session's step model (no second build)
        ctx = session._context
        await press(pilot, "space", "r")  # no-straggler off: nothing picked
        assert "pick a change" in str(page.query_one("#wi-status").render())
        assert session._context is ctx


@pytest.mark.parametrize("change", ["microbatches=8", "overlap:all_to_all", "nonsense"])
@sync
async def test_a_change_that_does_not_apply_shows_the_clis_line(session, straggler, change):
    r = _cli_whatif(straggler, change)
    assert r.exit_code == 2
    (line,) = r.output.strip().splitlines()
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        page = await _replay(pilot, typed=change)
        assert page.message == line
        assert page.outcome is None
        assert str(page.query_one("#wi-status").render()).replace("\n", " ").strip() == line
        assert not isinstance(app.screen, ErrorScreen) and app.errors == []


def test_suggestions_come_from_the_run(session):
    rep = session.report
    offered = dict(suggestions(rep))
    first_spec, why = suggestions(rep)[0]
    (w,) = rep.step_model.what_if
    assert first_spec == " ".join(w.change) and w.finding in why
    assert "overlap:all_reduce" in offered
    (coll,) = [c for c in rep.collectives if c.name == "all_reduce"]
    assert f"bandwidth:all_reduce={2 * coll.busbw_GBps:.4g}" in offered
    assert not any(k.startswith("microbatches=") for k in offered)  # no pipeline here
    # the pipeline sample's frozen report: M = 4 → 8 offered
    pp = decode(Path(__file__).with_name("tui_report_pp_1f1b.json").read_text())
    assert "microbatches=8" in dict(suggestions(pp))


# --- layout -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frozen_pp(tmp_path_factory):
    from tests.tui.test_tui import SAMPLES

    p = _copy(SAMPLES / "pp_1f1b", tmp_path_factory.mktemp("tui-pp-wi") / "pp_1f1b")
    frozen = Path(__file__).with_name("tui_report_pp_1f1b.json")
    s = Session([p], workers=1, display_path="sample_traces/pp_1f1b", report=frozen)
    s.open()
    yield s
    s.close()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_whatif_snapshot(size, frozen_pp, snap_compare):
    """The page before a replay, on a frozen report without a step model (its note says
    so): the changes offered from the run, the table's rows."""

    async def before(pilot):
        await settle(pilot)
        await press(pilot, "w")
        await still(pilot)

    assert snap_compare(make_app(frozen_pp), terminal_size=size, run_before=before)


@sync
async def test_a_pipeline_replay_shows_what_scales_as_the_cli_says(tmp_path):
    """`microbatches=8` on the CPU pipeline sample: the page's prediction and its note
    (each operation's split, the schedule's span) are the CLI's."""
    run = tmp_path / "pp"
    _copy(Path(__file__).resolve().parents[2] / "sample_traces" / "pp_1f1b", run)
    r = _cli_whatif(run, "microbatches=8")
    assert r.exit_code == 0, r.output
    cli = json.loads(r.stdout)
    s = Session([run], workers=1, display_path="pp")
    s.load()
    try:
        app = make_app(s)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            page = await _replay(pilot, typed="microbatches=8")
            assert page.outcome is not None, page.message
            assert page.outcome.predicted_step_ms == pytest.approx(
                cli["predicted_step_ms"], rel=1e-12
            )
            assert page.outcome.notes == cli["notes"] and cli["notes"]
            why = str(page.query_one("#wi-why").render())
            assert "scales with the microbatch" in why and "span" in why
    finally:
        s.close()
