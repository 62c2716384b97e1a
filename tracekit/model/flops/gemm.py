"""FLOPs of the matrix products. A multiply-add is 2 FLOPs.

- GEMM: mm / _scaled_mm [M,K]·[K,N] → 2MKN; addmm (bias, [M,K], [K,N]) → 2MKN;
  bmm, baddbmm, addbmm [B,M,K]·[B,K,N] → 2BMKN; _grouped_mm (MoE experts):
  [T,K]·[G,K,N] → 2TKN (each token meets one expert), [G,M,K]·[G,K,N] → 2GMKN,
  [M,T]·[T,N] (grouped along K, the weight gradient) → 2MTN.
- Transformer Engine `tex_ts::te_gemm_ts(A, …, transa, B, …, transb, D, …)` (NVIDIA
  TransformerEngine `pytorch/csrc/ts_fp8_op.cpp`; cuBLAS column-major): D [M, N], K = A's
  inner dimension (A [N, K] when transa, else [K, N]; B [M, K] unless transb, then
  [K, M]) → 2MNK; the transposes from Concrete Inputs, else from the shapes when only one
  K fits both operands.
"""

from __future__ import annotations

from math import prod

from tracekit.model.flops.args import Args, OpCount, no_flops
from tracekit.model.flops.signatures import OpSig


def gemm_flops(sig: OpSig, a: Args) -> OpCount:
    x, y = a.shape(sig.args["a"]), a.shape(sig.args["b"])
    if not x or not y:
        return no_flops("operand shapes not recorded")
    if len(x) == 2 and len(y) == 2 and x[1] == y[0]:
        return OpCount(2.0 * x[0] * x[1] * y[1])
    if len(x) == 3 and len(y) == 3 and x[0] == y[0] and x[2] == y[1]:
        return OpCount(2.0 * x[0] * x[1] * x[2] * y[2])
    if len(x) == 2 and len(y) == 3 and x[1] == y[1]:  # grouped: tokens × one expert each
        return OpCount(2.0 * x[0] * x[1] * y[2])
    return no_flops(f"operand shapes {x}·{y} are not a matrix product this formula knows")


def te_gemm_flops(sig: OpSig, a: Args) -> OpCount:
    x, y, d = (a.shape(sig.args[r]) for r in ("a", "b", "d"))
    if not x or not y or not d or len(x) != 2 or len(y) != 2 or len(d) < 2:
        return no_flops("A, B or D shape not recorded")
    m, n = prod(d[:-1]), d[-1]
    ta, tb = (a.ints(sig.args[r], 1) for r in ("transa", "transb"))
    ka = {x[1]} if ta and ta[0] else {x[0]} if ta else {x[1] if x[0] == n else None,
                                                      x[0] if x[1] == n else None}  # fmt: skip
    kb = {y[0]} if tb and tb[0] else {y[1]} if tb else {y[1] if y[0] == m else None,
                                                      y[0] if y[1] == m else None}  # fmt: skip
    ks = (ka & kb) - {None}
    if len(ks) != 1:
        return no_flops(f"A {x}, B {y}, D {d}: no single inner dimension fits both operands")
    return OpCount(2.0 * m * n * ks.pop())
