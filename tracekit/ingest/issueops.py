"""What the CPU ops that issue a collective say of it: the framework's issue ops
(`c10d::*`, functional collectives, vLLM's), the elements of their `Input Dims`
(`issue_sizes`), the first dtype of their `Input type` and a send's or recv's peer in
their `Concrete Inputs`."""

from __future__ import annotations

import json
from math import prod
from typing import Any

# the framework's own collective ops above a kernel that carries no metadata: c10d and
# functional collectives, vLLM's (`vllm::all_reduce(Tensor input, str group_name)`)
ISSUE_OP_PREFIXES = ("c10d::", "_c10d_functional::", "vllm::")


# issue ops whose first two args are (output, input); the rest are in-place
_OUT_IN_OPS = {
    "c10d::_allgather_base_",
    "c10d::_reduce_scatter_base_",
    "c10d::alltoall_base_",
    "c10d::allgather_",
    "c10d::reduce_scatter_",
    "c10d::alltoall_",
    "c10d::allgather_into_tensor_coalesced_",
    "c10d::reduce_scatter_tensor_coalesced_",
}


def numel(arg: Any) -> int | None:
    """Elements in one op argument: a tensor's dims, or a TensorList of them."""
    if not isinstance(arg, list) or not arg:
        return None
    if all(isinstance(d, int) for d in arg):
        return prod(arg)
    sizes = [numel(a) for a in arg]
    known = [s for s in sizes if s is not None]
    return sum(known) if known else None


def first_type(types_json: str | None) -> str | None:
    if not types_json:
        return None
    try:
        types = json.loads(types_json)
    except ValueError:
        return None
    for t in types or []:
        if isinstance(t, str) and t and t not in ("TensorList", "Scalar", "ScalarList"):
            return t
    return None


def issue_sizes(op: str, dims_json: str | None) -> tuple[int | None, int | None]:
    """(in, out) elements of a c10d issue op from its `Input Dims`."""
    if not dims_json:
        return None, None
    try:
        dims = json.loads(dims_json)
    except ValueError:
        return None, None
    if not isinstance(dims, list) or not dims:
        return None, None
    if op in _OUT_IN_OPS and len(dims) >= 2:
        return numel(dims[1]), numel(dims[0])
    n = numel(dims[0])
    return n, n


def concrete_peer(op: str, concrete: str | None) -> int | None:
    """A gloo `c10d::send(tensors, pg, dstRank, tag)` / `c10d::recv_(tensors, pg,
    srcRank, tag)`'s peer as the trace's `Concrete Inputs` give it (record_shapes=True),
    its rank in the process group; None when absent."""
    if op not in ("c10d::send", "c10d::recv_") or not concrete:
        return None
    try:
        args = json.loads(concrete)
    except ValueError:
        return None
    if not isinstance(args, list) or len(args) < 3:
        return None
    try:
        return int(args[2])
    except (TypeError, ValueError):
        return None
