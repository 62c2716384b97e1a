"""Every public column is documented; the engine does not pull in heavy optional parts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tracekit
from tests.tracegen import ddp_like_rank
from tracekit.sql import docs

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_column_has_a_doc(tmp_path):
    ddp_like_rank(0).write(tmp_path / "rank-0.json")
    with tracekit.open(tmp_path) as run:
        public = [
            name
            for (name,) in run.sql(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND "
                "NOT starts_with(view_name, '_') UNION SELECT table_name FROM duckdb_tables()"
            ).fetchall()
        ]
        assert set(public) == set(docs()), "a public view lacks an @view/@table doc block"
        for view in public:
            for col, _typ, doc in run.describe(view):
                assert doc, f"{view}.{col} has no -- @column doc"
            documented = set(docs()[view].columns)
            actual = {c for c, _, _ in run.describe(view)}
            assert documented == actual, f"{view}: docs name columns that do not exist"


HEAVY = ("textual", "torch", "hta", "pandas", "polars")
OTHER_PACKAGES = ("diagnosers", "tui", "instrument")


@pytest.mark.parametrize(
    "module,forbidden",
    [
        ("tracekit", HEAVY + OTHER_PACKAGES),
        ("tracekit.store", HEAVY + OTHER_PACKAGES),
        ("tracekit.metrics.breakdown", HEAVY + OTHER_PACKAGES),
        ("tracekit.report", HEAVY + OTHER_PACKAGES),
        # the front door wires everything together, but imports torch only for `run`
        ("tracekit.cli", HEAVY),
    ],
)
def test_engine_imports_nothing_heavy(module, forbidden):
    code = (
        f"import sys, {module}; bad = [m for m in {forbidden!r} if m in sys.modules]; "
        "print(bad); sys.exit(bool(bad))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_an_ingest_worker_imports_neither_pandas_nor_pyarrow(tmp_path):
    """Each ingest worker paid 0.36 s importing them (pyarrow's builders import pandas):
    the per-rank tables go to DuckDB as JSON instead (`tracekit.ingest.coltable`)."""
    src = ROOT / "sample_traces" / "ddp"
    trace = next(p for p in sorted(src.iterdir()) if p.name.startswith("rank"))
    code = (
        "import sys; from pathlib import Path; from tracekit.ingest.runner import ingest_file; "
        f"ingest_file(Path({str(trace)!r}), Path({str(tmp_path)!r}), 'k', False); "
        "bad = [m for m in ('pandas', 'pyarrow') if m in sys.modules]; "
        "print(bad); sys.exit(bool(bad))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(p.name.split(".", 1)[1] for p in tmp_path.glob("k.*.parquet"))  # it ran
