"""FLOPs of attention: 4-D, varlen (packed sequences) and paged decode. A multiply-add
is 2 FLOPs.

- attention, q [B,H,S,D] (flash/efficient backend ops: [B,S,H,D]), k with Sk keys:
  forward 2·B·H·S·Sk·(D_qk + D_v) (QKᵀ and PV); backward 2·B·H·S·Sk·(3·D_qk + 2·D_v)
  (QKᵀ recomputed, dP, dV, dQ, dK: 2.5× the forward when D_qk = D_v, as
  `flop_counter.sdpa_backward_flop_count`); causal (is_causal, or the efficient
  kernels' custom_mask_type ≥ 1) halves it — the masked half of the blocks is skipped.
  Library ops with the same formula: flash-attn's `flash_attn::_flash_attn_forward` /
  `_flash_attn_backward` (q [B,S,H,D]; Dao-AILab/flash-attention
  `flash_attn/flash_attn_interface.py`), aiter's `aiter::mha_fwd` / `mha_bwd` (ROCm/aiter
  `aiter/ops/mha.py`).
- varlen attention, q [total_q, H, D] packed from B sequences (`cu_seqlens_q` has B+1
  entries): Σᵢ 2·H·sᵢ·skᵢ·(D_qk + D_v) — the per-sequence lengths live in the
  cumulative-length *tensors*, which a trace does not record. tracekit counts only where
  the shapes prove the lengths: B = 1 (s = total_q, sk = total_k, or max_seqlen_k for a
  paged cache), or every sequence at its maximum (total_q = B·max_seqlen_q and total_k =
  B·max_seqlen_k); else FLOPs unknown, with that reason. Causal with sk > s (a prefix in
  the cache, the mask aligned bottom-right as flash-attn does) attends s·(sk − s/2) pairs
  (s·sk/2 when sk = s). Ops: `flash_attn::_flash_attn_varlen_forward` / `_backward`,
  `aten::_flash_attention_forward` / `_backward` with cum_seq tensors, `aiter::mha_varlen_fwd`
  / `mha_varlen_bwd`, and `aiter::mha_batch_prefill` (SGLang's paged prefill: k/v are the
  page pool, so only B = 1 with max_seqlen_k is exact).
- paged decode attention (`aiter::paged_attention_rocm`, vLLM's `_rocm_C::paged_attention`,
  `_C::paged_attention_v1/v2`: query [num_seqs, H, D], one query token per sequence):
  2·H·(D + D)·Σ context_lens; exact for one sequence (Σ = max_context_len), else unknown.
"""

from __future__ import annotations

from tracekit.model.flops.args import Args, OpCount, no_flops
from tracekit.model.flops.signatures import OpSig


def attn_flops(sig: OpSig, a: Args) -> OpCount:
    q, k, v = (a.shape(sig.args[r]) for r in ("q", "k", "v"))
    if not q or not k or len(q) != 4 or len(k) != 4:
        return no_flops("q/k are not 4-D (varlen attention: the lengths are tensors)")
    if sig.layout == "BSHD":
        (b, s, h, d), sk = q, k[1]
    else:
        (b, h, s, d), sk = q, k[2]
    dv = v[3] if v and len(v) == 4 else d
    if "mask_type" in sig.args:
        mt = a.ints(sig.args["mask_type"], 1)
        causal = None if mt is None else mt[0] >= 1
    else:
        causal = a.flag(sig.args["causal"])
    if causal is None:
        return no_flops("is_causal not recorded (no Concrete Inputs)")
    per = (3 * d + 2 * dv) if sig.family == "attn_bwd" else (d + dv)
    flops = 2.0 * b * h * s * sk * per
    return OpCount(flops / 2 if causal else flops)


def _causal_pairs(s: int, sk: int, causal: bool) -> float:
    """Query-key pairs one sequence attends: s·sk, causal s·(sk − s/2) (bottom-right mask;
    s·sk/2 when sk = s, the convention of the 4-D ops)."""
    if not causal:
        return float(s) * sk
    return float(s) * (sk - s / 2) if sk > s else float(s) * sk / 2


def varlen_flops(sig: OpSig, a: Args) -> OpCount:
    q, k, v = (a.shape(sig.args[r]) for r in ("q", "k", "v"))
    cu_q = a.shape(sig.args["cu_q"])
    if not q or len(q) != 3 or not cu_q or len(cu_q) != 1:
        return no_flops("q is not [total_q, H, D] with a cu_seqlens_q vector")
    b = cu_q[0] - 1
    max_q, max_k = (a.ints(sig.args[x], 1) for x in ("max_q", "max_k"))
    causal = a.flag(sig.args["causal"])
    if max_q is None or max_k is None or causal is None:
        return no_flops("max_seqlen or is_causal not recorded (no Concrete Inputs)")
    (total_q, h, d), dv = q, (v[-1] if v else q[2])
    paged = "cu_k" not in sig.args  # k/v are the page pool, not the sequences
    total_k = None if paged or not k or len(k) != 3 else k[0]
    if b == 1:
        s, sk = total_q, (max_k[0] if paged else total_k)
    elif total_q == b * max_q[0] and total_k == b * max_k[0]:
        s, sk = max_q[0], max_k[0]
    else:
        return no_flops(
            f"{b} sequences of unequal length: their lengths are in the cu_seqlens tensors, "
            "which the trace does not record"
        )
    if sk is None:
        return no_flops("key shape not recorded")
    per = (3 * d + 2 * dv) if sig.family.endswith("_bwd") else (d + dv)
    return OpCount(2.0 * b * h * per * _causal_pairs(s, sk, causal))


def paged_flops(sig: OpSig, a: Args) -> OpCount:
    q = a.shape(sig.args["q"])
    max_len = a.ints(sig.args["max_len"], 1)
    if not q or len(q) != 3:
        return no_flops("query is not [num_seqs, H, D]")
    if max_len is None:
        return no_flops("max_context_len not recorded (no Concrete Inputs)")
    if q[0] != 1:
        return no_flops(
            f"{q[0]} sequences: their context lengths are a tensor the trace does not record"
        )
    return OpCount(2.0 * q[1] * 2 * q[2] * max_len[0])
