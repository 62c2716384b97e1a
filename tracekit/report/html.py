"""The report as one self-contained HTML page (`analyze --format html`): the four levels
with their verdicts, measured beside predicted; the charts; the findings with their
evidence, remedy and a link to their place in the Perfetto export.

Drawn from the typed report only (labels and units from `tracekit.model.figures`, values
written by `tracekit.report.units`); it computes no figure. The charts are Vega-Lite
specs drawn by vega-embed, whose JavaScript comes from `vl-convert-python` (bundled
once per version into the user cache) and is inlined with the styles: the page makes no
request at all, and its Content-Security-Policy forbids any (benchmarks/html_plotting.py
measured the choice; DESIGN.md says why).

Every string from a trace (kernel, op, collective names, paths, notes) is escaped: in
the page as HTML text (`esc`); in a chart as JSON data, which Vega draws as SVG text and
whose tooltips escape HTML.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from tracekit.model import figures as F
from tracekit.report import units
from tracekit.report.charts import chart_breakdown, charts
from tracekit.report.render import header, health_lines, healthy_text, level_rows
from tracekit.report.schema import Report
from tracekit.report.vega import Chart, vega_bundle

LEVELS = ("memory", "compute", "communication", "scaling")
CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
    "style-src 'unsafe-inline'; img-src data:; font-src data:"
)


def esc(value: Any) -> str:
    """Text for HTML (element content or a quoted attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def _json_for_script(obj: Any) -> str:
    """JSON safe inside <script>: no `</script>`, `<!--`, or line separators survive."""
    text = json.dumps(obj, allow_nan=False, default=str)
    for ch, rep in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, rep)
    return text


@dataclass(frozen=True)
class Link:
    """A finding's place in the Perfetto export: the URL and what it points at."""

    url: str
    what: str


# ---------------------------------------------------------------- the page


def _table(headers: Iterable[str], rows: Iterable[Iterable[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _badge(verdict: str) -> str:
    v = verdict if verdict in ("ok", "info", "warning", "critical", "unknown") else "other"
    return f"<span class='badge {v}'>{esc(verdict)}</span>"


def _levels_html(report: Report) -> str:
    rows = level_rows(report)
    cards = []
    for name in LEVELS:
        lv = report.level(name)
        if lv is None:
            continue
        mine, on = [], False
        for level, fig, m, p, _v in rows:
            if level:
                on = level == name
            if on:  # a part keeps its indent (the exposed communication's two groups)
                depth = (len(fig) - len(fig.lstrip())) // 2
                mine.append(("\u2003" * depth + fig.strip(), m, p))
        why = f"<p class='why'>unknown: {esc(lv.verdict_reason)}</p>" if lv.verdict_reason else ""
        notes = "".join(f"<li>{esc(n)}</li>" for n in lv.notes)
        cards.append(
            f"<section class='level' id='level-{name}'><h3>{esc(name)} {_badge(lv.verdict)}</h3>"
            + why
            + _table(("figure", "measured", "predicted"), mine, "figs")
            + (f"<ul class='notes'>{notes}</ul>" if notes else "")
            + "</section>"
        )
    return "<div class='levels'>" + "".join(cards) + "</div>"


def _figures(v: Any) -> str:
    """A finding's measured or predicted: a mapping of figures in words and units."""
    if isinstance(v, dict):
        return "; ".join(
            f"{F.label(k)} {units.fmt(x, F.unit(k)) if F.get(k) else _value(x)}"
            for k, x in v.items()
            if not isinstance(x, dict | list)
        )
    return _value(v)


def _value(v: Any) -> str:
    if isinstance(v, float):
        return units.sig(v)
    if isinstance(v, list):
        return ", ".join(_value(x) for x in v)
    return "" if v is None else str(v)


def _word(key: str) -> str:
    """A column or row name: the figure's label where the key is a figure."""
    return F.label(key) if F.get(key) else key.replace("_", " ")


def _cell(key: str, value: Any) -> str:
    """A value in its figure's unit where the key is a figure (bare: the header names it)."""
    fig = F.get(key)
    if fig and fig.unit not in ("map", "text") and isinstance(value, int | float):
        return units.fmt(value, fig.unit)
    return _value(value)


def _details_html(details: dict[str, Any]) -> str:
    """A finding's evidence as tables: a list of rows as a table, a mapping as
    key–value rows; never raw JSON."""
    parts, scalars = [], []
    for key, val in details.items():
        if isinstance(val, list) and val and all(isinstance(x, dict) for x in val):
            cols = list(
                dict.fromkeys(k for x in val for k in x if not isinstance(x[k], dict | list))
            )
            parts.append(
                f"<div class='ev'><b>{esc(_word(key))}</b>"
                + _table(
                    [_word(c) for c in cols], ([_cell(c, x.get(c)) for c in cols] for x in val[:12])
                )
                + "</div>"
            )
        elif isinstance(val, dict):
            flat = [
                (_word(k), _cell(k, v)) for k, v in val.items() if not isinstance(v, dict | list)
            ]
            flat += [
                (f"{_word(k)}: {_word(k2)}", _cell(k2, v2))
                for k, v in val.items()
                if isinstance(v, dict)
                for k2, v2 in v.items()
                if not isinstance(v2, dict | list)
            ]
            parts.append(
                f"<div class='ev'><b>{esc(_word(key))}</b>" + _table(("", ""), flat) + "</div>"
            )
        else:
            scalars.append((_word(key), _cell(key, val)))
    if scalars:
        parts.insert(0, "<div class='ev'>" + _table(("", ""), scalars) + "</div>")
    return "".join(parts)


def _findings_html(report: Report, links: list[Link | None] | None, how: str) -> str:
    if not report.findings:
        verdicts = {lv.level: lv.verdict for lv in report.levels or []}
        return f"<p>None — {esc(healthy_text(verdicts))}.</p>"
    out = []
    for i, f in enumerate(report.findings):
        link = links[i] if links and i < len(links) else None
        impact = f" · {units.fmt(f.impact_ms, 'ms')} per step" if f.impact_ms else ""
        meas = f"measured {esc(_figures(f.measured))}" if f.measured is not None else ""
        pred = f" · predicted {esc(_figures(f.predicted))}" if f.predicted is not None else ""
        go = (
            f"<p class='perfetto'><a href='{esc(link.url)}' target='_blank' "
            f"rel='noopener noreferrer'>open in Perfetto</a> at {esc(link.what)}</p>"
            if link
            else f"<p class='perfetto'>{esc(how)}</p>"
        )
        out.append(
            f"<article class='finding {esc(f.severity)}' id='finding-{esc(f.code)}-{i}'>"
            f"<h3>{_badge(f.severity)} <code>{esc(f.code)}</code> {esc(f.kind)}{esc(impact)}</h3>"
            f"<p class='title'>{esc(f.title)}</p>"
            f"<p class='meta'>level {esc(f.level)} · ranks {esc(units.ranks(f.ranks))}"
            f"{' · ' if meas else ''}{meas}{pred}</p>"
            f"<p class='remedy'><b>Remedy:</b> {esc(f.remedy)}</p>"
            f"{_remedies_html(f.remedies)}"
            f"{go}<details open><summary>evidence</summary>{_details_html(f.details)}</details>"
            "</article>"
        )
    return "".join(out)


def _remedies_html(remedies: list) -> str:
    """The finding's candidate changes replayed, best first."""
    if not remedies:
        return ""
    rows = [
        (r.change, units.fmt(r.predicted_step_ms, "ms"), units.fmt(r.saved_ms, "ms"))
        for r in remedies
    ]
    return (
        "<div class='ev'><b>replayed</b>"
        + _table(("change", "predicted step", "saved"), rows)
        + "</div>"
    )


def _uncounted_html(report: Report) -> str:
    frac = report.summary.uncounted_compute_fraction
    tops = [msgspec.to_builtins(t) for t in report.top_uncounted_ops or []]
    if frac is None and not tops:
        return ""
    out = "<section id='uncounted'><h2>Compute tracekit cannot count</h2>"
    if frac is not None:
        label = F.UNCOUNTED_COMPUTE_FRACTION.label
        out += f"<p>{esc(label)}: <b>{esc(units.fmt(frac, 'fraction'))}</b></p>"
    if tops:  # every column the rows have, in their order
        cols = list(dict.fromkeys(k for t in tops for k in t))
        out += _table(cols, ([_value(t.get(c)) for c in cols] for t in tops[:15]))
    return out + "</section>"


def _chart_divs(items: list[Chart]) -> str:
    return "".join(
        f"<figure class='chart' data-chart='{esc(c.key)}'><figcaption>{esc(c.title)}"
        f"</figcaption><div class='vega' id='chart-{esc(c.key)}'></div>"
        f"<p class='caption'>{esc(c.note)}</p></figure>"
        for c in items
    )


def _script(items: list[Chart]) -> str:
    specs = _json_for_script({f"chart-{c.key}": c.spec for c in items})
    return (
        "<script type='module'>\n" + vega_bundle() + "\n;\n"
        f"const specs = {specs};\n"
        "const opts = {actions: false, renderer: 'svg'};\n"
        "Promise.all(Object.entries(specs).map(([id, spec]) =>\n"
        "  vegaEmbed('#' + id, spec, opts).catch(e => {\n"
        "    document.getElementById(id).textContent = 'chart failed: ' + e; throw e; })))\n"
        "  .then(() => document.body.dataset.charts = 'drawn');\n"
        "</script>"
    )


STYLE = "".join(
    (
        "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;"
        "color:#222;background:#fafafa}",
        "main{max-width:1200px;margin:0 auto;padding:16px 24px}",
        "h1{font-size:20px;margin:8px 0}",
        "h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}",
        "h3{font-size:15px;margin:4px 0 6px}",
        ".sub{color:#555;margin:2px 0}",
        ".warn{color:#a15c00}",
        ".levels{display:grid;grid-template-columns:repeat(auto-fit,minmax(270px,1fr));gap:12px}",
        ".level,.finding,.chart{background:#fff;border:1px solid #e2e2e2;border-radius:6px;"
        "padding:10px 12px;margin:0}",
        "table{border-collapse:collapse;font-size:13px;width:100%}",
        "th,td{text-align:left;padding:2px 6px;border-bottom:1px solid #f0f0f0;vertical-align:top}",
        "td:not(:first-child){font-variant-numeric:tabular-nums}",
        ".badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;"
        "color:#fff;background:#888}",
        ".badge.ok{background:#2e7d32}",
        ".badge.info{background:#1565c0}",
        ".badge.warning{background:#ef6c00}",
        ".badge.critical{background:#c62828}",
        ".badge.unknown{background:#757575}",
        ".charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:12px}",
        ".chart figcaption{font-weight:600;margin-bottom:4px}",
        ".vega{width:100%}",
        ".caption{color:#666;font-size:12px;margin:4px 0 0}",
        ".finding{margin:10px 0}",
        ".finding.critical{border-left:4px solid #c62828}",
        ".finding.warning{border-left:4px solid #ef6c00}",
        ".finding.info{border-left:4px solid #1565c0}",
        ".title{font-weight:600}",
        ".meta{color:#555;margin:2px 0}",
        ".ev{margin:6px 0;overflow-x:auto}",
        ".notes{color:#555;font-size:12px;padding-left:18px}",
        "code{font-size:13px}",
    )
)


def page(title: str, body: str, items: list[Chart]) -> str:
    """The whole document: CSP, styles and scripts inlined."""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body><main>"
        + body
        + "</main>"
        + (_script(items) if items else "")
        + "</body></html>\n"
    )


def to_html(
    report: Report,
    links: list[Link | None] | None = None,
    how: str = "",
    memory_timeline: list[dict] | None = None,
) -> str:
    """The report as a self-contained page; `links`: each finding's place in the Perfetto
    export (`tracekit.report.export`), `how`: the line that says how to get one;
    `memory_timeline`: the allocator's series (`export.memory_timeline`), drawn beside it."""
    head = header(report)
    body = f"<h1>tracekit · {esc(head[0])}</h1>" + "".join(
        f"<p class='sub'>{esc(h)}</p>" for h in head[1:]
    )
    body += "".join(f"<p class='warn'>{esc(w)}</p>" for w in health_lines(report))
    items: list[Chart] = []
    if report.full:
        body += "<h2>The four levels</h2>" + _levels_html(report)
        items = charts(report, memory_timeline)
        body += "<h2>Charts</h2><div class='charts'>" + _chart_divs(items) + "</div>"
        body += _uncounted_html(report)
        body += f"<h2>Findings</h2>{_findings_html(report, links, how)}"
        if report.collectives:
            from tracekit.report.render import COLLECTIVE_COLUMNS

            body += "<h2>Collectives</h2>" + _table(
                [t for _, t, _ in COLLECTIVE_COLUMNS],
                (
                    [fmt(getattr(c, k)) for k, _, fmt in COLLECTIVE_COLUMNS]
                    for c in report.collectives[:20]
                ),
            )
        if report.top_kernels:
            body += "<h2>Top kernels</h2>" + _table(
                ("kernel", "per step", "ms per step"),
                (
                    [
                        k.name,
                        units.fmt(k.count_per_step, "count"),
                        units.fmt(k.time_ms_per_step, "ms"),
                    ]
                    for k in report.top_kernels[:15]
                ),
            )
    else:
        items = [c for c in [chart_breakdown(report)] if c]
        body += "<h2>Charts</h2><div class='charts'>" + _chart_divs(items) + "</div>"
    return page(f"tracekit · {report.run.path}", body, items)
