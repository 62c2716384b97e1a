"""Which plotting library draws the HTML report: the same six charts drawn by plotly,
bokeh and Vega-Lite (vega-embed's JavaScript from vl-convert-python), each page
self-contained (every script inlined), measured for file size, time to write it, and
time for headless chromium to load and draw it with the network off.

    python benchmarks/html_plotting.py REPORT.json [--dest DIR] [--repeat 5]

REPORT.json: an `analyze --format json` report of a multi-rank run (its ranks, samples,
collectives and top ops feed the six charts). Needs `chromium` on PATH and the three
libraries installed (`pip install plotly bokeh vl-convert-python`); prints a Markdown
table. The render time is the wall time of `chromium --headless --screenshot` on the
page less the same for an empty page (the browser's own start), best and median of
`--repeat` rounds that take each page in turn.
Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def _data(rep: dict) -> dict:
    ranks = [r["rank"] for r in rep["ranks"]]
    parts = {
        k: [r.get(k.replace("_ms", "_fraction")) or 0 for r in rep["ranks"]]
        for k in ("idle_ms", "compute_ms", "exposed_comm_ms")
    }
    steps = {s["rank"]: (s["step"], s["step_time_ms"]) for s in rep["samples"]["ranks"]}
    coll = [c for c in rep.get("collectives", []) if c.get("busbw_GBps") and c.get("bytes")]
    ops = rep.get("top_ops", [])[:10]
    return {"ranks": ranks, "parts": parts, "steps": steps, "coll": coll, "ops": ops}


def plotly_page(d: dict) -> str:
    import plotly.graph_objects as go
    import plotly.offline as po

    figs = []
    f = go.Figure([go.Bar(name=k, x=d["ranks"], y=v) for k, v in d["parts"].items()])
    figs.append(f.update_layout(barmode="stack"))
    figs.append(
        go.Figure([go.Scatter(name=f"rank {r}", x=s, y=t) for r, (s, t) in d["steps"].items()])
    )
    figs.append(
        go.Figure(
            [
                go.Scatter(
                    x=[c["bytes"] for c in d["coll"]],
                    y=[c["busbw_GBps"] for c in d["coll"]],
                    mode="markers",
                ),
                go.Scatter(
                    x=[c["bytes"] for c in d["coll"]],
                    y=[c["predicted_busbw_GBps"] for c in d["coll"]],
                ),
            ]
        ).update_xaxes(type="log")
    )
    figs.append(
        go.Figure(
            [go.Bar(x=[c["name"] for c in d["coll"]], y=[c["exposed_ms"] for c in d["coll"]])]
        )
    )
    figs.append(
        go.Figure(
            [
                go.Bar(
                    x=[o["name"] for o in d["ops"]], y=[o["achieved_tflops"] or 0 for o in d["ops"]]
                )
            ]
        )
    )
    figs.append(go.Figure([go.Bar(x=d["ranks"], y=d["parts"]["compute_ms"])]))
    divs = [f.to_html(full_html=False, include_plotlyjs=False) for f in figs]
    return (
        f"<html><head><meta charset='utf-8'><script>{po.get_plotlyjs()}</script></head>"
        f"<body>{''.join(divs)}</body></html>"
    )


def bokeh_page(d: dict) -> str:
    from bokeh.embed import file_html
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource
    from bokeh.plotting import figure
    from bokeh.resources import INLINE

    figs = []
    x = [str(r) for r in d["ranks"]]
    p = figure(x_range=x, height=250)
    keys = list(d["parts"])
    p.vbar_stack(
        keys,
        x="rank",
        width=0.8,
        color=["#999", "#4c78a8", "#e45756"],
        source=ColumnDataSource({"rank": x, **d["parts"]}),
    )
    figs.append(p)
    p = figure(height=250)
    for _r, (s, t) in d["steps"].items():
        p.line(s, t)
    figs.append(p)
    p = figure(height=250, x_axis_type="log")
    p.scatter([c["bytes"] for c in d["coll"]], [c["busbw_GBps"] for c in d["coll"]])
    p.line([c["bytes"] for c in d["coll"]], [c["predicted_busbw_GBps"] for c in d["coll"]])
    figs.append(p)
    names = [f"{c['name']} {i}" for i, c in enumerate(d["coll"])]
    p = figure(x_range=names, height=250)
    p.vbar(x=names, top=[c["exposed_ms"] for c in d["coll"]], width=0.8)
    figs.append(p)
    names = [f"{o['name']} {i}" for i, o in enumerate(d["ops"])]
    p = figure(x_range=names, height=250)
    p.vbar(x=names, top=[o["achieved_tflops"] or 0 for o in d["ops"]], width=0.8)
    figs.append(p)
    p = figure(x_range=x, height=250)
    p.vbar(x=x, top=d["parts"]["compute_ms"], width=0.8)
    figs.append(p)
    return file_html(column(*figs), INLINE, "bench")


def vega_page(d: dict, bundle: str) -> str:
    specs = []
    rows = [
        {"rank": r, "part": k, "v": v[i]}
        for k, v in d["parts"].items()
        for i, r in enumerate(d["ranks"])
    ]
    specs.append(
        {
            "data": {"values": rows},
            "mark": "bar",
            "encoding": {
                "x": {"field": "rank", "type": "ordinal"},
                "y": {"field": "v", "type": "quantitative"},
                "color": {"field": "part"},
            },
        }
    )
    rows = [
        {"rank": r, "step": s, "ms": t}
        for r, (ss, tt) in d["steps"].items()
        for s, t in zip(ss, tt, strict=True)
    ]
    specs.append(
        {
            "data": {"values": rows},
            "mark": "line",
            "encoding": {
                "x": {"field": "step", "type": "ordinal"},
                "y": {"field": "ms", "type": "quantitative"},
                "color": {"field": "rank", "type": "nominal"},
            },
        }
    )
    specs.append(
        {
            "data": {"values": d["coll"]},
            "layer": [
                {
                    "mark": "point",
                    "encoding": {
                        "x": {"field": "bytes", "type": "quantitative", "scale": {"type": "log"}},
                        "y": {"field": "busbw_GBps", "type": "quantitative"},
                    },
                },
                {
                    "mark": "line",
                    "encoding": {
                        "x": {"field": "bytes", "type": "quantitative", "scale": {"type": "log"}},
                        "y": {"field": "predicted_busbw_GBps", "type": "quantitative"},
                    },
                },
            ],
        }
    )
    specs.append(
        {
            "data": {"values": d["coll"]},
            "mark": "bar",
            "encoding": {
                "x": {"field": "name"},
                "y": {"field": "exposed_ms", "type": "quantitative"},
            },
        }
    )
    specs.append(
        {
            "data": {"values": d["ops"]},
            "mark": "bar",
            "encoding": {
                "x": {"field": "name"},
                "y": {"field": "achieved_tflops", "type": "quantitative"},
            },
        }
    )
    specs.append(
        {
            "data": {
                "values": [
                    {"rank": r, "v": v}
                    for r, v in zip(d["ranks"], d["parts"]["compute_ms"], strict=True)
                ]
            },
            "mark": "bar",
            "encoding": {
                "x": {"field": "rank", "type": "ordinal"},
                "y": {"field": "v", "type": "quantitative"},
            },
        }
    )
    divs = "".join(f"<div id='v{i}'></div>" for i in range(len(specs)))
    calls = "".join(f"vegaEmbed('#v{i}', {json.dumps(s)});" for i, s in enumerate(specs))
    return (
        f"<html><head><meta charset='utf-8'><script type='module'>{bundle}\n{calls}"
        f"</script></head><body>{divs}</body></html>"
    )


def render_s(chromium: str, page: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            subprocess.run(
                [
                    chromium,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--proxy-server=127.0.0.1:9",
                    f"--user-data-dir={tmp}",
                    f"--screenshot={tmp}/s.png",
                    "--window-size=1200,2400",
                    "--virtual-time-budget=5000",
                    page.as_uri(),
                ],
                check=True,
                capture_output=True,
            )
            best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--dest", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("chromium not on PATH (apt-get install -y chromium)")
    d = _data(json.loads(args.report.read_text()))
    dest = args.dest or Path(tempfile.mkdtemp())
    dest.mkdir(parents=True, exist_ok=True)
    empty = dest / "empty.html"
    empty.write_text("<html><body></body></html>")

    import vl_convert

    t0 = time.perf_counter()
    bundle = vl_convert.javascript_bundle()
    bundle_s = time.perf_counter() - t0
    pages = {
        "plotly": lambda: plotly_page(d),
        "bokeh": lambda: bokeh_page(d),
        "vega-lite": lambda: vega_page(d, bundle),
    }
    made = {}
    for name, make in pages.items():
        t0 = time.perf_counter()
        text = make()
        write_s = time.perf_counter() - t0 + (bundle_s if name == "vega-lite" else 0)
        page = dest / f"{name}.html"
        page.write_text(text)
        made[name] = (page, len(text.encode()), write_s)
    # interleaved, so a busy machine slows every library alike; best and median
    times: dict[str, list[float]] = {n: [] for n in ["empty", *made]}
    for _ in range(args.repeat):
        for name in times:
            times[name].append(render_s(chromium, empty if name == "empty" else made[name][0], 1))
    base_best, base_med = min(times["empty"]), statistics.median(times["empty"])
    print("| library | file size | write (s) | render, best (s) | render, median (s) |")
    print("|---|---:|---:|---:|---:|")
    for name, (_page, size, write_s) in made.items():
        best = min(times[name]) - base_best
        med = statistics.median(times[name]) - base_med
        print(f"| {name} | {size / 1e6:.2f} MB | {write_s:.2f} | {best:.2f} | {med:.2f} |")


if __name__ == "__main__":
    main()
