"""docs/quickstart.md's recipe, run as written: its `train.py` block is taken from the page
and launched on the CPU with torchrun (two ranks over gloo), and what it wrote is
analyzed — a trace per rank, the steps it profiled, and the "predicted" column filled
from its job.json. The page and the test cannot drift: the test runs the page."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")
PAGE = ROOT / "docs" / "quickstart.md"


def _train_py() -> str:
    (block,) = [
        b for b in re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
        if b.startswith("# train.py")
    ]  # fmt: skip
    return block


def test_the_page_runs_its_commands_as_tracekit_has_them():
    text = PAGE.read_text()
    assert "torchrun --standalone --nproc-per-node 2 train.py" in _train_py().splitlines()[0]
    assert "tracekit analyze runs/exp1" in text


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("quickstart")
    (work / "train.py").write_text(_train_py())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env.pop("PYTHONPATH", None)
    res = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--standalone", "train.py"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    return work / "runs" / "exp1"


def test_every_rank_wrote_its_trace_and_the_profiled_steps(run):
    assert sorted(p.name for p in run.iterdir()) == ["job.json", "rank-0.json.gz",
                                                     "rank-1.json.gz"]  # fmt: skip
    for r in range(2):
        doc = json.loads(gzip.decompress((run / f"rank-{r}.json.gz").read_bytes()))
        assert doc["distributedInfo"]["rank"] == r
        steps = {e["name"] for e in doc["traceEvents"]
                 if str(e.get("name", "")).startswith("ProfilerStep#")}  # fmt: skip
        assert len(steps) == 3  # ACTIVE = 3 after one wait and one warm-up step
        # record_shapes: the matmuls carry their input shapes
        assert any(e.get("args", {}).get("Input Dims") for e in doc["traceEvents"]
                   if e.get("name") in ("aten::addmm", "aten::mm", "aten::linear"))  # fmt: skip


def test_the_report_has_the_predicted_column_filled(run):
    from tracekit.cli import main

    res = CliRunner().invoke(main, ["analyze", str(run), "--format", "json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    compute = next(lv for lv in rep["levels"] if lv["level"] == "compute")
    job = json.loads((run / "job.json").read_text())
    m = job["model"]
    # by hand: tokens × (6 N + 6 h V + 12 L H Q T), N without the embeddings (PaLM), the
    # logits GEMM against the h × V output layer (Chinchilla), attention in full (the
    # quick start's job.json does not say causal)
    n = m["params"] - m["embedding_params"]
    want = job["tokens_per_step"] * (
        6 * n
        + 6 * m["hidden"] * m["vocab"]
        + 12 * m["layers"] * m["heads"] * (m["hidden"] // m["heads"]) * m["seq"]
    )
    assert compute["predicted"]["model_flops_per_step"] == pytest.approx(want)
    assert rep["summary"]["predicted_flops_per_step"] == pytest.approx(want)
    text = CliRunner().invoke(main, ["analyze", str(run)]).output
    line = next(s for s in text.splitlines() if "model FLOPs / step" in s)
    assert len(line.split("GFLOP")) == 3 or len(line.split("MFLOP")) == 3, line  # both columns
