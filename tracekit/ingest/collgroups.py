"""The process group a collective ran on, where its metadata does not say it all: the
rank's default group, the group its shapes imply, a group's ranks as the trace lists
them, and a send's or recv's peer as a global rank."""

from __future__ import annotations

import json
from typing import Any


def default_group(
    pgs: list[dict], world_size: int | None
) -> tuple[int | None, list | None, str | None]:
    """(size, ranks, source) of the group a collective ran on when neither its metadata
    nor its shapes say: the rank's only group size (its ranks when every group of that
    size lists the same; source `pg_config`), or — when the trace lists no groups at
    all — the world (`world`)."""
    groups = [(p["pg_size"], tuple(p["ranks"] or ())) for p in pgs if p["pg_size"]]
    sizes = {n for n, _ in groups}
    if len(sizes) == 1:
        rank_sets = {r for _, r in groups if r}
        n = sizes.pop()
        return n, list(rank_sets.pop()) if len(rank_sets) == 1 else None, "pg_config"
    if not sizes and world_size:
        return world_size, list(range(world_size)), "world"
    return None, None, None


def group_from_shapes(name: str | None, n_in: int | None, n_out: int | None) -> int | None:
    """The group size an all-gather's or reduce-scatter's shapes imply: each rank
    contributes its shard to, or receives its shard of, the whole buffer, so the group
    is the whole ÷ the shard (all-gather out ÷ in; reduce-scatter in ÷ out) when that
    divides exactly and is ≥ 2; None for other collectives or other shapes."""
    if name not in ("all_gather", "reduce_scatter") or not n_in or not n_out:
        return None
    whole, shard = (n_out, n_in) if name == "all_gather" else (n_in, n_out)
    if shard <= 0 or whole % shard or whole // shard < 2:
        return None
    return whole // shard


def parse_ranks(text: str | None) -> list[int] | None:
    """`"[0, 1, 2, 3]"` → [0, 1, 2, 3]; empty, absent or odd → None (unknown)."""
    if not text:
        return None
    try:
        v = json.loads(text)
    except ValueError:
        return None
    if not isinstance(v, list) or not v or not all(isinstance(x, int) for x in v):
        return None
    return v


def global_peer(name: str | None, local: Any, ranks: list[int] | None) -> int | None:
    """The global rank a send goes to or a recv comes from: `local` is its rank in the
    process group (record_param_comms' "Rank" of a send/recv, PyTorch's
    ProcessGroupNCCL::send/recv `dstRank`/`srcRank`; gloo's `c10d::send`/`c10d::recv_`
    third argument), mapped through the group's global ranks. None for other
    collectives, or where the group's ranks are unknown."""
    if name not in ("send", "recv") or not ranks or isinstance(local, bool):
        return None
    if not isinstance(local, int) or not 0 <= local < len(ranks):
        return None
    return int(ranks[local])
