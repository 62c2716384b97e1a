"""Fusion: how much of the device's compute time goes to unfused memory-bound kernels —
elementwise, copy, cast, norm, reduction, softmax, optimizer — by kernel name
(`tracekit.model.opclass.UNFUSED`; never a GEMM, attention or convolution kernel:
`tracekit.model.opclass.is_matmul_kernel`; never a kernel Inductor or Triton already
fused, `triton_*`; embedding-bag kernels are table lookups, not chains to fuse). Those
kernels are bound by memory bandwidth: each reads and writes its tensors once, so a
chain of them costs a round trip to HBM per op where one fused kernel would make one.
Where they take most of the compute time, fusing them (torch.compile, fused
norm/RoPE/optimizer kernels) is the remedy, however well the GEMMs run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracekit import sql
from tracekit.model.opclass import is_unfused_kernel

if TYPE_CHECKING:
    from tracekit.analysis.facts import Facts


@dataclass(frozen=True)
class RankFusion:
    rank: int
    compute_ms: float  # per step: compute kernels' summed device time
    other_ms: float  # per step: the part in unfused memory-bound kernels (`opclass.UNFUSED`)
    top: list[tuple[str, float]] = field(default_factory=list)  # (kernel, ms per step)

    @property
    def elementwise_fraction(self) -> float | None:
        """Unfused memory-bound kernels' share of the compute kernels' device time, in
        [0, 1]."""
        return self.other_ms / self.compute_ms if self.compute_ms else None


def fusion(ctx: Facts) -> dict[int, RankFusion]:
    """Per GPU rank, its compute kernel time and the part in unfused kernels."""
    if ctx.cpu:
        return {}
    rows = ctx.run.sql(
        sql.query("levels.fusion", "compute_kernels", windows=ctx.windows)
    ).fetchall()
    per: dict[int, list[tuple[str, int]]] = {}
    for rank, name, dur, _n in rows:
        per.setdefault(rank, []).append((name, dur))
    out = {}
    for r in ctx.ranks:
        kernels = per.get(r.rank)
        if not kernels:
            continue
        steps = max(r.steps, 1)
        others = [(n, d) for n, d in kernels if is_unfused_kernel(n)]
        others.sort(key=lambda x: (-x[1], x[0]))
        out[r.rank] = RankFusion(
            rank=r.rank,
            compute_ms=sum(d for _, d in kernels) / 1e6 / steps,
            other_ms=sum(d for _, d in others) / 1e6 / steps,
            top=[(n, d / 1e6 / steps) for n, d in others[:3]],
        )
    return out
