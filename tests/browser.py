"""Headless chromium for the HTML report's tests: load a page with the network off and
return the DOM after its scripts ran and every console message; take a screenshot.

The network is off twice over: `--proxy-server=127.0.0.1:9` (nothing listens there) and
the page's own Content-Security-Policy, under which any request is refused and logged to
the console — so "no console message" also means "no request attempted".
Skips (the caller's `pytest.skip`) when chromium is absent: Debian's `chromium` package.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_CONSOLE = re.compile(r":INFO:CONSOLE[^\]]*\] (.*)$")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Rendered:
    dom: str
    console: list[str]

    def charts_drawn(self) -> list[str]:
        """The keys of the charts that hold an SVG drawing."""
        out = []
        for m in re.finditer(
            r"<figure class=\"chart\" data-chart=\"([^\"]+)\">(.*?)</figure>", self.dom, re.S
        ):
            if "<svg" in m.group(2):
                out.append(m.group(1))
        return out


def _args(exe: str, profile: str) -> list[str]:
    return [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
        f"--user-data-dir={profile}",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--virtual-time-budget=20000",
    ]


def render(
    page: Path, screenshot: Path | None = None, width: int = 1300, height: int = 4200
) -> Rendered:
    exe = chromium()
    assert exe, "chromium is not installed"
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                *_args(exe, profile),
                "--enable-logging=stderr",
                "--v=0",
                "--dump-dom",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        console = [m.group(1) for line in done.stderr.splitlines() if (m := _CONSOLE.search(line))]
        if screenshot is not None:
            subprocess.run(
                [
                    *_args(exe, profile),
                    f"--screenshot={screenshot}",
                    f"--window-size={width},{height}",
                    "--hide-scrollbars",
                    page.resolve().as_uri(),
                ],
                capture_output=True,
                timeout=120,
                check=True,
            )
    return Rendered(done.stdout, console)
