"""`--ranks` / `--sample-ranks`: only the chosen ranks' traces are read, the sample is the
documented spread, a chosen rank's figures are the full run's, and the report says it
is partial."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tracekit
from tests.conftest import ROOT
from tests.helpers import invoke
from tests.tracegen import ddp_like_rank
from tracekit.ingest import cache, ranksel
from tracekit.options import OpenOptions

RANK_LOCAL = (  # per-rank figures that depend on that rank's trace alone
    "steps",
    "step_time_ms",
    "window_ms",
    "idle_fraction",
    "compute_fraction",
    "non_compute_fraction",
    "comm_fraction",
    "comm_overlap_fraction",
    "exposed_comm_fraction",
)


def shift(rank: int) -> float:
    """Rank r's all-reduce starts 10·r µs late: its comm is (300 − 10r) µs per 1000 µs
    step, so `comm_fraction` = (300 − 10r)/1000 tells which trace a figure came from."""
    return 10.0 * rank


def write_rank(path: Path, rank: int, world: int, events_first: bool = False) -> Path:
    doc = ddp_like_rank(rank, world=world, comm_shift=shift(rank)).doc()
    if events_first:  # distributedInfo after the events: the header probe cannot tell
        doc = {"traceEvents": doc.pop("traceEvents"), **doc}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


def ingested_sources(run: Path) -> set[str]:
    """The trace files the cache holds an ingest of (relative paths)."""
    index = cache.load_index(cache.cache_dir(run))
    return {e["source"] for e in index.values() if "parts" in e}


# ---------------------------------------------------------------- the pure parts


def test_spec_parses_ranks_and_ranges():
    assert ranksel.parse_spec("0-7,64,100-103") == [0, 1, 2, 3, 4, 5, 6, 7, 64, 100, 101, 102, 103]
    assert ranksel.parse_spec(" 5 , 3-4,3") == [3, 4, 5]
    assert ranksel.ranges_text([0, 1, 2, 3, 64, 100, 101]) == "0-3,64,100-101"


@pytest.mark.parametrize("spec", ["x", "1,,2", "3-1", "-1", "1-", "0x3", ""])
def test_bad_spec_is_an_error(spec):
    with pytest.raises(tracekit.errors.TracekitError, match="--ranks"):
        ranksel.parse_spec(spec)


@pytest.mark.parametrize(
    "ranks,n,expected",
    [
        # positions i·(M−1)/(n−1), half up: 0, 3.5→4, 7
        (list(range(8)), 3, [0, 4, 7]),
        # 0, 1.5→2, 3
        (list(range(4)), 3, [0, 2, 3]),
        (list(range(4)), 2, [0, 3]),
        # 999/3 = 333 exactly
        (list(range(1000)), 4, [0, 333, 666, 999]),
        # by rank order, not by value: positions 0, 2, 4 of five ranks
        ([0, 10, 20, 30, 40], 3, [0, 20, 40]),
        (list(range(5)), 1, [0]),
        (list(range(3)), 5, [0, 1, 2]),
    ],
)
def test_sample_spreads_evenly(ranks, n, expected):
    assert ranksel.spread(ranks, n) == expected


def test_header_rank_reads_only_the_header(tmp_path):
    before = write_rank(tmp_path / "a.json.gz", 5, 8)
    after = write_rank(tmp_path / "b.json.gz", 6, 8, events_first=True)
    assert ranksel.header_rank(before) == 5
    assert ranksel.header_rank(after) is None
    # a header bigger than the probe is not read past the limit
    assert ranksel.header_rank(before, limit=64) is None


# ---------------------------------------------------------------- runs


@pytest.fixture
def named_run(tmp_path):
    """Eight ranks of the synthetic DDP step, named rank-<r>.json.gz."""
    d = tmp_path / "run"
    for r in range(8):
        write_rank(d / f"rank-{r}.json.gz", r, 8)
    return d


def test_sample_ingests_only_the_sampled_files(named_run):
    with tracekit.open(named_run, sample_ranks=3, workers=1) as run:
        assert run.ranks == [0, 4, 7]
        sel = run.rank_selection.to_dict()
        assert sel == {"option": "--sample-ranks", "spec": "3", "ranks": [0, 4, 7], "of": 8}
        assert run.missing_ranks == []  # left out on purpose, not missing
        assert not any("no trace" in w for w in run.warnings)
    assert ingested_sources(named_run) == {"rank-0.json.gz", "rank-4.json.gz", "rank-7.json.gz"}


def test_chosen_ranks_figures_are_their_own(named_run):
    rep = json.loads(invoke("analyze", named_run, "--ranks", "2,5-6", "--format", "json").stdout)
    assert [r["rank"] for r in rep["ranks"]] == [2, 5, 6]
    for r in rep["ranks"]:  # hand values of ddp_like_rank with its shift
        s = shift(r["rank"])
        assert r["comm_fraction"] == pytest.approx((300 - s) / 1000)
        assert r["comm_overlap_fraction"] == pytest.approx((100 - s) / (300 - s))
        assert r["exposed_comm_fraction"] == pytest.approx(0.2)
        assert r["idle_fraction"] == pytest.approx(0.2)
    assert rep["run"]["rank_selection"]["ranks"] == [2, 5, 6]
    assert rep["run"]["world_size"] == 8 and rep["run"]["missing_ranks"] == []


def test_full_run_later_ingests_only_the_rest(named_run):
    with tracekit.open(named_run, ranks="3", workers=1):
        pass
    cdir = cache.cache_dir(named_run)
    (entry,) = [e for e in cache.load_index(cdir).values() if e["source"] == "rank-3.json.gz"]
    batch = entry["parts"][0]["batch"]
    written = cache.table_path(cdir, batch, "events").stat().st_mtime_ns
    with tracekit.open(named_run, workers=1) as run:
        assert run.ranks == list(range(8)) and run.rank_selection is None
    assert len(ingested_sources(named_run)) == 8
    assert cache.table_path(cdir, batch, "events").stat().st_mtime_ns == written


def test_a_rank_really_missing_is_still_reported(tmp_path):
    d = tmp_path / "run"
    for r in (0, 1, 3):  # rank 2 of 4 has no trace
        write_rank(d / f"rank-{r}.json.gz", r, 4)
    with tracekit.open(d, sample_ranks=2, workers=1) as run:
        assert run.ranks == [0, 3]
        assert run.rank_selection.to_dict()["of"] == 3
        assert run.missing_ranks == [2]


def test_header_path_and_fallback_file(tmp_path):
    """No rank in the names: ranks 0–4 from their headers; rank 5's file has its header
    after the events, so it is ingested whole (its rank then known) and filtered."""
    d = tmp_path / "run"
    for r in range(5):
        write_rank(d / f"host-{chr(97 + r)}.json.gz", r, 6)
    write_rank(d / "host-f.json.gz", 5, 6, events_first=True)
    with tracekit.open(d, sample_ranks=3, workers=1) as run:
        # 6 ranks, positions 0, 2.5→3, 5
        assert run.ranks == [0, 3, 5]
        assert run.rank_selection.to_dict()["of"] == 6
    # ranks 0 and 3 by header; host-f whole; and rank 0's file, read beside it in the
    # first pass so the sample's ends are known before the rest is chosen
    assert ingested_sources(d) == {"host-a.json.gz", "host-d.json.gz", "host-f.json.gz"}
    with tracekit.open(d, ranks="1", workers=1) as run:
        assert run.ranks == [1]
    assert "host-b.json.gz" in ingested_sources(d)
    assert "host-c.json.gz" not in ingested_sources(d)


def test_sample_trace_ranks_equal_the_full_run(tmp_path):
    """The bundled 4-rank hybrid run: a chosen rank's rank-local figures equal that
    rank's in a full analyze; named once by file name, once only by header."""
    full_dir = tmp_path / "full"
    shutil.copytree(
        ROOT / "sample_traces" / "hybrid", full_dir, ignore=shutil.ignore_patterns(".tracekit")
    )
    headed = tmp_path / "headed"
    headed.mkdir()
    for f in sorted(full_dir.glob("rank-*.json.gz")):  # same traces, no rank in the name
        shutil.copy(f, headed / f.name.replace("rank-", "trace_"))
    shutil.copy(full_dir / "job.json", headed / "job.json")
    full = json.loads(invoke("analyze", full_dir, "--format", "json").stdout)
    for where in (full_dir, headed):
        res = invoke("analyze", where, "--sample-ranks", "2", "--format", "json")
        assert res.exit_code == 0, res.output
        part = json.loads(res.stdout)
        assert [r["rank"] for r in part["ranks"]] == [0, 3]
        for r in part["ranks"]:
            (f,) = [x for x in full["ranks"] if x["rank"] == r["rank"]]
            for k in RANK_LOCAL:
                assert r[k] == pytest.approx(f[k], abs=1e-12), (where.name, r["rank"], k)
    assert ingested_sources(headed) == {"trace_0.json.gz", "trace_3.json.gz"}


def test_merged_file_is_filtered_after(shared_trace):
    d = shared_trace("mi300_resnet_ddp4_merged")
    res = invoke("analyze", d, "--ranks", "1-2", "--format", "json", "--breakdown-only")
    assert res.exit_code == 0, res.output
    part = json.loads(res.stdout)
    full = json.loads(invoke("analyze", d, "--format", "json", "--breakdown-only").stdout)
    assert [r["rank"] for r in part["ranks"]] == [1, 2]
    assert part["run"]["rank_selection"]["of"] == 4 and part["run"]["world_size"] == 4
    for r in part["ranks"]:
        (f,) = [x for x in full["ranks"] if x["rank"] == r["rank"]]
        assert {k: r[k] for k in RANK_LOCAL} == pytest.approx({k: f[k] for k in RANK_LOCAL})


# ---------------------------------------------------------------- the front door


def test_text_report_says_it_is_partial(named_run):
    res = invoke("analyze", named_run, "--sample-ranks", "3")
    assert res.exit_code == 0, res.output
    assert "analysed 3 of 8 ranks (--sample-ranks 3)" in res.output
    assert "no trace for ranks" not in res.output
    full = invoke("analyze", named_run, "--breakdown-only")
    assert "analysed" not in full.output  # a full run says nothing of the kind
    ing = invoke("ingest", named_run, "--ranks", "0-1")
    assert ing.exit_code == 0 and "analysed 2 of 8 ranks (--ranks 0-1)" in ing.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--ranks", "x"], "not a rank list"),
        (["--ranks", "9"], "the run has no rank 9 (its ranks: 0-7)"),
        (["--ranks", "6-9"], "no rank 8-9"),
        (["--sample-ranks", "0"], "--sample-ranks"),
        (["--sample-ranks", "2", "--ranks", "1"], "pass one of them"),
    ],
)
def test_bad_selection_is_one_line_exit_2(named_run, args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "tracekit.cli", "analyze", str(named_run), *args],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert ingested_sources(named_run) == set()  # nothing read for a bad request


def test_compare_needs_the_same_ranks(named_run, tmp_path):
    base = tmp_path / "base.json"
    res = invoke("baseline", "save", named_run, "--sample-ranks", "2", "-o", base)
    assert res.exit_code == 0 and "(--sample-ranks 2, of 8)" in res.output
    # baseline schema 2: each run kept apart
    (saved,) = json.loads(base.read_text())["runs"]
    assert saved["run"]["rank_selection"]["ranks"] == [0, 7]
    # against every rank: one line, exit 2
    proc = subprocess.run(
        [sys.executable, "-m", "tracekit.cli", "compare", str(base), str(named_run)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "ranks 0,7 of 8 (--sample-ranks 2)" in proc.stderr and "all 8 ranks" in proc.stderr
    # the same ranks picked the other way compare (the run against itself: no regression)
    same = invoke("compare", base, named_run, "--ranks", "0,7")
    assert same.exit_code == 0, same.output


def test_tui_session_with_a_selection(named_run):
    pytest.importorskip("textual")
    from tui.data import Session
    from tui.screens.overview import run_facts

    s = Session([named_run], workers=1, open_options=OpenOptions(sample_ranks=2))
    try:
        s.open()
        assert s.run_info.ranks == [0, 7]  # the store's facts, before the report
        s.diagnose()
        assert [r.rank for r in s.report.ranks] == [0, 7]
        assert s.report.run.rank_selection.of == 8
        facts = run_facts(s.run_info, "steps", s.report, "run")
        assert "analysed 2 of 8 ranks (--sample-ranks 2)" in facts
    finally:
        if s.run is not None:
            s.run.close()
    assert ingested_sources(named_run) == {"rank-0.json.gz", "rank-7.json.gz"}


def test_query_and_tui_take_the_options(named_run):
    q = invoke("query", named_run, "--ranks", "6", "SELECT DISTINCT rank FROM events", "--format",
               "json")  # fmt: skip
    assert q.exit_code == 0 and json.loads(q.stdout) == [{"rank": 6}]
    pytest.importorskip("textual")
    bad = invoke("tui", named_run, "--ranks", "1-x")
    assert bad.exit_code == 2 and "not a rank list" in bad.output


def test_readme_sample_example_is_true():
    # the manual's pages: "A first look at a huge run" and the report's keys
    text = (ROOT / "docs" / "scale.md").read_text() + (ROOT / "docs" / "report.md").read_text()
    assert "`--sample-ranks 4` is ranks 0, 341, 682, 1023" in text
    assert ranksel.spread(list(range(1024)), 4) == [0, 341, 682, 1023]
    assert '"ranks": [0, 146, …, 1023], "of": 1024' in text
    eight = ranksel.spread(list(range(1024)), 8)
    assert (eight[:2], eight[-1]) == ([0, 146], 1023)
