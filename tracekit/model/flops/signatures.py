"""The FLOPs table: every op torch emits for a GEMM, a convolution or attention has one
entry in `SIGNATURES`, where each argument its formula needs sits in the op's schema
(PyTorch `aten/src/ATen/native/native_functions.yaml`; the positions were read from
`torch._C._jit_get_schemas_for_operator` of torch 2.13, the removed backward ops of
torch ≤ 1.10 from that release's yaml; library ops from the sources each entry names)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class OpSig:
    """Where an op's formula arguments sit in its schema (0-based positions)."""

    family: str  # gemm, conv, conv_bwd…, attn, attn_bwd, varlen, varlen_bwd, paged, te_gemm
    args: dict[str, int] = field(default_factory=dict)
    transposed: bool | None = None  # fixed by the op (None: read args["transposed"])
    layout: str = "BHSD"  # attention q/k/v layout


def _gemm(a: int, b: int) -> OpSig:
    return OpSig("gemm", {"a": a, "b": b})


def _conv(**args: int) -> OpSig:
    return OpSig("conv", {"x": 0, "w": 1, **args})


def _convt(**args: int) -> OpSig:
    return OpSig("conv", {"x": 0, "w": 1, **args}, transposed=True)


def _attn(causal: int, layout: str = "BHSD", mask_type: bool = False, bwd: bool = False):
    pos = {"q": 1, "k": 2, "v": 3} if bwd else {"q": 0, "k": 1, "v": 2}
    pos["mask_type" if mask_type else "causal"] = causal
    return OpSig("attn_bwd" if bwd else "attn", pos, layout=layout)


def _varlen(q: int, cu_q: int, cu_k: int | None, max_q: int, max_k: int, causal: int,
            bwd: bool = False) -> OpSig:  # fmt: skip
    pos = {"q": q, "k": q + 1, "v": q + 2, "cu_q": cu_q, "max_q": max_q, "max_k": max_k}
    pos["causal"] = causal
    if cu_k is not None:
        pos["cu_k"] = cu_k
    return OpSig("varlen_bwd" if bwd else "varlen", pos, layout="THD")


# Old (torch ≤ 1.10) split backward ops: (self|self_size, grad_output, weight|weight_size …)
_OLD_BWD = {"x": 0, "gy": 1, "w": 2}

_OLD_BWD_INPUT = {"gy": 1, "w": 2}

_OLD_BWD_WEIGHT = {"gy": 1, "x": 2}

SIGNATURES: dict[str, OpSig] = {
    # GEMMs
    "aten::mm": _gemm(0, 1),
    "aten::_scaled_mm": _gemm(0, 1),
    "aten::addmm": _gemm(1, 2),
    "aten::addmm_": _gemm(1, 2),
    "aten::_addmm_activation": _gemm(1, 2),
    "aten::bmm": _gemm(0, 1),
    "aten::baddbmm": _gemm(1, 2),
    "aten::baddbmm_": _gemm(1, 2),
    "aten::addbmm": _gemm(1, 2),
    "aten::_grouped_mm": _gemm(0, 1),
    "aten::_scaled_grouped_mm": _gemm(0, 1),
    # convolution front ends and generic paths (input, weight, bias, stride, padding, …)
    "aten::convolution": _conv(stride=3, padding=4, dilation=5, transposed=6),
    "aten::_convolution": _conv(stride=3, padding=4, dilation=5, transposed=6, tf32=12),
    "aten::convolution_overrideable": _conv(stride=3, padding=4, dilation=5, transposed=6),
    "aten::_convolution_mode": _conv(stride=3, padding=4, dilation=5),
    "aten::conv1d": _conv(stride=3, padding=4, dilation=5),
    "aten::conv2d": _conv(stride=3, padding=4, dilation=5),
    "aten::conv3d": _conv(stride=3, padding=4, dilation=5),
    "aten::conv_transpose1d": _convt(),
    "aten::conv_transpose2d": _convt(),
    "aten::conv_transpose3d": _convt(),
    # backends: cuDNN (self, weight, padding, stride, dilation, groups, …, allow_tf32)
    "aten::cudnn_convolution": _conv(padding=2, stride=3, dilation=4, tf32=8),
    "aten::cudnn_convolution_transpose": _convt(tf32=9),
    "aten::cudnn_convolution_relu": _conv(stride=3, padding=4, dilation=5),
    "aten::cudnn_convolution_add_relu": _conv(stride=5, padding=6, dilation=7),
    # MIOpen and mkldnn: (self, weight, bias, padding, stride, dilation, groups, …)
    "aten::miopen_convolution": _conv(padding=3, stride=4, dilation=5),
    "aten::miopen_depthwise_convolution": _conv(padding=3, stride=4, dilation=5),
    "aten::miopen_convolution_transpose": _convt(),
    "aten::mkldnn_convolution": _conv(padding=3, stride=4, dilation=5),
    # slow paths: (self, weight, kernel_size, bias, stride, padding[, dilation])
    "aten::_slow_conv2d_forward": _conv(stride=4, padding=5),
    "aten::thnn_conv2d": _conv(stride=4, padding=5),
    "aten::slow_conv3d_forward": _conv(stride=4, padding=5),
    "aten::slow_conv_dilated2d": _conv(stride=4, padding=5, dilation=6),
    "aten::slow_conv_dilated3d": _conv(stride=4, padding=5, dilation=6),
    "aten::_conv_depthwise2d": _conv(stride=4, padding=5, dilation=6),
    "aten::_nnpack_spatial_convolution": _conv(padding=3, stride=4),
    "aten::slow_conv_transpose2d": _convt(),
    "aten::slow_conv_transpose3d": _convt(),
    # convolution backward: (grad_output, input, weight, …, output_mask)
    "aten::convolution_backward": OpSig(
        "conv_bwd", {"gy": 0, "x": 1, "w": 2, "transposed": 7, "mask": 10}
    ),
    "aten::convolution_backward_overrideable": OpSig(
        "conv_bwd", {"gy": 0, "x": 1, "w": 2, "transposed": 6, "mask": 9}
    ),
    "aten::_slow_conv2d_backward": OpSig(
        "conv_bwd", {"gy": 0, "x": 1, "w": 2, "mask": 6}, transposed=False
    ),
    # torch ≤ 1.10: (self, grad_output, weight, padding, stride, dilation, groups, …, mask)
    "aten::cudnn_convolution_backward": OpSig("conv_bwd", {**_OLD_BWD, "mask": 10}, False),
    "aten::miopen_convolution_backward": OpSig("conv_bwd", {**_OLD_BWD, "mask": 9}, False),
    "aten::mkldnn_convolution_backward": OpSig("conv_bwd", {**_OLD_BWD, "mask": 7}, False),
    "aten::cudnn_convolution_backward_input": OpSig("conv_bwd_input", _OLD_BWD_INPUT, False),
    "aten::miopen_convolution_backward_input": OpSig("conv_bwd_input", _OLD_BWD_INPUT, False),
    "aten::mkldnn_convolution_backward_input": OpSig("conv_bwd_input", _OLD_BWD_INPUT, False),
    "aten::cudnn_convolution_backward_weight": OpSig("conv_bwd_weight", _OLD_BWD_WEIGHT, False),
    "aten::miopen_convolution_backward_weight": OpSig("conv_bwd_weight", _OLD_BWD_WEIGHT, False),
    "aten::mkldnn_convolution_backward_weights": OpSig("conv_bwd_weight", _OLD_BWD_WEIGHT, False),
    # attention forward
    "aten::scaled_dot_product_attention": _attn(5),
    "aten::_scaled_dot_product_attention_math": _attn(5),
    "aten::_scaled_dot_product_flash_attention": _attn(4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _attn(4),
    "aten::_scaled_dot_product_efficient_attention": _attn(6),
    "aten::_scaled_dot_product_cudnn_attention": _attn(6),
    "aten::_scaled_dot_product_fused_attention_overrideable": _attn(5),
    "aten::_flash_attention_forward": OpSig(
        "attn", {**_varlen(0, 3, 4, 5, 6, 8).args}, layout="BSHD"
    ),
    "aten::_efficient_attention_forward": _attn(9, "BSHD", mask_type=True),
    # attention backward: (grad_out, query, key, value, …)
    "aten::_scaled_dot_product_flash_attention_backward": _attn(11, bwd=True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _attn(7, bwd=True),
    "aten::_scaled_dot_product_efficient_attention_backward": _attn(11, bwd=True),
    "aten::_scaled_dot_product_cudnn_attention_backward": _attn(14, bwd=True),
    "aten::_flash_attention_backward": OpSig(
        "attn_bwd", {**_varlen(1, 6, 7, 8, 9, 11).args}, layout="BSHD"
    ),
    "aten::_efficient_attention_backward": _attn(14, "BSHD", mask_type=True, bwd=True),
    # flash-attn 2 (Dao-AILab/flash-attention flash_attn_interface.py custom ops)
    "flash_attn::_flash_attn_forward": _attn(5, "BSHD"),
    "flash_attn::_flash_attn_backward": _attn(11, "BSHD", bwd=True),
    "flash_attn::_flash_attn_varlen_forward": _varlen(0, 3, 4, 5, 6, 9),
    "flash_attn::_flash_attn_varlen_backward": _varlen(1, 9, 10, 11, 12, 15, bwd=True),
    # aiter (ROCm/aiter aiter/ops/mha.py): (q, k, v, dropout_p, softmax_scale, is_causal …)
    "aiter::mha_fwd": _attn(5, "BSHD"),
    "aiter::mha_bwd": _attn(8, "BSHD", bwd=True),
    "aiter::mha_varlen_fwd": _varlen(0, 3, 4, 5, 6, 12),
    "aiter::mha_varlen_bwd": _varlen(1, 6, 7, 8, 9, 13, bwd=True),
    "aiter::mha_batch_prefill": _varlen(0, 3, None, 6, 7, 12),
    # paged decode: (out, exp_sums, max_logits, tmp_out, query, key_cache, value_cache,
    # num_kv_heads, scale, block_tables, context_lens, …, block_size, max_context_len …)
    "aiter::paged_attention_rocm": OpSig("paged", {"q": 4, "max_len": 12}),
    "_rocm_C::paged_attention": OpSig("paged", {"q": 4, "max_len": 13}),
    "_C::paged_attention_v1": OpSig("paged", {"q": 1, "max_len": 9}),
    "_C::paged_attention_v2": OpSig("paged", {"q": 4, "max_len": 12}),
    # Transformer Engine GEMM (TorchScript op; cuBLAS column-major)
    "tex_ts::te_gemm_ts": OpSig("te_gemm", {"a": 0, "transa": 4, "b": 5, "transb": 9, "d": 10}),
}

COUNTED_OPS = frozenset(SIGNATURES)
