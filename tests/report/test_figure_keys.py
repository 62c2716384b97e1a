"""A figure's key is spelled once: in the figure catalog (`tracekit/model/figures.py`),
the report's schema (`tracekit/report/schema.py` and its `schema_levels.py` and
`schema_rows.py`, its Structs' attribute names) and the
SQL library (`tracekit/sql/`, its column names). Everywhere else a figure is read as an
attribute of the typed report or named through its `Figure` (`F.STEP_TIME_MS.key` where a
key is genuinely needed: a JSON dict, a finding's `measured` block). A string literal equal
to a summary figure's key (`"step_time_ms"`, `"mfu"` …) outside those places fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec

from tracekit.model import figures as F
from tracekit.report import schema as S

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tracekit", "tui", "diagnosers")

# where the keys are declared
HOMES = (
    "tracekit/model/figures.py",
    "tracekit/report/schema.py",
    "tracekit/report/schema_levels.py",
    "tracekit/report/schema_rows.py",
    "tracekit/sql/",
)

# Not converted yet; each entry says why. Shrink it: the test fails on an entry that no
# longer holds a figure-key literal.
ALLOWED = {
    # the gate's metric names: two of them (`mfu`, `hfu`) are spelled as their figures'
    # keys, and these two modules name metrics, not figures (`read.py` reads the figures)
    "tracekit/gate/metrics.py": "the metric names mfu and hfu (RUN_METRICS, PRIORS)",
    "tracekit/gate/causes.py": "which metrics take the step's cause, by metric name",
}


def summary_keys() -> set[str]:
    """The figure keys of the summary: the schema's `Summary` fields the catalog holds."""
    return {f.encode_name for f in msgspec.structs.fields(S.Summary)} & set(F.CATALOG)


def key_literals(tree: ast.AST, keys: set[str]) -> list[ast.Constant]:
    """The string literals of `tree` equal to one of `keys` (f-strings' parts included)."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in keys]


def literal_hits() -> dict[str, list[tuple[int, str]]]:
    """Source file (relative, posix) → (line, key) of each string literal equal to a key."""
    keys = summary_keys()
    hits: dict[str, list[tuple[int, str]]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if ".venv" in rel.split("/"):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
            for node in key_literals(tree, keys):
                hits.setdefault(rel, []).append((node.lineno, node.value))
    return hits


def _under(rel: str, places) -> str | None:
    return next((p for p in places if rel == p or (p.endswith("/") and rel.startswith(p))), None)


def test_the_keys_are_the_summary_figures():
    keys = summary_keys()
    assert {"step_time_ms", "mfu", "exposed_comm_fraction", "straggler_ranks"} <= keys
    assert "device_spec" not in keys and "null_reasons" not in keys  # not figures


def test_no_figure_key_literal_outside_the_catalog_schema_and_sql():
    bad = {
        rel: lines
        for rel, lines in literal_hits().items()
        if not _under(rel, HOMES) and not _under(rel, ALLOWED)
    }
    assert not bad, (
        "figure keys spelled as strings; read the typed report's attribute or use the "
        f"catalog's Figure (`F.STEP_TIME_MS.key`): {bad}"
    )


def test_the_allow_list_holds_only_files_that_need_it():
    hits = literal_hits()
    stale = [p for p in ALLOWED if not any(_under(rel, (p,)) for rel in hits)]
    assert not stale, f"allow-list entries without a figure-key literal left: {stale}"


def test_the_scan_sees_literals():
    # a key in a subscript, a dict and an f-string's expression is found; F.MFU.key is not
    src = 'x = r["mfu"]\ny = {"step_time_ms": 1}\nz = f"{r[\'idle_fraction\']}"\nw = F.MFU.key\n'
    found = {n.value for n in key_literals(ast.parse(src), summary_keys())}
    assert found == {"mfu", "step_time_ms", "idle_fraction"}


def test_the_summary_is_derived_from_the_catalog_table():
    # every figure of the summary has one source in `SUMMARY_FROM`, and nothing else has
    assert {f.key for f in F.SUMMARY_FROM} == summary_keys()
    levels = {"memory", "compute", "communication", "scaling"}
    for fig, src in F.SUMMARY_FROM.items():
        if src.level in ("ranks", "run"):
            assert src.block is None and not src.path, fig.key
            continue
        assert src.level in levels and src.block in ("measured", "predicted", "metrics")
        if src.block != "metrics" and not src.path:  # the block's attribute is the key
            block = msgspec.structs.fields(S.LEVEL_TYPES[src.level])
            (typ,) = [f.type for f in block if f.name == src.block]
            assert fig.key in typ.__struct_fields__, (fig.key, src)
    # a `ranks` figure is a field of `ranks[]`
    rank_fields = set(S.RankRow.__struct_fields__)
    assert {f.key for f, s in F.SUMMARY_FROM.items() if s.level == "ranks"} <= rank_fields
