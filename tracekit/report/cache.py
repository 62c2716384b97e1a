"""Reports kept beside the Parquet cache: a warm `analyze` reads its answer back.

A full report is a pure function of what went into it: the ingested sources (the cache
index records each one's size, mtime, schema version and the user's communication-kernel
patterns), the sources chosen (and the `--ranks` / `--sample-ranks` that chose them),
`job.json`, the options (window, steps, overrides) and the code that computed it. The
key hashes all of them — the code by the size and mtime of every module of `tracekit`
and `diagnosers`, so an edited or upgraded tracekit never reads an old answer. A miss
computes the report and stores it (an atomic write); the folder keeps the newest `KEEP`
reports.

The code includes the rules plugins add (`tracekit.rules` entry points: name, target and
their distribution's version). The stored report is the JSON the user would get
(`tracekit.report.schema.encode`), so a hit renders exactly what a miss does. The
report's types are imported when a report is read or written: a cold `analyze` computes
the answer's key before its ingest, and the workers it forks have no use for them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.atomic import write_bytes, write_text

if TYPE_CHECKING:
    from tracekit.report.schema import Report
    from tracekit.store.run import Run

KEEP = 32
FOLDER = "reports"


@cache
def code_stamp() -> str:
    """Size and mtime of every module the report is computed by (the engine and the
    diagnosers, found without importing them), and the plugin rules installed."""
    from importlib.util import find_spec

    from tracekit.config import rule_plugins

    h = hashlib.sha256()
    for name in ("tracekit", "diagnosers"):
        spec = find_spec(name)
        if spec is None or not spec.origin:
            continue
        root = os.path.dirname(spec.origin)
        # the files in the order of their paths' parts (as sorted Paths), __pycache__ not
        # walked (an os.walk: a third of rglob's time, which lists the bytecode too)
        for parts in sorted(_sources(root)):
            st = os.stat(os.path.join(root, *parts))
            h.update(f"{name}/{'/'.join(parts)}:{st.st_size}:{st.st_mtime_ns};".encode())
    for ep in rule_plugins():
        version = ep.dist.version if ep.dist else ""
        h.update(f"rule:{ep.name}={ep.value}@{version};".encode())
    return h.hexdigest()


def _sources(root: str) -> list[tuple[str, ...]]:
    """The path parts (below `root`) of every .py and .sql file under it."""
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(folder, root)
        parts = () if rel == "." else tuple(rel.split(os.sep))
        out += [(*parts, n) for n in names if os.path.splitext(n)[1] in (".py", ".sql")]
    return out


def key(run: Run, options: dict[str, Any]) -> str:
    h = hashlib.sha256(code_stamp().encode())
    for p in (run.cache_dir / "index.json", run.root / "job.json"):
        h.update(p.read_bytes() if p.is_file() else b"-")
    sel = run.rank_selection.to_dict() if run.rank_selection else None
    h.update(json.dumps([str(run.root), [s.key for s in run.sources], sel]).encode())
    h.update(json.dumps(options, sort_keys=True, default=str).encode())
    return h.hexdigest()[:32]


def cached(run: Run, options: dict[str, Any], compute: Callable[[], Report]) -> Report:
    """The report for `options`: read back when this exact one was computed before."""
    from tracekit.report.schema import decode, encode

    folder = run.cache_dir / FOLDER
    path = folder / f"{key(run, options)}.json"
    try:
        return decode(path.read_bytes())
    except (OSError, ValueError):  # none yet, or unreadable (msgspec's errors are ValueErrors)
        pass
    text = encode(compute())
    try:
        folder.mkdir(exist_ok=True)
        write_text(path, text)
        _prune(folder)
    except OSError:  # a cache we cannot write only costs the next analyze its time
        pass
    return decode(text)  # what a hit returns, exactly


def _prune(folder: Path) -> None:
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in files[KEEP:]:
        old.unlink(missing_ok=True)


# ---- the warm answer from one file, before the run is opened ------------------------
#
# `tracekit analyze RUN_FOLDER` answers from `<cache>/answers/<key>.json` without
# discovering the traces, opening DuckDB or the Parquet tables, or running the health
# check, when nothing it depends on changed. The key hashes the code (`code_stamp`), the
# run folder, the open and analysis options, the project's pyproject.toml (found as
# `tracekit.config.pyproject_for` finds it: path, size, mtime) and the path, size and
# mtime of every file under the folder outside `.tracekit/` — the traces (the freshness
# the ingest index uses), job.json and any file that is not a trace yet. Anything
# ambiguous (several inputs, a file, a symlink under the folder, a cache we cannot
# locate) has no key: the command takes the normal path. A stored answer is the report
# the normal path printed (`encode`, what `cached` returns) and its warnings.

ANSWERS = "answers"


def answer_root(inputs: tuple[str, ...]) -> Path | None:
    """The run folder when the fast answer may apply: one input, a folder, not a link
    (the root `find_trace_files` gives it); else None."""
    import os

    if len(inputs) != 1 or not os.path.isdir(inputs[0]) or os.path.islink(inputs[0]):
        return None
    return Path(inputs[0]).resolve()


class AnswerKey:
    """An answer's key, made from the folder as it is now (`answer_stamp`); the code's
    stamp is hashed in when the answer's file is first asked for (`path`). A run with no
    answers yet (`may_hit` false: a cold analyze) reads none, and its stamp (≈ 20 ms: a
    stat of every module, the plugin rules' scan) is made while the ingest's workers read
    (`tracekit.commands.load_analysis`), not before they start."""

    def __init__(self, folder: Path, stamp: bytes):
        self.folder = folder
        self._stamp = stamp
        self._path: Path | None = None

    def may_hit(self) -> bool:
        return self.folder.is_dir()

    @property
    def path(self) -> Path:
        if self._path is None:
            h = hashlib.sha256(code_stamp().encode())
            h.update(self._stamp)
            self._path = self.folder / f"{h.hexdigest()[:32]}.json"
        return self._path


def answer_key(root: Path, options: dict[str, Any]) -> Path | None:
    """The answer's file for the run folder `root` and `options` as they are now, or None
    when the fast answer does not apply. Costs a walk of the folder and one stat a file."""
    key = answer_stamp(root, options)
    return key.path if key is not None else None


def answer_stamp(root: Path, options: dict[str, Any]) -> AnswerKey | None:
    """`answer_key`, its code stamp not hashed in yet (`AnswerKey`)."""
    import os

    from tracekit import config
    from tracekit.errors import TracekitError
    from tracekit.ingest.cache import cache_dir

    files: list[tuple[str, int, int]] = []
    try:
        # one scan a folder, one lstat a file, paths joined as walked (1,024 traces: no
        # `os.walk` + lstat + islink + relpath per file)
        todo = [(str(root), "")]
        while todo:
            folder, rel = todo.pop()
            with os.scandir(folder) as it:
                for e in it:
                    if e.is_symlink():
                        return None  # discovery may follow it: ambiguous
                    if e.is_dir(follow_symlinks=False):
                        if e.name != ".tracekit":
                            todo.append((e.path, rel + e.name + os.sep))
                        continue
                    st = e.stat(follow_symlinks=False)
                    files.append((rel + e.name, st.st_size, st.st_mtime_ns))
        pyproject = config.pyproject_for(root)
        project = None
        if pyproject is not None:
            st = pyproject.stat()
            project = [str(pyproject.resolve()), st.st_size, st.st_mtime_ns]
        cdir = cache_dir(root)
    except (OSError, TracekitError):
        return None
    stamp = [str(root), sorted(files), project, options]
    return AnswerKey(cdir / ANSWERS, json.dumps(stamp, sort_keys=True, default=str).encode())


def read_answer(path: Path) -> tuple[Report, list[str]] | None:
    """The stored report and warnings, or None (none yet, or unreadable)."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    from tracekit.report.schema import decode  # a miss (a cold analyze) does not need it

    try:
        return decode(data["report"]), [str(w) for w in data["warnings"]]
    except (ValueError, KeyError, TypeError):
        return None


def write_answer(path: Path, report: Report, warnings: list[str], text: str | None = None) -> None:
    """Store the answer the normal path gave (an atomic write; newest `KEEP` kept);
    `text`: the report's JSON (`encode(report)`) where the caller has it already."""
    import msgspec

    from tracekit.report.schema import encode

    try:
        path.parent.mkdir(exist_ok=True)
        answer = {"report": encode(report) if text is None else text, "warnings": list(warnings)}
        write_bytes(path, msgspec.json.encode(answer))  # `read_answer` parses it; fast
        _prune(path.parent)
    except OSError:  # only costs the next analyze its time
        pass
