"""A collective's kind and element size from what traces call them: `canonical_name`
(`c10d::_allgather_base_`, `ncclDevKernel_AllGather_RING_LL` → `all_gather`),
`dtype_bytes` (NCCL's and gloo's dtype names), `kernel_dtype` (a kernel name's dtype)."""

from __future__ import annotations

import functools
import re

CANONICAL = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send",
    "recv",
    "send_recv",
    "barrier",
    "gather",
    "scatter",
)


# Element sizes for NCCL metadata dtypes (`Float`, `BFloat16` …) and the C++ type
# names gloo traces show in `Input type` (`float`, `c10::BFloat16` …); lower-cased.
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "int": 4,
    "int32": 4,
    "long": 8,
    "long int": 8,
    "int64": 8,
    "long long": 8,
    "short": 2,
    "short int": 2,
    "int16": 2,
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "byte": 1,
    "uint8": 1,
    "int8": 1,
    "bool": 1,
    "complexfloat": 8,
    "c10::complex<float>": 8,
    "complexdouble": 16,
}


_KERNEL_COLL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_PREFIXES = ("c10d::", "_c10d_functional::", "gloo:", "nccl:", "vllm::")


def dtype_bytes(dtype: str | None) -> int | None:
    if not dtype:
        return None
    d = dtype.strip().lower()
    if d.startswith(("float8", "c10::float8")):
        return 1
    return DTYPE_BYTES.get(d)


@functools.lru_cache(maxsize=4096)  # a run's few names, asked for per collective row
def canonical_name(raw: str | None) -> str | None:
    """`c10d::_allgather_base_`, `allgather`, `ncclDevKernel_AllGather_RING_LL` → `all_gather`."""
    if not raw:
        return None
    m = _KERNEL_COLL.match(raw)
    s = m.group(1) if m else raw
    for p in _PREFIXES:
        if s.startswith(p):
            s = s[len(p) :]
            break
    s = re.sub(r"[^a-z]", "", s.lower())
    for key, name in (
        ("allreduce", "all_reduce"),
        ("allgather", "all_gather"),
        ("reducescatter", "reduce_scatter"),
        ("alltoall", "all_to_all"),
        ("broadcast", "broadcast"),
        ("sendrecv", "send_recv"),
        ("send", "send"),
        ("recv", "recv"),
        ("reduce", "reduce"),
        ("barrier", "barrier"),
        ("monitoredbarrier", "barrier"),
        ("gather", "gather"),
        ("scatter", "scatter"),
    ):
        if s.startswith(key):
            return name
    return None


_KERNEL_DTYPE = re.compile(
    r"_(float|half|bf16|bfloat16|f16|f32|f64|double|i8|u8|i32|u32|i64|u64|fp8_e4m3|fp8_e5m2"
    r"|int8_t|uint8_t|int32_t|uint32_t|int64_t|uint64_t)(?=_|$)",
    re.IGNORECASE,
)


_KERNEL_DTYPE_NAMES = {
    "f32": "float",
    "f16": "half",
    "bf16": "bfloat16",
    "f64": "double",
    "i8": "int8",
    "u8": "uint8",
    "i32": "int32",
    "u32": "int32",
    "i64": "int64",
    "u64": "int64",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "int8_t": "int8",
    "uint8_t": "uint8",
    "int32_t": "int32",
    "uint32_t": "int32",
    "int64_t": "int64",
    "uint64_t": "int64",
}


@functools.lru_cache(maxsize=4096)
def kernel_dtype(name: str) -> str | None:
    m = _KERNEL_DTYPE.search(name.split("(")[0])
    if not m:
        return None
    d = m.group(1).lower()
    return _KERNEL_DTYPE_NAMES.get(d, d)
