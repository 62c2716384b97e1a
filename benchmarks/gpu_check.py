"""Check tracekit against independent truths on the reference jobs — one command, for
when a GPU is at hand; on a CPU machine it runs as far as it can.

    python benchmarks/gpu_check.py [--jobs ddp,fsdp,pp] [--out DIR] [--device auto]
                                   [--world N] [--json FILE] [--size small|large]
                                   [--backend auto|nccl|gloo]

`--size large` is a 0.5 B-parameter model (8 blocks of width 2048, 1,024 tokens × 8
sequences) that keeps a GPU busy; the default is the reference jobs' small model, which
leaves a fast GPU mostly idle (launch-bound). `--backend gloo` lets ranks share GPUs.

On CUDA (at least `--world` GPUs) the jobs run with NCCL in bf16; on CPU with gloo in
fp32. Each job is run by `instrument` (what `tracekit run` runs), analysed by
`tracekit.analyze`, and checked:

- `flops`: tracekit's GEMM FLOPs per step (mm/addmm/bmm/baddbmm rows of `op_flops`, all
  ranks) against `torch.utils.flop_counter.FlopCounterMode` over one training step of the
  same model, batch and dtype in this process, times the ranks that each compute the
  whole model (DDP, FSDP: the world size; a pipeline's stages split it: 1). Attention
  is left out of this comparison: FlopCounterMode has no formula for the CPU flash op,
  and counts causal attention in full where tracekit halves it (its docstring).
- `mfu`: tracekit's MFU against the job's own: FlopCounterMode's model FLOPs (3 × the
  forward's GEMMs and attention, as tracekit's MFU) per rank ÷ the job's own wall time per
  step (device synchronized; `instrument.launch` records it in job.json) ÷ the peak the
  report used. Timing windows differ slightly (ProfilerStep spans vs the job's timer).
- `memory` (CUDA): each rank's peak allocated bytes from the trace against
  `torch.cuda.max_memory_allocated` over the same profiled steps (reset before them).
- `kernels` (CUDA): every `nccl*` kernel is communication in `kernel_classes`; every
  GEMM/attention kernel (by name) is counted — launched by an op with FLOPs.

Exit 0 when every check that ran passed, 1 otherwise; a check that cannot run here
(memory and kernels on CPU) says SKIP and why. The runs stay in `--out` (commit the GPU
ones, gzipped as written, as sample runs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation")
ORACLE_GEMMS = ("mm", "addmm", "bmm", "baddbmm", "_addmm_activation")
# ranks that each compute the whole model on their own batch
WHOLE_MODEL_RANKS = {"ddp": "world", "fsdp": "world", "pp": 1}
GEMM_OR_ATTENTION_KERNEL = re.compile(
    r"gemm|gemv|cutlass|xmma|cublas|flash|fmha|attention|sm\d\d_", re.IGNORECASE
)
TOLERANCE = {"flops": 0.02, "mfu": 0.15, "memory": 0.05}
SIZES = {
    "small": {},
    "large": {
        "layers": 8,
        "hidden": 2048,
        "heads": 16,
        "kv_heads": 8,
        "ffn": 5632,
        "vocab": 32000,
        "seq": 1024,
        "batch": 8,
    },
}


@dataclass
class Check:
    job: str
    name: str
    status: str  # PASS, FAIL or SKIP
    tracekit: float | None
    truth: float | None
    detail: str

    def line(self) -> str:
        def f(v):
            return "—" if v is None else f"{v:.6g}"

        return (
            f"{self.status:4}  {self.job:5} {self.name:8} tracekit {f(self.tracekit):>12}  "
            f"truth {f(self.truth):>12}  {self.detail}"
        )


def _close(job, name, got, want, tol, detail) -> Check:
    if got is None or want is None:
        return Check(job, name, "FAIL", got, want, f"{detail}: a figure is missing")
    ok = abs(got - want) <= tol * abs(want)
    return Check(job, name, "PASS" if ok else "FAIL", got, want, f"{detail} (±{tol:.0%})")


def oracle_flops(cfg) -> dict[str, float]:
    """FlopCounterMode over one training step of the job's model on one rank's batch:
    GEMM FLOPs (forward + backward), forward GEMMs, forward attention."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from instrument.jobs import _batch, _dtype
    from instrument.launch import _device_and_backend
    from instrument.model import Transformer, loss_fn

    device, _ = _device_and_backend(cfg, 0)
    torch.manual_seed(cfg.seed)
    model = Transformer(cfg).to(device=device, dtype=_dtype(cfg))
    x, y = _batch(cfg, device, 0)

    def by_op(counter) -> dict[str, float]:  # keys such as aten.mm → "mm"
        counts = counter.get_flop_counts().get("Global", {})
        return {([*str(k).split("."), ""])[1] or str(k): float(v) for k, v in counts.items()}

    with FlopCounterMode(display=False) as fwd:
        out = model(x)
    fwd_ops = by_op(fwd)
    with FlopCounterMode(display=False) as step:
        loss_fn(model(x), y).backward()
    step_ops = by_op(step)
    attn = sum(v for k, v in fwd_ops.items() if "attention" in k)
    del out
    return {
        "gemm": sum(v for k, v in step_ops.items() if k in ORACLE_GEMMS),
        "forward_gemm": sum(v for k, v in fwd_ops.items() if k in ORACLE_GEMMS),
        "forward_attention": attn,
    }


def check_job(job: str, out: Path, device: str, world: int, **options) -> list[Check]:
    import tracekit
    from instrument.config import JobConfig
    from instrument.launch import run_job
    from tracekit.metrics import windows as W

    cuda = device == "cuda"
    cfg = JobConfig(job=job, world_size=world, out=str(out / job), steps=2,
                    dtype="bfloat16" if cuda else "float32", device=device,
                    calibrate=not cuda, **options)  # fmt: skip
    run_dir = run_job(cfg, command=f"benchmarks/gpu_check.py {job}")
    manifest = json.loads((run_dir / "job.json").read_text())
    own = manifest["notes"]["measured_by_the_job"]["ranks"]
    oracle = oracle_flops(cfg)
    factor = world if WHOLE_MODEL_RANKS[job] == "world" else 1
    checks: list[Check] = []
    with tracekit.open(run_dir) as run:
        rep = tracekit.analyze(run_dir, cache=False).report
        windows = W.values(run, W.rank_windows(run))
        names = ", ".join(f"'{n}'" for n in GEMM_OPS)
        ops = W.starting_in(f"SELECT * FROM op_flops WHERE name IN ({names})", windows)
        total = run.sql(f"SELECT sum(flops) FROM ({ops})").fetchall()[0][0] or 0.0
        steps = max(r.steps for r in rep.ranks)
        checks.append(_close(job, "flops", total / steps, oracle["gemm"] * factor,
                             TOLERANCE["flops"], "GEMM FLOPs/step vs FlopCounterMode"))  # fmt: skip
        s = rep.summary
        peak = (s.peak_flops_by_dtype or {}).get("bf16" if cuda else "fp32")
        secs = [sum(r["step_seconds"]) / len(r["step_seconds"]) for r in own if r["step_seconds"]]
        if peak and secs:
            model_flops = 3 * (oracle["forward_gemm"] + oracle["forward_attention"]) * factor
            own_mfu = model_flops / world / (sum(secs) / len(secs)) / peak
            checks.append(_close(job, "mfu", s.mfu, own_mfu, TOLERANCE["mfu"],
                                 "MFU vs the job's own count and timer"))  # fmt: skip
        else:
            checks.append(Check(job, "mfu", "FAIL", s.mfu, None, "no peak or no step times"))
        if cuda:
            checks += _device_checks(job, run, rep, own, windows)
        else:
            why = "CPU run: no device memory or kernels (needs CUDA)"
            checks += [Check(job, "memory", "SKIP", None, None, why),
                       Check(job, "kernels", "SKIP", None, None, why)]  # fmt: skip
    return checks


def _device_checks(job, run, rep, own, windows) -> list[Check]:
    """Peak memory per rank against the allocator's own statistic; kernel classification."""
    from tracekit.analysis.uncounted import attribution_sql

    out = []
    mem = {m["rank"]: m["peak_allocated_bytes"] for m in rep.level("memory").metrics["ranks"]}
    for rank, r in enumerate(own):
        detail = f"rank {rank} peak allocated vs torch.cuda.max_memory_allocated"
        want = r["max_memory_allocated_bytes"]
        out.append(_close(job, "memory", mem.get(rank), want, TOLERANCE["memory"], detail))
    kc = run.sql("SELECT name, category FROM kernel_classes").fetchall()
    bad = sorted({n for n, c in kc if n.lower().startswith("nccl") and c != "communication"})
    detail = "NCCL kernels not communication: " + (", ".join(bad[:3]) or "none")
    out.append(Check(job, "kernels", "FAIL" if bad else "PASS", len(bad), 0, detail))
    query = attribution_sql(windows)
    missed = sorted(
        {
            k
            for _, why, _, k, *_ in run.sql(query).fetchall()
            if GEMM_OR_ATTENTION_KERNEL.search(k) and why != "counted"
        }
    )
    detail = "GEMM/attention kernels not counted: " + (", ".join(missed[:3]) or "none")
    out.append(Check(job, "kernels", "FAIL" if missed else "PASS", len(missed), 0, detail))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default=None, help="comma-separated: ddp, fsdp, pp "
                    "(default: all on CUDA, ddp on CPU)")  # fmt: skip
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--world", type=int, default=2, help="ranks per job")
    ap.add_argument("--out", default=None, help="where the runs go (default: a temp folder)")
    ap.add_argument("--json", default=None, help="also write the checks as JSON here")
    ap.add_argument("--size", default="small", choices=tuple(SIZES), help="model size")
    ap.add_argument("--backend", default="auto", choices=("auto", "nccl", "gloo"),
                    help="gloo lets ranks share GPUs (NCCL needs one GPU per rank)")  # fmt: skip
    a = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    device = a.device
    if device == "auto":
        enough = 1 if a.backend == "gloo" else a.world
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        device = "cuda" if gpus >= enough else "cpu"
    jobs = (a.jobs or ("ddp,fsdp,pp" if device == "cuda" else "ddp")).split(",")
    unknown = [j for j in jobs if j not in WHOLE_MODEL_RANKS]
    if unknown:
        print(f"gpu_check: --jobs {unknown[0]!r}: use {', '.join(WHOLE_MODEL_RANKS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="gpu_check-"))
    backend = a.backend if a.backend != "auto" else ("nccl" if device == "cuda" else "gloo")
    dtype = "bf16" if device == "cuda" else "fp32"
    print(f"device {device} ({backend}, {dtype}) · world {a.world} · {a.size} model · "
          f"runs in {out}")  # fmt: skip
    checks: list[Check] = []
    for job in jobs:
        checks += check_job(job, out, device, a.world, backend=a.backend, **SIZES[a.size])
    for c in checks:
        print(c.line())
    if a.json:
        Path(a.json).write_text(json.dumps([asdict(c) for c in checks], indent=1))
    failed = [c for c in checks if c.status == "FAIL"]
    print(f"{len(checks) - len(failed)} of {len(checks)} checks passed or skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
