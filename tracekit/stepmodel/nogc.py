"""The cyclic garbage collector paused while the step model builds and replays.

A graph is hundreds of thousands of small lists and tuples (each node's edges), none in
a reference cycle; building them, and a what-if's copies, set off the collector's
generation-2 passes over every live object: ≈ 15% of the model's CPU at 8 big ranks
(0.08 s of a 0.55 s build, 0.07 s of two remedies' 0.30 s). Reference counting still
frees what is dropped; cycles wait until the collector runs again. Nested and
concurrent pauses (the model built on a thread beside the analysis) restore the
collector once the last ends, as they found it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
