"""Which node each rank runs on, and whether a process group spans nodes.

A collective's predicted bandwidth depends on where its ranks sit, not on how many
there are: a group of 8 spread over two nodes runs at the NIC's speed, a group of 8 in
one node at NVLink's. Sources, first that answers:

1. `--gpus-per-node N` (the user), then `gpus_per_node` in job.json: ranks fill nodes
   in order, node = rank // N;
2. the traces' `host_name` (rank_info) for the ranks that were traced, when ranks sit on
   more than one host or every rank of the world is traced (ranks per host = GPUs per
   node for the ranks not traced);
3. the device table's GPUs per node (8 for the GPUs it lists), node = rank // 8.

A group's ranks come from the collective's `pg_ranks` (NCCL metadata); without them a
group of the whole world has ranks 0…world−1, a larger group than a node spans nodes,
and a smaller one is taken to sit in one node (how TP and expert groups are placed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracekit import sql

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts


@dataclass(frozen=True)
class Topology:
    gpus_per_node: int
    hosts: dict[int, str]  # traced rank → host (only from trace host names)
    world: int
    source: str

    def node(self, rank: int) -> str:
        if rank in self.hosts:
            return self.hosts[rank]
        return f"node{rank // self.gpus_per_node}"

    def spans_nodes(self, group_size: int | None, ranks: list[int] | None = None) -> bool:
        if ranks:
            return len({self.node(r) for r in ranks}) > 1
        n = group_size or self.world
        if n == self.world:
            return len({self.node(r) for r in range(self.world)}) > 1
        return n > self.gpus_per_node


def topology(ctx: Facts) -> Topology:
    """The run's topology (`ctx.topology` caches it)."""
    rows = ctx.run.sql(sql.query("levels.run", "hosts")).fetchall()
    world = max([w for _, _, w in rows if w] + [len(rows), 1])
    hosts = {r: h for r, h, _ in rows if h}
    default = ctx.spec.gpus_per_node if ctx.spec else 8
    if ctx.overrides.gpus_per_node:
        topo = Topology(ctx.overrides.gpus_per_node, {}, world, "--gpus-per-node")
    elif ctx.manifest and ctx.manifest.gpus_per_node:
        topo = Topology(ctx.manifest.gpus_per_node, {}, world, "job.json gpus_per_node")
    elif hosts and (len(set(hosts.values())) > 1 or len(hosts) >= world):
        per_host: dict[str, int] = {}
        for h in hosts.values():
            per_host[h] = per_host.get(h, 0) + 1
        topo = Topology(max(per_host.values()), hosts, world, "trace host names")
    else:
        topo = Topology(default, {}, world, "device table")
    return topo
