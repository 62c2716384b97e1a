"""The report's JSON Schema (`tracekit schema`): every report validates against it, on
every shared trace, sample run and window; it names every figure with its label, unit
and definition; and the JSON a run prints decodes back to the same typed report."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import tracekit
from tests.conftest import ROOT, shared_trace_names
from tests.helpers import full_report, validate
from tracekit.cli import main
from tracekit.model import figures as F
from tracekit.report.schema import decode, encode, json_schema

SAMPLES = sorted(p.name for p in (ROOT / "sample_traces").iterdir() if p.is_dir())


def test_tracekit_schema_prints_the_schema():
    res = CliRunner().invoke(main, ["schema"])
    assert res.exit_code == 0
    printed = json.loads(res.output)
    assert printed == json.loads(json.dumps(json_schema()))
    assert printed["$schema"].endswith("2020-12/schema")


def test_every_figure_field_carries_its_label_unit_and_definition():
    defs = json_schema()["$defs"]
    seen = set()
    for struct in defs.values():
        for prop in (struct.get("properties") or {}).values():
            if "x-unit" in prop:
                assert prop["x-label"] and prop["description"]
                seen.add(prop["x-label"])
    # every catalogued figure appears somewhere in the report
    assert {f.label for f in F.CATALOG.values()} <= seen


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("window", ["steps", "trace"])
def test_sample_reports_validate(name, window, tmp_path):
    import shutil

    run = shutil.copytree(
        ROOT / "sample_traces" / name, tmp_path / name, ignore=shutil.ignore_patterns(".tracekit")
    )
    with tracekit.open(run) as r:
        rep = full_report(r, window=window)
        validate(full_report(r, levels=False))
    assert rep["levels"] and rep["samples"]["ranks"]


@pytest.mark.parametrize("name", shared_trace_names())
def test_shared_trace_reports_validate(name, shared_trace):
    with tracekit.open(shared_trace(name)) as r:
        full_report(r)


def test_the_json_decodes_to_the_same_report(tmp_path):
    import shutil

    run = shutil.copytree(
        ROOT / "sample_traces" / "pp_1f1b",
        tmp_path / "pp",
        ignore=shutil.ignore_patterns(".tracekit"),
    )
    res = CliRunner().invoke(main, ["analyze", str(run), "--format", "json"])
    assert res.exit_code == 0, res.output
    rep = decode(res.output)
    assert encode(rep) == res.output
    assert validate(json.loads(res.output))["summary"]["bubble_fraction"] is not None


def test_a_broken_report_fails_validation():
    rep = {"schema": 1, "tracekit_version": "x", "window": {"kind": "steps", "steps": "all"}}
    with pytest.raises(AssertionError, match="schema"):
        validate(rep)
