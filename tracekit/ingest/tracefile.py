"""Read one Kineto trace file: gunzip, split header from events, find its rank.

The events never become Python objects. `split_document` finds the `traceEvents`
array in the gunzipped bytes; its text goes to DuckDB's JSON reader
(`tracekit.ingest`), which decodes it straight into typed columns. Only the small
header around the array is decoded here (msgspec). Per 54 MB trace this is
~0.4 s against ~1.2 s for a Python JSON decode plus column building — see
`benchmarks/ingest.py`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
from isal import igzip, isal_zlib

from tracekit.errors import TracekitError
from tracekit.ingest.discover import rank_from_name


class Header(msgspec.Struct):
    """The top-level keys of a trace besides `traceEvents`."""

    schemaVersion: Any = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    record_shapes: Any = None
    profile_memory: Any = None
    with_flops: Any = None
    host_name: Any = None
    trace_id: Any = None
    # a merged file written by `tracekit export`: each rank's distributedInfo, by rank
    distributedInfoByRank: Any = None


_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_HEADER_KEYS = frozenset(Header.__struct_fields__)


def read_bytes(path: Path) -> bytes:
    """The JSON text of a trace, gunzipped when the file is gzip (by magic, not name)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            if head == b"\x1f\x8b":
                return _gunzip(fh.read())
            return fh.read()
    except OSError as exc:
        raise TracekitError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (igzip.BadGzipFile, EOFError, ValueError) as exc:
        raise TracekitError(
            f"{path} is not a valid gzip file ({exc}); re-export the trace or gunzip it"
        ) from exc


def _gunzip(data: bytes) -> bytes:
    """A gzip file's content. One member, the usual file: isal_zlib's one-shot decompress
    (0.037 s per 47 MB of JSON against 0.059 s for igzip's reader, which grows its buffer:
    copies and page faults); anything else (several members, zero padding, damage):
    igzip's reader, with its checks and errors."""
    d = isal_zlib.decompressobj(31)  # 31: a gzip header and trailer (CRC, size) checked
    try:
        out = d.decompress(data)
    except isal_zlib.error:
        return igzip.decompress(data)
    return out if d.eof and not d.unused_data else igzip.decompress(data)


# Python's json module writes NaN / Infinity, which JSON does not have: read them as null
_NON_JSON_NUMBER = re.compile(rb"(?<=[:\[,])(\s*)(?:-?Infinity|NaN)(?=\s*[,\]}])")


def _decode_top(data: bytes) -> dict[str, msgspec.Raw]:
    try:
        return _TOP.decode(data)
    except msgspec.DecodeError:
        if b"NaN" not in data and b"Infinity" not in data:
            raise
        fixed = _NON_JSON_NUMBER.sub(rb"\1null", data)
        if fixed == data:
            raise
        return _TOP.decode(fixed)


def split_document(path: Path, data: bytes) -> tuple[Header, bytes | msgspec.Raw]:
    """(header, the raw text of the traceEvents array) of a whole trace document.

    msgspec validates the whole document but only skips over each top-level value
    (`msgspec.Raw`), ~1 GB/s; the header values are then decoded on their own.
    """
    try:
        parts = _decode_top(data)
    except msgspec.ValidationError as exc:
        raise TracekitError(
            f"{path} does not look like a PyTorch profiler trace ({exc}); pass the files "
            "written by torch.profiler (export_chrome_trace / tensorboard_trace_handler)"
        ) from exc
    except msgspec.DecodeError as exc:
        raise TracekitError(
            f"{path} is not valid JSON ({exc}); the file may be truncated — re-export the trace"
        ) from exc
    events = parts.pop("traceEvents", None)
    if events is None:
        raise TracekitError(f"{path} has no traceEvents: it is empty or not a Kineto trace")
    if bytes(memoryview(events)[:1]) != b"[":
        raise TracekitError(
            f"{path} does not look like a PyTorch profiler trace (traceEvents is not a list)"
        )
    fields = {k: msgspec.json.decode(v) for k, v in parts.items() if k in _HEADER_KEYS}
    return Header(**fields), events


def decode(path: Path, rank_as_is: bool = False) -> tuple[Header, bytes | msgspec.Raw]:
    """Read a trace file; one clear error for anything that is not a Kineto trace.

    `rank_as_is`: record_param_comms' "Rank" is left as it is in a file with
    distributedInfo (`comm_rank_key`), not renamed "Comm rank" (the ingest's reader then
    declares "Rank"): the rename's scan of the whole text cost 0.02 s per 47 MB, its copy
    as much again where the key is there."""
    data = read_bytes(path)
    # Old traces spell "external id" on GPU/runtime events; the store reads one
    # spelling (a DuckDB struct cannot hold names differing only in case). The same for
    # "Rank" below.
    if b'"external id"' in data:
        data = data.replace(b'"external id"', b'"External id"')
    if not rank_as_is:
        data = _comm_rank(data)
    header, events = split_document(path, data)
    if not isinstance(header.distributedInfo, dict | None):
        header.distributedInfo = None
    if not isinstance(header.deviceProperties, list):
        header.deviceProperties = []
    base = header.baseTimeNanoseconds
    if isinstance(base, bool) or not isinstance(base, int) or not 0 <= base < 4 * 10**18:
        header.baseTimeNanoseconds = None  # absent, mistyped or absurd (past year 2096)
    if not isinstance(header.trace_id, str):
        header.trace_id = None
    if rank_as_is and comm_rank_key(header) != "Rank":
        events = _comm_rank(events)
    return header, events


# the `args` key record_param_comms' "Rank" is renamed to (`_comm_rank`), the ingest's
# default (`comm_rank_key`, `tracekit.ingest.tables`)
COMM_RANK = "Comm rank"
_COMM_RANK_ARG = f'"{COMM_RANK}":'.encode()


def _comm_rank(text: bytes | msgspec.Raw) -> bytes | msgspec.Raw:
    """record_param_comms' "Rank" (the peer of a send/recv, else the rank in the group)
    renamed "Comm rank": it would clash with TraceFusion's per-event "rank"."""
    data = bytes(text)  # a copy where `text` is the events' msgspec.Raw: a merged file's
    return data.replace(b'"Rank":', _COMM_RANK_ARG) if b'"Rank":' in data else text


def comm_rank_key(header: Header) -> str:
    """The `args` key of record_param_comms' "Rank" in the events `decode(path,
    rank_as_is=True)` gave with `header`: as torch writes it in a file with
    distributedInfo (one rank's: no per-event "rank" beside it, which a DuckDB struct
    could not hold as well), else renamed "Comm rank"."""
    return "Rank" if header.distributedInfo else COMM_RANK


def resolve_rank(path: Path, header: Header, single: bool) -> tuple[int, str]:
    """Rank from `distributedInfo.rank`, else the file name, else 0 for a lone file."""
    info = header.distributedInfo or {}
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
