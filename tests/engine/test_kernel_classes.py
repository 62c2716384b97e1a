"""Kernel classes by the kernel name's own family (tracekit/model/opclass.py): every kernel
name of ../shared/traces, read from the raw JSON here, against a committed table reviewed by
hand (tests/fixtures/kernel_classes.tsv), and the library families of field traces — cuBLAS,
cuBLASLt, nvjet, CUTLASS, CK, hipBLASLt/rocBLAS/Tensile, FP8/FP4/MX `bmm_*`, flash/fmha,
cuDNN/MIOpen convolutions — never a substring of a template argument."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tracekit
from tests.conftest import SHARED_TRACES
from tests.helpers import full_report
from tests.synth import Scenario, generate
from tracekit.model.opclass import is_matmul_kernel, kernel_class, kernel_head

TABLE = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_classes.tsv"

# Kernels of field traces and of the libraries' sources, one per family
FAMILIES = {
    # cuBLAS / cuBLASLt
    "volta_sgemm_128x64_nn": "gemm",
    "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn": "gemm",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas": "gemm",
    "sm100_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_cluster2x1x1_execute_"
    "kernel__5x_cublas": "gemm",
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT": "gemm",
    "nvjet_hsh_256x128_64x4_2x1_v_bz_coopB_TNN": "gemm",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, false,"
    " false>(cublasLt::cublasSplitKParams<float>, float const*)": "gemm",
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false,"
    " cublasGemvParams<cublasGemvTensorStridedBatched<float const> > >(float)": "gemm",
    # CUTLASS: the wrapper by its operator, a cutlass_* kernel
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>"
    "(cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4::Params)": "gemm",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)": "gemm",
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>"
    ", cutlass::gemm::collective::CollectiveMma<> > >(cutlass::gemm::kernel::GemmUniversal<>"
    "::Params)": "gemm",
    "void cutlass::device_kernel<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2>,"
    " flash::CollectiveEpilogueFwd<> > >(flash::FlashAttnFwdSm90<>::Params)": "attention",
    # composable kernel, hipBLASLt, rocBLAS/Tensile
    "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<>, true>"
    "(ck::GridwiseGemm_xdl_cshuffle_v3<>::Argument)": "gemm",
    "void ck::tensor_operation::device::device_gemm_xdl_splitk<float>(float)": "gemm",
    "Cijk_Alik_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT16x16x256_MI16x16x1_SN_LDSB1": "gemm",
    "Cijk_Ailk_Bljk_HHS_BH_MT64x64x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0": "gemm",
    "_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3"
    "INS_28GridwiseGemm_xdl_cshuffle_v3EEEvv": "conv",
    # FP8 / FP4 / MX GEMMs of TensorRT-LLM's trtllm-gen (vLLM/FlashInfer on B200)
    "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x8x256_s4_et128x8_m128x8x32_cga1x1x1_16dp256b_TN_"
    "transOut_schedS_bN_sm100f": "gemm",
    "bmm_Bfloat16_MxE2m1Bfloat16_Fp32_t128x8x512u2_s4_et128x8_m128x8x64_cga1x1x1_16dp256b_TN_"
    "transOut_schedS_bN_sm100f": "gemm",
    "bmm_E4m3_E4m3E4m3_Fp32_t128x16x128_s6_et64x16_m64x16x32_cga1x1x1_16dp256b_TN_transOut_"
    "noShflA_dsFp8_schedS_sm100a": "gemm",
    "fused_moe_kernel": "gemm",
    # attention
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false,"
    " cutlass::half_t> >(flash::Flash_fwd_params)": "attention",
    "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<>(pytorch_flash::"
    "Flash_bwd_params)": "attention",
    "FlashAttnBwd": "attention",
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::"
    "half_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0"
    : "attention",
    "void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128>(float*)"
    : "attention",
    # convolutions: cuDNN (implicit GEMM, Winograd, direct), MIOpen
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5"
    "_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer": "conv",
    "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1": "conv",
    "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::"
    "winograd_nonfused::WinogradDataParams<float, float>)": "conv",
    "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, true, true>"
    "(int, int, int, float const*, int, float*, float const*, kernel_conv_params)": "conv",
    "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1": "conv",
    "miopenSp3AsmConv_v30_3_1_gfx9_fp16_dot2_edc_f3x2_stride1": "conv",
    "naive_conv_nonpacked_wrw_nchw_half_double_half": "conv",
    # not matmul work, whatever their arguments say
    "void tensorrt_llm::kernels::cutlass_kernels::finalizeKernel<float, __nv_bfloat16, cutlass::"
    "epilogue::thread::LinearCombination<cutlass::bfloat16_t, 8, float, float> >(float const*)"
    : None,
    "void finalizeKernel<cutlass::bfloat16_t, cutlass::gemm::GemmShape<128, 128, 32> >(float)"
    : None,
    "void at::native::vectorized_elementwise_kernel<4, at::native::conv_depthwise_helper<float>,"
    " at::detail::Array<char*, 2> >(int, at::native::conv_depthwise_helper<float>)": None,
    "void scal_kernel<float, float, 1, true, 6, 5, 5, 3>(cublasTransposeParams<float>, float "
    "const*, float*, float const*)": None,
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::"
    "Fp8KVCacheDataType)0>(__nv_bfloat16 const*)": None,
    "void fbgemm_gpu::permute_2D_data_kernel<int, long, float>(int, int)": None,
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(float)": None,
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(cudnn::ops::"
    "nchw2nhwc_params_t<float>, float const*, float*)": None,
    "triton_poi_fused_add_mul_0": None,
    "triton_tem_fused_mm_0": "gemm",
}


def _table() -> dict[str, str]:
    out = {}
    for line in TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            name, cls = line.split("\t")
            out[name] = cls
    return out


def _shared_kernel_names() -> set[str]:
    """Every distinct kernel name of ../shared/traces, from the raw JSON."""
    names = set()
    for f in sorted(SHARED_TRACES.glob("*/*.json.gz")):
        with gzip.open(f) as fh:
            d = json.load(fh)
        for e in d["traceEvents"] if isinstance(d, dict) else d:
            if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel":
                names.add(e["name"])
    return names


@pytest.mark.parametrize("name", list(FAMILIES), ids=[n[:48] for n in FAMILIES])
def test_a_family_is_read_from_the_kernels_own_name(name):
    assert kernel_class(name) == FAMILIES[name]
    assert is_matmul_kernel(name) == (FAMILIES[name] is not None)


def test_every_kernel_of_the_shared_traces_has_its_class():
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"{SHARED_TRACES} not present")
    names = _shared_kernel_names()
    table = _table()
    assert set(table) <= names  # the table holds only names the traces have
    wrong = {n: (kernel_class(n), table.get(n)) for n in names if kernel_class(n) != table.get(n)}
    assert not wrong
    assert len(names) >= 500 and len(table) >= 200


def test_the_head_is_the_name_before_its_arguments():
    cat = "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, int, 4>(float*)"
    assert kernel_head(cat) == "at::native::anon::CatArrayBatchedCopy"
    assert kernel_head("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, "
                       "float>(float)") == "internal::gemvx::kernel"
    assert kernel_head("_ZN2ck16tensor_operation6device8kernel_xIfEEvv") == (
        "ck::tensor_operation::device::kernel_x"
    )
    assert kernel_head("volta_sgemm_128x64_nn") == "volta_sgemm_128x64_nn"


def test_fp4_and_mx_gemms_of_a_formula_less_op_are_uncounted_matmul_work(tmp_path):
    """vLLM on B200: trtllm-gen FP4/MX `bmm_*` kernels under a vLLM custom op without a FLOP
    formula are matmul work whose FLOPs tracekit cannot count; with slow counted GEMMs, TK-C201
    is then info (the docs' rule), not critical. Truth: the generator's schedule."""
    kernel = ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x8x256_s4_et128x8_m128x8x32_cga1x1x1_16dp256b_"
              "TN_transOut_schedS_bN_sm100f")
    sc = Scenario(name="vllm_fp4", world=2, layers=4, steps=2, hidden=1024, tokens=2048,
                  gemm_eff=0.06, formula_less_op=("vllm::fused_experts", kernel, 6000.0))
    truth = generate(sc, tmp_path / "run")
    with tracekit.open(tmp_path / "run") as run:
        report = full_report(run)
    assert min(truth.uncounted_fraction.values()) > 0.5
    for row in report["ranks"]:
        assert row["uncounted_compute_fraction"] == pytest.approx(
            truth.uncounted_fraction[row["rank"]], abs=1e-6
        )
    assert kernel in {k["name"] for k in report["top_uncounted_kernels"]}
    f = {f["code"]: f for f in report["findings"]}["TK-C201"]
    assert f["severity"] == "info"


def _resnet_truth(path: Path) -> dict:
    """From the raw JSON of v100_resnet50_single: each forward convolution's FLOPs (2·N·
    Cout·Ho·Wo·Cin·kh·kw; the output shape is the input of the batch norm that follows it
    on its thread: ResNet-50 puts one after every convolution), its kernels' time and
    names (runtime launches inside the op, matched to kernels by correlation)."""
    with gzip.open(next(path.glob("*.json.gz"))) as fh:
        ev = json.load(fh)["traceEvents"]
    ops = sorted((e for e in ev if e.get("cat") == "Operator"), key=lambda e: e["ts"])
    kernels = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "Kernel"}
    launches = [e for e in ev if e.get("cat") == "Runtime" and "correlation" in e.get("args", {})]
    convs = []
    for i, op in enumerate(ops):
        if op["name"] != "aten::cudnn_convolution":
            continue
        x, w = op["args"]["Input Dims"][:2]
        bn = next(o for o in ops[i + 1 :] if o["name"] == "aten::cudnn_batch_norm"
                  and o["tid"] == op["tid"] and o["ts"] >= op["ts"] + op["dur"])  # fmt: skip
        n, cout, ho, wo = bn["args"]["Input Dims"][0]
        assert (n, cout) == (x[0], w[0])
        end = op["ts"] + op["dur"]
        ks = [kernels[r["args"]["correlation"]] for r in launches
              if r["tid"] == op["tid"] and op["ts"] <= r["ts"] <= end
              and r["args"]["correlation"] in kernels]  # fmt: skip
        convs.append({
            "flops": 2 * n * cout * ho * wo * w[1] * w[2] * w[3],
            "kernel_us": sum(k["dur"] for k in ks),
            "kernels": [k["name"] for k in ks],
        })  # fmt: skip
    return {"convs": convs}


def test_convolutions_above_the_peak_are_winograd_not_a_counting_error(shared_trace):
    """v100_resnet50_single: the forward convolutions' FLOPs are exact (1,569.5 GFLOP over
    the trace's six steps, from the shapes by hand); every instance faster than the V100's
    15.7 TFLOP/s fp32 peak ran a cuDNN Winograd kernel (fewer multiplies than the count).
    The note says Winograd, not "suspect", and those ops stay out of GEMM efficiency."""
    path = shared_trace("v100_resnet50_single")
    truth = _resnet_truth(path)
    total = sum(c["flops"] for c in truth["convs"])
    assert total / 1e9 == pytest.approx(1569.5, abs=0.05)
    over = [c for c in truth["convs"] if c["flops"] / (c["kernel_us"] * 1e-6) > 15.7e12]
    assert over and all(any("winograd" in k.lower() for k in c["kernels"]) for c in over)
    with tracekit.open(path) as run:
        counted = run.sql(
            "SELECT sum(flops), count(*) FILTER (winograd) FROM op_flops "
            "WHERE name = 'aten::cudnn_convolution'"
        ).fetchall()[0]
        report = full_report(run)
    assert counted[0] == total
    assert counted[1] == sum(any("winograd" in k.lower() for k in c["kernels"])
                             for c in truth["convs"])  # fmt: skip
    notes = [n for n in report["levels"][1]["notes"] if "aten::cudnn_convolution " in n]
    assert len(notes) == 1
    assert "Winograd" in notes[0] and "suspect" not in notes[0]
    assert "left out of GEMM efficiency" in notes[0]
    assert not any("suspect" in n for n in report["levels"][1]["notes"])
