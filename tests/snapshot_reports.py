"""The safety net for restructuring: every JSON report of every shared trace, sample run
and synthetic GPU run, written to one folder, so two checkouts can be diffed figure by
figure.

    python tests/snapshot_reports.py OUT_DIR [--quick]
    python tests/snapshot_reports.py --diff BEFORE_DIR AFTER_DIR

Beside the reports, every cached table of every run is written as data
(`OUT_DIR/tables/<run>/<table>.parquet`, all ranks, rows sorted, read through the store's
views so that a change of the cache's file layout does not show): `--diff` compares
their columns and rows (each row carries its rank), so a table that changes for any rank
is named.

Traces are copied to a temporary folder first (never written in ../shared). Paths and
the version are normalised so only figures differ. `--diff` prints every key whose value
changed (floats compared to 1e-9 relative), grouped by report.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACEKIT_SHARED_TRACES") or ROOT.parent / "shared" / "traces")
SAMPLES = ROOT / "sample_traces"

# window options analysed for every run
VARIANTS = {"steps": [], "trace": ["--window", "trace"], "hta": ["--window", "hta"]}
SYNTH = {
    "healthy": dict(),
    "exposed": dict(name="exposed", hidden=4096, tokens=4096, buckets_after_backward=True),
    "slow": dict(name="slow", busbw_GBps=40),
    "straggler": dict(name="straggler", straggler=2),
    "low_mfu": dict(name="low_mfu", gemm_eff=0.06),
    "host_bound": dict(name="host_bound", hidden=512, tokens=1024, host_op_us=45.0),
    "bubble": dict(name="bubble", pipeline=(4, 2), layers=8),
    "memory": dict(name="memory", memory_peak=0.96),
    "seq": dict(world=4, seed=3, seq=True),
}


def _runs(work: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    if SHARED.is_dir():
        for d in sorted(SHARED.iterdir()):
            if d.is_dir():
                dest = work / "shared" / d.name
                shutil.copytree(d, dest, ignore=shutil.ignore_patterns(".tracekit"))
                out[f"shared-{d.name}"] = dest
    for d in sorted(SAMPLES.iterdir()):
        if d.is_dir():
            dest = work / "samples" / d.name
            shutil.copytree(d, dest, ignore=shutil.ignore_patterns(".tracekit"))
            out[f"sample-{d.name}"] = dest
    sys.path.insert(0, str(ROOT))
    from tests.synth import Scenario, generate

    for name, kw in SYNTH.items():
        dest = work / "synth" / name
        dest.mkdir(parents=True)
        generate(Scenario(**kw), dest)
        out[f"synth-{name}"] = dest
    return out


def _normalise(rep: dict, root: Path) -> dict:
    text = json.dumps(rep).replace(str(root), "<RUN>")
    rep = json.loads(text)
    rep.pop("tracekit_version", None)
    return rep


def snapshot(out: Path, quick: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    exe = ROOT / ".venv" / "bin" / "tracekit"
    with tempfile.TemporaryDirectory() as tmp:
        runs = _runs(Path(tmp))
        for name, path in runs.items():
            for var, opts in VARIANTS.items():
                if quick and var != "steps":
                    continue
                proc = subprocess.run(
                    [str(exe), "analyze", str(path), "--format", "json", *opts],
                    capture_output=True,
                    text=True,
                )
                dest = out / f"{name}.{var}.json"
                if proc.returncode:
                    dest.write_text(json.dumps({"error": proc.stderr.strip()}))
                    print(f"{name} {var}: exit {proc.returncode}: {proc.stderr.strip()[:200]}")
                    continue
                rep = _normalise(json.loads(proc.stdout), path)
                dest.write_text(json.dumps(rep, indent=1, sort_keys=True))
                print(f"{name} {var}: ok")
            _dump_tables(path, out / "tables" / name)


def _dump_tables(path: Path, out: Path) -> None:
    """Every cached table of the run at `path` (ingested by the analyses above), as the
    store reads it: all ranks, rows in one order, paths normalised."""
    import tracekit
    from tracekit.ingest.cache import TABLES
    from tracekit.sql.text import sql_str

    internal = {"collectives": "_collectives"}
    try:
        run = tracekit.open(path, allow_mixed=True)
    except Exception as exc:  # a run analyze refuses has no tables either
        print(f"{path.name}: no tables ({exc})")
        return
    out.mkdir(parents=True, exist_ok=True)
    views = {v for (v,) in run.sql("SELECT view_name FROM duckdb_views()").fetchall()}
    with run:
        for table in TABLES:
            name = internal.get(table, table)
            src = f"_unaligned_{name}" if f"_unaligned_{name}" in views else name
            cols = [c for c, *_ in run.sql(f"DESCRIBE {src}").fetchall()]
            sel = ", ".join(
                f'replace("{c}", {sql_str(str(path))}, \'<RUN>\') AS "{c}"'
                if c in ("source", "distributed_info")
                else f'"{c}"'
                for c in cols
            )
            dest = out / f"{table}.parquet"
            run.con.execute(
                f"COPY (SELECT {sel} FROM {src} ORDER BY ALL) TO {sql_str(str(dest))} "
                "(FORMAT parquet)"
            )


def _walk(a, b, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}.{k}: added")
            elif k not in b:
                out.append(f"{path}.{k}: removed")
            else:
                _walk(a[k], b[k], f"{path}.{k}", out)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: length {len(a)} → {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _walk(x, y, f"{path}[{i}]", out)
        return
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
            return
    elif a == b:
        return
    out.append(f"{path}: {a!r} → {b!r}")


def diff(before: Path, after: Path) -> int:
    changed = 0
    for f in sorted(before.glob("*.json")):
        g = after / f.name
        if not g.exists():
            print(f"== {f.name}: missing after")
            changed += 1
            continue
        out: list[str] = []
        _walk(json.loads(f.read_text()), json.loads(g.read_text()), "", out)
        if out:
            changed += 1
            print(f"== {f.name}: {len(out)} changes")
            for line in out[:60]:
                print("  ", line)
    print(f"{changed} reports differ")
    tables = _diff_tables(before / "tables", after / "tables")
    return 1 if changed or tables else 0


def _diff_tables(before: Path, after: Path) -> int:
    """Tables whose columns or rows differ (as multisets of rows, each with its rank)."""
    import duckdb

    from tracekit.sql.text import sql_str

    con = duckdb.connect()
    changed = 0
    for f in sorted(before.glob("*/*.parquet")):
        g = after / f.parent.name / f.name
        label = f"{f.parent.name}/{f.stem}"
        if not g.exists():
            print(f"== table {label}: missing after")
            changed += 1
            continue
        a, b = (f"read_parquet({sql_str(str(p))})" for p in (f, g))
        cols_a = con.sql(f"DESCRIBE SELECT * FROM {a}").fetchall()
        cols_b = con.sql(f"DESCRIBE SELECT * FROM {b}").fetchall()
        if [c[:2] for c in cols_a] != [c[:2] for c in cols_b]:
            was, now = [c[:2] for c in cols_a], [c[:2] for c in cols_b]
            print(f"== table {label}: columns {was} → {now}")
            changed += 1
            continue
        gone = con.sql(f"SELECT count(*) FROM (FROM {a} EXCEPT ALL FROM {b})").fetchall()[0][0]
        new = con.sql(f"SELECT count(*) FROM (FROM {b} EXCEPT ALL FROM {a})").fetchall()[0][0]
        if gone or new:
            ranks = con.sql(
                f"SELECT list(DISTINCT rank ORDER BY rank) FROM "
                f"((FROM {a} EXCEPT ALL FROM {b}) UNION ALL (FROM {b} EXCEPT ALL FROM {a}))"
            ).fetchall()[0][0]
            print(f"== table {label}: {gone} rows gone, {new} rows new (ranks {ranks})")
            changed += 1
    n = len(list(before.glob("*/*.parquet")))
    print(f"{changed} of {n} tables differ")
    return changed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--quick", action="store_true", help="the default window only")
    ap.add_argument("--diff", nargs=2, metavar=("BEFORE", "AFTER"))
    a = ap.parse_args()
    if a.diff:
        sys.exit(diff(Path(a.diff[0]), Path(a.diff[1])))
    snapshot(Path(a.out), a.quick)


if __name__ == "__main__":
    main()
