"""A finding's page: what it says, its evidence as tables — where (ranks, steps,
collectives, ops), measured beside predicted, and each table of its `details` — its
remedy, its candidate changes replayed (`remedies`) and the rule's `explain` text.
Enter on a row jumps to it: a rank to its timeline (at the finding's collective when it
names one), a collective to the collectives screen, an op to the ops screen; `t`, `c`,
`o`, `r` jump to the evidence's first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Label, Static

from tracekit.report.schema import FindingRow
from tui import fmt
from tui.evidence import evidence
from tui.messages import JumpTo, Target
from tui.screens.common import TkScreen
from tui.widgets.levelpanel import VERDICT_STYLE

if TYPE_CHECKING:
    from tui.session import Session

UNIT_SUFFIXES = ("_ms", "_ns", "_us", "_bytes", "_fraction", "_GBps")

# a jump: (screen, what) — ("timeline", rank), ("collectives", name), ("ops", name),
# ("ranks", rank)
Jump = tuple[str, Any]


def words(key: str) -> str:
    """A details key in words: the figure's label where it is one, else the key without
    its unit suffix (the value carries the unit)."""
    fig = fmt.figure((key,))
    if fig is not None:
        return fig.label
    for suffix in UNIT_SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            key = key[: -len(suffix)]
            break
    return key.replace("_", " ")


def value_text(key: str, v: Any, parents: tuple[str, ...] = ()) -> str:
    """A value in the unit its key names, else the unit its enclosing keys name
    (`stage_ms: {"0": 18.3}` is in ms)."""
    return fmt.fmt(v, fmt.unit_of((*parents, key)))


def head_text(f: FindingRow) -> Text:
    sev = f.severity
    text = Text.assemble(
        (sev.upper(), VERDICT_STYLE.get(sev, "")),
        f"  {f.code}  {f.kind}  ({f.level})\n\n",
        (f.title, "bold"),
        f"\n\nimpact {fmt.fmt(f.impact_ms, 'ms')} per step",
    )
    return text


def figure_rows(f: FindingRow) -> list[tuple[str, str, str, str]]:
    """The finding's measured and predicted figures (free-form in the schema: a value or
    a mapping), paired by key: (figure, measured, predicted, gap)."""
    m, p = f.measured, f.predicted
    if not isinstance(m, dict) or not isinstance(p, dict):
        return [("value", fmt.fmt(m), fmt.fmt(p), "")] if m is not None or p is not None else []
    mleaves, pleaves = dict(fmt.leaves(m)), dict(fmt.leaves(p))
    rows = []
    for path in [*mleaves, *(k for k in pleaves if k not in mleaves)]:
        unit = fmt.unit_of(path)
        mv, pv = mleaves.get(path), pleaves.get(path)
        rows.append(
            (
                fmt.label(path),
                fmt.fmt(mv, unit) if path in mleaves else "",
                fmt.fmt(pv, unit) if path in pleaves else "",
                fmt.gap(mv, pv, unit),
            )
        )
    return rows


def detail_tables(
    details: Any, title: str = "details", parents: tuple[str, ...] = ()
) -> list[dict]:
    """The finding's `details` as tables: {title, key, columns [(key, label)], rows
    [[text]], raw [row dicts]}. A list of records is a table with a column per key; a
    mapping's scalars are a two-column table (nested mappings get their own tables)."""
    out: list[dict] = []
    if isinstance(details, list):
        recs = [r for r in details if isinstance(r, dict)]
        if recs:
            keys: list[str] = []
            for r in recs:
                keys += [k for k, v in r.items() if k not in keys and not isinstance(v, dict)]
            out.append(
                {
                    "title": title,
                    "columns": [(k, words(k)) for k in keys],
                    "rows": [[value_text(k, r.get(k), parents) for k in keys] for r in recs],
                    "raw": recs,
                }
            )
        elif details:
            table = {"title": title, "columns": [("value", "value")], "raw": [{}]}
            out.append({**table, "rows": [[fmt.fmt(details)]]})
        return out
    if not isinstance(details, dict):
        return out
    scalars = {k: v for k, v in details.items() if not isinstance(v, dict | list)}
    short_lists = {
        k: v
        for k, v in details.items()
        if isinstance(v, list) and not any(isinstance(x, dict | list) for x in v)
    }
    if scalars or short_lists:
        plain = {**scalars, **short_lists}
        out.append(
            {
                "title": title,
                "columns": [("key", "what"), ("value", "value")],
                "rows": [[words(k), value_text(k, v, parents)] for k, v in plain.items()],
                "raw": [{k: v} for k, v in plain.items()],
            }
        )
    for k, v in details.items():
        if k in scalars or k in short_lists:
            continue
        sub = words(k) if title == "details" else f"{title} · {words(k)}"
        out += detail_tables(v, sub, (*parents, k))
    return out


def row_jump(raw: dict, title: str, ev: dict) -> Jump | None:
    """Where Enter on a details row goes."""
    if isinstance(raw.get("rank"), int):
        return ("timeline", raw["rank"])
    name = raw.get("name") or raw.get("op")
    if isinstance(name, str):
        t = title.lower()
        if "op" in t.split() or "ops" in t or name in ev["ops"]:
            return ("ops", name)
        if "coll" in t or "bytes" in raw or "group_size" in raw or name in ev["collectives"]:
            return ("collectives", name)
    return None


def where_rows(ev: dict) -> list[tuple[str, str, Jump | None]]:
    rows: list[tuple[str, str, Jump | None]] = [
        ("rank", str(r), ("timeline", r)) for r in ev["ranks"]
    ]
    if ev["steps"]:
        rows.append(("steps", fmt.fmt(ev["steps"], "ranks"), None))
    rows += [("collective", c, ("collectives", c)) for c in ev["collectives"]]
    rows += [("op", o, ("ops", o)) for o in ev["ops"]]
    return rows


JUMP_WORDS = {"timeline": "→ timeline", "collectives": "→ collectives", "ops": "→ ops"}


class FindingScreen(TkScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("t", "timeline", "timeline"),
        Binding("c", "collectives", "collectives"),
        Binding("o", "ops", "ops"),
        Binding("r", "ranks", "ranks"),
    ]

    def __init__(self, session: Session, finding: FindingRow) -> None:
        super().__init__(session)
        self.finding = finding
        self.evidence = evidence(finding)
        self.jumps: dict[str, list[Jump | None]] = {}  # table id → each row's jump
        self.tables: list[dict] = detail_tables(finding.details)

    def compose(self) -> ComposeResult:
        from diagnosers.rules import lookup

        f = self.finding
        yield from self.compose_chrome()
        with VerticalScroll(id="finding-body"):
            yield Static(head_text(f), id="finding-head")
            yield Label("where — Enter jumps", classes="ev-title")
            yield DataTable(id="ev-where", cursor_type="row", classes="ev-table")
            if figure_rows(f):
                yield Label("measured beside predicted", classes="ev-title")
                yield DataTable(id="ev-figures", cursor_type="row", classes="ev-table")
            for i, t in enumerate(self.tables):
                yield Label(t["title"], classes="ev-title")
                yield DataTable(id=f"ev-details-{i}", cursor_type="row", classes="ev-table")
            if f.remedy:
                yield Label("remedy", classes="ev-title")
                yield Static(f.remedy, markup=False, classes="ev-text", id="finding-remedy")
            if f.remedies:
                yield Label("remedies replayed (the step model), best first", classes="ev-title")
                yield DataTable(id="ev-remedies", cursor_type="row", classes="ev-table")
            kind = lookup(f.kind)
            if kind is not None:
                yield Label("explain", classes="ev-title")
                yield Static(kind.explain(), markup=False, classes="ev-text", id="finding-explain")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"finding {self.finding.code}"
        where = self.query_one("#ev-where", DataTable)
        where.add_columns("what", "which", "")
        rows = where_rows(self.evidence)
        for what, which, jump in rows:
            where.add_row(what, which, Text(JUMP_WORDS.get(jump[0], "") if jump else "", "dim"))
        self.jumps["ev-where"] = [j for _, _, j in rows]
        if figure_rows(self.finding):
            figs = self.query_one("#ev-figures", DataTable)
            figs.add_columns("figure", "measured", "predicted", "gap")
            for label, m, p, g in figure_rows(self.finding):
                cells = [Text(x, justify="right") for x in (m, p, g)]
                figs.add_row(label, *cells)
        for i, t in enumerate(self.tables):
            dt = self.query_one(f"#ev-details-{i}", DataTable)
            jumps = [row_jump(raw, t["title"], self.evidence) for raw in t["raw"]]
            dt.add_columns(*[label for _, label in t["columns"]], *([""] if any(jumps) else []))
            for cells, jump in zip(t["rows"], jumps, strict=True):
                extra = [Text(JUMP_WORDS.get(jump[0], ""), "dim") if jump else ""]
                dt.add_row(
                    *[Text(c, justify="left" if j == 0 else "right") for j, c in enumerate(cells)],
                    *(extra if any(jumps) else []),
                )
            self.jumps[dt.id or ""] = jumps
        if self.finding.remedies:
            rem = self.query_one("#ev-remedies", DataTable)
            rem.add_columns("change", "predicted step", "saved")
            for r in self.finding.remedies:
                rem.add_row(
                    r.change,
                    Text(fmt.fmt(r.predicted_step_ms, "ms"), justify="right"),
                    Text(fmt.fmt(r.saved_ms, "ms"), justify="right"),
                )
        where.focus()

    def text(self) -> str:
        """Everything the page shows, as plain text (for the tests)."""
        parts = [str(self.query_one("#finding-head", Static).render())]
        for dt in self.query(DataTable):
            parts += [" | ".join(str(c) for c in dt.get_row_at(i)) for i in range(dt.row_count)]
        for st in self.query(".ev-text"):
            parts.append(str(st.render()))  # type: ignore[attr-defined]
        return "\n".join(parts)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        jumps = self.jumps.get(event.data_table.id or "", [])
        if 0 <= event.cursor_row < len(jumps) and jumps[event.cursor_row] is not None:
            self.go(*jumps[event.cursor_row])  # type: ignore[misc]

    def go(self, screen: str, what: Any) -> None:
        ev = self.evidence
        if screen == "timeline":
            step = ev["steps"][0] if ev["steps"] else None
            coll = (ev["collectives"] or [None])[0]
            self.jump(Target("timeline", rank=what, step=step, collective=coll))
        elif screen in ("collectives", "ops"):
            self.jump(Target(screen, names=(what,)))
        elif screen == "ranks":
            self.jump(Target("ranks", ranks=(what,)))

    def jump(self, target: Target) -> None:
        self.post_message(JumpTo(target))

    def action_timeline(self) -> None:
        ev = self.evidence
        self.go("timeline", ev["ranks"][0] if ev["ranks"] else None)

    def action_collectives(self) -> None:
        self.jump(Target("collectives", names=tuple(self.evidence["collectives"])))

    def action_ops(self) -> None:
        self.jump(Target("ops", names=tuple(self.evidence["ops"])))

    def action_ranks(self) -> None:
        self.jump(Target("ranks", ranks=tuple(self.evidence["ranks"])))
