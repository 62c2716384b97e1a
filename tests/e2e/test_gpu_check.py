"""benchmarks/gpu_check.py on this machine: the CPU part (gloo, fp32) of the check one
runs on a GPU — a DDP reference job's GEMM FLOPs per step against FlopCounterMode and its
MFU against the job's own count and timer; memory and kernel checks say SKIP (CUDA)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_gpu_check_runs_its_cpu_part(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "checks.json"
    res = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu",
         "--jobs", "ddp", "--out", str(tmp_path / "runs"), "--json", str(out)],
        capture_output=True, text=True, timeout=400,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    checks = {(c["name"], c["status"]) for c in json.loads(out.read_text())}
    assert checks == {("flops", "PASS"), ("mfu", "PASS"), ("memory", "SKIP"), ("kernels", "SKIP")}
    flops = next(c for c in json.loads(out.read_text()) if c["name"] == "flops")
    assert flops["tracekit"] == pytest.approx(flops["truth"], rel=0.02) and flops["truth"] > 0
    # the job measured itself: job.json carries its step times (and, on CUDA, peak memory)
    man = json.loads((tmp_path / "runs" / "ddp" / "job.json").read_text())
    own = man["notes"]["measured_by_the_job"]["ranks"]
    assert len(own) == 2 and all(len(r["step_seconds"]) == 2 for r in own)


def test_gpu_check_refuses_an_unknown_job_in_one_line():
    res = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--jobs", "nope"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2 and "nope" in res.stderr and "Traceback" not in res.stderr
