"""8 · Regions: the report's `regions[]` (annotated ranges and nn.Modules) as a tree —
Enter or Space expands and collapses, `s` sorts siblings by device time, FLOPs or spread —
with the per-rank device time of the highlighted region below. The report's figures only."""

from __future__ import annotations

from statistics import median_low
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static, Tree

from tracekit.report import units
from tracekit.report.schema import Region
from tui.messages import JumpTo, ShowError, Target
from tui.screens.common import TkScreen

if TYPE_CHECKING:
    from tui.session import Session

# the sort orders `s` cycles through: (name, key of a region, highest first)
SORTS: tuple[str, ...] = ("device time", "FLOPs", "spread")


def time_ms(g: Region) -> float:
    """The region's time per step: device time, CPU time on CPU runs."""
    v = g.device_ms_per_step
    return (v if v is not None else g.cpu_ms_per_step) or 0.0


def spread(g: Region) -> float | None:
    """The most device time on a rank over the median rank's, minus 1 (None: one rank)."""
    by = [v for v in g.device_ms_by_rank.values() if v is not None]
    if len(by) < 2:
        return None
    med = median_low(by)
    return max(by) / med - 1 if med else None


def sort_value(g: Region, sort: str) -> float:
    if sort == "FLOPs":
        return g.flops_per_step or 0.0
    if sort == "spread":
        return spread(g) or 0.0
    return time_ms(g)


def label(g: Region) -> Text:
    name = g.path[-1] + (" (module)" if g.kind == "module" else "")
    parts = [f"{units.fmt(time_ms(g), 'ms', bare=True)} ms"]
    if g.achieved_tflops is not None:
        parts.append(f"{g.achieved_tflops:.3g} TFLOP/s")
    s = spread(g)
    if s is not None and g.max_rank is not None:
        parts.append(f"r{g.max_rank} +{100 * s:.0f}%")
    return Text.assemble((name, "bold"), "  ", ("  ".join(parts), "dim"))


def children(regions: list[Region]) -> dict[tuple, list[Region]]:
    """Parent path → its regions; a region whose parent is not listed hangs under its
    nearest listed ancestor (the report lists regions that launched device work)."""
    paths = {tuple(g.path) for g in regions}
    out: dict[tuple, list[Region]] = {}
    for g in regions:
        up = tuple(g.path[:-1])
        while up and up not in paths:
            up = up[:-1]
        out.setdefault(up, []).append(g)
    return out


class RegionsScreen(TkScreen):
    DEFAULT_CSS = """
    #regions-note { height: auto; padding: 0 1; color: $text-muted; }
    #regions-tree { height: 1fr; }
    #regions-ranks { height: auto; max-height: 3; padding: 0 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sort", "sort"),
        Binding("t", "timeline", "timeline"),
        Binding("o", "ops", "ops"),
    ]

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self.sort = SORTS[0]

    def compose(self) -> ComposeResult:
        yield from self.compose_chrome()
        yield Static(id="regions-note", markup=False)
        yield Tree("regions", id="regions-tree")
        yield Static(id="regions-ranks", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "regions"
        self._fill()
        self.query_one(Tree).focus()

    def regions(self) -> list[Region]:
        rep = self.session.report
        return list(rep.regions) if rep is not None and rep.regions else []

    def _fill(self) -> None:
        tree: Tree = self.query_one(Tree)
        tree.clear()
        tree.show_root = False
        regions = self.regions()
        kids = children(regions)

        def add(node, up: tuple, depth: int) -> None:
            rows = sorted(kids.get(up, []), key=lambda g: -sort_value(g, self.sort))
            for g in rows:
                path = tuple(g.path)
                if path in kids:
                    child = node.add(label(g), data=g, expand=depth < 2)
                    add(child, path, depth + 1)
                else:
                    node.add_leaf(label(g), data=g)

        add(tree.root, (), 0)
        tree.root.expand()
        if tree.root.children:  # the heaviest region highlighted, its ranks shown
            tree.move_cursor(tree.root.children[0])
        note = (
            f"sorted by {self.sort} · s sorts · Enter/Space expand or collapse · t its "
            "first run on the timeline · o its ops"
            if regions
            else "no regions: record_function ranges or with_modules=True name the model's"
            " parts (docs/regions.md)"
        )
        self.query_one("#regions-note", Static).update(note)

    def action_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self._fill()

    def _region(self) -> Region | None:
        node = self.query_one(Tree).cursor_node
        return node.data if node is not None and isinstance(node.data, Region) else None

    def action_timeline(self) -> None:
        """The timeline at the region's first run in the analysed steps, on the rank that
        spends the most device time in it, its name highlighted."""
        g = self._region()
        if g is None:
            return
        t = self.session.region_target(g)
        if t is None:
            self.post_message(ShowError(f"{' / '.join(g.path)} does not run in the "
                                        "analysed steps", "regions"))  # fmt: skip
            return
        target = Target(
            "timeline", rank=t["rank"], step=t["step"], at_ns=t["at_ns"], highlight=g.path[-1]
        )
        self.post_message(JumpTo(target))

    def action_ops(self) -> None:
        """The ops screen, its cursor on the first of its rows (in its order) that ran
        inside the region."""
        g = self._region()
        if g is not None:
            self.post_message(JumpTo(Target("ops", names=tuple(self.session.region_ops(g)))))

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        self.query_one("#regions-ranks", Static).update(rank_text(event.node.data))


def rank_text(g: Any) -> str:
    """The highlighted region's device time per rank, lowest to highest."""
    if not isinstance(g, Region):
        return ""
    by = g.device_ms_by_rank
    head = " / ".join(g.path)
    if not by:
        return f"{head}: {units.fmt(g.cpu_ms_per_step, 'ms')} CPU per step"
    cells = sorted(by.items(), key=lambda kv: (kv[1], int(kv[0])))
    return f"{head}\n" + "  ".join(f"r{r} {units.fmt(v, 'ms', bare=True)}" for r, v in cells)
