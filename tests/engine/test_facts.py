"""The facts (`tracekit.analysis`) carry why a figure is null: the summary's
`null_reasons` are the facts' own fields, never a note searched for its words."""

from __future__ import annotations

import shutil

import pytest

import tracekit
from diagnosers.assemble import analyze
from diagnosers.context import Context
from tests.conftest import SHARED_TRACES
from tracekit.analysis.compute import FLOP_FIGURES
from tracekit.analysis.scaling import NOT_A_PIPELINE
from tracekit.options import AnalysisOptions


def test_the_summary_null_reasons_are_the_facts_reasons(tmp_path):
    """One GPU rank without allocator events, no pipeline (v100_resnet50_single)."""
    src = SHARED_TRACES / "v100_resnet50_single"
    if not src.is_dir():
        pytest.skip(f"{src} not present")
    run_dir = tmp_path / src.name
    shutil.copytree(src, run_dir, ignore=shutil.ignore_patterns(".tracekit"))
    with tracekit.open(run_dir) as run:
        run.materialize()
        ctx = Context(run, AnalysisOptions())
        why = analyze(run, AnalysisOptions()).summary.null_reasons
        assert ctx.memory.peak_why is not None and "profile_memory=True" in ctx.memory.peak_why
        for key in ("peak_memory_bytes", "peak_memory_fraction", "max_peak_memory_fraction"):
            assert why[key] == ctx.memory.peak_why
        assert ctx.bubble is None and why["bubble_fraction"] == NOT_A_PIPELINE
        for key, reason in ctx.compute.null_reasons.items():
            assert key in (*FLOP_FIGURES, "predicted_flops_per_step")
            if key in why:
                assert why[key] == reason
