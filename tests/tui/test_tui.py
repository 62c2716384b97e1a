"""`tracekit tui`: Pilot tests per screen, snapshots at 80×24 and 120×40, the overview
against `analyze --format json`, every sample run and shared trace opening, and one
end-to-end run under tmux."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("textual")

from click.testing import CliRunner

from tests.conftest import ROOT, SHARED_TRACES, shared_trace_names
from tracekit.cli import main
from tracekit.report import schema as S
from tui import fmt
from tui.app import TracekitApp
from tui.data import Session, evidence
from tui.screens import (
    CollectivesScreen,
    ErrorScreen,
    FindingScreen,
    InstancesScreen,
    KernelsScreen,
    LevelsScreen,
    MemoryScreen,
    OverviewScreen,
    RanksScreen,
    SqlScreen,
    TimelineScreen,
)
from tui.widgets import SortableTable, Timeline

SAMPLES = ROOT / "sample_traces"
SAMPLE_RUNS = sorted(p.name for p in SAMPLES.iterdir() if (p / "job.json").exists())


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".tracekit"))
    for p in dest.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dest


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Copies of two sample runs, ingested once for the module."""
    import tracekit

    base = tmp_path_factory.mktemp("tui-runs")
    out = {}
    for name in ("ddp", "fsdp"):
        p = _copy(SAMPLES / name, base / name)
        tracekit.open(p).close()
        out[name] = p
    return out


@pytest.fixture(scope="module")
def sessions(runs):
    """One loaded session per run, shared by the apps of this module (the report is
    built once; each app gets the same figures)."""
    out = {}
    for name, p in runs.items():
        s = Session([p], display_path=f"sample_traces/{name}")
        s.load()
        out[name] = s
    yield out
    for s in out.values():
        s.close()


def sync(fn):
    """Run an async test with asyncio (no pytest-asyncio needed)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return run


def make_app(path: Path | Session, display: str | None = None) -> TracekitApp:
    if isinstance(path, Session):
        return TracekitApp(path, close_session=False)
    return TracekitApp(Session([path], display_path=display or f"sample_traces/{path.name}"))


async def settle(pilot) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def still(pilot) -> None:
    """Settled, and the screen drawn the same twice in a row. A DataTable sizes its columns
    on idle after rows are (re)added, and the collectives page refills when its skew worker
    returns; a loaded CI runner took the snapshot between the two more than once, whatever
    fixed pause came before it. So wait for the drawing itself to stop changing. A text
    cursor blinks every 0.5 s, so it is held visible (as the committed snapshots draw it)
    before the first draw is taken."""
    for field in pilot.app.screen.query("Input, TextArea"):
        field.cursor_blink = False  # shown, steady
    before = None
    for _ in range(50):  # 50 x >= 0.05 s: a screen still moving after that is a bug
        await settle(pilot)
        await pilot.pause(0.05)
        now = pilot.app.export_screenshot()
        if now == before:
            return
        before = now
    raise AssertionError("the screen kept changing for 50 draws")


async def press(pilot, *keys: str) -> None:
    for k in keys:
        await pilot.press(k)
        await settle(pilot)


def analyze_json(path: Path) -> dict:
    res = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


# --- the engine stays free of Textual -------------------------------------------------


def test_engine_imports_no_textual():
    code = (
        "import sys, tracekit, diagnosers, diagnosers.assemble, tracekit.cli, tracekit.store\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tui'))\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env)


# --- overview -------------------------------------------------------------------------


@sync
async def test_overview_figures_are_analyze_json(runs):
    """The overview's four panels carry each level's verdict and key figures as
    `analyze --format json` has them; every figure of every level is on the levels page
    (`l`), with the same value, and nothing else is; findings in the same order."""
    path = runs["fsdp"]
    rep = analyze_json(path)
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        scr = app.screen
        assert isinstance(scr, OverviewScreen)
        panels = scr.shown_panels()
        assert list(panels) == ["memory", "compute", "communication", "scaling"]
        for lv in rep["levels"]:
            shown_panel = panels[lv["level"]]
            assert shown_panel["verdict"] == lv["verdict"]
            assert 2 <= len(shown_panel["rows"]) <= 3
            for row in shown_panel["rows"]:
                for side in ("measured", "predicted"):
                    if f"{side}_key" in row:
                        assert row[side] == lv[side][row[f"{side}_key"]], (lv["level"], row)
                assert "_" not in row["label"]  # words, not keys
        overview = scr
        await press(pilot, "l")
        scr = app.screen
        assert isinstance(scr, LevelsScreen)
        shown = {(r["level"], r["path"]): r for r in scr.shown_figures()}
        expected = {}
        for lv in rep["levels"]:
            for part in ("measured", "predicted"):

                def walk(d, path=(), part=part, lv=lv):
                    for k, v in d.items():
                        if isinstance(v, dict):
                            walk(v, (*path, k))
                        else:
                            expected.setdefault((lv["level"], (*path, k)), {})[part] = v

                walk(lv[part])
        assert len(expected) > 10
        assert set(shown) == set(expected)
        table = scr.query_one("#levels")
        texts = {str(table.get_row_at(i)[0]).strip() for i in range(table.row_count)}
        for key, parts in expected.items():
            row = shown[key]
            for part, v in parts.items():
                assert row[part] == v, (key, part)
                assert row[f"{part}_text"] == fmt.fmt(v, fmt.unit_of(key[1]))
            assert row["label"] in texts
        await press(pilot, "escape")
        scr = overview
        assert app.screen is scr
        facts = str(scr.query_one("#facts").render())
        assert f"{rep['summary']['step_time_ms']:,.2f} ms" in facts
        assert f"{len(rep['run']['ranks'])} of {rep['run']['world_size']} ranks" in facts
        assert [f.code for f in scr.findings] == [f["code"] for f in rep["findings"]]
        ft = scr.query_one("#findings")
        assert ft.row_count == len(rep["findings"]) >= 1
        assert [str(ft.get_row_at(i)[1]) for i in range(ft.row_count)] == [
            f["code"] for f in rep["findings"]
        ]


def test_fmt_units_from_key_names():
    assert fmt.fmt(0.1234, fmt.unit_of(("exposed_transfer_fraction",))) == "12.3%"
    assert fmt.fmt(0.5, fmt.unit_of(("hfu",))) == "50.0%"
    assert fmt.fmt(2.5e9, fmt.unit_of(("peak_bytes",))) == "2.5 GB"
    assert fmt.fmt(1.5, fmt.unit_of(("busbw_GBps", "all_reduce"))) == "1.50 GB/s"
    assert fmt.fmt(3e12, fmt.unit_of(("flops_per_step",))) == "3 TFLOP"
    assert fmt.fmt(None) == "—"
    # a nested figure (FLOPs per dtype) is flattened and keeps its figure's unit and label
    level = S.ComputeLevel(measured=S.ComputeMeasured(flops_by_dtype={"bf16": 9.89e14}))
    (row,) = [r for r in fmt.level_rows(level) if len(r["path"]) > 1]
    assert row["path"] == ("flops_by_dtype", "bf16")
    assert row["label"] == "FLOPs / step by dtype · bf16"
    assert row["measured_text"] == "989 TFLOP"
    assert fmt.gap(0.3, 0.2, "pct") == "+10.0 pt"
    assert fmt.gap(3.0, 2.0, "") == "×1.50"


@sync
async def test_finding_page_jumps_to_the_exposed_collective(runs, sessions):
    app = make_app(sessions["fsdp"])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        scr = app.screen
        f = scr.findings[0]
        assert f.code == "TK-N301"
        await press(pilot, "enter")
        page = app.screen
        assert isinstance(page, FindingScreen)
        text = page.text()
        assert f.title in text and f.remedy[:40] in text
        assert "What it detects" in text  # the explain text
        assert "{" not in text and '"' not in text  # tables, not a JSON dump
        assert evidence(f)["collectives"], "N301 names its collective"
        # the details' records are tables: a row per rank, labelled in words
        per_rank = next(t for t in page.tables if t["title"] == "ranks")
        assert [r["rank"] for r in per_rank["raw"]] == [r["rank"] for r in f.details["ranks"]]
        assert ("exposed_ms", "exposed / step") in per_rank["columns"]
        assert per_rank["rows"][0][1] == f"{f.details['ranks'][0]['exposed_ms']:,.2f} ms"
        await press(pilot, "t")
        tl = app.screen
        assert isinstance(tl, TimelineScreen)
        w = tl.query_one(Timeline)
        assert w.lane_key[0] == f.ranks[0]
        assert w.highlight  # the collective's kernel / span name
        # the cursor sits on an instance of that collective on that rank
        ta, tb = w.cursor_span()
        _, rows = app.session.query(
            "SELECT count(*) FROM collectives WHERE rank = $r AND name = $n "
            "AND ts_ns < $tb AND end_ns > $ta",
            {"r": w.lane_key[0], "n": evidence(f)["collectives"][0], "ta": ta, "tb": tb},
        )
        assert rows[0][0] >= 1
        assert tl.detail is not None and tl.detail["collective"] is not None
        await press(pilot, "escape")  # back where we came from: the finding's page
        assert isinstance(app.screen, FindingScreen)
        await press(pilot, "c")  # collectives, the cursor on the finding's collective
        t = app.screen.query_one(SortableTable)
        assert isinstance(app.screen, CollectivesScreen)
        assert t.selected["name"] == evidence(f)["collectives"][0]
        await press(pilot, "1", "escape")
        assert isinstance(app.screen, OverviewScreen)


@sync
async def test_finding_rows_jump_to_their_collective_and_rank(runs, sessions):
    """Enter on a row of a finding's evidence tables goes where the row points."""
    app = make_app(sessions["fsdp"])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        f = app.screen.findings[0]
        await press(pilot, "enter")
        page = app.screen
        i, table = next((i, t) for i, t in enumerate(page.tables) if t["title"] == "collectives")
        want = table["raw"][1]["name"]
        dt = page.query_one(f"#ev-details-{i}")
        dt.focus()
        dt.move_cursor(row=1)
        await press(pilot, "enter")
        assert isinstance(app.screen, CollectivesScreen)
        assert app.screen.query_one(SortableTable).selected["name"] == want
        await press(pilot, "1")  # back on the overview's stack: the finding's page
        assert app.screen is page
        where = page.query_one("#ev-where")
        where.focus()
        rank_row = [str(where.get_row_at(r)[0]) for r in range(where.row_count)].index("rank") + 1
        where.move_cursor(row=rank_row)
        await press(pilot, "enter")
        assert isinstance(app.screen, TimelineScreen)
        assert app.screen.query_one(Timeline).lane_key[0] == f.ranks[1]


def test_detail_tables_of_a_nested_finding():
    """A pipeline finding's model (nested mappings) becomes one table per mapping."""
    from tui.screens.finding import detail_tables, figure_rows

    f = S.decode(FROZEN_PP.read_text()).findings[0]
    assert f.code == "TK-S401"
    tables = {t["title"]: t for t in detail_tables(f.details)}
    assert list(tables) == ["model", "model · stage", "model · parts"]
    stage = tables["model · stage"]
    assert stage["rows"] == [["0", "18.30 ms"], ["1", "21.21 ms"]]
    assert ["span", "29.00 ms"] in tables["model"]["rows"]
    assert figure_rows(f)[0] == ("pipeline bubble", "43.6%", "20.0%", "+23.6 pt")


# --- ranks ------------------------------------------------------------------------------


@sync
async def test_ranks_sort_and_open_timeline(runs, sessions):
    app = make_app(sessions["ddp"])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        scr = app.screen
        assert isinstance(scr, RanksScreen)
        t = scr.query_one(SortableTable)
        assert [r["rank"] for r in t.shown_rows] == [0, 1]
        t.sort_by("step_time_ms", reverse=True)
        times = [r["step_time_ms"] for r in t.shown_rows]
        assert times == sorted(times, reverse=True)
        await press(pilot, "r")
        assert [r["step_time_ms"] for r in t.shown_rows] == sorted(times)
        t.move_cursor(row=[r["rank"] for r in t.shown_rows].index(1))
        await press(pilot, "enter")
        assert isinstance(app.screen, TimelineScreen)
        assert app.screen.query_one(Timeline).lane_key == (1, None)


@sync
async def test_ranks_marks_the_report_s_stragglers(runs):
    """The marks are the report's `summary.straggler_ranks`, whatever they are."""
    s = Session([runs["ddp"]], workers=1, display_path="sample_traces/ddp")
    s.load()
    s.report.summary.straggler_ranks = [1]
    app = TracekitApp(s)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "2")
        t = app.screen.query_one(SortableTable)
        assert [(r["rank"], r["straggler"]) for r in t.shown_rows] == [(0, False), (1, True)]
        assert "◀ straggler" in str(t.get_row_at(1)[0])
        assert "stragglers: 1" in str(app.screen.query_one("#ranks-note").render())


# --- timeline ---------------------------------------------------------------------------


@sync
async def test_timeline_zoom_step_lane_tab(runs, sessions):
    app = make_app(sessions["ddp"])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        scr = app.screen
        w = scr.query_one(Timeline)
        _, steps = app.session.query("SELECT rank, step, ts_ns, end_ns FROM steps")
        first = min(s for _, s, _, _ in steps)
        assert (w.t0, w.t1) == (
            min(ts for _, s, ts, _ in steps if s == first),
            max(e for _, s, _, e in steps if s == first),
        )
        span = w.t1 - w.t0
        await press(pilot, "plus")
        assert abs((w.t1 - w.t0) - span / 2) <= 1
        await press(pilot, "minus", "minus")
        assert abs((w.t1 - w.t0) - span * 2) <= 2
        await press(pilot, "0")
        await press(pilot, "right_square_bracket")
        assert scr.step == first + 1
        assert w.t0 == min(ts for _, s, ts, _ in steps if s == first + 1)
        await press(pilot, "down")
        assert w.lane_key == (1, None)
        before = w.cursor_span()[1]
        await press(pilot, "tab")
        ta, tb = w.cursor_span()
        # the next event on rank 1 after the old cursor starts in the new cursor column
        _, rows = app.session.query(
            "SELECT min(ts_ns) FROM device_activity WHERE rank = 1 AND ts_ns > $t",
            {"t": before},
        )
        assert ta <= rows[0][0] < tb
        assert scr.detail is not None and scr.detail["rank"] == 1
        # streams on demand: one lane per (rank, thread)
        await press(pilot, "s")
        lanes = app.session.lanes()
        assert w.lanes == [(r, lane) for r in (0, 1) for lane in lanes[r]]


def test_frame_covers_exactly_the_clipped_events(runs):
    """Per category, the columns of a frame add up to the events' durations clipped to the
    view (summed in Python from the raw rows), whatever the column count."""
    s = Session([runs["ddp"]])
    s.load()
    try:
        t0, t1 = s.step_span(s.steps_list[0])
        t0 += (t1 - t0) // 7  # an odd window cutting events at both ends
        _, rows = s.query("SELECT rank, category, ts_ns, end_ns FROM device_activity")
        for ncols in (13, 80):
            fr = s.frame([(0, None), (1, None)], t0, t1, ncols)
            for rank in (0, 1):
                truth: dict[str, int] = {}
                for r, cat, ts, end in rows:
                    if r == rank and end > t0 and ts < t1:
                        truth[cat] = truth.get(cat, 0) + min(end, t1) - max(ts, t0)
                got = {c: sum(v) for c, v in fr.cover[(rank, None)].items()}
                assert got == truth
    finally:
        s.close()


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    """Two synthetic GPU ranks (tests.tracegen.ddp_like_rank): per 1000 µs step, a GEMM
    kernel 0–600 µs launched by aten::mm, an all-reduce 500–800 µs, idle after."""
    from tests.tracegen import ddp_like_rank

    d = tmp_path_factory.mktemp("tui-gpu")
    for r in (0, 1):
        ddp_like_rank(r).write(d / f"rank-{r}.json")
    s = Session([d], workers=1)
    s.load()
    yield s
    s.close()


def test_timeline_cells_follow_the_generators_schedule(gpu_run):
    from tui.widgets.timeline import classify

    s = gpu_run
    t0, t1 = s.step_span(1)
    assert t1 - t0 == 1_000_000
    fr = s.frame([(0, None)], t0, t1, 10)  # 100 µs columns
    cov = fr.cover[(0, None)]
    assert sum(cov["compute"]) == 600_000 and sum(cov["communication"]) == 300_000
    kinds = [classify(cov, c, fr.col_ns)[0] for c in range(10)]
    assert kinds == ["compute"] * 5 + ["overlap"] + ["exposed"] * 2 + ["idle"] * 2
    assert [round(classify(cov, c, fr.col_ns)[1], 3) for c in (0, 6, 9)] == [1.0, 1.0, 0.0]


def test_side_panel_and_kernels_on_a_gpu_run(gpu_run):
    s = gpu_run
    t0, _ = s.step_span(1)
    e = s.event_at(0, None, t0 + 100_000, t0 + 200_000)
    assert e["name"] == "sm90_xmma_gemm_bf16" and e["dur_ns"] == 600_000
    assert e["launched_by"] == "aten::mm" and e["lane"] == 7
    c = s.event_at(0, None, t0 + 650_000, t0 + 700_000)
    assert c["category"] == "communication"
    # 2**20 Float elements of 4 bytes
    assert c["collective"]["name"] == "all_reduce" and c["collective"]["bytes"] == 4 << 20
    assert c["collective"]["group_size"] == 2
    assert s.next_event(0, 7, t0 + 1) == (t0 + 1_000_000, t0 + 1_600_000)  # step 2's GEMM
    ks = s.op_kernels("aten::mm")  # over the run: 2 ranks × 2 steps × one 600 µs GEMM
    assert [(k["name"], k["launches"], k["total_ns"]) for k in ks] == [
        ("sm90_xmma_gemm_bf16", 4, 2_400_000)
    ]


@sync
async def test_timeline_highlight_and_min_duration(runs, sessions):
    app = make_app(sessions["ddp"])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3", "slash")
        await pilot.press(*"gloo")
        await press(pilot, "enter")
        w = app.screen.query_one(Timeline)
        assert w.highlight == "gloo"
        hit_cols = w.frame.hits.get((0, None), set())
        assert hit_cols
        fr = w.frame
        cols = set()
        _, rows = app.session.query(
            "SELECT ts_ns, end_ns FROM device_activity WHERE rank = 0 AND name ILIKE '%gloo%' "
            "AND end_ns > $a AND ts_ns < $b",
            {"a": fr.t0, "b": fr.t1},
        )
        for ts, end in rows:
            a = max(ts, fr.t0) - fr.t0
            b = max(min(end, fr.t1), max(ts, fr.t0) + 1) - 1 - fr.t0
            cols |= set(range(a * fr.ncols // (fr.t1 - fr.t0), b * fr.ncols // (fr.t1 - fr.t0) + 1))
        assert hit_cols == cols
        await press(pilot, "m")
        await pilot.press(*"1000")
        await press(pilot, "enter")
        assert w.min_dur_ns == 1_000_000
        _, rows = app.session.query(
            "SELECT sum(least(end_ns, $b) - greatest(ts_ns, $a)) FROM device_activity "
            "WHERE rank = 0 AND dur_ns >= 1000000 AND end_ns > $a AND ts_ns < $b",
            {"a": w.frame.t0, "b": w.frame.t1},
        )
        assert sum(sum(v) for v in w.frame.cover[(0, None)].values()) == rows[0][0]
        await press(pilot, "m")
        await pilot.press(*"abc")
        await press(pilot, "enter")
        assert isinstance(app.screen, ErrorScreen)


@sync
async def test_no_color_uses_glyphs(sessions, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(sessions["ddp"])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        assert app.no_color
        text = str(app.screen.query_one(Timeline).render())
        assert "█" in text and "X" in text  # compute and exposed communication
        assert not set("▁▂▃▄▅▆▇") & set(text)


# --- collectives, ops, memory -------------------------------------------------------------


@sync
async def test_collectives_sort_and_instances(runs, sessions):
    path = runs["fsdp"]
    rep = analyze_json(path)
    app = make_app(sessions["fsdp"])
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "4")
        scr = app.screen
        assert isinstance(scr, CollectivesScreen)
        t = scr.query_one(SortableTable)
        assert len(t.shown_rows) == len(rep["collectives"])
        exposed = [r["exposed_ms"] for r in t.shown_rows]
        assert exposed == sorted(exposed, reverse=True)
        assert all("mean_skew_ms" in r for r in t.shown_rows)
        await press(pilot, "s")  # the next column: sorted by it, descending
        key = t.sort_key
        vals = [r[key] for r in t.shown_rows if r[key] is not None]
        assert vals == sorted(vals, reverse=True)
        row = t.shown_rows[0]
        await press(pilot, "enter")
        inst = app.screen
        assert isinstance(inst, InstancesScreen)
        _, rows = app.session.query(
            "SELECT count(*), count(DISTINCT occurrence) FROM collectives "
            "WHERE name = $n AND bytes = $b AND instance_key IS NOT NULL",
            {"n": row["name"], "b": row["bytes"]},
        )
        assert len(inst.instances) == rows[0][0]
        # the last rank of each instance is the one with the latest start and no wait
        by_occ: dict = {}
        for r in inst.instances:
            by_occ.setdefault(r["occurrence"], []).append(r)
        for rs in by_occ.values():
            last = [r for r in rs if r["last"]]
            assert len(last) == 1
            assert last[0]["arrival_ns"] == max(r["arrival_ns"] for r in rs)
            assert min(r["arrival_ns"] for r in rs) == 0
        await press(pilot, "escape")
        assert isinstance(app.screen, CollectivesScreen)


@sync
async def test_ops_and_kernels_on_a_cpu_run(runs, sessions):
    rep = analyze_json(runs["ddp"])
    app = make_app(sessions["ddp"])
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "5")
        t = app.screen.query_one(SortableTable)
        assert [r["name"] for r in t.shown_rows] == [
            o["name"] for o in sorted(rep["top_ops"], key=lambda o: -o["device_ms"])
        ]
        # the report's own figures, fraction of each op's dtype peak included
        by_name = {o["name"]: o for o in rep["top_ops"]}
        for row in t.shown_rows:
            assert row["peak_fraction"] == by_name[row["name"]]["peak_fraction"]
            assert row["achieved_tflops"] == pytest.approx(by_name[row["name"]]["achieved_tflops"])
        assert "peak per dtype: fp32" in str(app.screen.query_one("#ops-note").render())
        await press(pilot, "enter")
        k = app.screen
        assert isinstance(k, KernelsScreen)
        assert k.kernels == []  # a CPU run launches no kernels
        assert "CPU run" in str(k.query_one("#kern-note").render())


@sync
async def test_memory_screen(runs, sessions):
    app = make_app(sessions["ddp"])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "6")
        scr = app.screen
        assert isinstance(scr, MemoryScreen)
        chart = scr.query_one("#mem-chart")
        assert sorted(chart.series) == [0, 1]
        _, rows = app.session.query("SELECT max(total_allocated) FROM memory WHERE rank = 0")
        assert max(v for v in chart.series[0]["allocated"] if v is not None) == rows[0][0]


# --- sql --------------------------------------------------------------------------------


@sync
async def test_sql_console_query_history_and_error_modal(runs, sessions):
    app = make_app(sessions["ddp"])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "7")
        scr = app.screen
        assert isinstance(scr, SqlScreen)
        q = "SELECT rank, count(*) AS n FROM steps GROUP BY rank ORDER BY rank"
        scr.query_one("#sql-input").value = q
        await press(pilot, "enter")
        cols, rows = scr.last_result
        assert cols == ["rank", "n"]
        assert rows == [(0, 2), (1, 2)]  # the sample run profiled steps 2 and 3 on 2 ranks
        assert scr.query_one("#sql-results").row_count == 2
        inp = scr.query_one("#sql-input")
        inp.value = ""
        await press(pilot, "up")
        assert inp.value == q
        inp.value = "DROP VIEW events"
        await press(pilot, "enter")
        assert isinstance(app.screen, ErrorScreen)
        assert "DROP statements are not allowed" in str(
            app.screen.query_one("#error-message").render()
        )
        await press(pilot, "escape")
        assert isinstance(app.screen, SqlScreen)
        _, rows = app.session.query("SELECT count(*) FROM events")
        assert rows[0][0] > 0  # still there


# --- palette, help, errors ------------------------------------------------------------------


@sync
async def test_palette_jumps_to_a_rank(runs, sessions):
    app = make_app(sessions["ddp"])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await press(pilot, "ctrl+p")
        await pilot.press(*"go to rank 1")
        await pilot.pause(0.3)
        await press(pilot, "enter")
        await settle(pilot)
        assert isinstance(app.screen, TimelineScreen)
        assert app.screen.query_one(Timeline).lane_key == (1, None)
        await press(pilot, "question_mark")
        assert "Tab / Shift+Tab" in str(app.screen.query_one("#help-text").render())


@sync
async def test_unreadable_run_shows_error_then_exits_2(tmp_path):
    (tmp_path / "rank-0.json").write_text('{"traceEvents": [ {"ph": "X", ')
    app = TracekitApp(Session([tmp_path], display_path="bad"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ErrorScreen)
        assert "cannot open the run" in str(app.screen.query_one("#error-message").render())
        await press(pilot, "enter")
    assert app.return_code == 2
    assert app.load_error


@sync
async def test_a_diagnoser_crash_leaves_the_drill_down_working(runs, monkeypatch):
    from diagnosers import assemble

    def boom(*_a, **_k):
        raise ZeroDivisionError("integer division or modulo by zero")

    monkeypatch.setattr(assemble, "cached", boom)
    app = TracekitApp(Session([runs["ddp"]], workers=1, display_path="sample_traces/ddp"))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ErrorScreen)
        assert "ZeroDivisionError" in app.errors[0]
        await press(pilot, "escape")
        assert isinstance(app.screen, OverviewScreen)
        assert "report failed" in str(app.screen.query_one("#facts").render())
        assert [r.rank for r in app.session.report.ranks] == [0, 1]  # the breakdown
        await press(pilot, "3")
        assert app.screen.query_one(Timeline).frame.cover  # the store still answers
        assert len(app.errors) == 1


def test_cli_tui_bad_path_is_one_line_exit_2(tmp_path):
    res = CliRunner().invoke(main, ["tui", str(tmp_path / "nope")])
    assert res.exit_code == 2
    assert res.output.startswith("tracekit: ") and len(res.output.strip().splitlines()) == 1


# --- a stored report (tracekit tui RUN --report FILE) -------------------------------------------


def _corrupted_report(tmp_path: Path) -> Path:
    """A copy of the frozen ddp report with a figure the schema requires taken out of a
    rank's row (what a report of an older tracekit looks like)."""
    rep = json.loads(FROZEN_REPORT.read_text())
    del rep["ranks"][0]["exposed_comm_ms"]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(rep))
    return path


def test_a_report_that_does_not_decode_is_one_clear_line(tmp_path):
    from tracekit.errors import TracekitError
    from tui.session import read_report

    assert read_report(FROZEN_REPORT).ranks[0].exposed_comm_ms > 0  # the frozen one decodes
    with pytest.raises(TracekitError) as err:
        read_report(_corrupted_report(tmp_path))
    msg = str(err.value)
    assert "not a report of this tracekit version" in msg and "\n" not in msg
    assert "exposed_comm_ms" in msg and "$.ranks[0]" in msg  # where it does not fit
    (tmp_path / "cut.json").write_text(FROZEN_REPORT.read_text()[:200])
    with pytest.raises(TracekitError, match="is not a JSON report"):
        read_report(tmp_path / "cut.json")
    with pytest.raises(TracekitError, match="cannot read the report"):
        read_report(tmp_path / "none.json")


def test_cli_tui_report_that_does_not_decode_is_one_line_exit_2(runs, tmp_path):
    res = CliRunner().invoke(
        main, ["tui", str(runs["ddp"]), "--report", str(_corrupted_report(tmp_path))]
    )
    assert res.exit_code == 2, res.output
    assert res.output.startswith("tracekit: ") and len(res.output.strip().splitlines()) == 1
    assert "exposed_comm_ms" in res.output and "Traceback" not in res.output


@sync
async def test_a_report_that_does_not_decode_shows_one_line_then_exits_2(runs, tmp_path):
    bad = _corrupted_report(tmp_path)
    app = TracekitApp(Session([runs["ddp"]], workers=1, display_path="ddp", report=bad))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ErrorScreen)
        shown = str(app.screen.query_one("#error-message").render())
        assert "not a report of this tracekit version" in shown and "exposed_comm_ms" in shown
        assert app.errors == [app.load_error] and "\n" not in app.load_error
        await press(pilot, "enter")
    assert app.return_code == 2


@sync
async def test_a_stored_report_is_shown_as_it_is(runs):
    """`--report`: the overview and the ranks draw the stored report's figures, not ones
    computed again (the frozen report's step and findings)."""
    from tui.session import read_report

    frozen = read_report(FROZEN_REPORT)
    frozen.summary.step_time_ms = 12345.678  # no run has this step: the stored one shows
    app = TracekitApp(Session([runs["ddp"]], workers=1, display_path="ddp", report=frozen))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        scr = app.screen
        assert isinstance(scr, OverviewScreen) and app.session.report is frozen
        facts = str(scr.query_one("#facts").render())
        assert "step 12,345.68 ms" in facts
        assert [f.code for f in scr.findings] == [f.code for f in frozen.findings]
        await press(pilot, "2")
        t = app.screen.query_one(SortableTable)
        assert [r["idle_fraction"] for r in t.shown_rows] == [r.idle_fraction for r in frozen.ranks]


# --- opens on every run ----------------------------------------------------------------------


async def _opens(path: Path, size=(80, 24)) -> TracekitApp:
    """The overview, then every screen; no error shown on the way."""
    app = TracekitApp(Session([path], workers=1, display_path=path.name))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert app.loaded and isinstance(app.screen, OverviewScreen), app.load_error
        assert app.session.report_error is None, app.session.report_error
        for key in "234567":
            await pilot.press(key)
            await pilot.pause()
        await settle(pilot)
        assert isinstance(app.screen, SqlScreen)
        # every finding's page draws its evidence as tables
        for i, f in enumerate(app.session.report.findings or []):
            app.open_finding(i)
            await settle(pilot)
            assert isinstance(app.screen, FindingScreen)
            assert f.code in app.screen.text()
        assert app.errors == []
    return app


@pytest.mark.parametrize("name", SAMPLE_RUNS)
@sync
async def test_opens_every_sample_run(name, tmp_path):
    await _opens(_copy(SAMPLES / name, tmp_path / name))


@pytest.mark.slow  # 12 real traces, ~3 s of CPU each: CI runs them, `-m "not slow"` skips
@pytest.mark.parametrize(
    "name",
    shared_trace_names(),
)
@sync
async def test_opens_every_shared_trace(name, tmp_path):
    await _opens(_copy(SHARED_TRACES / name, tmp_path / name))


# --- snapshots ------------------------------------------------------------------------------

SNAP_KEYS = {"ranks": ["2"], "timeline": ["3"], "collectives": ["4"], "sql": ["7"]}
# The snapshots pin the layout, so they draw a frozen report of sample_traces/ddp (what
# `analyze --format json` printed when they were taken): keys the report gains later do
# not move them. The live report is checked against the screen above.
FROZEN_REPORT = Path(__file__).with_name("tui_report_ddp.json")


@pytest.fixture(scope="module")
def frozen_session(runs):
    s = Session([runs["ddp"]], workers=1, display_path="sample_traces/ddp", report=FROZEN_REPORT)
    s.open()
    yield s
    s.close()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("screen", list(SNAP_KEYS))
def test_snapshot(screen, size, frozen_session, snap_compare):
    async def before(pilot):
        await settle(pilot)
        await press(pilot, *SNAP_KEYS[screen])
        await still(pilot)

    assert snap_compare(make_app(frozen_session), terminal_size=size, run_before=before)


# The dashboard is drawn from a frozen report of sample_traces/pp_1f1b: a CRITICAL
# pipeline bubble among four levels, one finding with nested evidence.
FROZEN_PP = Path(__file__).with_name("tui_report_pp_1f1b.json")
DASHBOARD_KEYS = {"dashboard": [], "levels": ["l"], "finding": ["enter"]}


@pytest.fixture(scope="module")
def frozen_pp_session(tmp_path_factory):
    p = _copy(SAMPLES / "pp_1f1b", tmp_path_factory.mktemp("tui-pp") / "pp_1f1b")
    s = Session([p], workers=1, display_path="sample_traces/pp_1f1b", report=FROZEN_PP)
    s.open()
    yield s
    s.close()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("screen", list(DASHBOARD_KEYS))
def test_dashboard_snapshot(screen, size, frozen_pp_session, snap_compare):
    async def before(pilot):
        await settle(pilot)
        await press(pilot, *DASHBOARD_KEYS[screen])
        await still(pilot)

    assert snap_compare(make_app(frozen_pp_session), terminal_size=size, run_before=before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@sync
async def test_the_dashboard_fits(size, frozen_pp_session):
    """At 80×24 and 120×40 every level's name, verdict and key figures, and the findings,
    are on the screen as drawn: nothing below the fold, no label cut."""
    app = make_app(frozen_pp_session)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        scr = app.screen
        assert isinstance(scr, OverviewScreen)
        assert scr.has_class("-compact") == (size[0] < 100)
        lines = _screen_lines(app)
        assert len(lines) == size[1]
        body = lines[:-1]  # the footer's line left out
        for panel in scr.panels().values():
            r = panel.region
            assert r.height > 0 and r.y + r.height <= size[1] - 1, panel.level
            mine = "\n".join(line[r.x : r.x + r.width] for line in body[r.y : r.y + r.height])
            assert panel.level in mine and panel.verdict.upper() in mine, mine
            for row in panel.rows:
                assert row["label"] in mine, (row["label"], mine)  # whole, not cut
                assert row["measured_text"] in mine and row["predicted_text"] in mine
        scaling = scr.panels()["scaling"]
        assert scaling.verdict == "critical" and "43.6%" in "\n".join(body)
        assert any("CRITICAL" in line and "TK-S401" in line for line in body)


def _screen_lines(app) -> list[str]:
    """The screen as drawn, one string per terminal line."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


# --- end to end under tmux ---------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_end_to_end_under_tmux(tmp_path):
    """`tracekit tui` on the pipeline sample in an 80×24 terminal: the four levels with
    their verdicts (the CRITICAL bubble), the key figures and the finding on one screen."""
    run = _copy(SAMPLES / "pp_1f1b", tmp_path / "pp")
    rep = analyze_json(run)
    session = f"tk-{os.getpid()}"
    env = f"PYTHONPATH={ROOT} TRACEKIT_NO_PROGRESS=1"
    cmd = f"cd {tmp_path} && env {env} {sys.executable} -m tracekit.cli tui pp; sleep 30"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd], check=True
    )

    def screen() -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout

    def wait_for(text: str, timeout: float = 30) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            out = screen()
            if text in out:
                return out
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never showed:\n{screen()}")

    try:
        # the report is in: its first finding's code (or "findings: none") is on screen
        first = rep["findings"][0]["code"] if rep["findings"] else "findings: none"
        out = wait_for(first)
        assert "run pp" in out
        assert f"{rep['summary']['step_time_ms']:,.2f} ms" in out
        levels = {lv["level"]: lv for lv in rep["levels"]}
        assert levels["scaling"]["verdict"] == "critical"
        lines = out.splitlines()
        for name, lv in levels.items():
            # the level's name, and its verdict on the line below (the compact panels)
            i = next(i for i, line in enumerate(lines) if line.split()[:1] == [name])
            assert lines[i + 1].split()[0] == lv["verdict"].upper(), (name, out)
        mfu = levels["compute"]["measured"]["mfu"]
        bubble = levels["scaling"]["measured"]["bubble_fraction"]
        assert f"{100 * mfu:.1f}%" in out and f"{100 * bubble:.1f}%" in out
        assert "CRITICAL  TK-S401" in out
        subprocess.run(["tmux", "send-keys", "-t", session, "3"], check=True)
        out = wait_for("per rank")
        assert " r0 " in out and " r1 " in out
        # the regions screen (issue 30): the report's first region (the pipeline's stage
        # labels here) in the tree, its keys in the note
        subprocess.run(["tmux", "send-keys", "-t", session, "8"], check=True)
        out = wait_for("o its ops")
        assert rep["regions"][0]["path"][-1] in out
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        end = time.monotonic() + 10
        while time.monotonic() < end and "timeline" in screen():
            time.sleep(0.2)
        assert "timeline" not in screen()  # the app quit
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
