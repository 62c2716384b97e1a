"""Matmul-class work: GEMM, attention and convolution kernels and ops, by name.

MFU counts matmul-class FLOPs (PaLM, Chowdhery et al. 2022, appendix B: the model's
matmuls and attention; elementwise, normalization, embedding lookups, optimizer updates
and copies have ~zero model FLOPs and are correctly zero in MFU). Compute time whose
FLOPs tracekit cannot know matters to MFU only when it may carry such FLOPs — that is
`uncounted_compute_fraction` (diagnosers/analyses/uncounted.py). This module says,
from a name alone, whether a kernel or an op is of that class.

Kernels (`is_matmul_kernel`), case-insensitive, from the names the libraries give their
kernels (seen in ../shared/traces: A100/V100 cuBLAS, cuDNN, CUTLASS; MI300X hipBLASLt,
MIOpen, composable kernel; and in the libraries' sources):

- GEMM/GEMV: `gemm`, `gemv` (cuBLAS `volta_sgemm_*`, `ampere_*gemm*`, `gemmSN_*`,
  `gemv2T_*`; CUTLASS `cutlass_80_tensorop_s1688gemm_*`; MAGMA `magma_sgemmEx`;
  MIOpen/ck `igemm_*`, `*GridwiseGemm*`), `cublasLt`/`cublasGemv`/`cublasDot`/
  `cublasSplitK` (cuBLAS's own split-K and epilogue helpers:
  `reduce_1Block_kernel<…cublasGemv…>`, `cublasLtEpilogue`; not `scal_kernel<…
  cublasTransposeParams>`, a BLAS-1 scale), `splitkreduce`
  (`splitKreduce_kernel`), `xmma` (`sm80_xmma_*`, `sm90_xmma_*`), `nvjet` (cuBLAS on
  Hopper/Blackwell), `cutlass`, `cijk_` (Tensile/hipBLASLt/rocBLAS), `wvsplitk` (vLLM
  ROCm skinny GEMM), triton templates whose name has an `mm`/`bmm`/`addmm` token
  (`triton_tem_fused_mm_0`), `matmul`;
- attention: `fmha`, `flash`, `attn`, `attention` (FlashAttention, cuDNN/CK fmha,
  vLLM/aiter paged attention);
- convolution: `conv` but not `convert`, `wgrad`, `dgrad`, `fprop`, `implicit_gemm`
  (cuDNN `sm80_xmma_fprop_implicit_gemm_*`, `cudnn::cnn::reduce_wgrad_*`,
  `*_scudnn_*`/`*_hcudnn_*`, `*winograd*`, `cask_cudnn_*`; MIOpen
  `naive_conv_*`, ck `kernel_grouped_conv_fwd_*`).

`fbgemm` is removed from a name first: FBGEMM-GPU's kernels (`fbgemm_gpu::permute_*`)
are embedding and sparse-feature work, not GEMMs. `cudnn` alone is not matmul-class
(`cudnn::bn_fw_*` is batch norm, `cudnn::ops::nchwToNhwcKernel` a layout copy).

Ops (`is_matmul_op`): the name after its namespace, split into lower-case tokens at
non-letters and CamelCase humps (`mylib::fused_attention` → fused, attention;
`FlashAttnFunc` → flash, attn, func), is matmul-class when a token is one of `OP_TOKENS`
(mm, bmm, addmm, matmul, linear, gemm, attention, attn, mha, conv, convolution, einsum,
…) or ends in `gemm` (not `fbgemm`) or is `conv` + digits/`transpose` (conv2d,
conv_transpose2d). `aten::upsample_linear1d` (token linear1d) and
`prims::convert_element_type` are not.
"""

from __future__ import annotations

import re
from functools import lru_cache

_KERNEL = re.compile(
    r"gemm|gemv|cublas(?:lt|gemv|dot|splitk)|splitkreduce|xmma|nvjet|cutlass|cijk_|wvsplitk"
    r"|matmul|fmha|flash|attn|attention"
    r"|conv(?!ert)|wgrad|dgrad|fprop|[shd]cudnn_|winograd|cask_cudnn"
)
_TRITON_MM = re.compile(r"triton_.*(?:^|[^a-z])(?:b?mm|addmm|baddbmm)(?:[^a-z]|$)")

OP_TOKENS = frozenset(
    {
        "mm", "bmm", "addmm", "addbmm", "baddbmm", "matmul", "linear", "gemm", "gemv",
        "einsum", "attention", "attn", "mha", "fmha", "sdpa", "flash", "conv",
        "convolution",
    }
)  # fmt: skip
_CONV_TOKEN = re.compile(r"conv(?:\d+d|transpose\d*d?|_?tbc)$")


@lru_cache(maxsize=65536)
def is_matmul_kernel(name: str | None) -> bool:
    """A GEMM, attention or convolution kernel, by its name (module docstring)."""
    if not name:
        return False
    s = name.lower().replace("fbgemm", "")
    return bool(_KERNEL.search(s) or _TRITON_MM.search(s))


def op_tokens(name: str) -> list[str]:
    """`ns::fused_FlashAttn2d` → ['fused', 'flash', 'attn2d']: lower-case tokens of the
    name after its namespace, split at non-letters/digits and CamelCase humps."""
    base = name.rsplit("::", 1)[-1].rsplit(": ", 1)[-1]
    base = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", base)
    return [t for t in re.split(r"[^a-z0-9]+", base.lower()) if t]


@lru_cache(maxsize=65536)
def is_matmul_op(name: str | None) -> bool:
    """A GEMM, attention or convolution op, by its name (module docstring)."""
    if not name:
        return False
    for t in op_tokens(name):
        if t in OP_TOKENS or _CONV_TOKEN.match(t):
            return True
        if t.endswith("gemm") and t != "fbgemm":
            return True
    return False


# Ops that return a view of their input and touch no data (torch's "Tensor Views",
# https://pytorch.org/docs/stable/tensor_view.html, as aten ops): their duration on a
# host is the op's dispatch alone, whatever the tensor's size.
VIEW_OPS = frozenset(
    "aten::" + n
    for n in (
        "view", "_unsafe_view", "view_as", "as_strided", "alias", "detach", "expand",
        "expand_as", "t", "transpose", "permute", "movedim", "narrow", "select", "slice",
        "squeeze", "unsqueeze", "diagonal", "unflatten", "unfold", "unbind", "split",
        "split_with_sizes", "chunk", "view_as_real", "view_as_complex", "swapaxes",
        "swapdims", "indices", "values", "real", "imag",
    )
)  # fmt: skip

# Backward work the size of the parameters, not of the microbatch: adding a parameter's
# gradient into `.grad` (autograd's AccumulateGrad node, once per parameter per backward).
PARAMETER_SIZED_OPS = ("AccumulateGrad",)
