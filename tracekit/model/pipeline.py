"""Pipeline bubble, as a fraction of the step.

GPipe and 1F1B (Huang et al. 2019; Narayanan et al. 2021, PipeDream-Flush): with P
stages and M microbatches, each stage idles (P−1) microbatch slots out of M+P−1:
bubble = (P−1)/(M+P−1). Interleaved 1F1B with V model chunks per rank (Narayanan
et al. 2021, Megatron-LM §2.2): (P−1)/(V·M+P−1).
"""

from __future__ import annotations


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
