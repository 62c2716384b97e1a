"""The comparison as one self-contained HTML page (`compare --format html`): the verdict,
each metric base beside new with its change and evidence, and two charts — the change of
every run metric (coloured by verdict) and each side's step time per step. Computes no
figure: the verdicts and changes are the comparison's, the series the reports' samples."""

from __future__ import annotations

from tracekit.gate import read as R
from tracekit.gate.render import _change, _shown, headline
from tracekit.gate.verdict import Comparison
from tracekit.report import units
from tracekit.report.html import _table, esc, page
from tracekit.report.vega import Chart, _n, _o, _q, _spec

VERDICT_COLOR = {
    "regressed": "#c62828",
    "warning": "#f9a825",
    "inconclusive": "#ef6c00",
    "improved": "#2e7d32",
    "unchanged": "#888888",
    "not compared": "#cccccc",
}


def _change_chart(cmp: Comparison) -> Chart | None:
    rows = [
        {
            "metric": v.label or v.metric,
            "change": v.change,
            "verdict": v.verdict,
            "in": {"pct": "relative", "pt": "points", "ms": "ms"}.get(v.threshold.kind, ""),
        }
        for v in cmp.verdicts
        if not v.drill_down and v.change is not None
    ]
    if not rows:
        return None
    dom = [d for d in VERDICT_COLOR if any(r["verdict"] == d for r in rows)]
    return Chart(
        "changes",
        "Change of each run metric",
        _spec(
            rows,
            mark={"type": "bar", "tooltip": True},
            encoding={
                "y": _n("metric", None, sort=None),
                "x": _q("change", "change (in the threshold's unit)"),
                "color": _n(
                    "verdict", "", scale={"domain": dom, "range": [VERDICT_COLOR[d] for d in dom]}
                ),
            },
        ),
        "Relative changes are fractions (0.05 = 5%), points are fractions of the window, "
        "ms are ms per step; the tooltip says which.",
    )


def _steps_chart(cmp: Comparison) -> Chart | None:
    rows = []
    for side, name in ((cmp.base, "base"), (cmp.new, "new")):
        for s in R.sample_ranks(side.report):
            for i, ms in enumerate(s.get(R.STEP_MS) or []):
                if isinstance(ms, int | float):
                    rows.append(
                        {"side": name, "rank": f"{name} rank {s['rank']}", "i": i + 1, "ms": ms}
                    )
    if not rows:
        return None
    return Chart(
        "compare_steps",
        "Step time per step, base and new",
        _spec(
            rows,
            mark={"type": "line", "point": True, "tooltip": True},
            encoding={
                "x": _o("i", "sampled step (in order)"),
                "y": _q("ms", "step time (ms)"),
                "color": _n("side", ""),
                "detail": _n("rank", ""),
            },
        ),
        "Each line one rank; the gate tests these samples, not only their means.",
    )


def to_html(cmp: Comparison) -> str:
    b, n = cmp.base.describe(), cmp.new.describe()
    body = f"<h1>tracekit compare · {esc(headline(cmp))}</h1>"
    for side, d in (("base", b), ("new", n)):
        what = f"{side} {d['path']} ({d['kind']}, {d['steps'] or 'no'} steps sampled)"
        body += f"<p class='sub'>{esc(what)}</p>"
    items = [c for c in (_change_chart(cmp), _steps_chart(cmp)) if c]
    body += (
        "<h2>Charts</h2><div class='charts'>"
        + "".join(
            f"<figure class='chart' data-chart='{esc(c.key)}'><figcaption>{esc(c.title)}"
            f"</figcaption><div class='vega' id='chart-{esc(c.key)}'></div>"
            f"<p class='caption'>{esc(c.note)}</p></figure>"
            for c in items
        )
        + "</div>"
    )
    rows = [
        (
            v.verdict,
            v.label or v.metric,
            units.fmt(v.base, v.unit),
            units.fmt(v.new, v.unit),
            _change(v),
            v.evidence or "",
            v.cause or "",
        )
        for v in _shown(cmp, False)
    ]
    body += "<h2>Metrics</h2>" + _table(
        ("verdict", "metric", "base", "new", "change", "evidence", "cause"), rows
    )
    if cmp.notes:
        body += "<h2>Notes</h2><ul>" + "".join(f"<li>{esc(x)}</li>" for x in cmp.notes) + "</ul>"
    return page("tracekit compare", body, items)
