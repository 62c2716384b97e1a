"""The analytic model, one worked example per formula."""

from __future__ import annotations

import json

import pytest

from tracekit.model import hardware
from tracekit.model.flops import op_dtype, transformer_flops_per_token
from tracekit.model.memory import activation_bytes_per_layer, model_state_bytes
from tracekit.model.pipeline import bubble_fraction, microbatches_for


def test_op_dtype():
    assert op_dtype(json.dumps(["", "c10::BFloat16", "Scalar"])) == "c10::BFloat16"
    assert op_dtype(json.dumps(["Scalar"])) is None


def test_transformer_flops_per_token_llama2_7b():
    # Llama-2 7B: N ≈ 6.48e9 non-embedding, L=32, H=32, Q=128, T=4096 (PaLM appendix B form)
    per_token = transformer_flops_per_token(6.48e9, 32, 32, 128, 4096)
    assert per_token == pytest.approx(6 * 6.48e9 + 12 * 32 * 32 * 128 * 4096)
    assert per_token == pytest.approx(4.51e10, rel=0.01)


@pytest.mark.parametrize(
    "size",
    [
        {},  # the reference jobs' small model
        # gpu_check --size large: predicted 20.2 of 22.6 TFLOP measured on an H200 before the
        # logits term (benchmarks/gpu_session.sh, 2026-11-27)
        dict(layers=8, hidden=2048, heads=16, kv_heads=8, ffn=5632, vocab=32000, seq=1024),
    ],
)
def test_predicted_flops_against_flop_counter(size):
    """The prediction against torch's FlopCounterMode over one training step of the
    reference model (on the meta device: shapes only): the GEMMs (mm) are 6N + 6·h·V,
    attention (bmm: SDPA's math decomposition, counted in full) 12·L·H·Q·T, half of it
    when causal."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from instrument.config import JobConfig
    from instrument.model import Transformer, loss_fn, param_counts

    cfg = JobConfig(batch=2, **size)
    with torch.device("meta"):
        model = Transformer(cfg)
        x = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq))
    with FlopCounterMode(display=False) as fc:
        loss_fn(model(x), x).backward()
    counts = {str(k): float(v) for k, v in fc.get_flop_counts()["Global"].items()}
    gemm, attention = counts.pop("aten.mm"), counts.pop("aten.bmm")
    assert not counts  # nothing else counted
    p = param_counts(cfg)
    tokens = cfg.batch * cfg.seq
    args = (p["params"] - p["embedding_params"], cfg.layers, cfg.heads, cfg.hidden // cfg.heads)
    full = transformer_flops_per_token(*args, cfg.seq, hidden=cfg.hidden, vocab=cfg.vocab)
    causal = transformer_flops_per_token(
        *args, cfg.seq, hidden=cfg.hidden, vocab=cfg.vocab, causal=p["causal"]
    )
    # N counts the norms' weights too (as PaLM's N does), which multiply no matrix: +0.16%
    # on the small model, exact once they are taken out
    norms = sum(q.numel() for q in model.parameters() if q.dim() == 1)
    assert tokens * (full - 6 * norms) == pytest.approx(gemm + attention, rel=1e-9)
    assert tokens * (causal - 6 * norms) == pytest.approx(gemm + attention / 2, rel=1e-9)


def test_state_bytes_per_param():
    """Adam's bytes per parameter: fp32 4+4+8, mixed precision 2+2+12 (ZeRO §3.1), 16-bit
    parameters without master weights 2+2+4 (torch's Adam keeps exp_avg and exp_avg_sq
    in the parameter's dtype: checked on a real optimizer below)."""
    from tracekit.model.memory import state_bytes_per_param

    assert state_bytes_per_param("float32", None) == (4, 4, 8)
    assert state_bytes_per_param("bfloat16", None) == (2, 2, 12)
    assert state_bytes_per_param("bfloat16", True) == (2, 2, 12)
    assert state_bytes_per_param("bfloat16", False) == (2, 2, 4)
    torch = pytest.importorskip("torch")
    w = torch.nn.Parameter(torch.zeros(64, dtype=torch.bfloat16))
    opt = torch.optim.AdamW([w])
    w.grad = torch.ones_like(w)
    opt.step()
    state = opt.state[w]
    held = sum(t.numel() * t.element_size() for t in state.values() if t.dim())
    assert held / w.numel() == state_bytes_per_param("bfloat16", False)[2]


def test_fused_attention_stores_no_scores():
    kw = dict(seq=2048, micro_batch=1, hidden=12288, heads=96)
    s, b, h = 2048, 1, 12288
    assert activation_bytes_per_layer(**kw, fused_attention=True) == pytest.approx(34 * s * b * h)
    assert activation_bytes_per_layer(**kw) == pytest.approx(s * b * h * (34 + 5 * 96 * s / h))


def test_model_state_bytes_zero_stages():
    psi, n = 7.5e9, 64  # the ZeRO paper's figure 1 example
    assert model_state_bytes(psi) == pytest.approx(120e9)
    assert model_state_bytes(psi, dp=n, zero=1) == pytest.approx(31.4e9, rel=0.01)
    assert model_state_bytes(psi, dp=n, zero=2) == pytest.approx(16.6e9, rel=0.01)
    assert model_state_bytes(psi, dp=n, zero=3) == pytest.approx(1.9e9, rel=0.02)
    assert model_state_bytes(psi, tp=2, pp=4) == pytest.approx(120e9 / 8)


def test_activation_memory_korthikanti():
    # GPT-3 175B layer: s=2048, b=1, h=12288, a=96, t=8 (Korthikanti et al. table 2
    # setting); 5·a·s/h = 5·96·2048/12288 = 80, so by hand, in units of s·b·h:
    sbh = 2048 * 12288
    no_tp = activation_bytes_per_layer(2048, 1, 12288, 96)
    assert no_tp == pytest.approx(sbh * (34 + 80))  # 114
    tp = activation_bytes_per_layer(2048, 1, 12288, 96, tp=8)
    assert tp == pytest.approx(sbh * (10 + 24 / 8 + 80 / 8))  # 23: norms replicated
    sp = activation_bytes_per_layer(2048, 1, 12288, 96, tp=8, sequence_parallel=True)
    assert sp == pytest.approx(sbh * 114 / 8)  # 14.25
    assert activation_bytes_per_layer(2048, 1, 12288, 96, recompute="full") == 2 * sbh
    sel = activation_bytes_per_layer(2048, 1, 12288, 96, tp=8, recompute="selective")
    assert sel == pytest.approx(sbh * (10 + 24 / 8))  # 13
    sel_sp = activation_bytes_per_layer(
        2048, 1, 12288, 96, tp=8, recompute="selective", sequence_parallel=True
    )
    assert sel_sp == pytest.approx(sbh * 34 / 8)  # 4.25
    # fp32 activations: twice the 16-bit count
    assert activation_bytes_per_layer(2048, 1, 12288, 96, bytes_per_value=4) == 2 * no_tp


def test_pipeline_bubble():
    assert bubble_fraction(4, 4) == pytest.approx(3 / 7)  # 43%
    assert bubble_fraction(4, 16) == pytest.approx(3 / 19)  # 16%
    assert bubble_fraction(4, 4, virtual=2) == pytest.approx(3 / 11)
    assert microbatches_for(4, 0.10) == 27  # 3 / (27 + 3) = 10%
    with pytest.raises(ValueError):
        bubble_fraction(0, 4)


@pytest.mark.parametrize(
    "name,spec,bf16_tflops",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.4),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756),
        ("NVIDIA H200", "H200 SXM", 989.4),
        ("NVIDIA B200", "B200", 2250),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB", 312),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB", 312),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB", 312),
        ("NVIDIA A100-PG509-200", "A100 SXM 80GB", 312),
        ("Tesla V100-SXM2-32GB", "V100 SXM2", 125),
        ("NVIDIA L4", "L4", 121),
        ("NVIDIA L40S", "L40S", 362),
        ("AMD Instinct MI300X", "MI300X", 1307.4),
        ("AMD Instinct MI325X", "MI325X", 1307.4),
        ("AMD Instinct MI355X", "MI355X", 2516.6),
        ("AMD Instinct MI250X", "MI250X GCD", 191.5),
    ],
)
def test_hardware_lookup(name, spec, bf16_tflops):
    s = hardware.lookup(name)
    assert s.name.startswith(spec)
    assert s.peak("bf16") == pytest.approx(bf16_tflops * 1e12)
    assert s.busbw_Bps < (s.link_Bps or float("inf"))  # realistic, never the datasheet


def test_hardware_memory_from_trace_and_unknown_device():
    assert hardware.lookup("NVIDIA H100 80GB HBM3", 85_520_809_984).memory_bytes == 85_520_809_984
    assert hardware.lookup("Some NPU") is None
    assert (
        hardware.dtype_class("c10::BFloat16") == "bf16" and hardware.dtype_class("float") == "fp32"
    )
