"""The nodes and edges that join the ranks' graphs and close each rank's window: one node
per collective instance matched across the ranks of its group (members start as their
lanes allow, the instance takes the transfer time, each member ends at the instance's end
plus its own tail), and each rank's window end (its step thread's last host event, or the
device's last work where it ran past that)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.stepmodel.kinds import E_INST, E_TAIL, INST

if TYPE_CHECKING:
    from tracekit.stepmodel.graph import Graph


def add(g: Graph, by_instance: dict[str, list[int]]) -> None:
    """An instance node for each collective (`by_instance`: key → member nodes) whose
    members are all in the analysed windows, one per rank."""
    for key, members in by_instance.items():
        # a send and its recv are two members, whatever the size of their group
        expect = 2 if key.startswith("p2p:") else (g.group[members[0]] or 0)
        if len(members) != expect or len({g.rank[m] for m in members}) != len(members):
            continue  # a member lies outside some rank's window
        last = max(members, key=lambda m: g.ts[m])
        first_end = min(g.end[m] for m in members)
        transfer = max(first_end - g.ts[last], 0)
        j = g.add(
            g.rank[last],
            "collective",
            INST,
            g.coll[last] or g.name[last],
            g.ts[last],
            g.ts[last] + transfer,
            transfer,
        )
        g.coll[j], g.nbytes[j], g.group[j] = g.coll[last], g.nbytes[last], g.group[last]
        for m in members:
            g.starts[j].append((m, False, 0, E_INST))
            g.inst[m] = j
            g.dur[m] = 0.0
            g.ends[m].append((j, g.end[m] - g.end[j], E_TAIL))


def window_ends(
    g: Graph, host_nodes: dict[int, list[int]], dev_nodes: dict[int, list[int]], on_host: set[int]
) -> None:
    """Each rank's `RankSpan.end_edges`: the nodes its window ends after, with their lags."""
    for rank, sp in g.spans.items():
        hn = [
            i
            for i in host_nodes.get(rank, [])
            if sp.main_tid is None or g.lane[i] == f"thread {sp.main_tid}"
        ]
        tails = [hn[-1]] if hn else []
        last_by_lane: dict[str, int] = {}
        for i in dev_nodes.get(rank, []):
            if i in on_host:
                continue  # a send's span lasts until it is waited for: not the step's end
            if g.lane[i] not in last_by_lane or g.end[i] > g.end[last_by_lane[g.lane[i]]]:
                last_by_lane[g.lane[i]] = i
        # the step ends when its thread's last host event (and the gap after it) does; a
        # lane's last work bounds it only where it ran past that end (the measured lag
        # after work that ended earlier is host time, already in the host tail) ...
        sp.end_edges = [(i, sp.end_ns - g.end[i]) for i in tails] + [
            (i, min(sp.end_ns - g.end[i], 0) if tails else sp.end_ns - g.end[i])
            for i in last_by_lane.values()
        ]
        dev_last = max(
            (g.end[i] for i in last_by_lane.values() if g.lane[i].startswith("stream ")),
            default=None,
        )
        if tails and not g.cpu and dev_last is not None and dev_last > g.end[tails[0]]:
            # ... but where the device ran past the host's last event (a GPU the host runs
            # ahead of), the step ends when the device does: the time after the host's
            # last event is the device's, and only what follows the device's last work is
            # the step's tail (the host's last event ends no later than that before it)
            tail = max(sp.end_ns - dev_last, 0)
            sp.end_edges = [(i, tail) for i in tails] + [
                (i, min(sp.end_ns - g.end[i], tail)) for i in last_by_lane.values()
            ]
