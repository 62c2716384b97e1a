"""FLOPs: per traced op from a table of signatures, and per token from the model.

Per op (`op_flops`), from `Input Dims` / `Input type` / `Concrete Inputs`
(record_shapes=True). A multiply-add is 2 FLOPs. Every op torch emits for a GEMM, a
convolution or attention has one entry in `SIGNATURES`: where each argument the formula
needs sits in the op's schema (PyTorch `aten/src/ATen/native/native_functions.yaml`;
the positions were read from `torch._C._jit_get_schemas_for_operator` of torch 2.13,
the removed backward ops of torch ≤ 1.10 from that release's yaml). The formulas, a
module an op family:

- GEMM, Transformer Engine GEMM: `gemm`
- convolution, forward and backward: `conv`
- attention, varlen attention, paged decode attention: `attention`

Each module's docstring gives its formulas and their sources; `signatures` holds the
table, `args` an op's traced arguments, `ops` the op → formula dispatch.

An argument the formula needs and the trace lacks (old traces have no `Concrete Inputs`)
makes the op's FLOPs `None` with the reason — never a default; the one exact exception,
a convolution's output or kernel size from its backward op, is `conv`'s (`ConvGeometry`).

matmul, linear and the conv/sdpa front ends dispatch to the ops above; only the
innermost op of the table counts (a DTensor `aten::mm` wraps the local one) — see
`tracekit.ingest.opscan`.

Per token (`transformer_flops_per_token`, `per_token`): 6N + 6·h·V + 12·L·H·Q·T (PaLM
appendix B, plus the logits of Hoffmann et al. 2022, appendix F).
"""

from tracekit.model.flops.args import Args, OpCount
from tracekit.model.flops.conv import ConvGeometry
from tracekit.model.flops.ops import count, loads, op_dtype, op_flops
from tracekit.model.flops.per_token import transformer_flops_per_token
from tracekit.model.flops.signatures import COUNTED_OPS, SIGNATURES, OpSig

__all__ = [
    "COUNTED_OPS",
    "SIGNATURES",
    "Args",
    "ConvGeometry",
    "OpCount",
    "OpSig",
    "count",
    "loads",
    "op_dtype",
    "op_flops",
    "transformer_flops_per_token",
]
