"""The warm `analyze` answer read from one file before the run is opened
(`tracekit.report.cache.answer_key`): byte-identical to the normal path, and missed
whenever a trace, the ranks, job.json or an option changes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.cli import main
from tracekit.store import open as store_open

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "hybrid"


@pytest.fixture
def run(tmp_path):
    """The 4-rank hybrid sample without rank 3 (kept aside, to be added later): the
    health check warns of the missing rank, so the warnings are compared too."""
    dest = tmp_path / "run"
    shutil.copytree(SAMPLE, dest)
    shutil.move(dest / "rank-3.json.gz", tmp_path / "rank-3.json.gz")
    return dest


@pytest.fixture
def opens(monkeypatch):
    """How many times the run was opened (the normal path)."""
    calls = []
    real = store_open.open_run

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(store_open, "open_run", counting)
    return calls


def _analyze(*args):
    res = CliRunner().invoke(main, ["analyze", *map(str, args)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout, res.stderr


def _answers(run: Path) -> list[Path]:
    return sorted(run.glob(".tracekit/*/answers/*.json"))


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_fast_answer_is_the_normal_answer(run, opens, fmt):
    slow = _analyze(run, "--format", fmt)
    assert len(opens) == 1 and len(_answers(run)) == 1
    assert "warning" in slow[1]  # the missing rank: warnings come back too
    fast = _analyze(run, "--format", fmt)
    assert len(opens) == 1  # answered without opening the run
    assert fast == slow
    for answer in _answers(run):  # the normal path again, the answer gone
        answer.unlink()
    assert _analyze(run, "--format", fmt) == slow
    assert len(opens) == 2


def _touch(run: Path, tmp: Path) -> None:
    st = os.stat(run / "rank-0.json.gz")
    os.utime(run / "rank-0.json.gz", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def _add_rank(run: Path, tmp: Path) -> None:
    shutil.move(tmp / "rank-3.json.gz", run / "rank-3.json.gz")


def _edit_job(run: Path, tmp: Path) -> None:
    job = json.loads((run / "job.json").read_text())
    job["microbatches"] = 1
    (run / "job.json").write_text(json.dumps(job))


@pytest.mark.parametrize("change", [_touch, _add_rank, _edit_job], ids=lambda f: f.__name__)
def test_a_changed_source_takes_the_normal_path(run, opens, change):
    first = _analyze(run)
    _analyze(run)
    assert len(opens) == 1
    change(run, run.parent)
    again = _analyze(run)
    assert len(opens) == 2
    if change is _add_rank:
        assert again != first
    _analyze(run)  # the new answer is kept
    assert len(opens) == 2


@pytest.mark.parametrize(
    "options",
    [["--window", "trace"], ["--breakdown-only"], ["--ignore", "TK-N301"], ["--ranks", "0-1"]],
)
def test_a_changed_option_takes_the_normal_path(run, opens, options):
    _analyze(run)
    _analyze(run, *options)
    assert len(opens) == 2


def test_no_fast_answer_for_files_or_debug(run, opens):
    files = sorted(run.glob("rank-*.json.gz"))
    _analyze(*files)
    _analyze(*files)
    assert len(opens) == 2
    res = CliRunner().invoke(main, ["--debug", "analyze", str(run)], catch_exceptions=False)
    res = CliRunner().invoke(main, ["--debug", "analyze", str(run)], catch_exceptions=False)
    assert res.exit_code == 0
    assert len(opens) == 4


def test_the_answer_key_stamps_every_file_outside_the_cache(run):
    """The key covers each file of the folder, nested ones too (its path, size, mtime),
    not what lies in `.tracekit/` at any depth; a symlink anywhere makes it ambiguous."""
    from tracekit.report.cache import answer_key

    (run / "sub" / ".tracekit").mkdir(parents=True)
    (run / "sub" / "notes.txt").write_text("a")
    first = answer_key(run, {})
    assert first is not None and first == answer_key(run, {})
    (run / "sub" / ".tracekit" / "x").write_text("cache")
    (run / ".tracekit").mkdir(exist_ok=True)
    (run / ".tracekit" / "y").write_text("cache")
    assert answer_key(run, {}) == first
    (run / "sub" / "notes.txt").write_text("ab")  # one more byte
    second = answer_key(run, {})
    assert second not in (None, first)
    (run / "sub" / "deeper").mkdir()
    (run / "sub" / "deeper" / "more.txt").write_text("")
    assert answer_key(run, {}) not in (None, first, second)
    os.symlink(run / "sub" / "notes.txt", run / "sub" / "deeper" / "link.txt")
    assert answer_key(run, {}) is None


def test_the_code_stamp_lists_the_sources_as_sorted_paths_would(tmp_path):
    """`code_stamp`'s files (`_sources`): every .py and .sql file below the package,
    __pycache__ left out, in the order of their sorted Paths (the stamp an rglob gave)."""
    from tracekit.report.cache import _sources

    for rel in ("a.py", "b/c.sql", "b/__pycache__/c.cpython-311.pyc", "b/d.txt", "b-x/e.py",
                "b/__pycache__/f.py", "ba/g.py", "z.sql"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    want = [
        p.relative_to(tmp_path).parts
        for p in sorted(tmp_path.rglob("*"))
        if p.suffix in (".py", ".sql") and "__pycache__" not in p.parts
    ]
    assert sorted(_sources(str(tmp_path))) == want
    assert ("b", "c.sql") in want and len(want) == 5
