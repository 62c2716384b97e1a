"""Opening the export in Perfetto: the links to ui.perfetto.dev at a place, and the local
server it loads the trace from.

Perfetto takes `visStart` / `visEnd` (ns on the trace's clock) in its URL and opens there
(perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui); a JSON trace's clock is
its `ts` in µs × 1000, so a place is `ns since the epoch − base_ns`. The UI loads a trace
by `url=` from http://127.0.0.1:9001, which `tracekit export --serve` serves."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from tracekit.errors import TracekitError
from tracekit.report.evidence import Place

PERFETTO_UI = "https://ui.perfetto.dev/"
SERVE_PORT = 9001  # the one local origin ui.perfetto.dev fetches a trace from
SERVED_NAME = "trace.json.gz"  # the name links use; `serve` answers every path with the file


def perfetto_url(place: Place, base: int, served: bool = True) -> str:
    """ui.perfetto.dev opened at `place`, loading the export from `tracekit export --serve`
    (`served`), else the bare view to open the file in by hand."""
    params = {}
    if served:
        params["url"] = f"http://127.0.0.1:{SERVE_PORT}/{quote(SERVED_NAME)}"
    params["visStart"] = str(place.start_ns - base)
    params["visEnd"] = str(place.end_ns - base)
    return PERFETTO_UI + "?" + urlencode(params, safe=":/")


def how_to_open() -> str:
    """The one line that says how to open the export at a finding."""
    return (
        "see a finding in Perfetto: tracekit export RUN -o merged.json.gz --serve "
        "(prints each finding's ui.perfetto.dev link, visStart/visEnd at its evidence)"
    )


def trace_server(path: Path, port: int = SERVE_PORT):
    """An HTTP server on 127.0.0.1:`port` that answers every path with the file at `path`,
    to ui.perfetto.dev (which may fetch a trace from that one local origin)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    data = Path(path).read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def _head(self) -> None:
            self.send_response(200)
            self.send_header("Access-Control-Allow-Origin", "https://ui.perfetto.dev")
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()

        def do_HEAD(self) -> None:
            self._head()

        def do_GET(self) -> None:
            self._head()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    try:
        return ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise TracekitError(f"cannot serve on 127.0.0.1:{port} ({exc.strerror or exc})") from exc


def serve(path: Path, port: int = SERVE_PORT) -> None:
    """Serve the trace at `path` for ui.perfetto.dev until Ctrl-C."""
    with trace_server(path, port) as server, contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
