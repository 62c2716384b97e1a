"""The HTML report (`analyze --format html`, `compare --format html`): one self-contained
page drawn from the report, names from traces escaped, charts drawn in a real browser
with the network off.

The browser tests need Debian's `chromium` (tests/browser.py) and skip without it; the
rest check the page's text and its chart specs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from msgspec import convert
from msgspec.structs import replace

from tests import browser
from tests.helpers import invoke
from tests.synth import SCENARIOS, generate
from tracekit.cli import main
from tracekit.report import html as H
from tracekit.report.schema import StepModelBlock, UncountedOpRow, decode, to_dict

ROOT = Path(__file__).resolve().parents[2]
EVIL = "<img src=x onerror=\"document.body.dataset.pwned='yes'\">"
LEVELS = ("memory", "compute", "communication", "scaling")
needs_chromium = pytest.mark.skipif(browser.chromium() is None, reason="chromium not installed")

# a step model as the step-model issue's contract gives it (its own branch builds it)
STEP_MODEL = {
    "measured_step_ms": 20.5,
    "replayed_step_ms": 20.1,
    "replay_error": 0.02,
    "critical_path": {
        "by_kind": {"compute": 8.0, "communication": 9.5, "waiting": 1.0, "host": 0.5, "idle": 1.1},
        "by_rank": {"0": 6.0, "1": 5.0, "2": 4.5, "3": 5.0},
        "segments": [
            {"rank": 0, "kind": "compute", "name": "aten::mm", "start_ms": 0.0, "ms": 4.0},
            {"rank": 1, "kind": "communication", "name": EVIL, "start_ms": 4.0, "ms": 9.5},
            {"rank": 3, "kind": "compute", "name": "aten::mm", "start_ms": 13.5, "ms": 4.0},
        ],
    },
    "what_if": [
        {"finding": "TK-S401", "change": ["M = 16"], "predicted_step_ms": 12.0, "saved_ms": 8.5}
    ],
}


def _step_model() -> StepModelBlock:
    return convert(STEP_MODEL, StepModelBlock)


def _cli(*args) -> str:
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("pipe") / "run"
    generate(SCENARIOS["pipeline_bubble"][0], run)
    return run


@pytest.fixture(scope="module")
def pipeline_html(pipeline_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report.html"
    _cli("analyze", pipeline_run, "--format", "html", "-o", out)
    return out


def _report(run: Path):
    return decode(_cli("analyze", run, "--format", "json"))


def _evil_report(run: Path):
    """The run's report with a trace's strings replaced by markup."""
    rep = to_dict(_report(run))
    rep["run"]["path"] = EVIL
    rep["top_ops"][0]["name"] = EVIL
    for c in rep["collectives"]:
        c["name"] = EVIL
    rep["findings"][0]["title"] = EVIL
    rep["findings"][0]["details"]["evil"] = [{"name": EVIL, "ms": 1.0}]
    rep["levels"][0]["notes"].append(EVIL)
    return decode(json.dumps(rep))


# ---------------------------------------------------------------- the page's text


def test_page_is_self_contained(pipeline_html):
    text = pipeline_html.read_text()
    # no address the browser would fetch: no src/href to a host, no @import, no url()
    assert not re.search(r"""src\s*=\s*["']?(https?:)?//""", text)
    hrefs = re.findall(r"""href\s*=\s*["']([^"']*)""", text.split("<script", 1)[0])
    assert hrefs and all(h.startswith("https://ui.perfetto.dev/?") for h in hrefs)
    assert "@import" not in text and "url(" not in text.split("<script", 1)[0]
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    # the only outside address is the Perfetto link each finding carries (a click, no load)
    hosts = set(re.findall(r"https?://([a-z0-9.-]+)", text.split("<script", 1)[0]))
    assert hosts <= {"ui.perfetto.dev", "127.0.0.1"}


def test_page_names_the_levels_and_findings(pipeline_run, pipeline_html):
    rep = _report(pipeline_run)
    text = pipeline_html.read_text()
    for level in LEVELS:
        assert f"id='level-{level}'" in text
    assert rep.findings, "the pipeline scenario raises its bubble"
    for f in rep.findings:
        assert f.code in text
    # each finding links to its place in the export: ui.perfetto.dev with visStart/visEnd
    links = re.findall(r"href='(https://ui\.perfetto\.dev/\?[^']+)'", text)
    assert len(links) == len(rep.findings)
    for link in links:
        start = int(re.search(r"visStart=(\d+)", link).group(1))
        end = int(re.search(r"visEnd=(\d+)", link).group(1))
        assert 0 <= start < end


def test_charts_from_the_report(pipeline_run):
    report = _report(pipeline_run)
    rep = to_dict(report)  # the truths: the report's JSON values
    keys = [c.key for c in H.charts(report)]
    assert {"breakdown", "step_times", "exposed", "bubble", "mfu", "ops", "memory"} <= set(keys)
    # the bubble chart sets each stage's measured bubble beside the formula and the model
    bubble = next(c for c in H.charts(report) if c.key == "bubble")
    measured = bubble.spec["layer"][0]["data"]["values"]
    per_rank = next(lv for lv in rep["levels"] if lv["level"] == "scaling")["metrics"]
    assert [m["bubble"] for m in measured] == [
        p["bubble_fraction"] for p in per_rank["pipeline"]["per_rank"]
    ]
    rules = {r["what"]: r["bubble"] for r in bubble.spec["layer"][1]["data"]["values"]}
    assert rules["formula (P−1)/(M+P−1)"] == pytest.approx(3 / 5)  # P = 4, M = 2
    # the breakdown's four parts add up to each rank's window per step
    bd = next(c for c in H.charts(report) if c.key == "breakdown").spec["data"]["values"]
    for r in rep["ranks"]:
        parts = [x["ms"] for x in bd if x["rank"] == f"rank {r['rank']}"]
        assert sum(parts) == pytest.approx(r["window_ms"] / r["steps"], rel=1e-9)


def test_step_model_is_drawn_when_present(pipeline_run):
    report = _report(pipeline_run)
    bare = replace(report, step_model=msgspec.UNSET)
    assert not [c for c in H.charts(bare) if c.key.startswith("critical_path")]
    keys = [c.key for c in H.charts(replace(bare, step_model=_step_model()))]
    assert {"critical_path", "critical_path_timeline"} <= set(keys)
    # the run's own step model (the report has one now) is drawn too
    assert report.step_model.critical_path.segments
    assert {"critical_path", "critical_path_timeline"} <= {c.key for c in H.charts(report)}


def test_uncounted_compute_is_shown_when_present(pipeline_run):
    report = _report(pipeline_run)
    assert "uncounted_compute_fraction" not in H.to_html(report).split("<script")[0]
    report = replace(
        report,
        summary=replace(report.summary, uncounted_compute_fraction=0.125),
        top_uncounted_ops=[UncountedOpRow(name=EVIL, why="no_op", count=1, device_ms=3.0)],
    )
    page = H.to_html(report).split("<script")[0]
    assert "12.5%" in page and "&lt;img src=x" in page


def test_every_name_from_a_trace_is_escaped(pipeline_run):
    page = H.to_html(_evil_report(pipeline_run))
    body, script = page.split("<script type='module'>", 1)
    assert "<img" not in body
    assert body.count("&lt;img src=x onerror=") >= 4  # path, title, evidence, note
    # inside the script the names are JSON with < and > escaped: no tag can close it
    specs = script[script.index("const specs") :]
    assert "<img" not in specs and "</script" not in specs.split("</script>")[0]
    assert "\\u003cimg src=x" in specs


# ---------------------------------------------------------------- in a real browser


def _check_in_browser(page: Path, shot: Path, codes: list[str], min_charts: int = 5) -> None:
    got = browser.render(page, shot)
    assert got.console == [], got.console  # no error, no warning, no refused request
    assert 'data-charts="drawn"' in got.dom  # every vegaEmbed promise resolved
    assert len(got.charts_drawn()) >= min_charts, got.charts_drawn()
    for level in LEVELS:
        assert f'id="level-{level}"' in got.dom
    for code in codes:
        assert code in got.dom
    assert shot.stat().st_size > 10_000


@needs_chromium
def test_pipeline_run_renders_offline(pipeline_run, pipeline_html, tmp_path):
    codes = [f.code for f in _report(pipeline_run).findings]
    _check_in_browser(pipeline_html, tmp_path / "pipe.png", codes)


@needs_chromium
def test_bundled_cpu_run_renders_offline(tmp_path):
    run = tmp_path / "ddp"
    shutil.copytree(ROOT / "sample_traces" / "ddp", run)
    page = tmp_path / "ddp.html"
    _cli("analyze", run, "--format", "html", "-o", page)
    codes = [f.code for f in _report(run).findings]
    _check_in_browser(page, tmp_path / "ddp.png", codes)


@needs_chromium
def test_dlrm_8_ranks_render_offline(shared_trace, tmp_path):
    run = shared_trace("v100_dlrm_8rank")
    page = tmp_path / "dlrm.html"
    _cli("analyze", run, "--format", "html", "-o", page)
    codes = [f.code for f in _report(run).findings]
    assert len(codes) >= 3
    _check_in_browser(page, tmp_path / "dlrm.png", codes)


@needs_chromium
def test_markup_in_names_runs_nothing(pipeline_run, tmp_path):
    report = _evil_report(pipeline_run)
    page = tmp_path / "evil.html"
    page.write_text(H.to_html(replace(report, step_model=_step_model())))
    got = browser.render(page)
    assert got.console == [], got.console  # an injected <img> would be a refused request
    assert "data-pwned=" not in got.dom  # its handler never ran
    assert "&lt;img src=x onerror=" in got.dom  # it shows as text
    assert {"critical_path", "critical_path_timeline"} <= set(got.charts_drawn())


@needs_chromium
def test_compare_html_renders_offline(pipeline_run, tmp_path):
    page = tmp_path / "cmp.html"
    res = CliRunner().invoke(
        main, ["compare", str(pipeline_run), str(pipeline_run), "--format", "html", "-o", str(page)]
    )
    assert res.exit_code == 0, res.output
    got = browser.render(page)
    assert got.console == [], got.console
    assert set(got.charts_drawn()) == {"changes", "compare_steps"}


def test_memory_timeline_from_the_trace(pipeline_run, pipeline_html):
    """The synthetic run's allocator totals (7 instants per rank) become the timeline."""
    text = pipeline_html.read_text()
    assert "data-chart='memory_timeline'" in text
    specs = json.loads(
        re.search(r"const specs = (\{.*?\});\n", text, re.S)
        .group(1)
        .replace("\\u003c", "<")
        .replace("\\u003e", ">")
        .replace("\\u0026", "&")
    )
    rows = specs["chart-memory_timeline"]["data"]["values"]
    assert {r["rank"] for r in rows} == {"rank 0", "rank 1", "rank 2", "rank 3"}
    peak = max(r["GB"] for r in rows if r["rank"] == "rank 0")
    rep = _report(pipeline_run)
    mem = rep.level("memory").metrics["ranks"][0]
    assert peak * 1e9 == pytest.approx(mem["peak_allocated_bytes"], rel=1e-9)


@needs_chromium
def test_a_kernel_named_as_markup_from_the_trace_shows_as_text(tmp_path):
    """End to end: the trace itself names its GEMM kernel `<img src=x onerror=…>`."""
    import gzip

    run = tmp_path / "run"
    generate(SCENARIOS["healthy"][0], run)
    for path in run.glob("rank-*.json.gz"):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        for e in doc["traceEvents"]:
            if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("sm90_xmma_gemm"):
                e["name"] = EVIL
        path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    page = tmp_path / "report.html"
    _cli("analyze", run, "--format", "html", "-o", page)
    assert EVIL in [k.name for k in _report(run).top_kernels]
    got = browser.render(page)
    assert got.console == [], got.console
    assert "data-pwned=" not in got.dom
    assert "&lt;img src=x onerror=" in got.dom
