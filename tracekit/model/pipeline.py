"""Pipeline bubble, as a fraction of the step: the formula, and the schedule itself.

GPipe and 1F1B (Huang et al. 2019; Narayanan et al. 2021, PipeDream-Flush): with P
stages and M microbatches, each stage idles (P−1) microbatch slots out of M+P−1:
bubble = (P−1)/(M+P−1). Interleaved 1F1B with V model chunks per rank (Narayanan
et al. 2021, Megatron-LM §2.2): (P−1)/(V·M+P−1).

The formula assumes equal stages, no transfer time and nothing outside the pipeline.
`simulate` runs the schedule itself — each rank executes its operations in order, a
forward waits for the previous stage's forward of that microbatch, a backward for the
next stage's backward (the last stage's for its own forward), plus a hop latency when
the two stages sit on different ranks — so measured per-stage forward/backward times
give the bubble the schedule really has. With equal stages and no latency it gives the
formula exactly (worked example in tests/engine/test_model.py).
"""

from __future__ import annotations

from dataclasses import dataclass

Op = tuple[str, int, int]  # (kind F | B | W, stage, microbatch); I (input grad) is a B


def bubble_fraction(stages: int, microbatches: int, virtual: int = 1) -> float:
    if stages < 1 or microbatches < 1 or virtual < 1:
        raise ValueError("stages, microbatches and virtual chunks must be ≥ 1")
    return (stages - 1) / (virtual * microbatches + stages - 1)


def microbatches_for(stages: int, target: float, virtual: int = 1) -> int:
    """The smallest M whose bubble is at most `target`."""
    m = 1
    while bubble_fraction(stages, m, virtual) > target and m < 1 << 16:
        m += 1
    return m


def schedule_orders(schedule: str, ranks: int, microbatches: int) -> dict[int, list[Op]]:
    """Each rank's operation order for 1F1B or GPipe (one stage per rank)."""
    p, m = ranks, microbatches
    out = {}
    for s in range(p):
        if schedule == "gpipe":
            out[s] = [("F", s, i) for i in range(m)] + [("B", s, i) for i in range(m)]
            continue
        warm = min(p - s - 1, m)
        seq: list[Op] = [("F", s, i) for i in range(warm)]
        f, b = warm, 0
        while f < m or b < m:
            if f < m:
                seq.append(("F", s, f))
                f += 1
            if b < m:
                seq.append(("B", s, b))
                b += 1
        out[s] = seq
    return out


@dataclass(frozen=True)
class Simulation:
    makespan: float
    busy: dict[int, float]  # rank → time spent in its operations
    ends: dict[Op, float]

    def bubble(self) -> float:
        """1 − mean busy ÷ makespan: the schedule's bubble over the pipeline's span."""
        if not self.makespan or not self.busy:
            return 0.0
        return 1 - sum(self.busy.values()) / len(self.busy) / self.makespan


def simulate(
    orders: dict[int, list[Op]],
    duration: dict[Op, float],
    stage_rank: dict[int, int],
    latency: float | dict[Op, float] = 0.0,
    default_latency: float = 0.0,
) -> Simulation:
    """Run each rank's operations in order, each starting once its rank is free and its
    dependency has ended (+ the hop latency across ranks: `latency`, one figure or per
    consuming operation, `default_latency` for those a dict lacks). Raises ValueError on
    a deadlock."""
    n_stages = max(stage_rank) + 1 if stage_rank else 0
    ends: dict[Op, float] = {}
    free = {r: 0.0 for r in orders}
    busy = {r: 0.0 for r in orders}
    pos = {r: 0 for r in orders}

    def dep(op: Op) -> Op | None:
        kind, s, i = op
        if kind == "F":
            return ("F", s - 1, i) if s > 0 else None
        if kind == "B":
            return ("B", s + 1, i) if s < n_stages - 1 else ("F", s, i)
        return ("B", s, i)  # W after its own B

    remaining = sum(len(v) for v in orders.values())
    while remaining:
        progressed = False
        for r, seq in orders.items():
            while pos[r] < len(seq):
                op = seq[pos[r]]
                d = dep(op)
                ready = 0.0
                if d is not None and d in duration:
                    if d not in ends:
                        break
                    hop = latency.get(op, default_latency) if isinstance(latency, dict) else latency
                    ready = ends[d] + (hop if stage_rank.get(d[1]) != r else 0.0)
                start = max(free[r], ready)
                t = duration.get(op, 0.0)
                ends[op] = start + t
                free[r] = start + t
                busy[r] += t
                pos[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise ValueError("the schedule deadlocks: an operation waits for one never run")
    return Simulation(max(free.values(), default=0.0), busy, ends)
