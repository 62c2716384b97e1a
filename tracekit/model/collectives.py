"""Collective bandwidth as nccl-tests defines it, and α-β costs.

Source: NVIDIA nccl-tests, doc/PERFORMANCE.md ("Bus bandwidth"): algbw = S / t with
S the message size (for all-gather and reduce-scatter the whole, gathered buffer);
busbw = algbw × factor, the factor making busbw comparable with the hardware's link
bandwidth whatever the collective and the number of ranks n:

    all_reduce                       2(n−1)/n
    all_gather, reduce_scatter,
    all_to_all                       (n−1)/n
    broadcast, reduce, send/recv     1
"""

from __future__ import annotations

_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}


def bus_factor(name: str, n: int | None) -> float | None:
    """busbw ÷ algbw for collective `name` over `n` ranks (None when it has no meaning)."""
    f = _FACTORS.get(name)
    if f is None or not n or n < 1:
        return None
    if n == 1 and name not in ("broadcast", "reduce", "send", "recv", "send_recv"):
        return None  # a one-rank all-reduce moves nothing
    return f(n)


def algbw(bytes_: float, seconds: float) -> float | None:
    """Algorithm bandwidth, bytes/s: S ÷ t."""
    return bytes_ / seconds if seconds > 0 and bytes_ else None


def busbw(name: str, n: int | None, bytes_: float, seconds: float) -> float | None:
    """Bus bandwidth, bytes/s: algbw × bus_factor."""
    a, f = algbw(bytes_, seconds), bus_factor(name, n)
    return a * f if a is not None and f is not None else None


def alpha_beta_time(alpha_s: float, algbw_Bps: float, bytes_: float) -> float:
    """Predicted time t(S) = α + S / algbw (the Hockney α-β model, with β = 1 / algbw)."""
    return alpha_s + bytes_ / algbw_Bps


def fit_alpha_beta(sizes: list[float], times: list[float]) -> tuple[float, float, float]:
    """Least-squares fit of t = α + S·β; returns (α seconds, algbw = 1/β bytes/s, r²).

    α is clamped at 0 (a negative latency is noise), β must come out positive.
    """
    n = len(sizes)
    if n < 2 or len(times) != n:
        raise ValueError("need at least two (size, time) points")
    mx, my = sum(sizes) / n, sum(times) / n
    sxx = sum((x - mx) ** 2 for x in sizes)
    if sxx == 0:
        raise ValueError("sizes must differ")
    beta = sum((x - mx) * (y - my) for x, y in zip(sizes, times, strict=True)) / sxx
    alpha = my - beta * mx
    if beta <= 0:
        raise ValueError("time does not grow with size; cannot fit a bandwidth")
    ss_tot = sum((y - my) ** 2 for y in times)
    ss_res = sum((y - (alpha + beta * x)) ** 2 for x, y in zip(sizes, times, strict=True))
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return max(alpha, 0.0), 1.0 / beta, r2
