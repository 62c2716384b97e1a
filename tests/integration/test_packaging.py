"""What `pip install tracekit-torch` gives: analyze and the TUI (textual is a core dependency),
torch only through the `jobs` extra; `tracekit run` is always listed and, without torch,
says in one line how to get it (exit 2)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

# torch made unimportable, as on a machine without it: `find_spec` answers None for a
# module set to None in sys.modules, and `import torch` raises ImportError
NO_TORCH = "import sys; sys.modules['torch'] = None\n"


def _cli(*args: str, no_torch: bool = True, cwd=None) -> subprocess.CompletedProcess:
    code = (NO_TORCH if no_torch else "") + (
        f"from tracekit.cli import main\nmain({list(args)!r}, prog_name='tracekit')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd or ROOT
    )


def _commands(help_text: str) -> list[str]:
    lines = help_text.split("Commands:", 1)[1].splitlines()
    return [line.split()[0] for line in lines if line.startswith("  ") and line.split()]


def test_run_is_listed_without_torch():
    res = _cli("--help")
    assert res.returncode == 0, res.stderr
    assert "run" in _commands(res.stdout)
    assert {"analyze", "tui", "compare", "query"} <= set(_commands(res.stdout))


def test_run_without_torch_says_how_to_get_it(tmp_path):
    res = _cli("run", "ddp", "--out", str(tmp_path / "out"))
    assert res.returncode == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr  # one line, no traceback
    assert lines[0].startswith("tracekit: tracekit run needs torch")
    assert "pip install 'tracekit-torch[jobs]'" in lines[0]
    assert not (tmp_path / "out").exists()  # nothing half-written
    # even a bad invocation hears first what is missing
    res = _cli("run")
    assert res.returncode == 2 and "needs torch" in res.stderr
    # its help still works: what it would do, and what it needs
    res = _cli("run", "--help")
    assert res.returncode == 0 and "--world-size" in res.stdout
    assert "tracekit-torch[jobs]" in res.stdout


def test_the_simulation_hides_torch():
    """The tests above would pass vacuously if torch were still importable."""
    res = subprocess.run(
        [sys.executable, "-c", NO_TORCH + "import torch"], capture_output=True, text=True
    )
    assert res.returncode != 0 and "import of torch halted" in res.stderr


def test_run_with_torch_parses_its_options(tmp_path):
    """With torch present the same command reaches its own option checks (a bad world
    size is a usage error, exit 2, not the torch message)."""
    res = _cli("run", "ddp", "-n", "0", "--out", str(tmp_path / "o"), no_torch=False)
    assert res.returncode == 2
    assert "needs torch" not in res.stderr and "--world-size" in res.stderr


def test_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = [d.split(">")[0].split("=")[0].split(";")[0].strip() for d in project["dependencies"]]
    assert "textual" in core  # pip install tracekit-torch gives the TUI
    assert "torch" not in core
    extras = project["optional-dependencies"]
    assert any(d.startswith("torch") for d in extras["jobs"])
    assert any(d.startswith("mkdocs-material") for d in extras["docs"])


def test_frames_without_polars_say_which_extra(tmp_path):
    """`Analysis.ranks()` without polars: one line naming the extra, not a bare
    ModuleNotFoundError (the report itself needs no DataFrame library)."""
    import shutil

    shutil.copytree(ROOT / "sample_traces" / "ddp", tmp_path / "run",
                    ignore=shutil.ignore_patterns(".tracekit"))  # fmt: skip
    code = (
        "import sys; sys.modules['polars'] = None\n"
        "import tracekit\n"
        f"a = tracekit.analyze({str(tmp_path / 'run')!r})\n"
        "print(a.report.summary.step_time_ms > 0)\n"
        "try:\n    a.ranks()\n"
        "except ModuleNotFoundError as exc:\n    print(exc.name, '|', exc)\n"
        "print(len(a.ranks(backend='pandas')))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "True",
        "polars | tables as DataFrames need polars: pip install 'tracekit-torch[frames]'",
        "2",
    ]


def test_version_from_one_place():
    """pyproject.toml reads the version from tracekit/version.py; `--version` prints it."""
    from tracekit.version import DIST_NAME, __version__

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and meta["project"]["dynamic"] == ["version"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "tracekit.version.__version__"
    }
    assert meta["project"]["name"] == DIST_NAME
    res = _cli("--version", no_torch=False)
    assert res.returncode == 0 and res.stdout.strip() == f"tracekit, version {__version__}"
    assert f"## {__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_every_top_level_package_is_found():
    """A folder of modules at the top of the repository that the program imports is in
    `packages.find` (tests, benchmarks and docs are not shipped)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = meta["tool"]["setuptools"]["packages"]["find"]["include"]
    tops = {p.parent.name for p in ROOT.glob("*/*.py")} - {"tests", "benchmarks", "docs"}
    assert {f"{t}*" for t in tops} == set(include)
