"""An ingest's batches: which traces are read together in one worker (`plan_batches`)."""

from __future__ import annotations

from pathlib import Path

from tracekit.ingest import resources

# Batches (`ingest_batch`): traces of less than SMALL_BYTES of JSON are ingested together,
# up to BATCH_BYTES of JSON a batch, in a multiple of the workers' count of batches (equal
# batches then end together: 13 batches on 2 workers left one core idle for the 13th); a
# bigger trace is a batch of its own (its tables alone are what a worker can hold).
# 128 MiB, by measurement (DLRM ranks of 0.8 MB, one worker): 20.8 ms of CPU a rank in
# batches of 74 ranks (64 MiB), 19.6 ms in batches of 148, at 421 MB of peak RSS a
# worker, under the 1 GB the analysis of those 1,024 ranks takes afterwards.
SMALL_BYTES = 16 * 2**20
BATCH_BYTES = 128 * 2**20


def plan_batches(files: list[Path], workers: int) -> list[list[Path]]:
    """`files` cut into the batches of one ingest: big traces alone, small ones in runs of
    consecutive files of about equal JSON size, as many batches of them as it takes to
    keep each within BATCH_BYTES, rounded up to a multiple of `workers` (when there are
    that many files)."""
    sizes = {f: resources.text_bytes(f) for f in files}
    big = [[f] for f in files if sizes[f] >= SMALL_BYTES]
    small = [f for f in files if sizes[f] < SMALL_BYTES]
    if not small:
        return big
    total = sum(sizes[f] for f in small)
    workers = max(1, workers)
    count = min(len(small), -(-max(1, -(-total // BATCH_BYTES)) // workers) * workers)
    per = total / count
    batches: list[list[Path]] = [[]]
    acc = 0
    for f in small:
        # a new batch once this one has its share, keeping one file for each batch to come
        if batches[-1] and acc >= per * len(batches) and len(batches) < count:
            batches.append([])
        batches[-1].append(f)
        acc += sizes[f]
    return big + batches
