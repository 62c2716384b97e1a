"""job.json: the schema, validation, round trip, and the α-β / bus-bandwidth formulas."""

from __future__ import annotations

import json

import pytest

from tracekit import manifest
from tracekit.errors import TracekitError
from tracekit.manifest import CollectiveFit, JobManifest, Mesh, ModelConfig
from tracekit.model.collectives import (
    alpha_beta_time,
    bus_factor,
    busbw,
    fit_alpha_beta,
)


def test_round_trip(tmp_path):
    man = JobManifest(
        strategy="pp",
        world_size=4,
        mesh=Mesh(pp=4),
        schedule="1f1b",
        microbatches=8,
        model=ModelConfig(layers=8, hidden=256, params=123),
    )
    man.calibration.collectives["all_reduce"] = CollectiveFit(alpha_s=1e-5, algbw_Bps=1e9)
    man.write(tmp_path)
    back = manifest.load(tmp_path)
    assert back == man
    assert (tmp_path / "job.json").stat().st_mode & 0o777 == 0o644


def test_unknown_keys_are_ignored_and_future_schema_refused(tmp_path):
    d = JobManifest(world_size=2, mesh=Mesh(dp=2)).to_dict()
    d["something_new"] = 1
    d["model"]["new_model_key"] = 2
    (tmp_path / "job.json").write_text(json.dumps(d))
    assert manifest.load(tmp_path).world_size == 2
    d["schema"] = manifest.MANIFEST_SCHEMA + 1
    (tmp_path / "job.json").write_text(json.dumps(d))
    with pytest.raises(TracekitError, match="upgrade tracekit"):
        manifest.load(tmp_path)


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"world_size": 4, "mesh": Mesh(dp=2, tp=1)}, "must equal world_size"),
        ({"strategy": "zero"}, "strategy"),
        ({"schedule": "zb"}, "schedule"),
    ],
)
def test_validation(kw, message):
    with pytest.raises(TracekitError, match=message):
        JobManifest(**kw).validate()


def test_missing_and_broken_manifest(tmp_path):
    assert manifest.load(tmp_path) is None
    (tmp_path / "job.json").write_text("{")
    with pytest.raises(TracekitError, match="not readable JSON"):
        manifest.load(tmp_path)


def test_every_field_is_documented():
    docs = manifest.field_docs()
    assert all(doc for _, doc in docs), [k for k, d in docs if not d]
    keys = {k for k, _ in docs}
    assert {
        "mesh.pp",
        "model.kv_heads",
        "calibration.peak_flops",
        "calibration.collectives[name].alpha_s",
    } <= keys


# ---- formulas, worked examples (nccl-tests PERFORMANCE.md)


@pytest.mark.parametrize(
    "name,n,factor",
    [
        ("all_reduce", 8, 1.75),
        ("all_reduce", 2, 1.0),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 4, 0.75),
        ("all_to_all", 2, 0.5),
        ("broadcast", 8, 1.0),
        ("send_recv", 2, 1.0),
        ("all_reduce", 1, None),
        ("barrier", 8, None),
    ],
)
def test_bus_factor(name, n, factor):
    assert bus_factor(name, n) == factor


def test_busbw_worked_example():
    # 1 GiB all-reduce over 8 GPUs in 5 ms: algbw 214.7 GB/s, busbw 375.8 GB/s
    assert busbw("all_reduce", 8, 2**30, 5e-3) == pytest.approx(2**30 / 5e-3 * 1.75)


def test_fit_alpha_beta_recovers_a_line():
    sizes = [1e3, 1e4, 1e5, 1e6]
    times = [alpha_beta_time(20e-6, 5e9, s) for s in sizes]
    alpha, bw, r2 = fit_alpha_beta(sizes, times)
    assert alpha == pytest.approx(20e-6) and bw == pytest.approx(5e9) and r2 == pytest.approx(1)
    with pytest.raises(ValueError):
        fit_alpha_beta([1e3, 1e4], [2e-3, 1e-3])  # shrinking time: no bandwidth
