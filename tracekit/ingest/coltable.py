"""Small tables built in Python at ingest (rank info, process groups, kernel classes,
collective rows, counted ops), handed to DuckDB as JSON, without pyarrow.

pyarrow's array builders ask whether their input is a pandas object, which imports
pandas: with pyarrow itself, 0.36 s in every ingest worker. msgspec writes the rows as
JSON and DuckDB's reader types them by the schema: 0.013 s for 20k rows × 5 columns,
as fast as building the Arrow table once both are imported.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import duckdb
import msgspec

from tracekit.sql.text import sql_str

Schema = Sequence[tuple[str, str]]  # (column, DuckDB type), in table order

_ENCODE = msgspec.json.Encoder()


def create(
    con: duckdb.DuckDBPyConnection, name: str, schema: Schema, rows: list[dict], tmp_dir: Path
) -> None:
    """Table `name` of `con` with `schema`, from `rows` (dicts; a missing key is null, a
    key not in `schema` is left out by the reader, so the rows are encoded as they are).
    The JSON goes through a temporary file in `tmp_dir`, removed before returning."""
    cols = ", ".join(f"{sql_str(c)}: {sql_str(t)}" for c, t in schema)
    fd, tmp = tempfile.mkstemp(dir=tmp_dir, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_ENCODE.encode(rows))
        names = ", ".join(f'"{c}"' for c, _ in schema)
        con.execute(
            f"CREATE OR REPLACE TABLE {name} AS SELECT {names} FROM read_json("
            f"{sql_str(tmp)}, format = 'array', columns = {{{cols}}})"
        )
    finally:
        Path(tmp).unlink(missing_ok=True)


def dicts(rel: duckdb.DuckDBPyRelation) -> list[dict]:
    """The rows of a query as dicts (no Arrow round trip)."""
    names = rel.columns
    return [dict(zip(names, r, strict=True)) for r in rel.fetchall()]
