"""The README's and the docs' examples run as written, on a copy of a sample run: the
Python API (docs/python.md) and the `tracekit analyze sample_traces/ddp` output (the
README and docs/analyze.md)."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.conftest import ROOT


def _python_blocks(page: str = "docs/python.md") -> list[str]:
    text = (ROOT / page).read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_python_api_example_runs(tmp_path, monkeypatch):
    (block,) = [b for b in _python_blocks() if 'tracekit.open("run/")' in b]
    shutil.copytree(
        ROOT / "sample_traces" / "ddp", tmp_path / "run", ignore=shutil.ignore_patterns(".tracekit")
    )
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(block, "docs/python.md", "exec"), scope)
    assert scope["ranks"]["rank"].to_list() == [0, 1]
    assert scope["a"].report.summary.step_time_ms > 0 and scope["findings"].height >= 1
    assert scope["samples"].height == 4  # ProfilerSteps 2 and 3 on two ranks
    assert scope["df"].height == 4  # the trace holds ProfilerSteps 2 and 3
    assert scope["n"] == [(4,)]
    assert scope["run"].missing_ranks == [] and scope["run"].unreadable == []


@pytest.mark.parametrize("page", ["README.md", "docs/analyze.md"])
def test_the_analyze_example_is_what_analyze_prints(tmp_path, page):
    """The `tracekit analyze sample_traces/ddp` output the README and the analyze page
    show, as the command prints it today (the sample run is committed: its figures are
    fixed)."""
    from click.testing import CliRunner

    from tracekit.cli import main

    text = (ROOT / page).read_text()
    start = text.index("```\nrun /…/sample_traces/ddp") + 4
    want = text[start : text.index("```", start)]
    run = shutil.copytree(
        ROOT / "sample_traces" / "ddp", tmp_path / "ddp", ignore=shutil.ignore_patterns(".tracekit")
    )
    res = CliRunner().invoke(main, ["analyze", str(run)])
    assert res.exit_code == 0, res.output
    got = res.output.replace(str(run), "/…/sample_traces/ddp")
    assert [line.rstrip() for line in got.splitlines()] == want.rstrip("\n").splitlines()
