"""The `kernel_classes` table: each kernel name of each rank, communication or compute,
and the collective its name tells (`tracekit.model.commkernels`)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from tracekit import sql
from tracekit.ingest import coltable
from tracekit.ingest.collnames import canonical_name
from tracekit.model import commkernels

KERNEL_CLASSES = (
    ("rank", "INTEGER"),
    ("name", "VARCHAR"),
    ("category", "VARCHAR"),
    ("family", "VARCHAR"),
    ("coll_name", "VARCHAR"),
    ("pattern", "VARCHAR"),
)


def kernel_classes(
    con: duckdb.DuckDBPyConnection, tmp_dir: Path, user: tuple[str, ...] = ()
) -> None:
    """Table `kernel_classes` of `con`: one row per rank and distinct kernel name:
    communication (a `commkernels` entry or a user pattern matches) or compute; the
    collective its name tells. (`tmp_dir`: where `coltable` may write.) Each name is
    classified, and handed to DuckDB, once however many ranks ran it (128 small ranks:
    9,700 rows of names of ~380 characters were built and written as JSON in Python)."""
    coltable.create(con, "_name_classes", KERNEL_CLASSES[1:], name_class_rows(con, user), tmp_dir)
    con.execute(sql.query("ingest.collectives", "kernel_classes_table"))
    con.execute("DROP TABLE _name_classes")


def name_class_rows(con: duckdb.DuckDBPyConnection, user: tuple[str, ...] = ()) -> list[dict]:
    """The class of every distinct kernel name in `events`: the `kernel_classes` columns
    but the rank, by name."""
    rx = commkernels.compile_patterns(user, "--comm-kernel")
    rows = []
    for (name,) in con.execute(sql.query("ingest.collectives", "kernel_names")).fetchall():
        c = commkernels.classify(name, rx)
        kind = None
        if c is not None:
            kind = c.kind or (canonical_name(name) if c.family == "nccl" else None)
        rows.append(
            {
                "name": name,
                "category": "communication" if c else "compute",
                "family": c.family if c else None,
                "coll_name": kind,
                "pattern": c.pattern if c else None,
            }
        )
    return rows
