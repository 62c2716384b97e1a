"""Messy run folders: every user mistake is one line and exit 2; damaged ranks and odd
events are left out, named and counted; mixed runs are refused unless allowed.

The corpus is built here from `tests.tracegen`; each case says what was broken, so the
expected message and counts are known independently of tracekit's code."""

from __future__ import annotations

import copy
import gzip
import json
import math
import subprocess
import sys

import pytest
from click.testing import CliRunner

import tracekit
from tests.conftest import ROOT
from tests.helpers import full_report
from tests.tracegen import ddp_like_rank
from tracekit.cli import main
from tracekit.report.render import to_text
from tracekit.report.schema import decode

DAY_NS = 86_400 * 10**9


def cli(*args):
    """(exit code, stdout, stderr) of an in-process CLI call."""
    res = CliRunner().invoke(main, [str(a) for a in args])
    return res.exit_code, res.stdout, res.stderr


def assert_one_line_exit_2(code, out, err, *needles):
    assert code == 2, (code, out, err)
    assert err.startswith("tracekit: ") and err.count("\n") == 1, err
    assert "internal error" not in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, (n, err)
    assert out == ""


def write_doc(path, doc, gz=False):
    text = json.dumps(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def good_run(folder, world=2, ranks=None):
    for r in range(world) if ranks is None else ranks:
        ddp_like_rank(r, world=world).write(folder / f"rank-{r}.json.gz")
    return folder


# ---------------------------------------------------------------- bad input: exit 2


def _corpus_case(name, tmp):
    """Build case `name` under tmp; return (args after the run, message parts)."""
    doc = ddp_like_rank(0, world=1).doc()
    if name == "missing path":
        return [tmp / "nope"], ["does not exist"]
    if name == "empty folder":
        return [tmp], ["no Kineto traces"]
    if name == "only other JSON":
        (tmp / "config.json").write_text('{"lr": 0.1}')
        return [tmp], ["no Kineto traces"]
    if name == "not JSON":
        (tmp / "rank-0.json").write_text("hello, I am not a trace")
        return [tmp], ["rank-0.json", "not valid JSON"]
    if name == "empty file":
        (tmp / "rank-0.json.gz").write_bytes(b"")
        return [tmp], ["rank-0.json.gz"]
    if name == "truncated gzip":
        data = gzip.compress(json.dumps(doc).encode())
        (tmp / "rank-0.json.gz").write_bytes(data[: len(data) // 2])
        return [tmp], ["rank-0.json.gz", "gzip"]
    if name == "truncated JSON":
        (tmp / "rank-0.json").write_text(json.dumps(doc)[:-40])
        return [tmp], ["rank-0.json", "not valid JSON"]
    if name == "no traceEvents":
        write_doc(tmp / "rank-0.json", {k: v for k, v in doc.items() if k != "traceEvents"})
        return [tmp], ["rank-0.json", "traceEvents"]
    if name == "traceEvents not a list":
        write_doc(tmp / "rank-0.json", {**doc, "traceEvents": {"a": 1}})
        return [tmp], ["rank-0.json", "not a list"]
    if name == "a file that is not a trace":
        (tmp / "notes.txt").write_text("x")
        return [tmp / "notes.txt"], ["not a .json or .json.gz"]
    if name == "duplicate ranks":
        ddp_like_rank(0).write(tmp / "a.json")
        ddp_like_rank(0).write(tmp / "b.json")
        return [tmp], ["rank 0 appears twice"]
    raise AssertionError(name)


CORPUS = [
    "missing path",
    "empty folder",
    "only other JSON",
    "not JSON",
    "empty file",
    "truncated gzip",
    "truncated JSON",
    "no traceEvents",
    "traceEvents not a list",
    "a file that is not a trace",
    "duplicate ranks",
]


@pytest.mark.parametrize("name", CORPUS)
def test_bad_run_folder_is_one_line_exit_2(tmp_path, name):
    args, needles = _corpus_case(name, tmp_path)
    assert_one_line_exit_2(*cli("analyze", *args), *needles)


@pytest.mark.parametrize(
    "mutate,needles",
    [
        (lambda j: j.update(world_size="two"), ["job.json: world_size", "whole number", '"two"']),
        (lambda j: j["mesh"].update(dp="x"), ["job.json: mesh.dp"]),
        (lambda j: j["model"].update(hidden=-3), ["job.json: model.hidden", "-3"]),
        (lambda j: j.update(model=[1]), ["job.json: model must be an object"]),
        (lambda j: j.update(activation_checkpointing="yes"), ["activation_checkpointing"]),
        (
            lambda j: j["calibration"]["collectives"]["all_reduce"].update(alpha_s="fast"),
            ["job.json: calibration.collectives.all_reduce.alpha_s"],
        ),
        (lambda j: j.update(world_size=3), ["dp·tp·pp"]),
        (lambda j: j.update(schema=99), ["schema 99"]),
    ],
)
def test_bad_job_json_field_is_named(tmp_path, mutate, needles):
    job = json.loads((ROOT / "sample_traces" / "ddp" / "job.json").read_text())
    mutate(job)
    good_run(tmp_path)
    (tmp_path / "job.json").write_text(json.dumps(job))
    assert_one_line_exit_2(*cli("analyze", tmp_path), *needles)


def test_job_json_that_is_not_json(tmp_path):
    good_run(tmp_path)
    (tmp_path / "job.json").write_text("{world_size: 2")
    assert_one_line_exit_2(*cli("analyze", tmp_path), "job.json", "not readable JSON")


@pytest.mark.parametrize(
    "option,value",
    [
        ("--peak-tflops", "0"),
        ("--peak-tflops", "-5"),
        ("--peak-tflops", "nan"),
        ("--peak-tflops", "inf"),
        ("--peak-tflops", "lots"),
        ("--busbw-GBps", "0"),
        ("--device-memory-GB", "-1"),
        ("--latency-us", "0"),
        ("--workers", "0"),
        ("--steps", "zz"),
        ("--window", "weekly"),
    ],
)
def test_bad_option_value_is_one_line_exit_2(tmp_path, option, value):
    good_run(tmp_path)
    code, out, err = cli("analyze", tmp_path, option, value)
    assert_one_line_exit_2(code, out, err)
    assert option in err or "step selection" in err


def test_output_into_a_missing_folder(tmp_path):
    good_run(tmp_path / "run")
    dest = tmp_path / "no" / "such" / "report.json"
    assert_one_line_exit_2(
        *cli("analyze", tmp_path / "run", "-o", dest), "-o", "does not exist", str(dest.parent)
    )
    assert not (tmp_path / "no").exists()


# ---------------------------------------------------------------- partial runs


def test_garbage_rank_is_named_and_the_rest_analysed(tmp_path):
    good_run(tmp_path, world=3, ranks=[0, 1])
    (tmp_path / "rank-2.json").write_text("\x00\x01 garbage")
    code, out, err = cli("analyze", tmp_path, "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["run"]["ranks"] == [0, 1]
    assert rep["run"]["missing_ranks"] == [2]
    (u,) = rep["run"]["unreadable"]
    assert u["path"].endswith("rank-2.json") and "not valid JSON" in u["reason"]
    lines = err.splitlines()
    assert any("rank-2.json" in line for line in lines)
    assert any("rank 2 of 3 has no trace" in line for line in lines)
    assert all(line.startswith("tracekit: warning: ") for line in lines)
    text = cli("analyze", tmp_path)[1]
    assert "warning: left out" in text and "warning: no trace for ranks 2" in text
    # --strict: the same folder is an error
    assert_one_line_exit_2(*cli("analyze", tmp_path, "--strict"), "--strict", "rank-2.json")


def test_truncated_rank_among_good_ones(tmp_path):
    good_run(tmp_path, world=3)
    data = (tmp_path / "rank-1.json.gz").read_bytes()
    (tmp_path / "rank-1.json.gz").write_bytes(data[: len(data) // 3])
    code, out, err = cli("analyze", tmp_path, "--format", "json", "--breakdown-only")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["run"]["ranks"] == [0, 2] and rep["run"]["missing_ranks"] == [1]
    assert [u["path"].rsplit("/", 1)[1] for u in rep["run"]["unreadable"]] == ["rank-1.json.gz"]
    # the second look reads the remembered failure, and says the same
    assert cli("analyze", tmp_path, "--format", "json", "--breakdown-only")[1] == out


def test_missing_ranks_from_world_size(tmp_path):
    good_run(tmp_path, world=4, ranks=[0, 1])
    with tracekit.open(tmp_path) as run:
        assert run.missing_ranks == [2, 3] and run.unreadable == []
    code, _, err = cli("ingest", tmp_path)
    assert code == 0 and "ranks 2–3 of 4 have no trace" in err
    assert_one_line_exit_2(*cli("ingest", tmp_path, "--strict"), "ranks 2–3 of 4")


def test_no_readable_trace_at_all(tmp_path):
    (tmp_path / "rank-0.json").write_text("{")
    (tmp_path / "rank-1.json").write_text("nope")
    assert_one_line_exit_2(*cli("analyze", tmp_path), "none of the 2 traces could be read")


# ---------------------------------------------------------------- mixed runs


def _mixed(tmp, how):
    a = ddp_like_rank(0, world=2)
    b = ddp_like_rank(1, world=2)
    if how == "world_size":
        b = ddp_like_rank(1, world=4)
        return a, b, "world_size"
    if how == "days apart":
        b.base_ns += 3 * DAY_NS
        return a, b, "3.0 days after"
    if how == "one trace twice":
        return a, b, "are one trace"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["world_size", "days apart", "one trace twice"])
def test_mixed_runs_are_refused_unless_allowed(tmp_path, how):
    a, b, needle = _mixed(tmp_path, how)
    da, db = a.doc(), b.doc()
    da["trace_id"] = "AAAA"
    db["trace_id"] = "AAAA" if how == "one trace twice" else "BBBB"
    write_doc(tmp_path / "rank-0.json", da)
    write_doc(tmp_path / "rank-1.json", db)
    assert_one_line_exit_2(*cli("analyze", tmp_path), "more than one run", needle, "--allow-mixed")
    code, out, err = cli("analyze", tmp_path, "--allow-mixed", "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    assert len(rep["run"]["mixed"]) == 1 and needle in rep["run"]["mixed"][0]
    assert "mixed runs allowed" in err


def test_one_run_is_not_mixed(tmp_path):
    good_run(tmp_path)
    with tracekit.open(tmp_path) as run:
        assert run.mixed == [] and run.warnings == []


# ---------------------------------------------------------------- odd events: skipped, counted


def _with_bad_events(doc):
    """The trace plus bad events appended: (doc, what skipped_events must say)."""
    d = copy.deepcopy(doc)
    x = {"ph": "X", "cat": "kernel", "name": "bad", "pid": 0, "tid": 7, "ts": 150.0, "dur": 5.0}
    bad = [
        {**x, "dur": "abc"},  # dur missing or not a number
        {k: v for k, v in x.items() if k != "dur"},
        {**x, "ts": 1e300},  # ts not finite or out of range
        {**x, "ts": math.nan},  # json.dumps writes NaN: not JSON, read as null
        {**x, "ts": "soon"},  # ts missing or not a number
        {**x, "dur": -3.0},  # negative dur
        {**x, "dur": 1e20},  # dur longer than a day
        {**x, "args": "not an object"},  # kept: args are optional
        7,  # not an event object
        None,
    ]
    d["traceEvents"] = d["traceEvents"] + bad
    expected = {
        "dur longer than a day": 1,
        "dur missing or not a number": 2,
        "negative dur": 1,
        "not an event object, or no ph": 2,
        "ts missing or not a number": 2,
        "ts not finite or out of range": 1,
    }
    return d, expected


def test_bad_events_are_skipped_and_counted(tmp_path):
    clean = tmp_path / "clean"
    dirty = tmp_path / "dirty"
    for r in range(2):
        doc = ddp_like_rank(r).doc()
        write_doc(clean / f"rank-{r}.json", doc)
        write_doc(dirty / f"rank-{r}.json", _with_bad_events(doc)[0] if r == 1 else doc)
    _, expected = _with_bad_events({"traceEvents": []})
    code, out, err = cli("analyze", dirty, "--format", "json", "--breakdown-only")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["run"]["skipped_events"] == expected
    assert f"skipped {sum(expected.values())} events in rank-1.json" in err
    ref = json.loads(cli("analyze", clean, "--format", "json", "--breakdown-only")[1])
    # the one bad event that was kept ("args" not an object) is a 5 µs kernel inside
    # rank 1's busy time (compute 100–700 µs of step 1), so no figure moves
    assert rep["ranks"] == ref["ranks"]
    assert_one_line_exit_2(*cli("analyze", dirty, "--strict"), "--strict", "skipped 9 events")


# ---------------------------------------------------------------- text is text


def test_user_text_is_not_rich_markup(tmp_path):
    good_run(tmp_path / "[run] :x:")
    with tracekit.open(tmp_path / "[run] :x:") as run:
        rep = full_report(run, levels=False)
    rep["levels"] = [
        {
            "level": "memory",
            "verdict": "ok",
            "measured": {},
            "predicted": {},
            "notes": ["no [memory] events :x: [bold]b[/bold]"],
        }
    ]
    rep["findings"] = []
    text = to_text(decode(json.dumps(rep)))
    assert "no [memory] events :x: [bold]b[/bold]" in text
    assert "[run] :x:" in text and "❌" not in text


# ---------------------------------------------------------------- entry points


def test_python_dash_m_tracekit(tmp_path):
    good_run(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "tracekit", "analyze", str(tmp_path), "--breakdown-only"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 ranks" in proc.stdout


# ---------------------------------------------------------------- clock skew


def test_clock_offset_of_a_skewed_host_is_estimated_and_aligned(tmp_path):
    """Rank 2's clock runs 7 ms ahead (its base time moved); its collectives, which end
    together with the others' in the generator, say so within a microsecond, and once
    aligned the collectives are those of the same run on one clock."""
    from tests.synth import Scenario, generate
    from tracekit.store import clocks

    # hosts whose clocks differ run torch new enough to record Seq (2.2+): alignment rests
    # on instances matched by Seq, which no clock can shift
    generate(Scenario(world=4, seed=3, seq=True), tmp_path / "one_clock")
    generate(Scenario(world=4, seed=3, seq=True), tmp_path / "skewed")
    path = tmp_path / "skewed" / "rank-2.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    doc["baseTimeNanoseconds"] += 7_000_000
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    sql = (
        "SELECT rank, instance_key, ts_ns, end_ns, wait_ns FROM collectives "
        "WHERE instance_key IS NOT NULL ORDER BY rank, instance_key"
    )
    with tracekit.open(tmp_path / "one_clock") as run:
        truth = run.sql(sql).fetchall()
        steps = run.sql("SELECT rank, step, ts_ns FROM steps ORDER BY 1, 2").fetchall()
    with tracekit.open(tmp_path / "skewed") as run:
        assert set(run.clock_offsets_ns) == {2}
        assert abs(run.clock_offsets_ns[2] - 7_000_000) <= 1_000
        assert any("rank 2's clock is 7.000 ms ahead of rank 0's" in w for w in run.warnings)
        rep = full_report(run, levels=False)
        # aligned: the same collectives, arrival times and waits as on one clock
        got = run.sql(sql).fetchall()
        assert [g[:2] for g in got] == [t[:2] for t in truth]
        for g, t in zip(got, truth, strict=True):
            assert all(abs(a - b) <= 1_000 for a, b in zip(g[2:], t[2:], strict=True)), (g, t)
        got_steps = run.sql("SELECT rank, step, ts_ns FROM steps ORDER BY 1, 2").fetchall()
        assert all(abs(g[2] - t[2]) <= 1_000 for g, t in zip(got_steps, steps, strict=True))
        # after alignment nothing is left to estimate; the sandbox sees aligned views too
        assert all(abs(o.offset_ns) <= 1_000 for o in clocks.estimate(run))
        q = "SELECT max(abs(wait_ns)) FROM collectives WHERE rank = 2"
        assert run.readonly_sql(q).fetchall() == run.sql(q).fetchall()
    assert rep["run"]["clock_offsets_ns"] == {"2": run.clock_offsets_ns[2]}


def test_one_clock_no_offsets(tmp_path):
    from tests.synth import Scenario, generate

    generate(Scenario(world=4, seed=3), tmp_path)
    with tracekit.open(tmp_path) as run:
        assert run.clock_offsets_ns == {} and run.warnings == []


# ---------------------------------------------------------------- memory


def test_trace_too_big_for_memory_is_named_not_oom_killed(tmp_path, monkeypatch):
    from tracekit.ingest import resources

    good_run(tmp_path)
    monkeypatch.setattr(resources, "available_bytes", lambda: 50 * 2**20)
    code, out, err = cli("analyze", tmp_path / "rank-1.json.gz")
    assert_one_line_exit_2(code, out, err, "rank-1.json.gz", "needs about", "0.1 GB is available")
    assert_one_line_exit_2(*cli("analyze", tmp_path), "none of the 2 traces", "needs about")
    monkeypatch.undo()  # with the memory back, the same run is analysed (nothing remembered)
    assert cli("analyze", tmp_path, "--breakdown-only")[0] == 0


def test_parallel_ingest_runs_only_what_fits(tmp_path, monkeypatch):
    from tracekit.ingest import resources

    files = [ddp_like_rank(r).write(tmp_path / f"rank-{r}.json") for r in range(4)]
    need = max(resources.need_bytes(f) for f in files)
    assert resources.need_bytes(files[0]) == 5 * files[0].stat().st_size + 200 * 2**20
    monkeypatch.setattr(resources, "available_bytes", lambda: int(2.5 * need))
    assert resources.workers_that_fit([[f] for f in files], 4) == 2
    # a batch of small traces holds all of them at once: two files a batch, one fits
    pair = resources.batch_need_bytes(files[:2])
    assert pair == 5 * sum(f.stat().st_size for f in files[:2]) + 200 * 2**20
    monkeypatch.setattr(resources, "available_bytes", lambda: int(1.5 * pair))
    assert resources.workers_that_fit([files[:2], files[2:]], 4) == 1
    monkeypatch.setattr(resources, "available_bytes", lambda: None)
    assert resources.workers_that_fit([[f] for f in files], 4) == 4


def test_small_traces_read_together_take_the_memory_of_their_batch(tmp_path, monkeypatch):
    """Two workers would each read a batch of two traces. The memory fits two workers of
    one trace each, not two of two: the ingest runs in one process (no pool), and reads
    every trace."""
    from tracekit.ingest import resources, runner

    files = [ddp_like_rank(r, world=4).write(tmp_path / f"rank-{r}.json") for r in range(4)]
    size = max(f.stat().st_size for f in files)
    avail = 2 * resources.BASE_BYTES + 3 * resources.BYTES_PER_JSON_BYTE * size
    assert 2 * max(resources.need_bytes(f) for f in files) <= avail  # one trace a worker fits
    assert resources.batch_need_bytes(files[:2]) + resources.batch_need_bytes(files[2:]) > avail
    monkeypatch.setattr(resources, "available_bytes", lambda: avail)

    def no_pool(*_a, **_k):
        raise AssertionError("a second worker was started")

    monkeypatch.setattr(runner, "_executor", no_pool)
    _cdir, sources = runner.ingest_run(tmp_path, files, workers=2)
    assert [s.rank for s in sources] == [0, 1, 2, 3]


def test_gzip_text_size_is_read_from_its_trailer(tmp_path):
    from tracekit.ingest import resources

    text = json.dumps(ddp_like_rank(0).doc()).encode()
    p = tmp_path / "rank-0.json.gz"
    p.write_bytes(gzip.compress(text))
    assert resources.text_bytes(p) == len(text)
    # the size is remembered by path, size and mtime: a rewritten trace is read again
    longer = json.dumps(ddp_like_rank(0, steps=4).doc()).encode()
    p.write_bytes(gzip.compress(longer))
    assert resources.text_bytes(p) == len(longer) != len(text)


def test_no_clock_alignment_from_pairings_by_occurrence(tmp_path):
    """Without Seq, pairing is by occurrence and assumes aligned clocks: a rank missing one
    collective must not read as a clock one collective ahead (and be shifted into a match)."""
    from tests.engine.test_comm_ingest import _missing_one

    with tracekit.open(_missing_one(tmp_path, with_seq=False)) as run:
        assert run.clock_offsets_ns == {}
        matched = run.sql("SELECT count(*) FROM collectives WHERE matched").fetchall()[0][0]
    assert matched == 2  # the first all-reduce on both ranks; the shifted ones are refused
