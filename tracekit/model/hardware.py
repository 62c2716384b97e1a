"""Hardware specs, keyed by the trace's `deviceProperties.name`.

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
the table holds half of each figure. Realistic bus bandwidth: nccl-tests all-reduce on
8×H100 NVLink ≈ 360–480 GB/s, 8×A100 NVLink ≈ 230 GB/s, DGX-1 V100 ≈ 130 GB/s; PCIe-only
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


# (pattern on deviceProperties.name, spec); the first match wins
SPECS: list[tuple[re.Pattern, DeviceSpec]] = [
    (re.compile(p, re.IGNORECASE), s)
    for p, s in [
        (r"H100.*PCIe", _spec("H100 PCIe", 80, 2.0, 51.2, 378, 756, 1513, 128, 40)),
        (r"H100", _spec("H100 SXM", 80, 3.35, 66.9, 494.7, 989.4, 1978.9, 900, 420)),
        (r"H200", _spec("H200 SXM", 141, 4.8, 66.9, 494.7, 989.4, 1978.9, 900, 420)),
        (r"B200", _spec("B200", 180, 8.0, 75, 1100, 2250, 4500, 1800, 760)),
        (
            r"A100.*PCIE.*40|A100-PCIE-40",
            _spec("A100 PCIe 40GB", 40, 1.555, 19.5, 156, 312, None, 64, 20),
        ),
        (
            r"A100.*80GB PCIe|A100.*PCIE",
            _spec("A100 PCIe 80GB", 80, 1.935, 19.5, 156, 312, None, 64, 20),
        ),
        (
            r"A100.*40GB|A100-SXM4-40GB",
            _spec("A100 SXM 40GB", 40, 1.555, 19.5, 156, 312, None, 600, 230),
        ),
        (r"A100", _spec("A100 SXM 80GB", 80, 2.039, 19.5, 156, 312, None, 600, 230)),
        (r"V100.*PCIE", _spec("V100 PCIe", 32, 0.9, 14, None, 112, None, 32, 10)),
        (r"V100", _spec("V100 SXM2", 32, 0.9, 15.7, None, 125, None, 300, 130)),
        (r"L40S", _spec("L40S", 48, 0.864, 91.6, 183, 362, 733, 64, 20)),
        (r"\bL4\b", _spec("L4", 24, 0.3, 30.3, 60, 121, 242.5, 64, 15)),
        (r"MI300X", _spec("MI300X", 192, 5.3, 163.4, 653.7, 1307.4, 2614.9, 896, 320)),
        (r"MI325X", _spec("MI325X", 256, 6.0, 163.4, 653.7, 1307.4, 2614.9, 896, 320)),
        (r"MI35[05]X", _spec("MI355X", 288, 8.0, 157.3, None, 2516.6, 5033.2, 1075, 380)),
        (r"MI250X?", _spec("MI250X GCD", 64, 1.6, 47.9, None, 191.5, None, 200, 80)),
    ]
]


def lookup(device_name: str | None, memory_bytes: float | None = None) -> DeviceSpec | None:
    """The spec for a device name; memory from the trace (totalGlobalMem) wins when given."""
    if not device_name:
        return None
    for pattern, spec in SPECS:
        if pattern.search(device_name):
            if memory_bytes:
                spec = replace(spec, memory_bytes=float(memory_bytes))
            return replace(spec, name=f"{spec.name} ({device_name})")
    return None


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
