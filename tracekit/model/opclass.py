"""Matmul-class work: GEMM, attention and convolution kernels and ops, by name.

MFU counts matmul-class FLOPs (PaLM, Chowdhery et al. 2022, appendix B: the model's
matmuls and attention; elementwise, normalization, embedding lookups, optimizer updates
and copies have ~zero model FLOPs and are correctly zero in MFU). Compute time whose
FLOPs tracekit cannot know matters to MFU only when it may carry such FLOPs — that is
`uncounted_compute_fraction` (tracekit/analysis/uncounted.py). This module says,
from a name alone, whether a kernel or an op is of that class.

Kernels (`kernel_class`, `is_matmul_kernel`): by the kernel name's own head, never by
its template or function arguments (`finalizeKernel<…cutlass…>` is not a GEMM because
"cutlass" is a template argument; `dot_kernel<…cublasGemv…>` is a cuBLAS helper only
because its head is one of cuBLAS's). The head (`kernel_head`) is the qualified name
before the parameter list, its template arguments removed, return type and `void `
dropped, `(anonymous namespace)` kept as a namespace, and a mangled `_Z…` name read
from its nested-name prefix (`_ZN2ck…39kernel_grouped_conv_fwd…` → `ck::…::
kernel_grouped_conv_fwd…`). Its namespaces count: they name the family. Case-insensitive:

- attention: `fmha`, `flash`, `attn`, `attention`, `mha`, `sdpa` (FlashAttention
  `flash_fwd_kernel`/`FlashAttnBwd`, xformers `fmha_cutlassF_*`, cuDNN sdpa, vLLM/aiter
  paged attention), not vLLM's KV-cache writes (`reshape_and_cache_flash_kernel`);
- convolution: `conv` (not `convert`), `wgrad`, `dgrad`, `fprop`, `winograd`,
  `implicit_gemm`, `convolve`, `[shd]cudnn_` (`volta_scudnn_*`), the cuDNN namespaces
  `cudnn::cnn`/`cudnn::detail`/`cask_cudnn*`/`cutlass_cudnn*`, MIOpen `igemm_*`
  (implicit-GEMM convolutions), ck `kernel_grouped_conv_*`;
- GEMM: `gemm`/`gemv` (cuBLAS `volta_sgemm_*`, `gemmSN_*`, `gemv2T_*`, `internal::gemvx`;
  MAGMA; ck `kernel_gemm_*`/`device_gemm*`), `cublas*` (cuBLASLt), `splitkreduce`,
  `xmma` (`sm90_xmma_gemm_*`), `nvjet_*` (cuBLAS on Hopper/Blackwell), a `cutlass*`
  kernel (`cutlass_80_tensorop_*`; the `cutlass::Kernel<Op>`/`device_kernel<Op>` wrapper
  is classified by `Op`, GEMM when `Op` says nothing else; not a kernel of a namespace
  spelt so in another library, TensorRT-LLM's `cutlass_kernels::finalizeKernel`), `Cijk_*` (Tensile:
  rocBLAS/hipBLASLt), `wvsplitk` (vLLM ROCm skinny GEMM), `matmul`, `bmm_*`
  (TensorRT-LLM/FlashInfer FP8/FP4/MX GEMMs: `bmm_MxE4m3_MxE2m1…`, `bmm_Bfloat16_MxE2m1…`),
  vLLM's triton `fused_moe_kernel` (grouped expert GEMMs),
  the architecture-named SASS kernels of cuBLAS (`volta_*`, `turing_*`, `ampere_*`,
  `hopper_*`, `sm90_*`, `sm100_*` …), triton templates with an `mm`/`bmm`/`addmm`
  token (`triton_tem_fused_mm_0`), cuBLASLt's epilogue (`epilogue::impl::globalKernel`),
  and cuBLAS's BLAS-1 helpers `dot_kernel`/`reduce_1Block_kernel` when their parameters
  are cuBLAS's GEMV/dot/split-K ones (not `scal_kernel`, a scale).

`fbgemm` is removed from a head first: FBGEMM-GPU's kernels (`fbgemm_gpu::permute_*`)
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

_ATTENTION = re.compile(r"fmha|flash|attn|attention|mha|sdpa")
_NOT_ATTENTION = re.compile(r"(?:reshape|concat)_and_cache")
_CONV = re.compile(
    r"conv(?!ert)|wgrad|dgrad|fprop|winograd|implicit_gemm|[shd]cudnn_|cask_cudnn"
    r"|cutlass_cudnn|cudnn::(?:cnn|detail|winograd)|(?:^|::)igemm_"
)
_GEMM = re.compile(r"gemm|gemv|cublas|splitkreduce|xmma|nvjet|wvsplitk|matmul")
# families a kernel's own name (its leaf) starts with; a namespace of the same spelling
# inside another library (TensorRT-LLM's `cutlass_kernels::finalizeKernel`) is not one
_GEMM_LEAF = re.compile(
    r"cutlass|cijk_|bmm_|fused_moe_kernel$|(?:maxwell|pascal|volta|turing|ampere|hopper"
    r"|blackwell)_|sm\d{2,3}[a-z]?_"
)
_GEMM_HEAD = frozenset({"epilogue::impl::globalkernel"})  # cuBLASLt's epilogue
_TRITON_MM = re.compile(r"triton_.*(?:^|[^a-z])(?:b?mm|addmm|baddbmm)(?:[^a-z]|$)")
_CUBLAS_HELPERS = ("dot_kernel", "reduce_1block_kernel")
_CUBLAS_PARAMS = re.compile(r"cublas(?:gemv|dot|splitk)", re.I)
_CUTLASS_WRAPPERS = ("kernel", "kernel2", "device_kernel")


def _mangled_head(name: str) -> str:
    """`_ZN2ck6device8kernel_xI…` → `ck::device::kernel_x`: the Itanium nested-name prefix
    of a mangled name (source names only; enough to read a kernel's family)."""
    i = 3 if name.startswith("_ZN") else 2
    parts = []
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        n = int(name[i:j])
        parts.append(name[j : j + n])
        i = j + n
    return "::".join(parts) or name


def _split_head(name: str) -> tuple[str, str]:
    """(qualified head, its template arguments' text) of a demangled kernel name."""
    s = name.strip().replace("(anonymous namespace)", "anon")
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):  # the parameter list: the first '(' outside template args
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    s = s[:cut]
    out, args, depth, start = [], "", 0, 0
    for i, ch in enumerate(s):  # drop template arguments, keep the last top-level group
        if ch == "<":
            if depth == 0:
                out.append(s[start:i])
                start = i + 1
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                args = s[start:i]
                start = i + 1
    tail = s[start:] if depth == 0 else ""
    if tail.strip():
        args = ""  # the last group belonged to a namespace or a return type, not the head
    out.append(tail)
    words = "".join(out).split()
    return (words[-1] if words else ""), args


@lru_cache(maxsize=65536)
def kernel_head(name: str) -> str:
    """The qualified name of a kernel without template arguments, parameters, return type
    (`void at::native::vectorized_elementwise_kernel<4, …>(…)` →
    `at::native::vectorized_elementwise_kernel`)."""
    if name.startswith("_Z"):
        return _mangled_head(name)
    return _split_head(name)[0]


def _first_arg(args: str) -> str:
    depth = 0
    for i, ch in enumerate(args):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            return args[:i].strip()
    return args.strip()


@lru_cache(maxsize=65536)
def kernel_class(name: str | None) -> str | None:
    """`gemm`, `attention`, `conv`, or None (not matmul-class), by the kernel name's head
    (module docstring)."""
    if not name:
        return None
    if name.startswith("_Z"):
        head, args = _mangled_head(name), ""
    else:
        head, args = _split_head(name)
    h = head.lower().replace("fbgemm", "")
    parts = h.split("::")
    leaf = parts[-1]
    if leaf in _CUTLASS_WRAPPERS and parts[0].startswith("cutlass"):
        inner = kernel_class(_first_arg(args)) if args else None
        if inner:
            return inner
        return "conv" if any("cudnn" in p for p in parts) else "gemm"
    if _ATTENTION.search(h) and not _NOT_ATTENTION.search(leaf):
        return "attention"
    if _CONV.search(h):
        return "conv"
    if _GEMM.search(h) or _GEMM_LEAF.match(leaf) or h in _GEMM_HEAD or _TRITON_MM.search(leaf):
        return "gemm"
    if leaf in _CUBLAS_HELPERS and _CUBLAS_PARAMS.search(name):
        return "gemm"
    return None


def is_matmul_kernel(name: str | None) -> bool:
    """A GEMM, attention or convolution kernel, by its name (module docstring)."""
    return kernel_class(name) is not None


OP_TOKENS = frozenset(
    {
        "mm", "bmm", "addmm", "addbmm", "baddbmm", "matmul", "linear", "gemm", "gemv",
        "einsum", "attention", "attn", "mha", "fmha", "sdpa", "flash", "conv",
        "convolution",
    }
)  # fmt: skip
_CONV_TOKEN = re.compile(r"conv(?:\d+d|transpose\d*d?|_?tbc)$")


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


# PyTorch's eager kernels for pointwise and memory-bound ops, by the names ATen, apex and
# the fused-optimizer kernels give them
UNFUSED = re.compile(
    r"elementwise|copy|cast|convert|norm|reduce|softmax|fill|transpose|cat_array|dropout"
    r"|multi_tensor|foreach|adam|rotary|rope",
    re.IGNORECASE,
)


def is_unfused_kernel(name: str) -> bool:
    """An eager memory-bound kernel that fusion would merge into its neighbours (never a
    GEMM, attention or convolution kernel, never one Triton already fused, never an
    embedding lookup): `tracekit.analysis.fusion` and the `fuse=F` what-if."""
    if is_matmul_kernel(name) or name.startswith("triton_") or "embedding" in name.lower():
        return False
    return bool(UNFUSED.search(name))
