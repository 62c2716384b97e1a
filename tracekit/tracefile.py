"""Read one Kineto trace file: gunzip, decode JSON into typed structs, find its rank.

Decoding goes straight into `msgspec.Struct`s that name only the fields tracekit
stores, so unknown keys (call stacks, occupancy figures …) are skipped by the C
decoder instead of becoming Python dicts. That is what keeps ingest near the
raw gunzip + JSON floor (see `benchmarks/ingest.py`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from isal import igzip

from tracekit.errors import TracekitError

Num = int | float
Id = int | str


class Args(msgspec.Struct, omit_defaults=True):
    """The `args` keys tracekit keeps. Kineto spells some with spaces.

    All are `Any`: a value of an unexpected type in one event must not fail the
    whole file; `tracekit.ingest` normalises types when it builds columns.
    """

    correlation: Any = None
    external_id: Any = msgspec.field(default=None, name="External id")
    external_id_old: Any = msgspec.field(default=None, name="external id")
    device: Any = None
    stream: Any = None
    bytes: Any = None
    # collective metadata (record_param_comms, NCCL kernels in recent torch)
    coll_name: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    in_split: Any = msgspec.field(default=None, name="In split size")
    out_split: Any = msgspec.field(default=None, name="Out split size")
    group_size: Any = msgspec.field(default=None, name="Group size")
    dtype: Any = None
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Any = msgspec.field(default=None, name="Process Group Description")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    rank_start: Any = msgspec.field(default=None, name="Global rank start")
    rank_stride: Any = msgspec.field(default=None, name="Global rank stride")
    seq: Any = msgspec.field(default=None, name="Seq")
    # shapes (record_shapes=True)
    input_dims: Any = msgspec.field(default=None, name="Input Dims")
    input_type: Any = msgspec.field(default=None, name="Input type")
    concrete_inputs: Any = msgspec.field(default=None, name="Concrete Inputs")
    # [memory] instants
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")
    addr: Any = msgspec.field(default=None, name="Addr")
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    # M (metadata) events
    meta_name: Any = msgspec.field(default=None, name="name")
    labels: Any = None


class Event(msgspec.Struct):
    ph: str = ""
    cat: str | None = None
    name: str = ""
    pid: Id = -1
    tid: Id = -1
    ts: Num = 0
    dur: Num = 0
    id: Id | None = None
    bp: str | None = None
    args: Args | None = None


class TraceDoc(msgspec.Struct):
    traceEvents: list[Event] = []
    schemaVersion: Any = None
    deviceProperties: list[dict[str, Any]] = []
    distributedInfo: dict[str, Any] | None = None
    baseTimeNanoseconds: int | None = None
    record_shapes: Any = None
    profile_memory: Any = None
    with_flops: Any = None
    host_name: str | None = None


_DECODER = msgspec.json.Decoder(TraceDoc)
_RANK_IN_NAME = re.compile(r"rank[-_.]?(\d+)", re.IGNORECASE)
TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass
class TraceFile:
    """A decoded trace and what its header says."""

    path: Path
    doc: TraceDoc
    rank: int
    rank_source: str  # "distributedInfo", "file name" or "single file"
    info: dict[str, Any] = field(default_factory=dict)


def read_bytes(path: Path) -> bytes:
    """The JSON text of a trace, gunzipped when the file is gzip (by magic, not name)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            if head == b"\x1f\x8b":
                return igzip.decompress(fh.read())
            return fh.read()
    except OSError as exc:
        raise TracekitError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (igzip.BadGzipFile, EOFError, ValueError) as exc:
        raise TracekitError(
            f"{path} is not a valid gzip file ({exc}); re-export the trace or gunzip it"
        ) from exc


def decode(path: Path, data: bytes | None = None) -> TraceDoc:
    """Decode a trace file; one clear error for anything that is not a Kineto trace."""
    if data is None:
        data = read_bytes(path)
    try:
        doc = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise TracekitError(
            f"{path} does not look like a PyTorch profiler trace ({exc}); "
            "pass the files written by torch.profiler "
            "(export_chrome_trace / tensorboard_trace_handler)"
        ) from exc
    except msgspec.DecodeError as exc:
        raise TracekitError(
            f"{path} is not valid JSON ({exc}); the file may be truncated — re-export the trace"
        ) from exc
    if not doc.traceEvents:
        raise TracekitError(f"{path} has no traceEvents: it is empty or not a Kineto trace")
    return doc


def rank_from_name(path: Path) -> int | None:
    m = _RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


def resolve_rank(path: Path, doc: TraceDoc, single: bool) -> tuple[int, str]:
    """Rank from `distributedInfo.rank`, else the file name, else 0 for a lone file."""
    info = doc.distributedInfo or {}
    rank = info.get("rank")
    if isinstance(rank, int) and rank >= 0:
        return rank, "distributedInfo"
    named = rank_from_name(path)
    if named is not None:
        return named, "file name"
    if single:
        return 0, "single file"
    raise TracekitError(
        f"cannot tell the rank of {path.name}: it has no distributedInfo.rank and no rank in its "
        "name; rename the files rank-<N>.json.gz (or rank<N>_…) or profile with torch.distributed "
        "initialised"
    )


def looks_like_trace(path: Path, probe_bytes: int = 1 << 20) -> bool:
    """Cheap check used when scanning a folder: does `traceEvents` appear near the start?"""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            if head == b"\x1f\x8b":
                with igzip.open(fh) as gz:
                    chunk = gz.read(probe_bytes)
            else:
                chunk = fh.read(probe_bytes)
    except (OSError, EOFError, igzip.BadGzipFile):
        return True  # let the real read report the problem in one line
    return b'"traceEvents"' in chunk


def find_trace_files(inputs: list[Path]) -> tuple[Path, list[Path]]:
    """The run root and its trace files, from a folder or a list of files.

    A folder is scanned recursively for `*.json` / `*.json.gz` (skipping `.tracekit/`
    caches and `job.json`); files whose start holds no `traceEvents` are skipped.
    """
    files: list[Path] = []
    roots: list[Path] = []
    for raw in inputs:
        p = Path(raw)
        if not p.exists():
            raise TracekitError(f"{p} does not exist; pass a run folder or trace files")
        if p.is_dir():
            roots.append(p)
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file()
                and f.name.endswith(TRACE_SUFFIXES)
                and ".tracekit" not in f.relative_to(p).parts
                and f.name != "job.json"
            )
            files.extend(f for f in found if looks_like_trace(f))
        else:
            if not p.name.endswith(TRACE_SUFFIXES):
                raise TracekitError(f"{p} is not a .json or .json.gz trace file")
            roots.append(p.parent)
            files.append(p)
    if not files:
        where = ", ".join(str(r) for r in roots)
        raise TracekitError(
            f"no Kineto traces (*.json, *.json.gz with traceEvents) found in {where}"
        )
    root = Path(os.path.commonpath([str(r.resolve()) for r in roots]))
    # one file listed twice is one file
    seen: dict[Path, None] = {}
    for f in files:
        seen.setdefault(f.resolve(), None)
    return root, list(seen)
