"""One trace of at least 1 GiB of JSON, analyzed cold: does it ingest on this machine?

    python benchmarks/bigtrace.py [--source ../shared/traces/v100_ddp_rank1] [--gib 1]
                                  [--keep DIR] [--json PATH]

Builds ONE trace from the source by replicating its events until the JSON text is at
least `--gib` GiB: copy k has every ts moved by k whole trace spans, every link id
(correlation, External id, Sequence number, flow id) moved by k times the largest id + 1,
and `ProfilerStep#N` renamed to later numbers, so steps and links stay unique; metadata
events appear once (`benchlib.replica`). It is written gzip'd (cached under `--keep DIR`),
then a whole `python -m tracekit.cli analyze RUN --format json` process runs on it with
no cache, with the peak RSS of its process tree.

Reports the JSON size, the events, the seconds, the peak RSS and whether analyze
succeeded; on failure, the command, its exit status and its last stderr line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import benchlib
from benchlib import DEFAULT_SOURCE


def bench(source: Path, root: Path, workers: int, gib: float = 1.0, timeout: float = 3600) -> dict:
    """Build (or reuse) `root/big` and time a cold analyze of it; prints and returns
    the figures."""
    big = benchlib.build_big(source, root / "big", int(gib * 2**30))
    print(
        f"big trace: {big.json_bytes / 2**30:.2f} GiB of JSON ({big.json_bytes:,} bytes, "
        f"{big.path.stat().st_size / 1e6:.0f} MB gzip), {big.events:,} events, "
        f"{big.copies} copies of the source",
        flush=True,
    )
    shutil.rmtree(big.path.parent / ".tracekit", ignore_errors=True)
    cmd = [sys.executable, "-m", "tracekit.cli", "analyze", str(big.path.parent)]
    cmd += ["--format", "json", "--workers", str(workers)]
    m = benchlib.measure(cmd, timeout=timeout)
    ok = m.returncode == 0
    err = [line for line in m.stderr.splitlines() if line.strip()]
    out = {
        "json_bytes": big.json_bytes,
        "gzip_bytes": big.path.stat().st_size,
        "events": big.events,
        "copies": big.copies,
        "command": " ".join(cmd),
        "succeeded": ok,
        "returncode": m.returncode,
        **m.figures(),
        "error": None if ok else (err[-1] if err else f"exit {m.returncode}, no stderr"),
    }
    status = "succeeded" if ok else f"FAILED (exit {m.returncode}): {out['error']}"
    print(
        f"  analyze cold       {m.seconds:8.2f} s   peak RSS {m.peak_rss_bytes / 2**20:7.0f} MiB"
        f"   {status}",
        flush=True,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--gib", type=float, default=1.0, help="least JSON size, GiB")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=3600, help="kill analyze after S seconds")
    ap.add_argument("--keep", type=Path, help="build/keep the trace here (reused by reruns)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="tracekit-big-"))
    try:
        res = bench(args.source, root, args.workers, args.gib, args.timeout)
        if args.json:
            args.json.write_text(json.dumps(res, indent=2) + "\n")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if not res["succeeded"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
