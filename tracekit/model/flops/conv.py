"""FLOPs of the convolutions, forward and backward. A multiply-add is 2 FLOPs.

- convolution, weight [O, C/g, k…] (transposed: [C_in, C_out/g, k…]):
  2·N·w₀·w₁·∏k·∏spatial, spatial = the output's (transposed: the input's), the output
  from stride, padding and dilation (`torch.utils.flop_counter.conv_flop_count`).
  Backward: that per gradient the output mask asks for (input, weight); the old
  `*_backward_input` / `*_backward_weight` ops are one gradient each.

An argument the formula needs and the trace lacks makes the op's FLOPs `None` with the
reason — never a default (`tracekit.model.flops`). One exception, exact and not a guess:
a forward convolution without its stride/padding takes its output size from the backward
op of the same convolution (same input and weight shapes; the backward op carries
grad_output, whose shape *is* the output), and an old `*_backward_weight` op takes its
kernel from the `*_convolution_backward` op that encloses it (else from the same shapes
elsewhere in the trace: `ConvGeometry`).
"""

from __future__ import annotations

import re
from math import prod
from typing import Any

from tracekit.model.flops.args import Args, OpCount, no_flops
from tracekit.model.flops.signatures import SIGNATURES, OpSig


class ConvGeometry:
    """Convolution shapes the trace's backward ops reveal: grad_output is the output.

    `output(x, w)` → the output shape of the convolution with input x and weight w;
    `weight(x, gy)` → the weight shape of the convolution with input x and output gy.
    A key seen with two different answers is ambiguous and answers None.
    """

    def __init__(self) -> None:
        self._out: dict[tuple, tuple | None] = {}
        self._w: dict[tuple, tuple | None] = {}

    @staticmethod
    def _put(d: dict, key: tuple, val: tuple) -> None:
        if key in d and d[key] != val:
            d[key] = None
        else:
            d.setdefault(key, val)

    def learn(self, name: str, dims: Any) -> None:
        sig = SIGNATURES.get(name)
        if sig is None or sig.family != "conv_bwd" or not isinstance(dims, list):
            return
        a = Args(dims, None)
        x, w, gy = a.shape(sig.args["x"]), a.shape(sig.args["w"]), a.shape(sig.args["gy"])
        if x and w and gy and len(x) == len(w) == len(gy):
            self._put(self._out, (tuple(x), tuple(w)), tuple(gy))
            self._put(self._w, (tuple(x), tuple(gy)), tuple(w))

    def output(self, x: list[int], w: list[int]) -> list[int] | None:
        v = self._out.get((tuple(x), tuple(w)))
        return list(v) if v else None

    def weight(self, x: list[int], gy: list[int]) -> list[int] | None:
        v = self._w.get((tuple(x), tuple(gy)))
        return list(v) if v else None


def _conv_spatial(sig: OpSig, a: Args, x, w, geometry: ConvGeometry | None) -> list | None:
    """Output spatial size of a forward convolution, or None when the trace lacks it."""
    nsp = len(x) - 2
    stride = a.ints(sig.args.get("stride"), nsp)
    pad_text = a.value(sig.args.get("padding"))
    dilation = a.ints(sig.args["dilation"], nsp) if "dilation" in sig.args else [1] * nsp
    if stride and pad_text and dilation and all(s > 0 for s in stride):
        word = pad_text.strip().strip("'\"").lower()
        if word == "same":
            return [-(-x[2 + i] // stride[i]) for i in range(nsp)]
        padding = [0] * nsp if word == "valid" else a.ints(sig.args.get("padding"), nsp)
        if padding:
            return [
                (x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
                for i in range(nsp)
            ]
    out = geometry.output(x, w) if geometry else None
    return out[2:] if out else None


def _conv_core(x, w, spatial) -> float:
    """2·N·w₀·w₁·∏k·∏spatial (torch.utils.flop_counter.conv_flop_count)."""
    return 2.0 * x[0] * w[0] * w[1] * prod(w[2:]) * prod(spatial)


def conv_flops(sig: OpSig, a: Args, geometry: ConvGeometry | None) -> OpCount:
    x, w = a.shape(sig.args["x"]), a.shape(sig.args["w"])
    if not x or not w or len(x) < 3 or len(w) != len(x):
        return no_flops("input or weight shape not recorded")
    tf32 = bool(a.flag(sig.args.get("tf32")))
    transposed = sig.transposed
    if transposed is None:
        transposed = a.flag(sig.args.get("transposed")) if "transposed" in sig.args else False
    if transposed is None:
        return no_flops("'transposed' not recorded (no Concrete Inputs)")
    if transposed:
        return OpCount(_conv_core(x, w, x[2:]), tf32=tf32)
    spatial = _conv_spatial(sig, a, x, w, geometry)
    if spatial is None:
        return no_flops("stride/padding not recorded and no backward op gives the output size")
    if any(s <= 0 for s in spatial):
        return no_flops(f"output size {spatial} from the recorded stride/padding is empty")
    return OpCount(_conv_core(x, w, spatial), tf32=tf32)


def conv_bwd_flops(
    sig: OpSig, a: Args, geometry: ConvGeometry | None, parent: tuple[str, Any] | None
) -> OpCount:
    gy, x, w = (a.shape(sig.args.get(k)) for k in ("gy", "x", "w"))
    if sig.family == "conv_bwd_weight" and gy and x and w is None:
        w = _parent_weight(parent, x, gy) or (geometry.weight(x, gy) if geometry else None)
    if sig.family == "conv_bwd_input":
        if not gy or not w or len(gy) != len(w) or len(w) < 3:
            return no_flops("grad_output or weight shape not recorded")
        return OpCount(_conv_core(gy, w, gy[2:]))  # grad_input: the forward's work again
    if not gy or not x or not w or not (len(gy) == len(x) == len(w) >= 3):
        return no_flops("grad_output, input or weight shape not recorded")
    transposed = sig.transposed
    if transposed is None:
        transposed = a.flag(sig.args.get("transposed"))
        if transposed is None:
            return no_flops("'transposed' not recorded (no Concrete Inputs)")
    one = _conv_core(x, w, x[2:] if transposed else gy[2:])
    if sig.family == "conv_bwd_weight":
        return OpCount(one)
    mask = a.value(sig.args["mask"])
    if mask is None:
        return no_flops("output_mask not recorded: which gradients ran is unknown")
    grads = [m.lower() == "true" for m in re.findall(r"True|False|true|false", mask)]
    return OpCount(one * sum(grads[:2]))


def _parent_weight(parent: tuple[str, Any] | None, x, gy) -> list[int] | None:
    """The weight shape from the enclosing backward op of the same convolution."""
    psig = SIGNATURES.get(parent[0]) if parent else None
    if psig is None or psig.family != "conv_bwd" or not isinstance(parent[1], list):
        return None
    pa = Args(parent[1], None)
    if pa.shape(psig.args["x"]) == x and pa.shape(psig.args["gy"]) == gy:
        return pa.shape(psig.args["w"])
    return None
