"""One op's traced arguments (`Args`: shapes and concrete values by position) and what
a formula makes of them (`OpCount`: FLOPs, or None with the reason)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Args:
    """One op's traced arguments: shapes and concrete values by position."""

    dims: list
    concrete: list | None

    def shape(self, i: int | None) -> list[int] | None:
        if i is None or i >= len(self.dims):
            return None
        x = self.dims[i]
        ok = isinstance(x, list) and x and all(isinstance(d, int) and d >= 0 for d in x)
        return x if ok else None

    def value(self, i: int | None) -> str | None:
        """The concrete value at position i as text, None when not recorded."""
        if i is None or self.concrete is None or i >= len(self.concrete):
            return None
        v = self.concrete[i]
        return v if isinstance(v, str) and v != "" else None

    def ints(self, i: int | None, n: int) -> list[int] | None:
        text = self.value(i)
        if text is None:
            return None
        nums = [int(v) for v in re.findall(r"-?\d+", text)]
        if len(nums) == 1:
            return nums * n
        return nums[:n] if len(nums) >= n else None

    def flag(self, i: int | None) -> bool | None:
        text = self.value(i)
        if text is None:
            return None
        t = text.strip().lower()
        return True if t == "true" else False if t == "false" else None


@dataclass
class OpCount:
    flops: float | None
    reason: str | None = None  # why flops is None
    tf32: bool = False  # the op's own args say TF32 may be used (cuDNN allow_tf32)


def no_flops(reason: str) -> OpCount:
    return OpCount(None, reason)
