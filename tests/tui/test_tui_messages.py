"""The TUI on messages: screens post (`tui.messages`), the app routes; no screen or widget
touches the app's own state (an AST check, and a check of the checker); each message
lands where the keys' paths land; the drill-down's SQL (`tracekit/sql/tui/`) returns the
columns its docs name.

Truth for the jumps comes from the generator (tests/tracegen.ddp_like_rank: per 1000 µs
step an all-reduce 500 µs in, 550 on the shifted rank) and from the report the screens draw."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytest.importorskip("textual")

from textual.app import App

from tests.tui.test_tui import SAMPLES, _copy, make_app, press, settle, sync
from tracekit import sql
from tui.app import TracekitApp
from tui.messages import (
    JumpTo,
    OpenFinding,
    OpenInstances,
    OpenKernels,
    ShowError,
    SwitchTo,
    Target,
)
from tui.screens import (
    CollectivesScreen,
    ErrorScreen,
    FindingScreen,
    InstancesScreen,
    KernelsScreen,
    OverviewScreen,
    RanksScreen,
    TimelineScreen,
)
from tui.session import Session
from tui.widgets import SortableTable, Timeline

ROOT = Path(__file__).resolve().parents[2]
CHECKED = sorted(p for d in ("screens", "widgets") for p in (ROOT / "tui" / d).glob("*.py"))


# --- screens reach the app by message only ----------------------------------------------


def app_own_names() -> set[str]:
    """What TracekitApp defines itself: the names of its class body and every attribute
    its methods set on `self` (its state: session, errors, loaded …)."""
    tree = ast.parse((ROOT / "tui" / "app.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TracekitApp")
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and isinstance(node.ctx, ast.Store)
        ):
            names.add(node.attr)
    return names


OWN = app_own_names()
TEXTUAL_API = set(dir(App())) - OWN  # a bare Textual app's attributes, instance ones too


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return [a.name for a in node.names] if isinstance(node, ast.Import) else []


def reaches_into_app(source: str) -> list[str]:
    """Where a screen or widget touches the app beyond Textual's own App API
    (`push_screen`, `call_from_thread`, `size`, `no_color` …): any `….app.X` with X the
    tracekit app's own, `….app` used bare (kept, passed), the old `….tk`, or an import of
    `tui.app`."""
    tree = ast.parse(source)
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "tk":
            out.append(f"line {node.lineno}: .tk")
        elif isinstance(node, ast.Attribute) and node.attr == "app":
            up = parent.get(node)
            if not (isinstance(up, ast.Attribute) and up.value is node):
                out.append(f"line {node.lineno}: .app used bare")
            elif up.attr not in TEXTUAL_API:
                out.append(f"line {node.lineno}: .app.{up.attr}")
        elif "tui.app" in _imported(node):
            out.append(f"line {node.lineno}: imports tui.app")
    return out


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_screens_and_widgets_reach_the_app_by_message_only(path):
    assert reaches_into_app(path.read_text()) == []


@pytest.mark.parametrize(
    "source,found",
    [
        ("self.tk.jump('ranks')", ".tk"),
        ("p = self.app.pending.pop('timeline')", ".app.pending"),
        ("self.app.session.report", ".app.session"),
        ("self.app.open_finding(0)", ".app.open_finding"),
        ("self.screen.app.errors", ".app.errors"),
        ("app = self.app", ".app used bare"),
        ("f(self.app)", ".app used bare"),
        ("if TYPE_CHECKING:\n    from tui.app import TracekitApp", "tui.app"),
        ("self.app.call_from_thread(f)\nself.app.push_screen(s)\nw = self.app.size.width", None),
        ("self.post_message(JumpTo(Target('ranks')))", None),
    ],
)
def test_the_check_sees_what_it_must(source, found):
    got = reaches_into_app(source)
    if found is None:
        assert got == []
    else:
        assert len(got) == 1 and found in got[0], got


def posted_messages() -> set[str]:
    """The messages of `tui.messages` the screens, widgets and the palette make."""
    from textual.message import Message

    from tui import messages

    kinds = {
        name
        for name, v in vars(messages).items()
        if isinstance(v, type) and issubclass(v, Message) and v is not Message
    }
    out = set()
    for path in [*CHECKED, ROOT / "tui" / "commands.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in kinds:
                out.add(node.func.id)  # type: ignore[attr-defined]
    return out


def test_every_message_posted_has_its_handler_on_the_app():
    from tui import messages

    posted = posted_messages()
    assert {"JumpTo", "OpenFinding", "ShowError", "SwitchTo", "Painted"} <= posted
    for name in posted:
        cls = getattr(messages, name)
        assert callable(getattr(TracekitApp, cls.handler_name, None)), cls.handler_name


# --- the routing --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    p = _copy(SAMPLES / "ddp", tmp_path_factory.mktemp("tui-msg") / "ddp")
    s = Session([p], workers=1, display_path="sample_traces/ddp")
    s.load()
    yield s
    s.close()


SHIFT_US = {0: 0.0, 1: 50.0}  # rank 1's all-reduce starts 50 µs later


@pytest.fixture(scope="module")
def gpu(tmp_path_factory):
    """Two generated GPU ranks, 2 steps of 1000 µs: an all-reduce 500 µs into each step
    on rank 0, 550 µs on rank 1."""
    from tests.tracegen import ddp_like_rank

    d = tmp_path_factory.mktemp("tui-msg-gpu")
    for r, shift in SHIFT_US.items():
        ddp_like_rank(r, comm_shift=shift).write(d / f"rank-{r}.json")
    s = Session([d], workers=1)
    s.load()
    yield s
    s.close()


async def post(pilot, message) -> None:
    """Post as the screen on top does, then let the app route it."""
    pilot.app.screen.post_message(message)
    await settle(pilot)


@sync
async def test_switch_and_jump_by_message(ddp):
    rep = ddp.report
    app = make_app(ddp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await post(pilot, SwitchTo("ranks"))
        assert isinstance(app.screen, RanksScreen)
        await post(pilot, SwitchTo("overview"))
        assert isinstance(app.screen, OverviewScreen)
        # a rank: the ranks screen, the cursor on its row
        await post(pilot, JumpTo(Target("ranks", ranks=(1,))))
        assert isinstance(app.screen, RanksScreen)
        assert app.screen.query_one(SortableTable).selected["rank"] == 1
        # a collective by name: the collectives screen, the cursor on it
        name = min(c.name for c in rep.collectives)
        await post(pilot, JumpTo(Target("collectives", names=(name,))))
        assert isinstance(app.screen, CollectivesScreen)
        assert app.screen.query_one(SortableTable).selected["name"] == name
        # a rank and a step: the timeline on that step, the rank's lane
        last = rep.run.steps[-1]
        await post(pilot, JumpTo(Target("timeline", rank=1, step=last)))
        assert isinstance(app.screen, TimelineScreen)
        assert app.screen.step == last
        assert app.screen.query_one(Timeline).lane_key == (1, None)
        # the same screen again: the target still applies
        await post(pilot, JumpTo(Target("timeline", rank=0)))
        assert app.screen.query_one(Timeline).lane_key == (0, None)


@sync
async def test_pages_open_by_message(ddp):
    rep = ddp.report
    app = make_app(ddp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await post(pilot, OpenFinding(len(rep.findings)))  # none such: nothing opens
        assert isinstance(app.screen, OverviewScreen)
        await post(pilot, OpenFinding(0))
        assert isinstance(app.screen, FindingScreen)
        assert app.screen.finding.code == rep.findings[0].code
        coll = rep.collectives[0]
        await post(pilot, OpenInstances(coll.name, coll.bytes))
        assert isinstance(app.screen, InstancesScreen)
        assert app.current_mode == "collectives"
        assert {r["rank"] for r in app.screen.instances} == {0, 1}
        op = rep.top_ops[0].name
        await post(pilot, OpenKernels(op))
        assert isinstance(app.screen, KernelsScreen) and app.screen.op == op
        await press(pilot, "escape")
        assert app.current_mode == "ops" and app.screen.query_one(SortableTable)
        assert app.errors == []


@sync
async def test_errors_by_message_and_a_failing_worker(ddp, monkeypatch):
    app = make_app(ddp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await post(pilot, ShowError("it broke", title="oops"))
        assert isinstance(app.screen, ErrorScreen)
        assert "it broke" in str(app.screen.query_one("#error-message").render())
        await press(pilot, "escape")

        def fail(*_a, **_k):
            raise RuntimeError("the store went away")

        monkeypatch.setattr(ddp, "collective_instances", fail)
        await post(pilot, OpenInstances("all_reduce", None))  # its worker fails
        assert isinstance(app.screen, ErrorScreen)
        assert app.errors == ["it broke", "RuntimeError: the store went away"]


@sync
async def test_a_jump_to_a_collective_lands_on_its_longest_instance(gpu):
    """From a finding: rank 1, step 2, all_reduce — the cursor on step 2's all-reduce on
    rank 1, 550 µs into the step (the generator's schedule), its name highlighted."""
    app = make_app(gpu)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await post(pilot, JumpTo(Target("timeline", rank=1, step=2, collective="all_reduce")))
        await settle(pilot)
        scr = app.screen
        assert isinstance(scr, TimelineScreen) and scr.step == 2
        tl = scr.query_one(Timeline)
        assert tl.lane_key[0] == 1
        (start,) = [ts for s, ts, _ in gpu.step_windows()[1] if s == 2]
        ta, tb = tl.cursor_span()
        assert ta <= start + 550_000 < tb
        assert "AllReduce" in tl.highlight or "all_reduce" in tl.highlight.lower()


def test_collective_target_from_the_generators_schedule(gpu):
    """No step given: the rank's first step; the instance 500 µs into it."""
    t = gpu.collective_target(0, None, "all_reduce")
    (first, start, _end) = gpu.step_windows()[0][0]
    assert t["step"] == first and t["at_ns"] == start + 500_000
    assert gpu.collective_target(0, None, "no_such_collective") == {"rank": 0, "step": first}


# --- the SQL modules --------------------------------------------------------------------------

TUI_MODULES = [m for m in sql.all_modules() if m.startswith("tui.")]
PARTS = {"ranks": "TRUE", "lane": "lane"}  # the placeholders' every-rank, per-stream fill


def _tui_queries() -> list[tuple[str, str]]:
    return [
        (m, q) for m in TUI_MODULES for q, d in sql.parse_docs(sql.module(m)).items()
        if d.what == "query"
    ]  # fmt: skip


def test_the_tui_modules_are_the_drill_downs():
    assert TUI_MODULES == [
        "tui.collectives", "tui.memory", "tui.ops", "tui.regions", "tui.timeline"
    ]  # fmt: skip
    assert len(_tui_queries()) >= 18


@pytest.mark.parametrize("module,name", _tui_queries())
def test_each_tui_query_returns_the_columns_its_docs_name(module, name, gpu):
    """Run on a run with every value NULL (the shape, not the rows, is checked)."""
    text = sql.query(module, name)  # placeholders left: filled below
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    parts = {k: v for k, v in PARTS.items() if "{" + k + "}" in code}
    text = sql.query(module, name, **parts)
    params = {p: None for p in set(re.findall(r"\$(\w+)", code))}
    if "n" in params:  # the column count divides
        params["n"] = 10
    cols, _ = gpu.query(text, params or None)
    assert cols == list(sql.parse_docs(sql.module(module))[name].columns)
