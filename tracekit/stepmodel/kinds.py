"""The step model's graph vocabulary: node kinds, edge kinds (how a lag or a duration on
the critical path is classified) and the thresholds the graph's edges are inferred with
(each measured or named in docs/step-model.md)."""

from __future__ import annotations

import re

HOST, COMPUTE, COMM, INST = 0, 1, 2, 3
# edge kinds: how a lag or a duration on the critical path is classified
(E_DUR, E_LAUNCH, E_STREAM, E_WAIT, E_CHAIN, E_ANCHOR, E_SYNC, E_INST, E_TAIL, E_HOSTWAIT,
 E_UNEXPLAINED) = range(11)  # fmt: skip
COMM_WAKE_NS = 200_000  # a thread waiting for a collective resumes within this after it
WAIT_NS = 20_000  # an unexplained start this close after other work ended waits for it
STREAM_SLACK_NS = 5_000  # device work starting this close after its stream freed was queued
MAX_LAUNCH_NS = 20_000  # launch latencies above this are waits the trace does not show
DEFAULT_LAUNCH_NS = 5_000  # launch latency when no device work waited for its launch
ROUND_NS = 10  # timestamps in µs with 3 decimals: ends and starts meet within rounding
P2P = ("send", "recv", "send_recv")
# runtime calls that block the host until device work is done (the graph SQL's `sync_name`
# lists them; a launch call of these names whose device work ended inside it is a blocking
# copy): a host wait on the path is "sync", named by its call
SYNC_API = re.compile(r"Synchroni[sz]e|Memcpy|Memset|cuda_sync", re.IGNORECASE)
