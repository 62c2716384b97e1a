"""The comparison as text, JSON, Markdown (a table for `$GITHUB_STEP_SUMMARY`) or JUnit
XML (one test case per gated metric; a regression is a failure carrying its message,
an inconclusive verdict a skip — or a failure with `--fail-on inconclusive`; a warning
passes, marked by a `verdict=warning` property and its message on system-err: JUnit has
no warning element)."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

from tracekit.gate.verdict import Comparison, Verdict
from tracekit.report import units

MARK = {
    "regressed": "✗",
    "warning": "!",
    "inconclusive": "?",
    "improved": "↑",
    "unchanged": "·",
    "not compared": " ",
}
# the rows a text or Markdown report shows: every run metric, and of the families
# those that moved
_FAMILY_SHOWN = ("regressed", "warning", "inconclusive", "improved")


def _val(v: float | None, unit: str) -> str:
    return units.fmt(v, unit)


def _change(v: Verdict) -> str:
    if v.base is None or v.new is None:
        return "—"
    th = v.threshold.kind
    rel = (v.new - v.base) / abs(v.base) if v.base else None
    if th == "pt":
        return f"{(v.new - v.base) * 100:+.1f}pt"
    if th == "ms":
        return f"{v.new - v.base:+.2f} ms"
    return "—" if rel is None else f"{rel * 100:+.1f}%"


def _shown(cmp: Comparison, everything: bool) -> list[Verdict]:
    if everything:
        return list(cmp.verdicts)
    return [
        v
        for v in cmp.verdicts
        if (not v.drill_down and v.verdict != "not compared") or v.verdict in _FAMILY_SHOWN
    ]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _details(cmp: Comparison) -> list[Verdict]:
    """The verdicts worth a line of evidence: every run metric that moved, and a
    rank's step time only when it moved unlike the run's."""
    step = next((v for v in cmp.verdicts if v.metric == "step_time"), None)
    return [
        v
        for v in cmp.verdicts
        if v.verdict in _FAMILY_SHOWN
        and not (v.family == "rank_step_time" and step and step.verdict == v.verdict)
    ]


def headline(cmp: Comparison) -> str:
    c = cmp.counts()
    failed = cmp.failed
    word = "FAIL" if failed else "PASS"
    parts = [
        f"{c[k]} {k}" + ("s" if k == "warning" and c[k] > 1 else "")
        for k in ("regressed", "warning", "inconclusive", "improved", "unchanged")
        if c[k]
    ]
    return f"{word}: " + ", ".join(parts) + f" (of {len(cmp.verdicts)} metrics)"


def to_text(cmp: Comparison, everything: bool = False) -> str:
    b, n = cmp.base.describe(), cmp.new.describe()
    lines = [
        f"base {b['path']} ({b['kind']}, {b['steps'] or 'no'} steps sampled)",
        f"new  {n['path']} ({n['kind']}, {n['steps'] or 'no'} steps sampled)",
        "",
    ]
    rows = _shown(cmp, everything)
    width = min(max([len(v.metric) for v in rows] + [6]), 48)
    head = f"  {'metric':{width}}  {'base':>12}  {'new':>12}  {'change':>8}  {'limit':>6}  verdict"
    lines.append(head)
    for v in rows:
        lines.append(
            f"{MARK[v.verdict]} {_cut(v.metric, width):{width}}  {_val(v.base, v.unit):>12}  "
            f"{_val(v.new, v.unit):>12}  {_change(v):>8}  {v.threshold!s:>6}  "
            f"{v.verdict}" + (f" ({v.confidence})" if v.confidence else "")
        )
    hidden = len(cmp.verdicts) - len(rows)
    if hidden:
        lines.append(
            f"  … {hidden} per-collective/kernel/rank/region metrics unchanged (--all shows them)"
        )
    lines.append("")
    said = set()
    for v in _details(cmp):
        lines.append(f"{v.verdict.upper()} {v.metric}: {v.evidence}")
        if v.cause and v.cause not in said:
            lines.append(f"    cause: {v.cause}")
            said.add(v.cause)
    for note in cmp.notes:
        lines.append(f"note: {note}")
    lines += ["", headline(cmp)]
    return "\n".join(lines) + "\n"


def to_json(cmp: Comparison, everything: bool = True) -> str:
    return json.dumps(cmp.to_dict(), indent=1, default=str) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(cmp: Comparison, everything: bool = False) -> str:
    icon = {
        "regressed": "❌",
        "warning": "⚠️",
        "inconclusive": "❔",
        "improved": "✅",
        "unchanged": "✔️",
    }
    b, n = cmp.base.describe(), cmp.new.describe()
    lines = [
        f"### tracekit compare: {headline(cmp)}",
        "",
        f"base `{_md(b['path'])}` ({b['kind']}, {b['steps'] or 'no'} steps) · "
        f"new `{_md(n['path'])}` ({n['kind']}, {n['steps'] or 'no'} steps)",
        "",
        "| | metric | base | new | change | threshold | verdict | confidence |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for v in _shown(cmp, everything):
        lines.append(
            f"| {icon.get(v.verdict, '')} | `{_md(v.metric)}` | {_val(v.base, v.unit)} | "
            f"{_val(v.new, v.unit)} | {_change(v)} | {v.threshold} | {v.verdict} | "
            f"{v.confidence or '—'} |"
        )
    details = _details(cmp)
    if details:
        lines += ["", "#### Why", ""]
    for v in details:
        cause = f" — *cause:* {_md(v.cause)}" if v.cause else ""
        lines.append(f"- **{v.verdict}** `{_md(v.metric)}`: {_md(v.evidence)}{cause}")
    for note in cmp.notes:
        lines.append(f"- note: {_md(note)}")
    return "\n".join(lines) + "\n"


def to_junit(cmp: Comparison, everything: bool = True) -> str:
    """JUnit XML: one <testcase> per gated metric (classname tracekit.compare.<family>)."""
    cases = [v for v in cmp.verdicts if v.gated]
    fail_inconclusive = cmp.fail_on == "inconclusive"
    failures = sum(
        v.verdict == "regressed" or (fail_inconclusive and v.verdict == "inconclusive")
        for v in cases
    )
    skipped = sum(v.verdict == "inconclusive" and not fail_inconclusive for v in cases)
    warnings = sum(v.verdict == "warning" for v in cases)
    suites = ET.Element("testsuites", name="tracekit compare")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="tracekit.compare",
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time="0",
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("base", cmp.base.path),
        ("new", cmp.new.path),
        ("alpha", str(cmp.alpha)),
        ("fail_on", cmp.fail_on),
        ("warnings", str(warnings)),
    ):
        ET.SubElement(props, "property", name=name, value=value)
    for v in cases:
        tc = ET.SubElement(
            suite, "testcase", classname=f"tracekit.compare.{v.family}", name=v.metric, time="0"
        )
        msg = (
            f"{v.label}: {_val(v.base, v.unit)} → {_val(v.new, v.unit)} ({_change(v)}, "
            f"threshold {v.threshold}); {v.verdict}"
            + (f" ({v.confidence})" if v.confidence else "")
            + f": {v.evidence}"
        )
        if v.cause:
            msg += f"; cause: {v.cause}"
        if v.verdict == "regressed" or (fail_inconclusive and v.verdict == "inconclusive"):
            el = ET.SubElement(tc, "failure", message=msg, type=v.verdict)
            el.text = msg
        elif v.verdict == "inconclusive":
            ET.SubElement(tc, "skipped", message=msg)
        elif v.verdict == "warning":
            tp = ET.SubElement(tc, "properties")
            ET.SubElement(tp, "property", name="verdict", value="warning")
            err = ET.SubElement(tc, "system-err")
            err.text = f"warning: {msg}"
        else:
            out = ET.SubElement(tc, "system-out")
            out.text = msg
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


RENDERERS = {"text": to_text, "json": to_json, "markdown": to_markdown, "junit": to_junit}
