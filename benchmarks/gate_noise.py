"""How often does the gate cry wolf, and how often does it catch a regression?

    python benchmarks/gate_noise.py record DIR [--job ddp|pp] [--base 6] [--variant 3] [--steps 6]
    python benchmarks/gate_noise.py measure DIR [--run-noise step_time=12%,…] [--json]
    python benchmarks/gate_noise.py probe [--seconds 60]

`record` runs `tracekit run JOB --world-size 2 --steps S` BASE times and the same job
with one more transformer block (`--layers 5`) VARIANT times, interleaved (b b v b b v …)
so the machine's load falls on both alike, logs /proc/loadavg before and after each job
(DIR/load.tsv), and keeps each run as a gzipped one-run baseline (DIR/base-N.json.gz,
DIR/variant-N.json.gz, a few KB: the report's figures and per-step samples, no traces).

`measure` makes the comparisons of the issue (tests/e2e/test_gate_noise.py makes the same):

- every ordered pair of base runs, one run a side (6 runs: 30 pairs) — a failure
  (exit 1) is a false failure;
- each of the last half of the base runs against a baseline of the first half, and the
  other way round (6 runs: 3 + 3) — false failures;
- every base run against every variant run, one run a side, and each variant run against
  the first-half baseline — a comparison whose step time is *regressed* caught it.

`probe` asks whether the machine itself is steady enough to gate on: two processes (one
per core of a 2-core runner) each copy a 64 MB array over and over for `--seconds`, and
it prints each process's mean time per round in 5-second blocks and their spread. A CPU
reference job's ops are memory-bound: where this spread is large, so is the job's step
time, whatever the gate does (on the 2-core development machine, 2026-11-27: 26–61 ms
over two runs, sd 12–18%, while a cache-resident matmul in the same two processes held
±3%).

`record` and `measure` time nothing; the figures are the reports' own.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def record(out: Path, base: int, variant: int, steps: int, job: str = "ddp") -> None:
    out.mkdir(parents=True, exist_ok=True)
    order = []
    b = v = 0
    while b < base or v < variant:  # two base runs, then one variant, …
        for kind in ("base", "base", "variant"):
            if kind == "base" and b < base:
                b += 1
                order.append(("base", b))
            elif kind == "variant" and v < variant:
                v += 1
                order.append(("variant", v))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(out / "load.tsv", "a") as log:
        for kind, i in order:
            name = f"{kind}-{i}"
            run = out / "runs" / name
            cmd = [sys.executable, "-m", "tracekit.cli", "run", job, "--world-size", "2",
                   "--steps", str(steps), "--out", str(run)]  # fmt: skip
            if kind == "variant":
                cmd += ["--layers", "5"]
            load0, t0 = Path("/proc/loadavg").read_text().split()[0], time.time()
            subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=ROOT)
            load1 = Path("/proc/loadavg").read_text().split()[0]
            log.write(f"{name}\t{time.strftime('%H:%M:%S', time.gmtime(t0))}\t"
                      f"{time.time() - t0:.0f}s\tload {load0} → {load1}\n")  # fmt: skip
            log.flush()
            subprocess.run(
                [sys.executable, "-m", "tracekit.cli", "baseline", "save", str(run), "-o",
                 str(out / f"{name}.json.gz")],
                check=True, capture_output=True, cwd=ROOT,
            )  # fmt: skip
            print(name, "recorded", flush=True)


def _load(path: Path):
    from tracekit.gate import baseline as gb

    return gb.load_side(str(path), lambda p: {})


def _files(d: Path, kind: str) -> list[Path]:
    return sorted(d.glob(f"{kind}-*.json.gz"), key=lambda p: int(p.name.split("-")[1][:-8]))


def measure(d: Path, run_noise: str | None = None) -> dict:
    from tracekit.gate import baseline as gb
    from tracekit.gate.compare import run_compare
    from tracekit.gate.metrics import parse_spec

    noise = parse_spec(run_noise, "--run-noise")
    base = [_load(p) for p in _files(d, "base")]
    var = [_load(p) for p in _files(d, "variant")]
    half = len(base) // 2
    first, last = gb.join(base[:half]), gb.join(base[half:])

    def verdict(b, n) -> dict:
        cmp = run_compare(b, n, run_noise=noise)
        st = next(v for v in cmp.verdicts if v.metric == "step_time")
        return {
            "base": b.path, "new": n.path, "failed": bool(cmp.failed),
            "failed_metrics": [v.metric for v in cmp.failed],
            "step_time": st.verdict, "change": st.change, "evidence": st.evidence,
        }  # fmt: skip

    same_pairs = [verdict(a, b) for a in base for b in base if a is not b]
    same_base = [verdict(first, r) for r in base[half:]] + [verdict(last, r) for r in base[:half]]
    var_pairs = [verdict(a, v) for a in base for v in var]
    var_base = [verdict(first, v) for v in var]

    def rate(rows, key="failed"):
        return {"of": len(rows), "count": sum(bool(r[key]) for r in rows)}

    return {
        "runs": {"base": len(base), "variant": len(var)},
        "false_failures": {
            "single_pairs": rate(same_pairs),
            "against_baseline": rate(same_base),
        },
        "caught_step_time_regressed": {
            "single_pairs": rate([{"x": r["step_time"] == "regressed"} for r in var_pairs], "x"),
            "against_baseline": rate(
                [{"x": r["step_time"] == "regressed"} for r in var_base], "x"
            ),
        },
        "variant_failed_any_metric": {
            "single_pairs": rate(var_pairs),
            "against_baseline": rate(var_base),
        },
        "comparisons": {
            "same_pairs": same_pairs,
            "same_baseline": same_base,
            "variant_pairs": var_pairs,
            "variant_baseline": var_base,
        },
    }


def _copy_rounds(seconds: float, out) -> None:
    import numpy as np

    a = np.random.default_rng(0).random(8_000_000)  # 64 MB: far past any cache
    b = np.empty_like(a)
    t0, times = time.perf_counter(), []
    while (t := time.perf_counter()) - t0 < seconds:
        for _ in range(5):
            np.copyto(b, a)
        times.append((time.perf_counter() - t, t - t0))
    out.put(times)


def probe(seconds: float) -> list[list[float]]:
    """Each process's mean ms per round of copies, in 5-second blocks."""
    import multiprocessing as mp

    q = mp.get_context("spawn").Queue()
    procs = [mp.get_context("spawn").Process(target=_copy_rounds, args=(seconds, q))
             for _ in range(2)]  # fmt: skip
    for p in procs:
        p.start()
    runs = [q.get() for _ in procs]
    for p in procs:
        p.join()
    blocks = []
    for times in runs:
        by: dict[int, list[float]] = {}
        for dt, at in times:
            by.setdefault(int(at // 5), []).append(dt * 1e3)
        blocks.append([sum(v) / len(v) for _, v in sorted(by.items())])
    return blocks


def step_times(d: Path) -> dict[str, float]:
    out = {}
    for kind in ("base", "variant"):
        for p in _files(d, kind):
            with gzip.open(p, "rt") as fh:
                run = json.load(fh)["runs"][0]
            out[p.name.removesuffix(".json.gz")] = run["summary"]["step_time_ms"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("dir", type=Path)
    r.add_argument("--base", type=int, default=6)
    r.add_argument("--variant", type=int, default=3)
    r.add_argument("--steps", type=int, default=6)
    r.add_argument("--job", choices=("ddp", "pp"), default="ddp")
    m = sub.add_parser("measure")
    m.add_argument("dir", type=Path)
    m.add_argument("--run-noise", default=None)
    m.add_argument("--json", action="store_true")
    pr = sub.add_parser("probe")
    pr.add_argument("--seconds", type=float, default=60)
    a = ap.parse_args()
    if a.cmd == "probe":
        import statistics

        for i, row in enumerate(probe(a.seconds)):
            sd = statistics.stdev(row) / statistics.fmean(row) if len(row) > 1 else 0.0
            print(f"process {i}: ms per round, 5 s blocks: "
                  + " ".join(f"{x:.0f}" for x in row)
                  + f"  (min {min(row):.0f}, max {max(row):.0f}, sd {sd:.0%})")  # fmt: skip
        return
    if a.cmd == "record":
        record(a.dir, a.base, a.variant, a.steps, a.job)
        return
    res = measure(a.dir, a.run_noise)
    if a.json:
        print(json.dumps(res, indent=1))
        return
    for name, ms in step_times(a.dir).items():
        print(f"{name:12} step time {ms:8.2f} ms")
    ff, cs = res["false_failures"], res["caught_step_time_regressed"]
    va = res["variant_failed_any_metric"]
    print(f"false failures: {ff['single_pairs']['count']}/{ff['single_pairs']['of']} single-run "
          f"pairs, {ff['against_baseline']['count']}/{ff['against_baseline']['of']} against a "
          "baseline of the other half")  # fmt: skip
    print(f"variant, step time regressed: {cs['single_pairs']['count']}/"
          f"{cs['single_pairs']['of']} single-run pairs, {cs['against_baseline']['count']}/"
          f"{cs['against_baseline']['of']} against the baseline")  # fmt: skip
    print(f"variant, any failure: {va['single_pairs']['count']}/{va['single_pairs']['of']} "
          f"pairs, {va['against_baseline']['count']}/{va['against_baseline']['of']} baseline")
    verdicts: dict[str, int] = {}
    for group in res["comparisons"].values():
        for row in group:
            verdicts[row["step_time"]] = verdicts.get(row["step_time"], 0) + 1
    print("step-time verdicts over all comparisons:", verdicts)


if __name__ == "__main__":
    main()
