"""One options resolver (`tracekit.options.resolve`) for every door: the command line,
`tracekit.analyze()`, the gate and the MCP door build `OpenOptions` and
`AnalysisOptions` from named values the same way, `[tool.tracekit]` included."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import tracekit
from tests.synth import SCENARIOS, generate
from tracekit.cli import main
from tracekit.options import AnalysisOptions, OpenOptions, Overrides, resolve


def test_values_by_name_none_keeps_the_default(tmp_path):
    opts, options = resolve(
        {"workers": None, "comm_kernels": ["nccl.*"], "ranks": "0-1", "window": None,
         "steps": "2-3", "peak_tflops": 100.0, "latency_us": None, "levels": False},
        tmp_path,
    )  # fmt: skip
    assert opts == OpenOptions(comm_kernels=("nccl.*",), ranks="0-1")
    assert options == AnalysisOptions(
        steps="2-3", overrides=Overrides(peak_tflops=100.0), levels=False
    )


def test_codes_split_alike_whatever_their_shape(tmp_path):
    """`--select A,B --select C` (click: a tuple), `select="A,B"` or a list in Python."""
    want = ("TK-N301", "TK-S", "TK-C")
    for given in (("TK-N301,TK-S", "TK-C"), ["TK-N301", "TK-S,TK-C"]):
        assert resolve({"select": given}, tmp_path)[1].select == want
    assert resolve({"ignore": "TK-N301, TK-S"}, tmp_path)[1].ignore == ("TK-N301", "TK-S")


def test_the_config_fills_what_is_not_given(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tracekit]\nselect = ["TK-S"]\nignore = ["TK-N301"]\n'
    )
    _, options = resolve({}, tmp_path)
    assert (options.select, options.ignore) == (("TK-S",), ("TK-N301",))
    _, options = resolve({"ignore": ("TK-S403",)}, tmp_path)  # a value given replaces it
    assert (options.select, options.ignore) == (("TK-S",), ("TK-S403",))


def test_an_unknown_option_names_the_door(tmp_path):
    with pytest.raises(TypeError, match=r"tracekit\.analyze: unknown option 'wokers'"):
        resolve({"wokers": 2}, tmp_path, where="tracekit.analyze")
    with pytest.raises(TypeError, match="unknown option 'wokers'"):
        tracekit.analyze(tmp_path, wokers=2)


def test_the_python_door_reads_the_config_as_the_cli_does(tmp_path):
    """Before the resolver, `tracekit.analyze()` left `[tool.tracekit]` select/ignore
    unread (and took `select="A,B"` letter by letter): its findings differed from the
    command line's on the same folder."""
    run = tmp_path / "run"
    generate(SCENARIOS["exposed_allreduce"][0], run)
    (run / "pyproject.toml").write_text('[tool.tracekit]\nignore = ["TK-N301"]\n')
    for flags, kwargs in [
        ([], {}),
        # a flag given replaces the file's value; a string is split at commas, as the flag is
        (["--select", "TK-N301,TK-S403", "--ignore", "TK-S403"],
         {"select": "TK-N301,TK-S403", "ignore": "TK-S403"}),
    ]:  # fmt: skip
        res = CliRunner().invoke(main, ["analyze", str(run), "--format", "json", *flags])
        assert res.exit_code == 0, res.output
        cli_codes = [f["code"] for f in json.loads(res.output)["findings"]]
        api_codes = [f.code for f in tracekit.analyze(run, **kwargs).report.findings]
        assert api_codes == cli_codes
        assert ("TK-N301" in api_codes) == bool(flags)
