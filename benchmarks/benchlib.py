"""Shared by the benchmarks: runs built from one trace, a process tree timed with its
peak memory, a 1 GB trace replicated from one trace, and the issue's targets.

Pure helpers (`replica`, `replica_plan`, `evaluate`) are tested in
`tests/integration/test_bench.py`; nothing here is timed by a test.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_SOURCE = ROOT.parent / "shared" / "traces" / "v100_ddp_rank1"

# ---------------------------------------------------------------- runs from one trace


def source_trace(source: Path) -> Path:
    """The one Kineto trace file in `source` (a folder) or `source` itself."""
    if source.is_file():
        return source
    files = [p for p in sorted(source.iterdir()) if p.name.endswith((".json", ".json.gz"))]
    if not files:
        raise SystemExit(f"{source} holds no .json or .json.gz trace")
    return files[0]


def read_doc(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        return json.loads(fh.read())


def _write_atomic(out: Path, data: bytes) -> None:
    from isal import igzip

    tmp = out.with_name(out.name + ".part")
    tmp.write_bytes(igzip.compress(data, compresslevel=3))
    tmp.replace(out)


def build_run(source: Path, ranks: int, dest: Path) -> list[Path]:
    """`dest/rank-R.json.gz` for R in 0..ranks-1: the source trace with
    distributedInfo.rank = R and world_size = ranks. Files already there are kept
    (a cached run); each is written whole or not at all."""
    dest.mkdir(parents=True, exist_ok=True)
    files = [dest / f"rank-{r}.json.gz" for r in range(ranks)]
    if all(f.exists() for f in files):
        return files
    doc = read_doc(source_trace(source))
    doc.setdefault("distributedInfo", {}).update(rank="@RANK@", world_size=ranks)
    text = json.dumps(doc).encode()
    for r, out in enumerate(files):
        if not out.exists():
            _write_atomic(out, text.replace(b'"@RANK@"', str(r).encode(), 1))
    return files


DLRM_SOURCE = ROOT.parent / "shared" / "traces" / "v100_dlrm_8rank"


def build_small_run(source: Path, ranks: int, dest: Path) -> list[Path]:
    """`dest/rank-R.json.gz` for R in 0..ranks-1 from a run of a few ranks (the 8-rank
    DLRM step): rank R is source trace R mod n with distributedInfo.rank = R and
    world_size = ranks, as a user of a big job with small traces per rank has them.
    Files already there are kept; each is written whole or not at all."""
    dest.mkdir(parents=True, exist_ok=True)
    files = [dest / f"rank-{r}.json.gz" for r in range(ranks)]
    if all(f.exists() for f in files):
        return files
    srcs = [p for p in sorted(source.iterdir()) if p.name.endswith((".json", ".json.gz"))]
    texts = []
    for src in srcs:
        doc = read_doc(src)
        doc.setdefault("distributedInfo", {}).update(rank="@RANK@", world_size=ranks)
        texts.append(json.dumps(doc).encode())
    for r, out in enumerate(files):
        if not out.exists():
            _write_atomic(out, texts[r % len(texts)].replace(b'"@RANK@"', str(r).encode(), 1))
    return files


def cpu_seconds() -> float:
    """This process's CPU seconds so far (user + system): load-robust on a shared machine."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def gzip_text_bytes(path: Path) -> int:
    """Uncompressed size of a single-member gzip file below 4 GiB (its ISIZE field)."""
    with open(path, "rb") as fh:
        fh.seek(-4, os.SEEK_END)
        return int.from_bytes(fh.read(4), "little")


# ---------------------------------------------------------------- timing a process tree


@dataclass
class Measured:
    seconds: float | None  # None: stopped at its timeout
    peak_rss_bytes: int
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    cpu_seconds: float | None = None  # user + system CPU of the whole process tree

    def figures(self) -> dict:
        secs = None if self.seconds is None else round(self.seconds, 3)
        cpu = None if self.cpu_seconds is None else round(self.cpu_seconds, 3)
        return {"seconds": secs, "peak_rss_bytes": self.peak_rss_bytes, "cpu_seconds": cpu}


def _rss(procs: list) -> int:
    """Summed RSS of the processes now (0 for one that has exited)."""
    import psutil

    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def _kill_tree(proc) -> None:
    import psutil

    for p in (*proc.children(recursive=True), proc):
        with contextlib.suppress(psutil.Error):
            p.kill()


def compile_bytecode() -> None:
    """Compile the packages a timed `tracekit analyze` imports from this checkout, once,
    as pip does for an installed package, so that no timed phase pays for it (`measure`
    lets the phases read the bytecode)."""
    import compileall

    for package in ("tracekit", "diagnosers"):
        compileall.compile_dir(ROOT / package, quiet=1)


def measure(cmd: list[str], timeout: float | None = None) -> Measured:
    """Wall seconds and peak summed RSS of `cmd`'s process tree (sampled every 10 ms
    with psutil, workers included), run from the repository root so that this
    checkout's tracekit is the one imported. Past `timeout` seconds the tree is killed
    (returncode -9).

    Listing the tree scans /proc (~4 ms here), so the list is refreshed every 0.25 s
    and only the listed processes' RSS is read every 10 ms: the sampler costs ~2% of
    a core instead of ~30% on a 2-core machine; a worker that lives less than 0.25 s
    may be missed."""
    import resource

    import psutil

    env = dict(os.environ, TRACEKIT_NO_PROGRESS="1")
    # an installed tracekit has its bytecode cached (pip compiles it; an editable checkout
    # writes it on first import): a shell with PYTHONDONTWRITEBYTECODE set (this project's
    # machines) recompiled ~80 modules on every run, 0.03-0.1 s a phase (`compile_bytecode`)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT, text=True
    )
    ps = psutil.Process(proc.pid)
    # read the pipes while the process runs so that a full pipe never blocks it
    chunks: dict[str, list[str]] = {"out": [], "err": []}
    readers = [
        threading.Thread(target=lambda s=s, k=k: chunks[k].append(s.read()), daemon=True)
        for s, k in ((proc.stdout, "out"), (proc.stderr, "err"))
    ]
    for t in readers:
        t.start()
    peak, tree, listed = 0, [ps], 0.0
    while proc.poll() is None:
        now = time.perf_counter()
        if now - listed > 0.25:
            with contextlib.suppress(psutil.Error):
                tree, listed = [ps, *ps.children(recursive=True)], now
        peak = max(peak, _rss(tree))
        if timeout is not None and time.perf_counter() - t0 > timeout:
            _kill_tree(ps)
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    for t in readers:
        t.join()
    # every process of the tree was waited for by its parent (the pool waits for its
    # workers), so the children's rusage holds them all: CPU seconds, far less sensitive
    # to other users of a shared machine than wall seconds
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    out, err = "".join(chunks["out"]), "".join(chunks["err"])
    return Measured(wall, peak, proc.returncode, out, err, cpu_seconds=cpu)


def best_of(runs: Iterable[Measured]) -> Measured:
    return min(runs, key=lambda m: math.inf if m.seconds is None else m.seconds)


# ---------------------------------------------------------------- one big trace

STEP = re.compile(r"ProfilerStep#(\d+)")
ID_ARGS = ("correlation", "External id", "Sequence number")


@dataclass(frozen=True)
class ReplicaPlan:
    """How copy k of a trace's events is moved: ts + k·span_us, every link id
    (correlation, External id, Sequence number, flow `id`) + k·id_stride, every
    `ProfilerStep#N` to N + k·step_stride."""

    span_us: int
    id_stride: int
    step_stride: int


def replica_plan(events: list[dict]) -> ReplicaPlan:
    starts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    ends = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float))]
    ids = [0]
    for e in events:
        if isinstance(e.get("id"), int):
            ids.append(e["id"])
        args = e.get("args") or {}
        ids += [args[k] for k in ID_ARGS if isinstance(args.get(k), int)]
    steps = [int(m.group(1)) for e in events if (m := STEP.fullmatch(str(e.get("name", ""))))]
    return ReplicaPlan(
        span_us=math.ceil(max(ends) - min(starts)) + 1 if starts else 0,
        id_stride=max(ids) + 1,
        step_stride=max(steps) - min(steps) + 1 if steps else 0,
    )


def replica(events: list[dict], k: int, plan: ReplicaPlan) -> list[dict]:
    """Copy k of the events, moved by `plan` (copy 0 is the events unchanged); metadata
    events (ph M) are only in copy 0. The input is not modified."""
    if k == 0:
        return events
    out = []
    dt, did, dstep = k * plan.span_us, k * plan.id_stride, k * plan.step_stride
    for e in events:
        if e.get("ph") == "M":
            continue
        e = dict(e)
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] += dt
        if isinstance(e.get("id"), int):
            e["id"] += did
        if (m := STEP.fullmatch(str(e.get("name", "")))) is not None:
            e["name"] = f"ProfilerStep#{int(m.group(1)) + dstep}"
        args = e.get("args")
        if args and any(isinstance(args.get(a), int) for a in ID_ARGS):
            e["args"] = args = dict(args)
            for a in ID_ARGS:
                if isinstance(args.get(a), int):
                    args[a] += did
        out.append(e)
    return out


@dataclass
class BigTrace:
    path: Path
    json_bytes: int
    events: int
    copies: int


def build_big(source: Path, dest: Path, min_bytes: int) -> BigTrace:
    """One trace of at least `min_bytes` of JSON: the source's events replicated
    (`replica`) until the text is that big, written gzip'd to `dest/big.json.gz`.
    Cached: a complete file with its sidecar `dest.parent/<dest.name>.meta.json` is
    reused."""
    import msgspec
    from isal import igzip

    out = dest / "big.json.gz"
    meta = dest.with_name(dest.name + ".meta.json")
    if out.exists() and meta.exists():
        m = json.loads(meta.read_text())
        if m["json_bytes"] >= min_bytes:
            return BigTrace(out, m["json_bytes"], m["events"], m["copies"])
    doc = read_doc(source_trace(source))
    events = doc.pop("traceEvents")
    plan = replica_plan(events)
    head = msgspec.json.encode(doc)[:-1] + b', "traceEvents": ['
    dest.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    written, n, k = len(head), 0, 0
    with igzip.open(tmp, "wb", compresslevel=3) as fh:
        fh.write(head)
        while written + 2 < min_bytes:
            copy = replica(events, k, plan)
            chunk = (b"," if k else b"") + msgspec.json.encode(copy)[1:-1]
            fh.write(chunk)
            written += len(chunk)
            n += len(copy)
            k += 1
        fh.write(b"]}")
        written += 2
    tmp.replace(out)
    meta.write_text(json.dumps({"json_bytes": written, "events": n, "copies": k}))
    return BigTrace(out, written, n, k)


# ---------------------------------------------------------------- the targets

OPS = {"≤": lambda v, lim: v <= lim, "≥": lambda v, lim: v >= lim, "<": lambda v, lim: v < lim}


@dataclass
class Target:
    target: str
    measured: str
    value: float | None
    limit: float
    met: bool | None  # None: not measured in this run

    def as_dict(self) -> dict:
        return asdict(self)


def _fig(figs: dict, run: str | None, phase: str, key: str) -> float | None:
    m = figs.get(run, {}).get(phase)
    return None if m is None else m.get(key)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _target(text: str, value: float | None, op: str, limit: float, unit: str) -> Target:
    if value is None:
        return Target(text, "not measured", None, limit, None)
    return Target(text, f"{value:.2f}{unit}", value, limit, OPS[op](value, limit))


def evaluate(
    figs: dict[str, dict[str, dict]],
    base: str | None,
    scaled: str | None = None,
    many: str | None = None,
) -> list[Target]:
    """The issue's "Done when" lines from one run's figures: `figs[run][phase]` =
    {"seconds", "peak_rss_bytes"} for the phases `floor`, `analyze_cold` and
    `analyze_warm`. `base` names the 8-big-rank run, `scaled` the 64-big-rank one, `many`
    the 1,024-small-rank one (None: not run; its lines say "not measured"). The scaled
    run's time limit is linear in ranks: 8× for 64 over 8."""

    def sec(n, phase):
        return _fig(figs, n, phase, "seconds")

    def rss(n, phase):
        return _fig(figs, n, phase, "peak_rss_bytes")

    def ranks(name):
        return int(name.split()[0]) if name else None

    grow = (ranks(scaled) / ranks(base)) if scaled and base else 8.0
    b = base or "8 big ranks"
    sc = scaled or "64 big ranks"
    m = many or "1024 small ranks"
    return [
        _target(
            f"cold analyze ≤ 2× floor ({b})",
            _ratio(sec(base, "analyze_cold"), sec(base, "floor")),
            "≤",
            2.0,
            "×",
        ),
        _target(
            f"cold analyze ≤ 3× floor ({m})",
            _ratio(sec(many, "analyze_cold"), sec(many, "floor")),
            "≤",
            3.0,
            "×",
        ),
        _target(f"warm analyze ≤ 0.5 s ({b})", sec(base, "analyze_warm"), "≤", 0.5, " s"),
        _target(f"warm analyze ≤ 1 s ({m})", sec(many, "analyze_warm"), "≤", 1.0, " s"),
        _target(
            f"cold ({sc}) ≤ {grow:.0f}× cold ({b})",
            _ratio(sec(scaled, "analyze_cold"), sec(base, "analyze_cold")),
            "≤",
            grow,
            "×",
        ),
        _target(
            f"cold peak RSS ({sc}) ≤ 1.5× ({b})",
            _ratio(rss(scaled, "analyze_cold"), rss(base, "analyze_cold")),
            "≤",
            1.5,
            "×",
        ),
    ]


@dataclass
class Bound:
    """The least cold analyze today's analysis allows: the decode over the workers
    (`floor_parallel`) and then the report computed from cached tables
    (`analyze_recompute`, its start and its Parquet reads included), as if building the
    tables cost nothing more than the decode. Against `limit` × the floor: the time left
    for building the tables (negative: the line cannot be met without a faster analysis)."""

    run: str
    seconds: float
    ratio: float  # × the floor
    limit: float  # the line's × the floor
    left_seconds: float  # limit × floor − seconds


def bound(figs: dict, run: str | None, limit: float) -> Bound | None:
    """`Bound` of `run` from its `floor`, `floor_parallel` and `analyze_recompute` (None
    when one was not measured)."""
    floor = _fig(figs, run, "floor", "seconds")
    par = _fig(figs, run, "floor_parallel", "seconds")
    rec = _fig(figs, run, "analyze_recompute", "seconds")
    if not floor or par is None or rec is None:  # `_fig` of no run is None too
        return None
    least = par + rec
    return Bound(run, least, least / floor, limit, limit * floor - least)


def big_target(big: dict) -> Target:
    """ "A 1 GB trace ingests on this machine", from `bigtrace.bench`'s figures."""
    gib = big["json_bytes"] / 2**30
    return Target(
        f"a {gib:.2f} GiB trace analyzes cold on this machine",
        f"{big['seconds']:.0f} s, {big['peak_rss_bytes'] / 2**30:.1f} GiB",
        1.0 if big["succeeded"] else 0.0,
        1.0,
        bool(big["succeeded"]),
    )


# ---------------------------------------------------------------- the README's table

LABELS = {
    "hta": "HTA `TraceAnalysis(trace_dir=…)`, load only",
    "floor": "**decode floor**: isal gunzip + msgspec into a minimal event struct, 1 process",
    "floor_orjson": "isal gunzip + orjson decoding the whole document, 1 process",
    "floor_parallel": "decode floor over {workers} processes",
    "analyze_cold": "`tracekit analyze --format json`, whole process, cold (no cache)",
    "analyze_recompute": "… recompute: cached tables, report computed again",
    "analyze_warm": "… warm: the report cache answers",
}


def markdown(result: dict) -> str:
    """The speed tables of docs/speed.md from `ingest.py --json`'s figures: every phase of
    each run (seconds, peak RSS, × the floor of that run), then the targets."""
    runs = result["runs"]
    head = "| phase | " + " | ".join(f"{n} | CPU | peak RSS | × floor" for n in runs) + " |"
    lines = [head, "|---" * (1 + 4 * len(runs)) + "|"]
    for ph, label in LABELS.items():
        if not any(ph in r["phases"] for r in runs.values()):
            continue
        cells = []
        for r in runs.values():
            m, floor = r["phases"].get(ph), r["phases"].get("floor")
            if m is None or m.get("seconds") is None:
                cells += ["", "", "", ""]
                continue
            rel = f"{m['seconds'] / floor['seconds']:.2f}×" if floor else ""
            cpu = f"{m['cpu_seconds']:.2f} s" if m.get("cpu_seconds") is not None else ""
            mib = f"{m['peak_rss_bytes'] / 2**20:.0f} MiB"
            cells += [f"{m['seconds']:.2f} s", cpu, mib, rel]
        label = label.format(workers=result.get("workers"))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "| target | measured | met? |", "|---|---|---|"]
    for t in result.get("targets", []):
        met = "—" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} | {t['measured']} | {met} |")
    if big := result.get("big"):
        lines += [
            "",
            f"One trace of {big['json_bytes'] / 2**30:.2f} GiB of JSON ({big['events']:,} events, "
            f"{big['copies']} copies of the source): cold analyze "
            + ("succeeded" if big["succeeded"] else f"failed ({big['error']})")
            + f" in {big['seconds']:.0f} s, peak RSS {big['peak_rss_bytes'] / 2**30:.1f} GiB.",
        ]
    return "\n".join(lines) + "\n"
