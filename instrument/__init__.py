"""Reference jobs (DDP, FSDP2, TP, PP, MoE, hybrid) that write profiled runs, and
`capture()` to profile a user's own loop the same way.

Imports torch lazily (`instrument.config` does not need it); `tracekit` itself never
imports this package except `tracekit run`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from instrument.user_loop import Capture, capture

__all__ = ["Capture", "capture"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from importlib import import_module

        return getattr(import_module("instrument.user_loop"), name)
    raise AttributeError(name)
