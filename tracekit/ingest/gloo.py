"""gloo's collectives: each `gloo:*` span paired with the `c10d::*` op that issued it.

The span's `External id` is not the issuing op's, so ids cannot be used: spans and issue
ops are paired first-in-first-out per (expected gloo op, message size)."""

from __future__ import annotations

from collections import defaultdict, deque

# issue op → the gloo span that executes it
_GLOO_EXEC = {
    "all_reduce": "gloo:all_reduce",
    "reduce_scatter": "gloo:all_reduce",
    "all_gather": "gloo:all_gather",
    "all_to_all": "gloo:all_to_all",
    "broadcast": "gloo:broadcast",
    "barrier": "gloo:barrier",
    "send": "gloo:send",
    "recv": "gloo:recv",
    "reduce": "gloo:reduce",
    "gather": "gloo:gather",
    "scatter": "gloo:scatter",
}


def _exec_size(name: str, n_in: int | None, n_out: int | None) -> int | None:
    """The element count the gloo span shows for an issue op of this name: its input
    (the shard for all-gather, the full input for reduce-scatter, this rank's send
    buffer for all-to-all — seen in torch 2.13 traces with uneven all-to-all splits)."""
    return n_in


def match_gloo(issue: list[dict], spans: list[dict]) -> list[tuple[dict, dict | None]]:
    """Pair each gloo span with its issue op, FIFO per (gloo op, message size).

    A span that starts before the oldest waiting issue op was issued before the
    trace began and stays unpaired.
    """
    queues: dict[tuple[str, int | None], deque] = defaultdict(deque)
    for op in sorted(issue, key=lambda o: o["ts_ns"]):
        key = (_GLOO_EXEC.get(op["name"], ""), _exec_size(op["name"], op["in"], op["out"]))
        queues[key].append(op)
    out = []
    for sp in sorted(spans, key=lambda s: s["ts_ns"]):
        q = queues.get((sp["raw_name"], sp["size"]))
        if q is None and sp["size"] is not None:
            q = queues.get((sp["raw_name"], None))
        op = None
        if q and q[0]["ts_ns"] <= sp["ts_ns"]:
            op = q.popleft()
        out.append((sp, op))
    return out
