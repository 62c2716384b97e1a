"""The docs site (docs/, mkdocs.yml) stays true: generated pages equal what the code
writes, the README's commands are the ones CI runs, examples in the pages run, and the
site builds with `mkdocs build --strict`."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOCS = ROOT / "docs"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("page", ["cli", "rules", "report", "sql"])
def test_generated_page_is_current(page):
    gen = _gen()
    rel = f"reference/{page}.md"
    assert (DOCS / rel).read_text() == gen.PAGES[rel](), (
        f"docs/{rel} is stale: run python docs/gen_reference.py"
    )


def test_generated_pages_say_what_the_code_says():
    """Independent spot checks of the generators' output (not their own code again)."""
    from click.testing import CliRunner

    from diagnosers.rules import registry
    from tracekit.cli import main

    cli = (DOCS / "reference/cli.md").read_text()
    for name in main.commands:
        assert f"## `tracekit {name}`" in cli
    assert "## `tracekit baseline save`" in cli  # a group's commands too
    schema = CliRunner().invoke(main, ["schema"]).output
    assert schema.strip() in (DOCS / "reference/report.md").read_text()
    rules = (DOCS / "reference/rules.md").read_text()
    assert all(f"## {r.code} `{r.kind}`" in rules for r in registry())
    sql = (DOCS / "reference/sql.md").read_text()
    for view in ("events", "steps", "collectives", "device_activity"):
        assert f"## `{view}`" in sql


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_readme_commands_are_what_ci_runs():
    """The README's two commands; .ci/run copies the test command verbatim, and the docs'
    home page shows the same two."""
    readme = (ROOT / "README.md").read_text()
    setup, tests = _bash_blocks(readme)[:2]
    assert setup.strip() == (
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && "
        ".venv/bin/tracekit analyze sample_traces/ddp"
    )
    assert tests.strip() in (ROOT / ".ci" / "run").read_text().splitlines()
    assert _bash_blocks((DOCS / "index.md").read_text())[:2] == [setup, tests]


def test_readme_links_resolve():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if not link.startswith("http")]
    assert len(local) >= 10
    for link in local:
        assert (ROOT / link).exists(), link


def test_the_pictures_are_the_dashboard_snapshots():
    """The README's picture is the TUI as its snapshot test draws it, so it stays current."""
    snaps = ROOT / "tests" / "tui" / "__snapshots__" / "test_tui"
    for pic, snap in (
        ("tui-overview.svg", "test_dashboard_snapshot[dashboard-120x40].svg"),
        ("tui-overview-80x24.svg", "test_dashboard_snapshot[dashboard-80x24].svg"),
    ):
        assert (DOCS / "assets" / pic).read_bytes() == (snaps / snap).read_bytes(), pic


def test_the_tui_page_shows_the_key_map():
    pytest.importorskip("textual")
    from tui.screens.common import KEYMAP

    assert "```text\n" + KEYMAP + "```" in (DOCS / "tui.md").read_text()


def test_ci_guide_workflow_writes_the_summary(tmp_path):
    """The CI guide's GitHub Actions workflow, its steps run as the runner would (bash -e)
    on sample runs: the compare step appends Markdown to $GITHUB_STEP_SUMMARY and is the
    gate — 0 for the same run, 1 for a slower one (the sample FSDP run against the DDP
    baseline: step time 31.5 → 60.7 ms)."""
    yaml = pytest.importorskip("yaml")
    text = (DOCS / "ci.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    steps = yaml.safe_load(block)["jobs"]["perf-gate"]["steps"]
    runs = {s["name"]: s["run"] for s in steps if "run" in s}
    assert list(runs) == ["Install", "Profile a few steps", "Compare with the baseline",
                          "Keep the report"]  # fmt: skip
    assert "tracekit run ddp" in runs["Profile a few steps"]
    (save,) = [c for c in _bash_blocks(text)[0].splitlines() if "baseline save" in c]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def sh(cmd: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-e", "-c", cmd], cwd=cwd, env={**env, **extra},
                              capture_output=True, text=True)  # fmt: skip

    for sample, want in (("ddp", 0), ("fsdp", 1)):
        work = tmp_path / sample
        work.mkdir()
        ignore = shutil.ignore_patterns(".tracekit")
        # the baseline, recorded once (step 1 of the guide) from the DDP sample
        shutil.copytree(ROOT / "sample_traces" / "ddp", work / "run", ignore=ignore)
        (work / "perf").mkdir()
        assert sh(save, work).returncode == 0
        # the pull request's run (the Profile step's output)
        shutil.rmtree(work / "run")
        shutil.copytree(ROOT / "sample_traces" / sample, work / "run", ignore=ignore)
        summary = work / "summary.md"
        summary.write_text("")
        res = sh(runs["Compare with the baseline"], work, GITHUB_STEP_SUMMARY=str(summary))
        assert res.returncode == want, res.stderr
        md = summary.read_text()
        assert md.startswith("### tracekit compare: " + ("PASS" if want == 0 else "FAIL"))
        assert "| metric | base | new |" in md or want == 0
        res = sh(runs["Keep the report"], work)
        assert res.returncode == 0 and (work / "report.json").stat().st_size > 0


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="the docs extra")
def test_mkdocs_build_strict(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()


def _doc_commands() -> list[tuple[str, list[str]]]:
    """(page, argv) of every `tracekit …` line in a bash block of the README and docs."""
    import shlex

    out = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for block in _bash_blocks(page.read_text()):
            for line in block.splitlines():
                line = line.split("  #")[0].strip()
                if line.startswith("tracekit "):
                    out.append((page.name, shlex.split(line)[1:]))
    return out


def test_every_documented_command_and_option_exists():
    import click

    from tracekit.cli import main

    cmds = _doc_commands()
    assert len(cmds) >= 10
    for page, argv in cmds:
        cmd: click.Command = main
        args = list(argv)
        while isinstance(cmd, click.Group):
            name = args.pop(0)
            assert name in cmd.commands, (page, argv)
            cmd = cmd.commands[name]
        opts = {o for p in cmd.params for o in p.opts}
        for a in args:
            if a.startswith("-"):
                assert a.split("=")[0] in opts, (page, argv, a)


def test_the_query_page_examples_run(tmp_path, monkeypatch):
    """docs/query.md's commands, on a copy of the DDP sample as run/."""
    from click.testing import CliRunner

    from tracekit.cli import main

    shutil.copytree(ROOT / "sample_traces" / "ddp", tmp_path / "run",
                    ignore=shutil.ignore_patterns(".tracekit"))  # fmt: skip
    cmds = [argv for page, argv in _doc_commands() if page == "query.md"]
    assert len(cmds) == 3
    monkeypatch.chdir(tmp_path)
    for argv in cmds:
        res = CliRunner().invoke(main, argv)
        assert res.exit_code == 0, (argv, res.output)
        if "--describe" in argv:
            assert "instance_key" in res.output
        elif argv[0] == "query":
            assert "all_reduce" in res.output
