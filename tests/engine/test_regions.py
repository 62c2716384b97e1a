"""Regions (issue 30): annotated ranges and nn.Module events nested on their thread, with
the device time of the work they launched, checked against counts made from the raw
trace JSON by hand: each region's launches are the runtime calls on its thread inside its
span, their device events found by correlation."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

import tracekit
from tests.conftest import ROOT
from tests.helpers import full_report
from tracekit.report.render import region_lines, to_markdown, to_text
from tracekit.report.schema import decode

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME_CATS = {"cuda_runtime", "hip_runtime", "runtime", "cuda_driver"}


def _load(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def truth(path: Path) -> dict[tuple[str, tuple[str, ...]], float]:
    """(kind, path) → device µs launched inside [start, end), summed over every instance
    (a region's parents: the regions of its thread whose span holds it, by a scan of every
    pair — not the engine's sweep)."""
    events = _load(path)
    regions = []
    for e in events:
        cat, name = (e.get("cat") or "").lower(), e.get("name") or ""
        if cat == "python_function" and name.startswith("nn.Module: "):
            regions.append(("module", name[len("nn.Module: ") :].strip(), e))
        elif cat == "user_annotation" and not name.startswith(("ProfilerStep#", "gloo:")):
            regions.append(("annotation", name, e))
    # the engine's order: thread, start, the longer first, the name
    regions.sort(key=lambda r: (r[2]["tid"], r[2]["ts"], -r[2]["dur"], r[1]))
    device = defaultdict(float)
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if (e.get("cat") or "").lower() in DEVICE_CATS and corr is not None:
            device[corr] += e["dur"]
    launches = defaultdict(list)  # tid → (launch ts, device µs)
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if (e.get("cat") or "").lower() in RUNTIME_CATS and corr in device:
            launches[e["tid"]].append((e["ts"], device.pop(corr)))
    out: dict[tuple[str, tuple[str, ...]], float] = defaultdict(float)
    for i, (kind, name, e) in enumerate(regions):
        end = e["ts"] + e["dur"]
        above = [
            n
            for _k, n, a in regions[:i]
            if a["tid"] == e["tid"] and a["ts"] <= e["ts"] and a["ts"] + a["dur"] >= end
        ]
        us = sum(d for ts, d in launches[e["tid"]] if e["ts"] <= ts < end)
        out[(kind, (*above, name))] += us
    return {k: v for k, v in out.items() if v > 0}


def _by_rank(g: dict) -> dict[int, float]:
    return {int(k): v for k, v in g["device_ms_by_rank"].items()}


def _check(report: dict, want: dict, rank: int) -> None:
    got = {
        (g["kind"], tuple(g["path"])): _by_rank(g)[rank] * 1e3
        for g in report["regions"]
        if _by_rank(g).get(rank)
    }
    assert set(got) == set(want)
    for key, us in want.items():
        assert got[key] == pytest.approx(us, rel=0.02), key


def test_module_regions_match_the_raw_trace(shared_trace):
    run = shared_trace("mi300x_resnet_ddp8_rank0")
    (trace,) = run.glob("*.json*")
    want = truth(trace)
    with tracekit.open(run) as r:
        # the trace window: every instance counts once (one window, n = 1)
        rep = full_report(r, window="trace")
        assert r.sql("SELECT count(*) FROM regions WHERE kind = 'module'").fetchall() == [(450,)]
    assert any(k == "module" for k, _ in want)
    _check(rep, want, 0)
    g = next(g for g in rep["regions"] if g["path"] == ["DistributedDataParallel_0"])
    assert g["kind"] == "module" and g["device_self_ms_per_step"] <= g["device_ms_per_step"]
    assert g["flops_per_step"] > 0 and g["achieved_tflops"] > 0


def test_annotation_regions_match_the_raw_trace_per_rank(shared_trace):
    run = shared_trace("v100_dlrm_8rank")
    with tracekit.open(run) as r:
        rep = full_report(r, window="trace")
    ranks = set()
    for trace in sorted(run.glob("*.json*")):
        rank = int(trace.name.split("_")[0].removeprefix("worker"))
        _check(rep, truth(trace), rank)
        ranks.add(rank)
    assert ranks == set(range(8))
    fwd = next(g for g in rep["regions"] if g["path"] == ["## forward ##"])
    assert fwd["kind"] == "annotation" and fwd["ranks"] == list(range(8))
    by = _by_rank(fwd)
    assert by[fwd["max_rank"]] == max(by.values())
    assert by[fwd["min_rank"]] == min(by.values())


def test_steps_window_counts_per_step_and_the_tree_fits_80_columns(shared_trace):
    with tracekit.open(shared_trace("mi300x_resnet_ddp8_rank0")) as r:
        rep = full_report(r)
    steps = rep["ranks"][0]["steps"]
    assert steps >= 1
    ddp = next(g for g in rep["regions"] if g["path"] == ["DistributedDataParallel_0"])
    assert ddp["count_per_step"] == pytest.approx(1.0)
    report = decode(json.dumps(rep))  # int map keys become strings and back
    lines = region_lines(report)
    assert lines and all(len(line) <= 80 for line in lines)
    assert "DistributedDataParallel_0 (module)" in to_text(report)
    assert "### Regions" in to_markdown(report)


@pytest.mark.parametrize("name", ["v100_dlrm_8rank", "mi300x_resnet_ddp8_rank0"])
def test_samples_hold_the_top_regions_per_step(shared_trace, name):
    """The gate's series: each top region's device time per step; their mean over the
    steps is the report's figure (every rank runs each of these regions every step: 8
    ranks of one step, one rank of three)."""
    with tracekit.open(shared_trace(name)) as r:
        rep = full_report(r, window="steps")
    series = rep["samples"]["regions"]
    assert series and len(series) <= 10
    by_path = {(g["kind"], tuple(g["path"])): g for g in rep["regions"]}
    for s in series:
        g = by_path[(s["kind"], tuple(s["path"]))]
        assert s["step"] == rep["samples"]["steps"]
        assert sum(s["device_ms"]) / len(s["device_ms"]) == pytest.approx(
            g["device_ms_per_step"], rel=1e-4, abs=1e-5
        )


def test_a_cpu_run_lists_regions_by_cpu_time(tmp_path):
    """sample_traces/ddp (gloo, no device): every region with CPU time, device figures
    null (no device), CPU time per step equal to the raw trace's annotated spans."""
    import shutil

    run = shutil.copytree(ROOT / "sample_traces" / "ddp", tmp_path / "ddp")
    with tracekit.open(run) as r:
        rep = full_report(r)
        steps = {x["rank"]: x["steps"] for x in rep["ranks"]}
    fwd = next(g for g in rep["regions"] if g["path"] == ["DistributedDataParallel.forward"])
    assert fwd["device_ms_per_step"] is None and fwd["device_ms_by_rank"] == {}
    assert fwd["ranks"] == sorted(steps)
    want = []
    for rank in sorted(steps):
        (trace,) = [p for p in run.glob("rank-*.json*") if _rank_of(p) == rank]
        spans = [
            e["dur"]
            for e in _load(trace)
            if e.get("cat") == "user_annotation" and e["name"] == "DistributedDataParallel.forward"
        ]
        want.append(sum(spans) / 1e3 / steps[rank])
    assert fwd["cpu_ms_per_step"] == pytest.approx(sum(want) / len(want), rel=0.02)


def _rank_of(path: Path) -> int:
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as fh:
        return int(json.load(fh)["distributedInfo"]["rank"])


# --- the TUI's regions screen (8) ------------------------------------------------------
# drawn from a frozen report of v100_dlrm_8rank (annotations on 8 ranks, a spread): the
# screen reads the report only, so the store under it is a sample run's


def _frozen_session(tmp_path):
    import shutil

    from tui.data import Session

    run = shutil.copytree(ROOT / "sample_traces" / "ddp", tmp_path / "ddp")
    frozen = Path(__file__).with_name("tui_report_regions.json")
    s = Session([run], workers=1, display_path="v100_dlrm_8rank", report=frozen)
    s.open()
    return s


async def _settle(pilot) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def _regions_screen(pilot):
    """Key 8: the regions screen, and its tree."""
    from textual.widgets import Tree

    from tui.screens import RegionsScreen

    await _settle(pilot)
    await pilot.press("8")
    await _settle(pilot)
    scr = pilot.app.screen
    assert isinstance(scr, RegionsScreen)
    return scr, scr.query_one(Tree)


def test_regions_screen_tree_sort_and_rank_spread(tmp_path):
    import asyncio

    from textual.widgets import Static

    from tui.app import TracekitApp

    s = _frozen_session(tmp_path)

    async def go():
        app = TracekitApp(s, close_session=False)
        async with app.run_test(size=(80, 24)) as pilot:
            scr, tree = await _regions_screen(pilot)
            top = [n.data.path for n in tree.root.children]
            assert top[0] == ["## forward ##"]  # the most device time first
            fwd = tree.root.children[0]
            assert fwd.is_expanded and fwd.children[0].data.path[-1] == (
                "DistributedDataParallel.forward"
            )
            await pilot.press("enter")  # collapse the highlighted (first) region
            await _settle(pilot)
            assert not tree.root.children[0].is_expanded
            ranks = str(scr.query_one("#regions-ranks", Static).render())
            assert "## forward ##" in ranks and "r1 " in ranks
            await pilot.press("s", "s")  # by FLOPs, then by spread
            await _settle(pilot)
            assert scr.sort == "spread"
            first = tree.root.children[0].data
            assert first.path == ["## forward ##"]  # r1 +225%: the widest spread
            assert app.errors == []

    try:
        asyncio.run(go())
    finally:
        s.close()


def test_regions_screen_snapshot(tmp_path, snap_compare):
    from tui.app import TracekitApp

    s = _frozen_session(tmp_path)

    async def before(pilot):
        await _settle(pilot)
        await pilot.press("8")
        await _settle(pilot)

    try:
        assert snap_compare(
            TracekitApp(s, close_session=False), terminal_size=(80, 24), run_before=before
        )
    finally:
        s.close()


# --- the HTML charts ---------------------------------------------------------------------


def test_html_icicle_and_rank_heat_map(tmp_path):
    from tests import browser
    from tracekit.report import html as H

    report = decode(Path(__file__).with_name("tui_report_regions.json").read_text())
    charts = {c.key: c for c in H.charts(report)}
    icicle = charts["regions"].spec["data"]["values"]
    by_path = {r["path"]: r for r in icicle}
    for r in icicle:  # a child lies inside its parent's bar, one row below
        up = r["path"].rsplit(" / ", 1)[0] if " / " in r["path"] else None
        if up in by_path:
            p = by_path[up]
            assert p["depth"] == r["depth"] - 1
            assert p["x0"] - 1e-9 <= r["x0"] and r["x1"] <= p["x1"] + 1e-9
    heat = charts["region_ranks"].spec["data"]["values"]
    fwd = [c for c in heat if c["region"] == "## forward ##"]
    assert sorted(c["rank"] for c in fwd) == list(range(8))
    import vl_convert

    for key in ("regions", "region_ranks"):  # each spec compiles and draws (Vega, no browser)
        assert "<svg" in vl_convert.vegalite_to_svg({**charts[key].spec, "width": 600})
    if browser.chromium() is None:
        return
    page = tmp_path / "regions.html"
    page.write_text(H.to_html(report))
    got = browser.render(page, tmp_path / "regions.png")
    assert got.console == [], got.console
    assert {"regions", "region_ranks"} <= set(got.charts_drawn())


def test_regions_screen_jumps_to_the_timeline_and_the_ops(tmp_path):
    """On the H200 run with layers (gpu_traces/h200_ddp2_gloo_layers): `t` on `layers.2`
    shows the timeline on the rank with the most device time in it, at the block's first
    run in the analysed steps (the raw trace's first `layers.2` range after the first
    analysed ProfilerStep starts), its name highlighted; `o` shows the ops with the cursor
    on an op that ran inside the block (by the raw trace)."""
    import asyncio
    import gzip
    import shutil

    from tui.app import TracekitApp
    from tui.data import Session
    from tui.screens import OpsScreen, TimelineScreen

    run = shutil.copytree(ROOT / "gpu_traces" / "h200_ddp2_gloo_layers", tmp_path / "run")
    s = Session([run], workers=1)
    s.load()

    async def go():
        app = TracekitApp(s, close_session=False)
        async with app.run_test(size=(100, 30)) as pilot:
            _, tree = await _regions_screen(pilot)
            nodes, stack = [], list(tree.root.children)
            while stack:
                n = stack.pop()
                nodes.append(n)
                stack.extend(n.children)
            node = next(n for n in nodes if n.data and n.data.path[-1] == "layers.2")
            node.parent.expand()
            await _settle(pilot)
            tree.move_cursor(node)
            await _settle(pilot)
            region = node.data
            await pilot.press("t")
            await _settle(pilot)
            tl = app.screen
            assert isinstance(tl, TimelineScreen) and app.errors == []
            by = region.device_ms_by_rank
            rank = int(max(by, key=lambda r: by[r]))
            assert tl.timeline.lane_key[0] == rank
            assert tl.timeline.highlight == "layers.2"
            with gzip.open(run / f"rank-{rank}.json.gz") as f:
                ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
            first_step = s.steps_list[0]
            (step_ev,) = [e for e in ev if e["name"] == f"ProfilerStep#{first_step}"
                          and e.get("cat") == "user_annotation"]  # fmt: skip
            want = min(e["ts"] for e in ev if e["name"] == "layers.2" and e["ts"] >= step_ev["ts"])
            # the store's clock: ns since the epoch; the step's start there and in the trace
            _, rows = s.query(
                "SELECT ts_ns FROM steps WHERE rank = $r AND step = $s",
                {"r": rank, "s": first_step},
            )
            want_ns = rows[0][0] + (want - step_ev["ts"]) * 1e3
            ta, tb = tl.timeline.cursor_span()
            assert ta - 1e3 <= want_ns <= tb + 1e3  # the cursor's column holds it
            await pilot.press("8")
            await _settle(pilot)
            await pilot.press("o")
            await _settle(pilot)
            ops = app.screen
            assert isinstance(ops, OpsScreen) and app.errors == []
            row = ops.query_one("SortableTable").selected
            spans = [(e["ts"], e["ts"] + e["dur"], e["tid"]) for e in ev
                     if e["name"] == "layers.2"]  # fmt: skip
            inside = {e["name"] for e in ev if e.get("cat") == "cpu_op" and any(
                a <= e["ts"] < b and e["tid"] == tid for a, b, tid in spans)}  # fmt: skip
            assert row is not None and row["name"] in inside

    try:
        asyncio.run(go())
    finally:
        s.close()


def test_region_time_of_some_regions_is_theirs_of_all(shared_trace, monkeypatch):
    """`region_time(…, only=…)` filters the regions in SQL before they are summed: its
    cells are those of every region for the ones asked (none asked: none); the rows read
    with their paths (the fallback where two regions share a hash) are the same cells."""
    from tracekit.metrics import regions as R
    from tracekit.metrics import windows as W

    with tracekit.open(shared_trace("v100_dlrm_8rank")) as r:
        steps = W.step_windows(None)
        every = R.region_time(r, steps)
        some = set(sorted(every)[1::3])
        assert len(every) > 3 and some
        assert R.region_time(r, steps, only=some) == {k: every[k] for k in some}
        assert R.region_time(r, steps, only=set()) == {}
        # every region named by one hash: the fallback reads the rows with their paths
        query = R.sql.query

        def one_hash(module, name, **kw):
            q = query(module, name, **kw)
            return q.replace("hash(kind, path)", "0::UBIGINT") if name == "region_cells" else q

        monkeypatch.setattr(R.sql, "query", one_hash)
        assert R.region_time(r, steps, only=some) == {k: every[k] for k in some}
        assert R.region_time(r, steps) == every


@pytest.mark.parametrize("name", ["mi300x_resnet_ddp8_rank0", "v100_dlrm_8rank"])
def test_region_figures_from_columns_are_the_cells_summed(shared_trace, name):
    """`per_rank_of` computes each rank's figures from the columns at once where every rank
    has one window: the same floats, bit for bit, as `per_rank` over `region_time`'s cells
    (FLOPs and nulls among them); over the step windows (several a rank) it sums cells."""
    from tracekit.analysis.regions import per_rank, per_rank_of
    from tracekit.metrics import regions as R
    from tracekit.metrics import windows as W
    from tracekit.metrics.breakdown import per_rank as breakdown
    from tracekit.metrics.breakdown import windows_of

    with tracekit.open(shared_trace(name)) as r:
        report = W.values(r, windows_of(breakdown(r)))
        for windows in (report, W.step_windows(None)):
            want = {k: per_rank(cells) for k, cells in R.region_time(r, windows).items()}
            got = per_rank_of(r, windows)
            assert repr(got) == repr(want)  # repr: the floats bit for bit, the order too
        flops = [v["flops"] for per in got.values() for v in per.values()]
        assert None in flops and any(f is not None for f in flops)
