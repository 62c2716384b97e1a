"""A command that runs once and exits (`tracekit analyze`): the cyclic garbage collector
off while it works, and no last collection when the process ends.

Reference counting frees nearly all of what a recompute drops: at 8 big ranks and at
1,024 small ranks the collector's passes found about 900 objects in cycles, out of the
≈ 10⁶ a recompute makes and keeps till it prints (query rows, the report's structs, the
step model's graph). Those passes cost ≈ 70 ms of CPU at 8 big ranks (the imports'
young generations, and the pass over everything the step model built while its own
pause held — `tracekit.stepmodel.nogc`), and the interpreter's last collection at exit
≈ 40 ms more. Neither is needed by a process that ends after printing; a long-lived one
(the TUI, the MCP server, a notebook) keeps the collector.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import contextmanager

from tracekit.stepmodel.nogc import paused

_frozen_at_exit = False


@contextmanager
def collector_off() -> Iterator[None]:
    """The collector paused for the block (`tracekit.stepmodel.nogc.paused`: restored as
    found, for callers in-process such as tests), and frozen at exit: the process's
    objects are freed with it."""
    global _frozen_at_exit
    if not _frozen_at_exit:
        atexit.register(gc.freeze)  # the last pass would walk every object still held
        _frozen_at_exit = True
    with paused():
        yield
