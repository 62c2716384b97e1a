"""Reading one file: gzip or plain, rank detection, clear errors on bad input."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.tracegen import TraceBuilder
from tracekit.errors import TracekitError
from tracekit.ingest.discover import find_trace_files
from tracekit.ingest.tracefile import decode, rank_from_name, resolve_rank


def tb(**kw) -> TraceBuilder:
    b = TraceBuilder(**kw)
    b.step(1, 0.0, 10.0)
    return b


@pytest.mark.parametrize("compact", [True, False])
def test_rank_from_distributed_info_compact_or_spaced(tmp_path, compact):
    p = tb(rank=5, world_size=8).write(tmp_path / "host_123.json", compact=compact)
    raw = p.read_text()
    assert ('"rank":5' in raw) is compact
    header, _ = decode(p)
    assert resolve_rank(p, header, single=False) == (5, "distributedInfo")


@pytest.mark.parametrize(
    "name,rank",
    [
        ("rank-3.json", 3),
        ("rank3.trace.json.gz", 3),
        ("trainer_rank_12.pt.trace.json", 12),
        ("host_77.1700.pt.trace.json", None),
    ],
)
def test_rank_from_file_name(name, rank, tmp_path):
    assert rank_from_name(tmp_path / name) == rank


def test_rank_fallbacks(tmp_path):
    p = tb(rank=None).write(tmp_path / "rank-4.json")
    assert resolve_rank(p, decode(p)[0], single=False) == (4, "file name")
    q = tb(rank=None).write(tmp_path / "worker.json")
    assert resolve_rank(q, decode(q)[0], single=True) == (0, "single file")
    with pytest.raises(TracekitError, match="rename the files rank-<N>"):
        resolve_rank(q, decode(q)[0], single=False)


def test_gzip_detected_by_content_not_name(tmp_path):
    p = tmp_path / "rank-0.json"
    with gzip.open(p, "wt") as fh:  # gzip bytes behind a .json name
        json.dump(TraceBuilder(rank=0).doc() | {"traceEvents": [{"ph": "X", "name": "a"}]}, fh)
    assert b'"name": "a"' in bytes(decode(p)[1])


@pytest.mark.parametrize(
    "content,message",
    [
        (b'{"traceEvents": [', "not valid JSON"),
        (b'{"traceEvents": [{"ph": "X"}, {"ph":', "not valid JSON"),
        (b"[1, 2]", "does not look like a PyTorch profiler trace"),
        (b'{"schemaVersion": 1}', "no traceEvents"),
        (b'{"traceEvents": 3}', "traceEvents is not a list"),
        (b"\x1f\x8b\x08\x00garbage", "not a valid gzip"),
    ],
)
def test_bad_files_raise_one_clear_error(tmp_path, content, message):
    p = tmp_path / "rank-0.json"
    p.write_bytes(content)
    with pytest.raises(TracekitError, match=message):
        decode(p)


def test_old_external_id_spelling_is_normalised(tmp_path):
    b = tb(rank=0)
    b.x("k", "Kernel", 1.0, 2.0, pid=0, tid="stream 7", **{"external id": 5})
    events = bytes(decode(b.write(tmp_path / "rank-0.json"))[1])
    assert b'"External id": 5' in events and b"external id" not in events


def test_info_array_after_trace_events(tmp_path):
    """Kineto appends an INFO log list after traceEvents; the split must not be fooled."""
    doc = tb(rank=2).doc()
    doc["INFO"] = ["INFO: a]", "PyTorch Profiler: 1 iterations"]
    doc["traceName"] = "x.json"
    p = tmp_path / "rank-2.json"
    p.write_text(json.dumps(doc))
    header, events = decode(p)
    assert json.loads(bytes(events)) == doc["traceEvents"]
    assert header.distributedInfo["rank"] == 2


def test_find_trace_files_scans_folders_and_skips_non_traces(tmp_path):
    tb(rank=0).write(tmp_path / "a" / "rank-0.json.gz")
    tb(rank=1).write(tmp_path / "b" / "rank-1.json")
    (tmp_path / "job.json").write_text("{}")
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    (tmp_path / ".tracekit").mkdir()
    tb(rank=9).write(tmp_path / ".tracekit" / "rank-9.json")
    root, files = find_trace_files([tmp_path])
    assert root == tmp_path.resolve()
    assert sorted(f.name for f in files) == ["rank-0.json.gz", "rank-1.json"]


def test_find_trace_files_opens_only_files_not_named_like_a_rank(tmp_path, monkeypatch):
    """A file named like a rank's trace is listed unopened (`looks_like_trace` would say
    yes whatever it holds: a damaged one is named unreadable by the ingest); the others
    are probed. The files come in the order of their paths."""
    from tracekit.ingest import discover

    (tmp_path / "rank-3.json").write_text('{"hello": 1}')
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    tb(rank=0).write(tmp_path / "trace.json")
    tb(rank=1).write(tmp_path / "a" / "rank-1.json")
    tb(rank=2).write(tmp_path / "a-b" / "rank-2.json")
    probed: list[str] = []
    real = discover.looks_like_trace
    monkeypatch.setattr(
        discover, "looks_like_trace", lambda p, *a: probed.append(p.name) or real(p, *a)
    )
    root, files = find_trace_files([tmp_path])
    assert sorted(probed) == ["notes.json", "trace.json"]
    assert [f.relative_to(root).as_posix() for f in files] == [
        "a/rank-1.json",  # Path order: ("a", …) before ("a-b", …), unlike the strings'
        "a-b/rank-2.json",
        "rank-3.json",
        "trace.json",
    ]


def test_find_trace_files_errors(tmp_path):
    with pytest.raises(TracekitError, match="does not exist"):
        find_trace_files([tmp_path / "nope"])
    with pytest.raises(TracekitError, match="no Kineto traces"):
        find_trace_files([tmp_path])
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(TracekitError, match=r"not a \.json or \.json\.gz"):
        find_trace_files([tmp_path / "x.txt"])


def test_record_param_comms_rank_is_kept_apart_from_a_merged_files_rank(tmp_path):
    """record_param_comms' "Rank" (a send's peer, a collective's rank in its group) and
    TraceFusion's per-event "rank" differ only in case, which one DuckDB struct cannot
    hold: "Rank" is stored as "Comm rank". A string that merely contains the text is
    left alone (inside a JSON string its quotes are escaped)."""
    import tracekit

    b = TraceBuilder(rank=0, world_size=8)
    b.step(1, 0.0, 100.0)
    b.cpu_op("record_param_comms", 5.0, 3.0, **{"Collective name": "send", "Rank": 5, "rank": 0})
    b.cpu_op('odd "Rank": name', 10.0, 1.0)
    b.write(tmp_path / "rank-0.json")
    _header, events = decode(tmp_path / "rank-0.json")
    assert b'"Comm rank":' in bytes(events) and b'"Rank":' not in bytes(events)
    with tracekit.open(tmp_path) as run:
        rows = run.sql("SELECT name, comm_rank FROM events WHERE kind = 'cpu_op' ORDER BY ts_ns")
        assert rows.fetchall() == [("record_param_comms", 5), ('odd "Rank": name', None)]


def test_ingest_keeps_rank_as_torch_writes_it_where_the_file_has_distributed_info(tmp_path):
    """The ingest reads record_param_comms' "Rank" as is in a file with distributedInfo
    (no rename, no copy of the text); a file without it (a merged one may carry per-event
    "rank") still has it renamed "Comm rank"."""
    from tracekit.ingest.tracefile import comm_rank_key

    b = TraceBuilder(rank=0, world_size=8)
    b.cpu_op("record_param_comms", 5.0, 3.0, **{"Collective name": "send", "Rank": 5})
    header, events = decode(b.write(tmp_path / "rank-0.json"), rank_as_is=True)
    assert comm_rank_key(header) == "Rank" and b'"Rank": 5' in bytes(events)
    doc = json.loads((tmp_path / "rank-0.json").read_text())
    del doc["distributedInfo"]
    (tmp_path / "merged.json").write_text(json.dumps(doc))
    header, events = decode(tmp_path / "merged.json", rank_as_is=True)
    assert comm_rank_key(header) == "Comm rank"
    assert b'"Comm rank": 5' in bytes(events) and b'"Rank":' not in bytes(events)
