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
    collective its name tells. (`tmp_dir`: where `coltable` may write.)"""
    coltable.create(con, "kernel_classes", KERNEL_CLASSES, kernel_class_rows(con, user), tmp_dir)


def kernel_class_rows(con: duckdb.DuckDBPyConnection, user: tuple[str, ...] = ()) -> list[dict]:
    """The `kernel_classes` rows of every rank in `events`, by rank and name (a name is
    classified once, however many ranks ran it)."""
    rx = commkernels.compile_patterns(user, "--comm-kernel")
    pairs = con.execute(sql.query("ingest.collectives", "kernel_names")).fetchall()
    known: dict[str, dict] = {}
    rows = []
    for rank, name in pairs:
        row = known.get(name)
        if row is None:
            c = commkernels.classify(name, rx)
            kind = None
            if c is not None:
                kind = c.kind or (canonical_name(name) if c.family == "nccl" else None)
            row = known[name] = {
                "name": name,
                "category": "communication" if c else "compute",
                "family": c.family if c else None,
                "coll_name": kind,
                "pattern": c.pattern if c else None,
            }
        rows.append({"rank": rank, **row})
    return rows
