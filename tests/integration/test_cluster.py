"""--cluster: the per-rank ingest on a Dask cluster writes the cache a local ingest
writes, so every figure of the report is the local run's."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT
from tracekit.cli import main

pytest.importorskip("distributed")


def _analyze(path, *extra) -> dict:
    res = CliRunner().invoke(main, ["analyze", str(path), "--format", "json", *extra])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    rep["run"].pop("path")
    return rep


@pytest.mark.parametrize("name", ["ddp", "pp_1f1b"])
def test_a_local_cluster_gives_the_local_answer(name, tmp_path):
    local = shutil.copytree(
        ROOT / "sample_traces" / name,
        tmp_path / "local",
        ignore=shutil.ignore_patterns(".tracekit"),
    )
    remote = shutil.copytree(
        ROOT / "sample_traces" / name,
        tmp_path / "cluster",
        ignore=shutil.ignore_patterns(".tracekit"),
    )
    assert _analyze(remote, "--cluster", "local:2") == _analyze(local)
    # the cluster wrote the cache: a second, local, open ingests nothing new
    index = json.loads(next((remote / ".tracekit").glob("*/index.json")).read_text())
    assert sorted(e["rank"] for e in index.values()) == [0, 1]


@pytest.mark.parametrize("address", ["local:0", "local:two"])
def test_a_bad_cluster_address_is_one_line(address, tmp_path):
    run = shutil.copytree(
        ROOT / "sample_traces" / "ddp", tmp_path / "run", ignore=shutil.ignore_patterns(".tracekit")
    )
    res = CliRunner().invoke(main, ["ingest", str(run), "--cluster", address])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        f"tracekit: --cluster {address}: use local, local:N (N ≥ 1) or an address"
    ]
