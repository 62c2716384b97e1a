"""Opening a run: find its traces, ingest what the cache lacks (only the chosen ranks
with `--ranks` / `--sample-ranks`), build the `Run` and check its health."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import TracekitError
from tracekit.ingest import runner as loader
from tracekit.ingest.discover import find_trace_files
from tracekit.options import OpenOptions
from tracekit.store.run import Run

if TYPE_CHECKING:
    from collections.abc import Callable

    from tracekit.ingest import ranksel


def open_run(
    *inputs: str | Path,
    options: OpenOptions | None = None,
    while_ingesting: Callable[[], object] | None = None,
    **kwargs,
) -> Run:
    """Open a run folder (or trace files), ingesting what the cache lacks. `options` (an
    `OpenOptions`), or its fields as keywords:

    `comm_kernels`: extra regexes of communication kernels (`--comm-kernel`), added to
    those of the run's job.json and pyproject.toml (`tracekit.model.commkernels.user_patterns`).
    Unreadable files are left out and named in `run.unreadable` (`strict`: an error);
    traces that look like several runs are an error unless `allow_mixed`. `cluster`: the
    per-rank ingest runs on a Dask cluster (`tracekit.ingest.cluster`).

    `ranks` (`"0-7,64"` or a list) or `sample_ranks` (N ranks spread evenly): open only
    those ranks, without ingesting the other traces (`tracekit.ingest.ranksel`); the selection
    is `run.rank_selection`.

    `while_ingesting`: work for this process while the ingest's worker processes read
    (`tracekit.ingest.runner.ingest_run`)."""
    o = options or OpenOptions(**kwargs)
    workers, strict, allow_mixed, cluster = o.workers, o.strict, o.allow_mixed, o.cluster
    ranks, sample_ranks, comm_kernels = o.ranks, o.sample_ranks, o.comm_kernels
    from tracekit import manifest
    from tracekit.model.commkernels import user_patterns
    from tracekit.store import health as validate

    request = None
    if ranks is not None or sample_ranks is not None:
        from tracekit.ingest import ranksel

        request = ranksel.Request.make(ranks, sample_ranks)  # a bad spec fails before reading
    if not inputs:
        raise TracekitError("pass a run folder or trace files")
    root, files = find_trace_files([Path(p) for p in inputs])
    man = manifest.load(root)
    patterns = user_patterns(root, comm_kernels, man.comm_kernels if man else ())
    notes = loader.IngestNotes()

    def ingest(batch: list[Path], last: bool = True) -> tuple[Path, list[loader.Source]]:
        # the work beside runs once, in the last ingest: its thread (and the DuckDB
        # database it makes, whose threads start with it) must not be alive when a later
        # ingest's pool forks its workers
        return loader.ingest_run(
            root,
            batch,
            workers=workers,
            comm_kernels=patterns,
            notes=notes,
            cluster=cluster,
            single=len(files) == 1,
            while_ingesting=while_ingesting if last else None,
        )

    selection = None
    if request is None:
        cdir, sources = ingest(files)
    else:
        cdir, sources, selection = _ingest_selected(files, request, ingest)
    run = Run(root, cdir, sources)
    run.comm_kernels = patterns
    run.manifest = man
    run.rank_selection = selection
    try:
        validate.check(run, notes, allow_mixed=allow_mixed, strict=strict)
    except BaseException:
        run.close()
        raise
    return run


def _ingest_selected(
    files: list[Path],
    request: ranksel.Request,
    ingest: Callable[..., tuple[Path, list[loader.Source]]],
) -> tuple[Path, list[loader.Source], ranksel.RankSelection]:
    """Ingest only the traces of the ranks `request` picks (`tracekit.ingest.ranksel`): files
    whose rank the name or header tells are chosen before reading; the others (and
    merged multi-rank files) are ingested whole first and their ranks filtered after."""
    from tracekit.ingest import ranksel

    known, unknown = ranksel.file_ranks(files)

    def batch_of(chosen: set[int], done: set[Path]) -> list[Path]:
        return [f for f in files if f in known and known[f] in chosen and f not in done]

    cdir, sources = None, []
    if unknown:
        first = []
        if request.sample is not None and known:
            # a sample needs every rank known before it is drawn; the lowest-ranked known
            # file (the sample's first rank, unless an unknown file holds a lower one) is
            # read in this pass too
            first = [min(known, key=lambda f: known[f])]
        elif request.ranks is not None:
            first = batch_of(set(request.ranks), set())
        cdir, sources = ingest(unknown + first, last=False)
    found = sorted(set(known.values()) | {s.rank for s in sources})
    chosen = ranksel.choose(request, found)
    rest = batch_of(set(chosen), {s.path for s in sources})
    if rest:
        cdir, more = ingest(rest)
        sources += more
    assert cdir is not None
    by_rank: dict[int, loader.Source] = {}
    for s in sources:
        other = by_rank.setdefault(s.rank, s)
        if other is not s:
            raise TracekitError(
                f"rank {s.rank} appears twice ({other.path.name} and {s.path.name}); "
                "pass one trace per rank (one ProfilerStep cycle per run folder)"
            )
    picked = set(chosen)
    kept = sorted((s for s in by_rank.values() if s.rank in picked), key=lambda s: s.rank)
    if not kept:
        raise TracekitError(
            f"{request.option} {request.spec}: no readable trace holds the chosen ranks "
            f"({ranksel.ranges_text(chosen)})"
        )
    selection = ranksel.RankSelection(request.option, request.spec, [s.rank for s in kept], found)
    return cdir, kept, selection
