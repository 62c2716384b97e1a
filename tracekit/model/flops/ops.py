"""FLOPs of one traced op (`count`, `op_flops`): its `SIGNATURES` entry picks the
formula of its family (`gemm`, `conv`, `attention`); and the traced args' JSON text
decoded (`loads`, `op_dtype`)."""

from __future__ import annotations

import json
from typing import Any

from tracekit.model.flops.args import Args, OpCount, no_flops
from tracekit.model.flops.attention import attn_flops, paged_flops, varlen_flops
from tracekit.model.flops.conv import ConvGeometry, conv_bwd_flops, conv_flops
from tracekit.model.flops.gemm import gemm_flops, te_gemm_flops
from tracekit.model.flops.signatures import SIGNATURES


def loads(text: str | None) -> Any:
    """A traced JSON-text arg (`Input Dims` …) decoded, or None when absent or not JSON."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def count(
    name: str,
    dims: Any,
    concrete: Any = None,
    geometry: ConvGeometry | None = None,
    parent: tuple[str, Any] | None = None,
) -> OpCount:
    """FLOPs of one traced op (decoded `Input Dims` and `Concrete Inputs`), with the reason
    when they cannot be known. `parent` is the enclosing op of the table (name, dims)."""
    sig = SIGNATURES.get(name)
    if sig is None:
        return no_flops("not a GEMM, convolution or attention op")
    if not isinstance(dims, list) or not dims:
        return no_flops("no Input Dims (profile with record_shapes=True)")
    a = Args(dims, concrete if isinstance(concrete, list) else None)
    if sig.family == "gemm":
        return gemm_flops(sig, a)
    if sig.family == "conv":
        return conv_flops(sig, a, geometry)
    if sig.family.startswith("conv_bwd"):
        return conv_bwd_flops(sig, a, geometry, parent)
    if sig.family.startswith("varlen"):
        return varlen_flops(sig, a)
    if sig.family == "paged":
        return paged_flops(sig, a)
    if sig.family == "te_gemm":
        return te_gemm_flops(sig, a)
    if len(a.shape(sig.args["q"]) or []) == 3 and "cu_q" in sig.args:
        return varlen_flops(sig, a)
    return attn_flops(sig, a)


def op_flops(name: str, input_dims: str | None, concrete_inputs: str | None = None) -> float | None:
    """FLOPs of one traced op from its JSON-text args, or None when they do not say."""
    return count(name, loads(input_dims), loads(concrete_inputs)).flops


_NOT_TENSOR = {"Scalar", "ScalarList", "TensorList", "None", "GenericList", "Int", "Bool"}


def op_dtype(input_types: str | None) -> str | None:
    """The first tensor dtype among an op's inputs."""
    types = loads(input_types)
    for t in types if isinstance(types, list) else []:
        if isinstance(t, str) and t and t not in _NOT_TENSOR:
            return t
    return None
