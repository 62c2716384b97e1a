"""The package a user installs: the sdist and the wheel built from it (`python -m build`),
installed with its dependencies into a fresh venv, and every command run from that venv
in a folder outside the checkout — the wheel's own files are what is imported.

`.ci/run` prepares the venv once before the suite and times it
(`python3 tests/integration/test_wheel.py DIR`, standard library only); the test then finds it
through TRACEKIT_WHEEL_DIR. Without that variable the test prepares its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tracekit", "diagnosers", "tui", "instrument")
# files the program reads beside its modules (package data)
DATA_SUFFIXES = (".sql", ".tcss")

try:
    import pytest

    pytestmark = pytest.mark.slow
except ModuleNotFoundError:  # run as a script by .ci/run, before the test venv exists
    pytest = None


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


def _run(cmd: list, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, env=env, **kw
    )


def _ok(res: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert res.returncode == 0, (res.args, res.stdout[-2000:], res.stderr[-4000:])
    return res


def prepare(out: Path) -> dict[str, float]:
    """Build the sdist and the wheel (from the sdist) into out/dist, make a fresh venv
    out/venv and install the wheel with the `frames` extra into it; seconds per phase."""
    out.mkdir(parents=True, exist_ok=True)
    venv, dist = out / "venv", out / "dist"
    times = {}
    t = time.perf_counter()
    _ok(_run([sys.executable, "-m", "venv", venv]))
    # --no-compile: the modules a command imports compile when first imported; compiling
    # all of scipy, pandas and polars up front was most of the install's time
    pip = [_bin(venv, "python"), "-m", "pip", "install", "-q", "--no-compile",
           "--disable-pip-version-check"]  # fmt: skip
    # the build tools once, in this venv, rather than in two isolated ones (sdist, wheel)
    _ok(_run([*pip, "build", "setuptools>=77"]))
    times["venv"] = time.perf_counter() - t
    t = time.perf_counter()
    _ok(_run([_bin(venv, "python"), "-m", "build", "--no-isolation", "-o", dist, ROOT]))
    times["build"] = time.perf_counter() - t
    (wheel,) = dist.glob("*.whl")
    t = time.perf_counter()
    _ok(_run([*pip, f"{wheel}[frames]"]))
    times["install"] = time.perf_counter() - t
    return times


def source_files() -> set[str]:
    """Every module and data file of the packages, as paths inside the wheel."""
    out = set()
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*"):
            if "__pycache__" in p.parts or not p.is_file():
                continue
            if p.suffix == ".py" or p.suffix in DATA_SUFFIXES:
                out.add(p.relative_to(ROOT).as_posix())
    return out


# ------------------------------------------------------------------------- the test
if pytest is not None:

    @pytest.fixture(scope="module")
    def installed(tmp_path_factory) -> Path:
        given = os.environ.get("TRACEKIT_WHEEL_DIR")
        if given:
            return Path(given)
        out = tmp_path_factory.mktemp("wheel")
        prepare(out)
        return out

    @pytest.fixture(scope="module")
    def work(tmp_path_factory) -> Path:
        """A folder outside the checkout, with two copies of the DDP sample run."""
        w = tmp_path_factory.mktemp("outside")
        assert ROOT not in w.parents
        for name in ("a", "b"):
            shutil.copytree(
                ROOT / "sample_traces" / "ddp", w / name,
                ignore=shutil.ignore_patterns(".tracekit"),
            )  # fmt: skip
        return w

    def test_the_wheel_holds_every_module_and_data_file(installed):
        (wheel,) = (installed / "dist").glob("*.whl")
        names = set(zipfile.ZipFile(wheel).namelist())
        ours = {n for n in names if n.split("/")[0] in PACKAGES}
        assert ours == source_files()  # nothing left out, nothing stray
        assert any(n.startswith("tracekit/sql/stepmodel/") for n in ours)  # nested data
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = zipfile.ZipFile(wheel).read(meta).decode()
        from tracekit.version import DIST_NAME, __version__

        assert f"Name: {DIST_NAME}\n" in text and f"Version: {__version__}\n" in text
        # the sdist holds what the wheel was built from, the changelog beside it
        (sdist,) = (installed / "dist").glob("*.tar.gz")
        assert sdist.name == f"{DIST_NAME.replace('-', '_')}-{__version__}.tar.gz"

    def test_the_fresh_venv_imports_the_wheel_not_the_checkout(installed, work):
        py = _bin(installed / "venv", "python")
        mods = ", ".join(PACKAGES)
        code = f"import json, {mods}; print(json.dumps([m.__file__ for m in ({mods})]))"
        res = _ok(_run([py, "-c", code], cwd=work))
        site = (installed / "venv").resolve()
        for f in json.loads(res.stdout):
            assert site in Path(f).resolve().parents, f
        from tracekit.version import __version__

        res = _ok(_run([_bin(installed / "venv", "tracekit"), "--version"], cwd=work))
        assert __version__ in res.stdout

    def test_every_command_runs_from_the_wheel(installed, work):
        tk = _bin(installed / "venv", "tracekit")
        for fmt in ("text", "json", "html"):
            res = _ok(_run([tk, "analyze", "a", "--format", fmt], cwd=work))
            assert res.stderr == "" or "internal error" not in res.stderr
        report = json.loads(_run([tk, "analyze", "a", "--format", "json"], cwd=work).stdout)
        assert report["findings"] and report["summary"]["step_time_ms"] > 0
        assert "<html" in _run([tk, "analyze", "a", "--format", "html"], cwd=work).stdout[:200]
        res = _ok(_run([tk, "whatif", "a", "--change", "overlap:all_reduce"], cwd=work))
        assert "saves" in res.stdout
        _ok(_run([tk, "export", "a", "-o", "merged.json.gz"], cwd=work))
        assert (work / "merged.json.gz").stat().st_size > 0
        assert "TK-N301" in _ok(_run([tk, "explain", "TK-N301"], cwd=work)).stdout
        assert "Report" in json.loads(_ok(_run([tk, "schema"], cwd=work)).stdout)["$defs"]
        _ok(_run([tk, "compare", "a", "b"], cwd=work))
        res = _ok(_run([tk, "query", "a", "--sql", "SELECT count(*) AS n FROM steps"], cwd=work))
        assert "4" in res.stdout

    API = """
import sys, tracekit
a = tracekit.analyze(sys.argv[1])
print(a.ranks()["rank"].to_list(), len(a.ranks(backend="pandas")), a.findings().height)
"""

    def test_the_python_api_with_frames(installed, work):
        res = _ok(_run([_bin(installed / "venv", "python"), "-c", API, "a"], cwd=work))
        ranks, n, findings = res.stdout.rsplit("]", 1)[0] + "]", *res.stdout.split("]")[1].split()
        assert ranks == "[0, 1]" and n == "2" and int(findings) >= 1

    TUI = """
import asyncio, sys
from pathlib import Path
from tui.app import TracekitApp
from tui.data import Session

async def main():
    app = TracekitApp(Session([Path(sys.argv[1])], display_path="a"))
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3):
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
        print(type(app.screen).__name__)
        await pilot.press("q")
    print("quit", app.return_code)

asyncio.run(main())
"""

    def test_the_tui_starts_and_quits_headless(installed, work):
        res = _ok(_run([_bin(installed / "venv", "python"), "-c", TUI, "a"], cwd=work,
                       timeout=120))  # fmt: skip
        assert res.stdout.split() == ["OverviewScreen", "quit", "0"], res.stdout


if __name__ == "__main__":  # .ci/run: python3 tests/integration/test_wheel.py DIR
    phases = prepare(Path(sys.argv[1]))
    print("wheel: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
          + f"; {sum(phases.values()):.1f} s in all")  # fmt: skip
