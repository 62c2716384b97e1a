"""Rank selection: `--ranks 0-7,64` or `--sample-ranks N`, a first look at a huge run.

The selection is made before ingest, so the traces of ranks left out are never
decompressed: a file's rank comes from its name when the name holds one (`rank-3…`,
`tracefile.rank_from_name`), else from `distributedInfo.rank` in its header, read by
gunzipping only the start of the file up to `"traceEvents"` (Kineto writes
`distributedInfo` before the events; at most `HEADER_PROBE_BYTES`). A file whose rank
neither tells cheaply — no rank in its name, no `distributedInfo` before its events,
or a merged multi-rank file (TraceLens TraceFusion, which has none) — is ingested whole,
and its ranks are filtered after. The cache stays per file: a later full run ingests
only the files left out.

The name is trusted for choosing: the ranks analysed are the ones the ingest then finds
(the header's `distributedInfo.rank` first), so a file whose name and header disagree
may be read for one rank and analysed as the other; `RankSelection.ranks` lists the
ranks actually analysed.

`RankSelection` is what the report records (`run.rank_selection`): the option as given,
the ranks analysed, and how many ranks the run's traces hold. Ranks that have traces but
were not selected are not "missing" (`tracekit.store.health.missing_ranks`).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.model.ranks import ranges

HEADER_PROBE_BYTES = 4 << 20  # how much of a trace is gunzipped to find its header
_CHUNK = 64 << 10
_SPEC_PART = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def parse_spec(spec: str) -> list[int]:
    """`"0-7,64,100-103"` → [0, …, 7, 64, 100, 101, 102, 103] (sorted, unique).

    Comma-separated global ranks and inclusive ranges `A-B`; anything else is a
    `TracekitError` naming the option."""
    ranks: set[int] = set()
    for part in str(spec).split(","):
        m = _SPEC_PART.fullmatch(part)
        if not m:
            raise TracekitError(
                f"--ranks {spec!r} is not a rank list; use global ranks and ranges, "
                "e.g. 0-7,64,100-103"
            )
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        if b < a:
            raise TracekitError(f"--ranks {spec!r}: the range {a}-{b} ends before it starts")
        if b - a > 10_000_000:
            raise TracekitError(f"--ranks {spec!r}: the range {a}-{b} is too large")
        ranks.update(range(a, b + 1))
    return sorted(ranks)


def ranges_text(ranks: list[int]) -> str:
    """[0, 1, 2, 5] → '0-2,5' (the `--ranks` syntax, so it can be pasted back)."""
    return ranges(ranks, dash="-", sep=",")


def spread(ranks: list[int], n: int) -> list[int]:
    """`n` of `ranks` spread evenly by rank order: always the first and the last, the
    others at positions round(i·(M−1)/(n−1)) of the M sorted ranks (half rounds up);
    every rank when n ≥ M; the first alone when n = 1."""
    rs = sorted(set(ranks))
    m = len(rs)
    if n >= m:
        return rs
    if n == 1:
        return rs[:1]
    return [rs[(2 * i * (m - 1) + (n - 1)) // (2 * (n - 1))] for i in range(n)]


@dataclass
class Request:
    """What the user asked for: `--ranks SPEC` or `--sample-ranks N` (never both)."""

    ranks: list[int] | None = None
    sample: int | None = None
    spec: str = ""  # as given, for the report

    @classmethod
    def make(cls, ranks: str | list[int] | None, sample_ranks: int | None) -> Request | None:
        if ranks is not None and sample_ranks is not None:
            raise TracekitError("--ranks and --sample-ranks pick ranks two ways; pass one of them")
        if sample_ranks is not None:
            if isinstance(sample_ranks, bool) or not isinstance(sample_ranks, int):
                raise TracekitError(f"--sample-ranks {sample_ranks!r} is not a whole number")
            if sample_ranks < 1:
                raise TracekitError(f"--sample-ranks {sample_ranks}: pick at least one rank")
            return cls(sample=sample_ranks, spec=str(sample_ranks))
        if ranks is None:
            return None
        if isinstance(ranks, str):
            return cls(ranks=parse_spec(ranks), spec=ranks.strip())
        listed = list(ranks)
        if not listed or not all(isinstance(r, int) and r >= 0 for r in listed):
            raise TracekitError(f"ranks={ranks!r}: pass global ranks (ints ≥ 0) or a spec")
        return cls(ranks=sorted(set(listed)), spec=ranges_text(listed))

    @property
    def option(self) -> str:
        return "--sample-ranks" if self.sample is not None else "--ranks"


@dataclass
class RankSelection:
    """The selection a run was opened with (`Run.rank_selection`); `to_dict` is the
    report's `run.rank_selection`."""

    option: str  # "--ranks" or "--sample-ranks"
    spec: str  # the option's value as given
    ranks: list[int]  # the ranks analysed
    found: list[int] = field(default_factory=list)  # every rank the run's traces hold

    def to_dict(self) -> dict:
        return {
            "option": self.option,
            "spec": self.spec,
            "ranks": self.ranks,
            "of": len(self.found),
        }


def header_rank(path: Path, limit: int = HEADER_PROBE_BYTES) -> int | None:
    """`distributedInfo.rank` from the start of a trace, without reading its events:
    gunzip (streamed) up to `"traceEvents"`, close the object there and decode that.
    None when the header does not say within `limit` bytes, or cannot be read."""
    import msgspec

    head = b""
    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
            fh.seek(0)
            dec = zlib.decompressobj(wbits=31) if gz else None
            while len(head) < limit:
                raw = fh.read(_CHUNK)
                if not raw:
                    break
                head += dec.decompress(raw, limit - len(head)) if dec else raw
                if b'"traceEvents"' in head or (dec and dec.eof):
                    break
    except (OSError, zlib.error):
        return None
    cut = head.find(b'"traceEvents"')
    if cut < 0:
        return None
    text = head[:cut].rstrip().rstrip(b",") + b"}"
    try:
        top = msgspec.json.decode(text, type=dict[str, msgspec.Raw])
        info = msgspec.json.decode(top.get("distributedInfo", b"null"))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None


def file_ranks(files: list[Path]) -> tuple[dict[Path, int], list[Path]]:
    """({file: rank} for the files whose rank is cheap to tell, the others)."""
    from tracekit.ingest.tracefile import rank_from_name

    known: dict[Path, int] = {}
    unknown: list[Path] = []
    for f in files:
        r = rank_from_name(f)
        if r is None:
            r = header_rank(f)
        if r is None:
            unknown.append(f)
        else:
            known[f] = r
    return known, unknown


def choose(req: Request, found: list[int]) -> list[int]:
    """The ranks `req` picks out of the ranks the run holds; a rank asked for that the
    run does not hold is a `TracekitError`."""
    if req.sample is not None:
        return spread(found, req.sample)
    assert req.ranks is not None
    absent = sorted(set(req.ranks) - set(found))
    if absent:
        have = ranges_text(found) or "none"
        raise TracekitError(
            f"--ranks {req.spec}: the run has no rank {ranges_text(absent)} (its ranks: {have})"
        )
    return list(req.ranks)
