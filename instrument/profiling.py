"""The profiler, set up the way tracekit needs it — shared by the jobs and `capture()`.

wait/warmup/active schedule (one cycle), `record_shapes=True` (message sizes and FLOPs
come from shapes), `profile_memory=True`, one gzip trace per rank named by
`TRACE_PATTERN`.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from tracekit.manifest import JobManifest

TRACE_PATTERN = JobManifest.__dataclass_fields__["trace_pattern"].default  # rank-{rank}.json.gz


def trace_path(out_dir: str | Path, rank: int) -> Path:
    return Path(out_dir) / TRACE_PATTERN.format(rank=rank)


def make_profiler(
    out_dir: str | Path,
    rank: int,
    active: int,
    wait: int = 1,
    warmup: int = 1,
    modules: bool = False,
):
    """A torch profiler that writes `out_dir/rank-<rank>.json.gz` after `active` steps;
    `modules` adds an `nn.Module: X` event per module call (regions): torch writes them
    from its Python tracer, which `with_stack` starts (`with_modules` alone does not, torch
    2.13) — slower steps, larger traces."""
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    dest = trace_path(out_dir, rank)
    dest.parent.mkdir(parents=True, exist_ok=True)

    def on_ready(prof) -> None:
        prof.export_chrome_trace(str(dest))  # gzip: torch compresses a .gz path

    return profile(
        activities=activities,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=on_ready,
        record_shapes=True,
        profile_memory=True,
        with_stack=modules,
        with_modules=modules,
    )


def label_pipeline_stage(stage, stage_index: int) -> None:
    """Wrap a PipelineStage's forward/backward chunks in `PP:{stage}{F|B}{mb}` labels.

    Schedule1F1B emits no labels of its own; this is torch's own form, the one its
    multi-stage runtime schedules use, so one parser reads both.
    """
    fwd, bwd = stage.forward_one_chunk, stage.backward_one_chunk

    @functools.wraps(fwd)
    def forward_one_chunk(fwd_chunk_id, *args, **kwargs):
        with record_function(f"PP:{stage_index}F{fwd_chunk_id}"):
            return fwd(fwd_chunk_id, *args, **kwargs)

    @functools.wraps(bwd)
    def backward_one_chunk(bwd_chunk_id, *args, **kwargs):
        with record_function(f"PP:{stage_index}B{bwd_chunk_id}"):
            return bwd(bwd_chunk_id, *args, **kwargs)

    stage.forward_one_chunk = forward_one_chunk
    stage.backward_one_chunk = backward_one_chunk
