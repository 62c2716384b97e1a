"""TK-N302 slow-collective."""

from __future__ import annotations

from msgspec.structs import asdict

from diagnosers.base import mean, pct
from diagnosers.rules.base import Rule
from tracekit.analysis.communication import SLOW_MIN_STEP_SHARE, SLOW_SHARE


class SlowCollective(Rule):
    """What it detects
    A collective whose measured bus bandwidth (nccl-tests definition, shortest duration
    across matched ranks) is below half of what the α-β model predicts for its size and
    group — in a node, or between nodes when the group spans them — and which takes at
    least 1% of the step. Its impact is the excess over the prediction where the
    collective is exposed.

    Why it matters
    A slow collective means a slow link, a bad topology or protocol choice, or contention
    — the network is not delivering what it should.

    Example
    all_reduce 256 MB × 8 ranks: 61 GB/s bus bandwidth against 420 predicted.

    Fix
    Check NCCL_ALGO/NCCL_PROTO and topology (nvidia-smi topo -m), NIC and NVLink health,
    other jobs on the fabric; run nccl-tests on these nodes.
    """

    code = "TK-N302"
    kind = "communication.slow_collective"
    name = "slow-collective"
    level = "communication"
    # the facts' thresholds (`communication.slow` is the rows under them)
    share = SLOW_SHARE
    min_step_share = SLOW_MIN_STEP_SHARE
    raised_when = (
        "measured bus bandwidth < {share:g}× the α-β prediction (CPU runs: < {share_cpu:g}×), "
        "taking ≥ {min_step_share:.0%} of the step; impact: the exposed excess over the "
        "prediction"
    )
    share_cpu = share / 2

    def check(self, ctx):
        comm = ctx.communication
        per_rank = comm.ranks
        for name in dict.fromkeys(r.name for r in comm.slow):  # one finding per collective
            rows = [r for r in comm.slow if r.name == name]
            r = max(rows, key=lambda x: x.time_ms_per_step)
            ratio = r.busbw_GBps / r.predicted_busbw_GBps
            sizes = f" (and {len(rows) - 1} other sizes)" if len(rows) > 1 else ""
            excess_ms = sum(
                max(0.0, x.transfer_ms - (x.predicted_ms or 0)) * x.count_per_step
                for x in rows
            )
            exposed_excess = mean(
                min(
                    excess_ms,
                    sum(
                        ctx.key_ms(x, pr.rank, "exposed_ns")
                        - ctx.key_ms(x, pr.rank, "wait_exposed_ns")
                        for x in rows
                    ),
                )
                for pr in per_rank
            )
            where = "between nodes" if r.inter_node else "in a node"
            yield self.finding(
                "critical" if ratio < comm.slow_limit / 2 else "warning",
                f"{name} of {r.bytes / 1e6:.2f} MB over {r.group_size or '?'} ranks"
                f"{sizes} reaches {r.busbw_GBps:.2f} GB/s bus bandwidth, {pct(ratio)} of "
                f"the {r.predicted_busbw_GBps:.2f} GB/s predicted"
                + ("" if ctx.cpu else f" {where}")
                + f"; {excess_ms:.1f} ms per step over the prediction, "
                f"{exposed_excess or 0:.1f} ms of it exposed",
                ranks=[pr.rank for pr in per_rank],
                measured={"busbw_GBps": r.busbw_GBps, "transfer_ms": r.transfer_ms},
                predicted={
                    "busbw_GBps": r.predicted_busbw_GBps,
                    "transfer_ms": r.predicted_ms,
                },
                impact_ms=exposed_excess or 0.0,
                remedy=self.advice(ctx),
                details={"sizes": [asdict(x) for x in rows], "excess_ms_per_step": excess_ms},
            )

    @staticmethod
    def advice(ctx) -> str:
        if ctx.cpu:
            return (
                "check the network between hosts and gloo's interface (GLOO_SOCKET_IFNAME); "
                "on one host, give each rank its own cores (OMP_NUM_THREADS, taskset)"
            )
        if ctx.gloo_on_gpu:
            # the prediction is what the GPUs' links carry with NCCL; gloo cannot reach it
            return (
                "these collectives run on a gloo process group: gloo copies CUDA tensors "
                "through host memory and reduces on the CPU, far below the GPUs' links; "
                "use the nccl backend for GPU tensors (gloo for CPU-side groups only)"
            )
        return (
            "run nccl-tests on these nodes; check NCCL_ALGO/NCCL_PROTO, topology "
            "(nvidia-smi topo -m), link health and fabric contention"
        )

    def candidates(self, ctx, finding):
        """The collective at its predicted bus bandwidth (overlapping it is the exposed
        communication finding's remedy: each finding wins what its own fix would)."""
        rows = (finding.details or {}).get("sizes") or []
        name = next((r.get("name") for r in rows if r.get("name")), None)
        bw = (finding.predicted or {}).get("busbw_GBps")
        return [f"bandwidth:{name}={bw:.6g}"] if name and bw else []
