"""Typed from fact to report (issue 35 item 2): the facts' rows are the schema's Structs,
the summary is derived from the levels through the catalog's `SUMMARY_FROM`, and the
JSON the report has always written keeps its keys and their order."""

from __future__ import annotations

import json
import shutil

import pytest

import tracekit
from diagnosers import assemble
from diagnosers.context import Context
from tests.synth import Scenario, generate
from tracekit.analysis.base import mean
from tracekit.model import figures as F
from tracekit.options import AnalysisOptions
from tracekit.report import schema as S

OP_KEYS = ["name", "dtype", "count", "flops", "device_ms", "not_counted", "achieved_tflops",
           "peak_fraction", "uncounted"]  # fmt: skip
# an op of the FLOPs table in the compute level's metrics: not_counted before device_ms
TABLE_OP_KEYS = ["name", "dtype", "count", "flops", "not_counted", "device_ms",
                 "achieved_tflops", "peak_fraction", "uncounted"]  # fmt: skip
RANK_KEYS = ["rank", "uncounted_compute_fraction", "flops_per_step", "model_flops_per_step",
             "flops_by_dtype", "mfu", "hfu", "gemm_efficiency", "at_peak_ms_per_step",
             "uncounted_ops_per_step", "uncounted_device_ms_per_step", "idle_fraction",
             "compute_fraction", "host_bound_fraction", "host_bound_ms_per_step",
             "host_gaps_per_step", "median_kernel_us"]  # fmt: skip
NO_FLOPS = {"flops_per_step", "model_flops_per_step", "flops_by_dtype", "mfu", "hfu",
            "gemm_efficiency", "at_peak_ms_per_step", "uncounted_ops_per_step",
            "uncounted_device_ms_per_step"}  # fmt: skip


@pytest.fixture(scope="module")
def synth_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fact-rows") / "run"
    generate(Scenario(world=2, layers=4, steps=2, buckets=2), out)
    return out


def _report(path):
    with tracekit.open(path) as run:
        rep = assemble.analyze(run, AnalysisOptions())
        ctx = Context(run, AnalysisOptions())
        facts = (ctx.compute.top_ops, ctx.compute.ranks, ctx.compute.uncounted)
    return rep, json.loads(rep.to_json()), facts


def _check_rows(doc: dict) -> None:
    """The keys, in order, of the report's op rows and the compute level's rows."""
    for o in doc["top_ops"]:
        assert list(o) == OP_KEYS
    comp = next(lv for lv in doc["levels"] if lv["level"] == "compute")
    for o in comp["metrics"]["top_ops"]:
        table = o["flops"] is not None or o["uncounted"] == "op_without_flops"
        assert list(o) == (TABLE_OP_KEYS if table else OP_KEYS), o
    for r in comp["metrics"]["ranks"]:
        expected = RANK_KEYS if "mfu" in r else [k for k in RANK_KEYS if k not in NO_FLOPS]
        assert list(r) == expected
    for o in doc["top_uncounted_ops"]:
        assert list(o) == ["name", "why", "note", "count", "device_ms"]
    for k in doc["top_uncounted_kernels"]:
        assert list(k) == ["name", "why", "op", "count_per_step", "time_ms_per_step"]


def _check_summary(rep: S.Report, doc: dict) -> None:
    """Each summary figure is its source's value: the level block's JSON key, or the
    mean over ranks[] (read from the JSON, not through `SUMMARY_FROM`'s reader)."""
    s = doc["summary"]
    lv = {x["level"]: x for x in doc["levels"]}
    assert s["mfu"] == lv["compute"]["measured"]["mfu"]
    assert s["peak_flops_source"] == lv["compute"]["measured"]["peak_source"]
    assert s["peak_flops_by_dtype"] == lv["compute"]["metrics"]["peak_flops_by_dtype"]
    assert s["predicted_flops_per_step"] == lv["compute"]["predicted"]["model_flops_per_step"]
    assert s["peak_memory_bytes"] == lv["memory"]["measured"]["peak_bytes"]
    assert s["max_peak_memory_fraction"] == lv["memory"]["measured"]["peak_fraction"]
    assert s["predicted_memory_bytes"] == lv["memory"]["predicted"]["total_bytes"]
    assert s["predicted_bubble_fraction"] == lv["scaling"]["predicted"]["bubble_fraction"]
    assert s["straggler_ranks"] == lv["scaling"]["measured"]["straggler_ranks"]
    proj = lv["scaling"]["predicted"].get("projection") or {}
    assert s["projected_efficiency_8x"] == (proj.get("8x") or {}).get("efficiency")
    for fig, src in F.SUMMARY_FROM.items():
        if src.level == "ranks":
            assert s[fig.key] == mean(r[fig.key] for r in doc["ranks"]), fig.key
    # a null figure has its reason; a known one has none
    nulls = {k for k, v in s.items() if v is None}
    assert set(s["null_reasons"]) == nulls


def test_fact_rows_are_the_schemas_structs(synth_run):
    rep, doc, (top_ops, ranks, unc) = _report(synth_run)
    assert top_ops and all(type(o) is S.OpRow for o in top_ops)
    assert ranks and all(type(r) is S.ComputeRankRow for r in ranks)
    assert all(type(o) is S.UncountedOpRow for o in unc.top_ops)
    assert all(type(k) is S.UncountedKernelRow for k in unc.top_kernels)
    assert all(type(o) is S.OpRow and o.uncounted is None for o in unc.other_ops)
    _check_rows(doc)
    _check_summary(rep, doc)


@pytest.mark.parametrize(
    "name",
    [
        "v100_recsys_rank1_of2",  # graph replays, table ops and ops that are not matmul work
        "a100_allreduce_meta_rank0",  # table ops without FLOPs
        "cpu_gloo_rank34",  # a rank without a counted op: its FLOPs keys are absent
    ],
)
def test_real_traces_keep_their_rows_and_summary(name, shared_trace, tmp_path):
    path = shutil.copytree(shared_trace(name), tmp_path / name)
    rep, doc, _ = _report(path)
    _check_rows(doc)
    _check_summary(rep, doc)


def test_an_efficiency_above_peak_is_unknown_with_its_note(synth_run):
    """A peak far below what the ops ran at puts MFU and HFU above 100% on every rank
    (the generator's MFU is 0.57 of the H100's 989 TFLOP/s bf16 peak, so ~28× at a
    20 TFLOP/s peak): never a figure — null, with the note on the rows as its reason."""
    from tests.synth import PEAK_BF16
    from tracekit.options import Overrides

    peak = 20e12
    assert 0.5 * PEAK_BF16 / peak > 1  # MFU at this peak, from the generator's half of it
    with tracekit.open(synth_run) as run:
        rep = assemble.analyze(run, AnalysisOptions(overrides=Overrides(peak_tflops=peak / 1e12)))
    note = "HFU, MFU above 100% on some rank: a counting bug, shown as unknown"
    assert note in rep.level("compute").notes
    assert rep.summary.mfu is None and rep.summary.hfu is None
    assert all(r.mfu is None and r.hfu is None for r in rep.ranks)
    assert rep.summary.null_reasons[F.MFU.key] == note
    assert rep.summary.flops_per_step  # the FLOPs are counted: only the efficiencies are not
