"""Hardware specs, keyed by the trace's `deviceProperties.name` — or, when the name is new
or missing, by its properties (`computeMajor`.`computeMinor` and `numSms`, memory to
tell sizes apart: `PROPERTIES`).

Dense (no sparsity) peak FLOP/s per dtype, memory, HBM bandwidth, the datasheet
link figure, and a *realistic* in-node collective bus bandwidth — what nccl-tests
(rccl-tests) reaches at large messages, not the datasheet. Any figure can be
overridden (`--peak-tflops`, `--busbw-GBps`, `--device-memory-GB`).

Sources: NVIDIA H100 datasheet (SXM5: 989.4 TFLOPS dense BF16, 494.7 TF32, 66.9 FP32,
1978.9 FP8, 3.35 TB/s, NVLink 900 GB/s); H200 datasheet (141 GB, 4.8 TB/s, H100 SXM
compute); DGX B200 / HGX B200 datasheets (2.25 PF dense BF16 per GPU, 8 TB/s, NVLink 5
1.8 TB/s); A100 datasheet (312 BF16, 156 TF32, 19.5 FP32; 40 GB 1.555 TB/s, 80 GB
2.039 TB/s SXM / 1.935 PCIe; NVLink 600 GB/s); V100 datasheet (SXM2 125 FP16 tensor,
15.7 FP32, 900 GB/s, NVLink 300 GB/s; PCIe 112 / 14); L4 datasheet (121 BF16 dense,
30.3 FP32, 300 GB/s); L40S datasheet (362 BF16 dense, 91.6 FP32, 864 GB/s); AMD MI300X
datasheet (1307.4 BF16 dense, 653.7 TF32, 163.4 FP32 matrix, 2614.9 FP8, 5.3 TB/s,
192 GB, Infinity Fabric 896 GB/s); MI325X datasheet (MI300X compute, 256 GB HBM3E,
6 TB/s); MI355X datasheet (2516.6 BF16 dense, 5033.2 FP8, 157.3 FP32, no TF32, 288 GB,
8 TB/s, Infinity Fabric 1075 GB/s); MI250X datasheet (383 BF16 dense, 95.7 FP32 matrix,
3.2 TB/s, 128 GB per OAM module) — PyTorch sees each of its two GCDs as one device, so
the table holds half of each figure; MI250 (208 CUs, 362.1 BF16) / MI210 (104 CUs, 181.0
BF16, 45.3 FP32 matrix, 64 GB, 1.6 TB/s): a GCD of 104 CUs. ROCm names the MI250X/MI250
"AMD Instinct MI250X / MI250" (one string for both: the CU count tells them apart), or by
its architecture, `gfx90a`; MI300X is `gfx942`, MI355X `gfx950`. Realistic bus
bandwidth: nccl-tests all-reduce on 8×H100 NVLink ≈ 360–480 GB/s (H800: the H100 SXM's
compute and HBM, NVLink cut to 400 GB/s — its bus bandwidth here is H100's scaled by
400/900, an estimate), 8×A100 NVLink ≈ 230 GB/s, DGX-1 V100 ≈ 130 GB/s; PCIe-only
nodes ≈ 20–50 GB/s; one 400 Gb/s NIC between nodes ≈ 45–50 GB/s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

T = 1e12
G = 1e9


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    memory_bytes: float
    hbm_Bps: float
    peak_flops: dict[str, float]  # dtype class → dense FLOP/s: fp32, tf32, bf16, fp16, fp8
    link_Bps: float | None  # datasheet NVLink / fabric bandwidth, total per GPU
    busbw_Bps: float  # realistic in-node collective bus bandwidth (nccl-tests, large S)
    latency_s: float = 10e-6  # per-collective α within a node (NCCL LL protocol order)
    inter_node_busbw_Bps: float = 45 * G  # one 400 Gb/s NIC per GPU
    gpus_per_node: int = 8
    source: str = "datasheet"

    def peak(self, dtype_class: str | None) -> float | None:
        if dtype_class is None:
            return None
        return self.peak_flops.get(dtype_class)


def _spec(name, mem_gb, hbm_tbs, fp32, tf32, bf16, fp8, link_gbs, busbw_gbs, **kw):
    peaks = {"fp32": fp32 * T, "bf16": bf16 * T, "fp16": bf16 * T}
    if tf32:
        peaks["tf32"] = tf32 * T
    if fp8:
        peaks["fp8"] = fp8 * T
    return DeviceSpec(
        name,
        mem_gb * G,
        hbm_tbs * 1e12,
        peaks,
        link_gbs * G if link_gbs else None,
        busbw_gbs * G,
        **kw,
    )


_H100 = _spec("H100 SXM", 80, 3.35, 66.9, 494.7, 989.4, 1978.9, 900, 420)
_H100_PCIE = _spec("H100 PCIe", 80, 2.0, 51.2, 378, 756, 1513, 128, 40)
_H800 = _spec("H800 SXM", 80, 3.35, 66.9, 494.7, 989.4, 1978.9, 400, 187)
_H200 = _spec("H200 SXM", 141, 4.8, 66.9, 494.7, 989.4, 1978.9, 900, 420)
_B200 = _spec("B200", 180, 8.0, 75, 1100, 2250, 4500, 1800, 760)
_A100_40 = _spec("A100 SXM 40GB", 40, 1.555, 19.5, 156, 312, None, 600, 230)
_A100_80 = _spec("A100 SXM 80GB", 80, 2.039, 19.5, 156, 312, None, 600, 230)
_V100 = _spec("V100 SXM2", 32, 0.9, 15.7, None, 125, None, 300, 130)
_L40S = _spec("L40S", 48, 0.864, 91.6, 183, 362, 733, 64, 20)
_L4 = _spec("L4", 24, 0.3, 30.3, 60, 121, 242.5, 64, 15)
_MI300X = _spec("MI300X", 192, 5.3, 163.4, 653.7, 1307.4, 2614.9, 896, 320)
_MI325X = _spec("MI325X", 256, 6.0, 163.4, 653.7, 1307.4, 2614.9, 896, 320)
_MI355X = _spec("MI355X", 288, 8.0, 157.3, None, 2516.6, 5033.2, 1075, 380)
_MI250X = _spec("MI250X GCD", 64, 1.6, 47.9, None, 191.5, None, 200, 80)
_MI250 = _spec("MI250 GCD", 64, 1.6, 45.3, None, 181.0, None, 200, 80)

# (pattern on deviceProperties.name, spec); the first match wins
SPECS: list[tuple[re.Pattern, DeviceSpec]] = [
    (re.compile(p, re.IGNORECASE), s)
    for p, s in [
        (r"H100.*PCIe", _H100_PCIE),
        (r"H100", _H100),
        (r"H800.*PCIe", replace(_H100_PCIE, name="H800 PCIe")),
        (r"H800", _H800),
        (r"H200", _H200),
        (r"B200", _B200),
        (
            r"A100.*PCIE.*40|A100-PCIE-40",
            _spec("A100 PCIe 40GB", 40, 1.555, 19.5, 156, 312, None, 64, 20),
        ),
        (
            r"A100.*80GB PCIe|A100.*PCIE",
            _spec("A100 PCIe 80GB", 80, 1.935, 19.5, 156, 312, None, 64, 20),
        ),
        (r"A100.*40GB|A100-SXM4-40GB", _A100_40),
        (r"A100", _A100_80),
        (r"V100.*PCIE", _spec("V100 PCIe", 32, 0.9, 14, None, 112, None, 32, 10)),
        (r"V100", _V100),
        (r"L40S", _L40S),
        (r"\bL4\b", _L4),
        (r"MI300X|gfx942", _MI300X),
        (r"MI325X", _MI325X),
        (r"MI35[05]X|gfx950", _MI355X),
        (r"MI250X?|MI210|gfx90a", _MI250X),
    ]
]


# (compute capability, SMs/CUs) → specs by memory, smallest first: the first whose memory
# holds the trace's totalGlobalMem (10% slack: drivers report a little less or more).
# ROCm reports gfx942 as 9.4, gfx90a as 9.0 and gfx950 as 9.5; their CU counts (304, 110
# or 104, 256) never meet an NVIDIA part's SM count at the same capability.
PROPERTIES: dict[tuple[str, int], list[DeviceSpec]] = {
    ("9.0", 132): [_H100, _H200],  # H100/H800 SXM (80 GB), H200 (141 GB)
    ("9.0", 114): [_H100_PCIE],
    ("10.0", 148): [_B200],
    ("8.0", 108): [_A100_40, _A100_80],
    ("7.0", 80): [_V100],
    ("8.9", 142): [_L40S],
    ("8.9", 58): [_L4],
    ("9.4", 304): [_MI300X, _MI325X],
    ("9.5", 256): [_MI355X],
    ("9.0", 110): [_MI250X],
    ("9.0", 104): [_MI250],
}


def by_properties(
    compute_capability: str | None, sms: int | None, memory_bytes: float | None = None
) -> DeviceSpec | None:
    """The spec of a device known only by its properties (`PROPERTIES`), or None."""
    specs = PROPERTIES.get((compute_capability or "", int(sms or 0)))
    if not specs:
        return None
    if memory_bytes:
        for spec in specs:
            if memory_bytes <= spec.memory_bytes * 1.1:
                return spec
    return specs[-1] if memory_bytes else specs[0]


def lookup(
    device_name: str | None,
    memory_bytes: float | None = None,
    compute_capability: str | None = None,
    sms: int | None = None,
) -> DeviceSpec | None:
    """The spec for a device name, else for its properties (compute capability and SM/CU
    count); memory from the trace (totalGlobalMem) wins when given."""
    spec, how = None, device_name
    for pattern, s in SPECS:
        if device_name and pattern.search(device_name):
            spec = s
            if s is _MI250X and sms == 104:  # "AMD Instinct MI250X / MI250": MI250's GCD
                spec = _MI250
            break
    if spec is None:
        spec = by_properties(compute_capability, sms, memory_bytes)
        how = f"{device_name or 'unnamed'}: by its properties, cc {compute_capability}, {sms} SMs"
    if spec is None:
        return None
    if memory_bytes:
        spec = replace(spec, memory_bytes=float(memory_bytes))
    return replace(spec, name=f"{spec.name} ({how})")


def dtype_class(dtype: str | None) -> str | None:
    """`c10::BFloat16`, `BFloat16`, `float` … → bf16, fp16, fp32, fp8 (peak-table keys)."""
    if not dtype:
        return None
    d = dtype.lower()
    if "bfloat16" in d or d in ("bf16",):
        return "bf16"
    if "half" in d or "float16" in d or d == "fp16":
        return "fp16"
    if "float8" in d or "fp8" in d:
        return "fp8"
    if d in ("float", "float32", "fp32", "c10::float"):
        return "fp32"
    if d in ("tf32",):
        return "tf32"
    return None
