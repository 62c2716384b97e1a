from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# ../shared/traces beside the checkout; TRACEKIT_SHARED_TRACES names it elsewhere (a worktree)
SHARED_TRACES = Path(os.environ.get("TRACEKIT_SHARED_TRACES") or ROOT.parent / "shared" / "traces")

# Reference values Holistic Trace Analysis 0.5.0 reports (shared/traces/README.md):
# trace -> rank -> (idle %, compute %, non-compute %, overlap %)
HTA_REFERENCE = {
    "a100_sendrecv_2rank": {0: (53.56, 17.71, 28.74, 11.81), 1: (54.72, 22.57, 22.72, 20.05)},
    "a100_allreduce_meta_rank0": {0: (77.78, 17.26, 4.97, 14.31)},
    "v100_ddp_rank1": {1: (46.08, 35.55, 18.37, 0.00)},
}


def shared_trace_names() -> list[str]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p.name for p in SHARED_TRACES.iterdir() if p.is_dir())


@pytest.fixture(scope="session", autouse=True)
def _user_cache(tmp_path_factory):
    """Caches of read-only runs (shared/traces) go to a per-session user cache dir."""
    d = tmp_path_factory.mktemp("xdg-cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(d)
    os.environ["TRACEKIT_NO_PROGRESS"] = "1"
    yield d
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture(scope="session")
def _shared_copies(tmp_path_factory):
    return tmp_path_factory.mktemp("shared-traces")


@pytest.fixture
def shared_trace(_shared_copies):
    """A private copy of a shared trace folder: tests never write into ../shared (root
    passes every permission check, so a cache would land there)."""

    def get(name: str) -> Path:
        p = SHARED_TRACES / name
        if not p.is_dir():
            pytest.skip(f"{p} not present")
        dest = _shared_copies / name
        if not dest.exists():
            tmp = _shared_copies / f".{name}.tmp"
            shutil.copytree(p, tmp, ignore=shutil.ignore_patterns(".tracekit"))
            tmp.rename(dest)
        return dest

    return get
