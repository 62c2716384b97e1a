"""Naming the cause of a change: the step-time change decomposed into the levels of the
step (compute, exposed communication, memcpy/memset, idle, host-bound, the bubble),
its top contributors (a collective, a kernel, a straggling rank, the bubble), and each
moved verdict's own cause — matched to its contributor by the entity's key, never by
its label."""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from tracekit.gate import metrics as M
from tracekit.gate import read as R
from tracekit.gate.verdict import Verdict
from tracekit.model import figures as F

# each part of the step (samples.ranks[] key) and its name in the cause
LEVELS = tuple(zip(R.LEVEL_KEYS[1:], ("compute", "exposed communication", "memcpy/memset",
                                      "idle"), strict=True))  # fmt: skip
# which contributor kinds name a collective's verdict
_COLLECTIVE_KINDS = ("collective", "collective_time")


@dataclass
class Contributor:
    """One contributor to the step-time change. `key` is its entity's key (a collective's
    (name, group size, bytes), a kernel's name, a rank); `extra` the figures shown
    between its change and its text."""

    kind: str
    name: str
    delta_ms: float
    text: str
    key: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "delta_ms": self.delta_ms,
                **self.extra, "text": self.text}  # fmt: skip


def _ranks_text(ranks: list) -> str:
    ranks = sorted(r for r in ranks if r is not None)
    if not ranks:
        return ""
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}–{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def explain(bs: list[dict], ns: list[dict]) -> tuple[dict[str, Any], list[Contributor]]:
    """Decompose the step-time change into levels and name the top contributors (each
    side's figures: the mean over its runs of the run's report figure): the cause as the
    comparison shows it, and its contributors."""
    step = M.RUN_METRICS[0]
    levels_b = [R.level_means(r) for r in bs]
    levels_n = [R.level_means(r) for r in ns]
    lb = {k: fmean(x[k] for x in levels_b) for k in levels_b[0] if all(k in x for x in levels_b)}
    ln = {k: fmean(x[k] for x in levels_n) for k in levels_n[0] if all(k in x for x in levels_n)}
    out: dict[str, Any] = {"levels": {}, "contributors": [], "text": None}
    if R.STEP_MS not in lb or R.STEP_MS not in ln:
        b_st = R.avg(bs, lambda r: R.point(r, step))
        n_st = R.avg(ns, lambda r: R.point(r, step))
        if b_st is not None and n_st is not None:
            out["step_ms_change"] = n_st - b_st
            out["text"] = f"step {n_st - b_st:+.2f} ms (no per-step samples to decompose it)"
        return out, []
    d_step = ln[R.STEP_MS] - lb[R.STEP_MS]
    out["step_ms_change"] = d_step
    out["step_ms"] = [lb[R.STEP_MS], ln[R.STEP_MS]]
    levels = {}
    for key, name in LEVELS:
        levels[name] = ln.get(key, 0.0) - lb.get(key, 0.0)
    # host-bound gaps are part of idle
    hb = [R.avg(x, lambda r: R.mean_sample(r, R.HOST_BOUND_MS)) for x in (bs, ns)]
    if None not in hb:
        levels["idle"] -= hb[1] - hb[0]
        levels["host-bound"] = hb[1] - hb[0]
    bubble = next(m for m in M.RUN_METRICS if m.key == "bubble")
    bub = [R.avg(x, lambda r: R.point(r, bubble)) for x in (bs, ns)]
    if None not in bub:  # a pipeline: idle and exposed send/recv are the bubble
        levels["bubble (idle + exposed send/recv)"] = levels.pop("idle") + levels.pop(
            "exposed communication"
        )
    out["levels"] = levels
    contributors = _collective_contributors(bs, ns) + _kernel_contributors(bs, ns)
    contributors += _rank_contributors(bs, ns)
    if None not in bub:
        contributors.append(
            Contributor(
                "bubble", "pipeline bubble", levels["bubble (idle + exposed send/recv)"],
                f"pipeline bubble {bub[0] * 100:.1f}% → {bub[1] * 100:.1f}% of the step",
            )
        )  # fmt: skip
    floor = max(0.005 * lb[R.STEP_MS], 0.1 * abs(d_step))  # what is worth naming
    contributors = [c for c in contributors if abs(c.delta_ms) >= floor]
    # a new straggler is the root of the waiting it causes: name it first
    contributors.sort(key=lambda c: (not c.extra.get("straggler"), -abs(c.delta_ms)))
    top = contributors[:6]
    out["contributors"] = [c.to_dict() for c in top]
    parts = sorted(levels.items(), key=lambda kv: -abs(kv[1]))
    shown = [f"{k} {v:+.2f} ms" for k, v in parts if abs(v) >= max(0.05 * abs(d_step), 1e-3)]
    pct = d_step / lb[R.STEP_MS] * 100 if lb[R.STEP_MS] else 0.0
    text = f"step {d_step:+.2f} ms ({pct:+.1f}%)"
    if shown:
        text += ": " + ", ".join(shown[:3])
    lead = [c for c in contributors if (c.delta_ms > 0) == (d_step > 0)][:2]
    if lead:
        text += "; " + "; ".join(c.text for c in lead)
    out["text"] = text
    return out, top


def _collective_contributors(bs: list[dict], ns: list[dict]) -> list[Contributor]:
    """A collective's exposed time, time and bus bandwidth: the report's figures (the
    table's `exposed_ms`, `time_ms_per_step`, `busbw_GBps` — the numbers the verdicts
    show), per rank the samples' exposure by rank."""
    keys: dict[tuple, None] = {}  # in order, once each
    for rep in ns:
        keys.update(dict.fromkeys(R.collectives(rep)[1]))
    in_base = {k for rep in bs for k in R.collectives(rep)[1]}
    out = []
    for key in [k for k in keys if k in in_base]:
        label = R.coll_label(key)

        def fig(side: list[dict], column: str, key: tuple = key) -> float:
            return R.avg(side, lambda rep: R.coll_figure(rep, key, column)) or 0.0

        exp_b, exp_n = fig(bs, "exposed"), fig(ns, "exposed")
        t_b, t_n = fig(bs, "collective_time"), fig(ns, "collective_time")
        d_exp, d_time = exp_n - exp_b, t_n - t_b

        def by_rank(side: list[dict], key: tuple = key) -> dict:
            acc: dict[Any, list[float]] = {}
            for rep in side:
                c = R.collectives(rep)[1].get(key) or {}
                for r, x in zip(c.get("ranks") or [], c.get(R.EXPOSED_BY_RANK) or [],
                                strict=False):  # fmt: skip
                    acc.setdefault(r, []).append(x)
            return {r: fmean(x) for r, x in acc.items()}

        br, nr = by_rank(bs), by_rank(ns)
        per_rank = {r: nr[r] - br.get(r, 0.0) for r in nr}
        top = max((abs(x) for x in per_rank.values()), default=0)
        ranks = [r for r, x in per_rank.items() if top and abs(x) >= 0.5 * top]
        ob = 1 - exp_b / t_b if t_b else None
        on = 1 - exp_n / t_n if t_n else None
        if d_exp:
            ov = (
                f" (overlap {'lost' if on < ob else 'gained'}: {ob * 100:.0f}% → {on * 100:.0f}%)"
                if ob is not None and on is not None and abs(on - ob) >= 0.05
                else ""
            )
            out.append(Contributor(
                "collective", label, d_exp,
                f"exposed {label} {d_exp:+.2f} ms/step on {_ranks_text(ranks)}{ov}",
                key, {"ranks": sorted(ranks), "overlap": [ob, on]},
            ))  # fmt: skip
        if d_time:
            bw = [R.avg(x, lambda rep, key=key: R.coll_figure(rep, key, "busbw"))
                  for x in (bs, ns)]  # fmt: skip
            bwt = ""
            if all(bw) and abs(bw[1] - bw[0]) <= 0.05 * bw[0] and d_time > 0:
                bwt = f", bus bandwidth unchanged ({bw[1]:.3g} GB/s): waiting for a late rank"
            elif all(bw):
                bwt = f", bus bandwidth {bw[0]:.3g} → {bw[1]:.3g} GB/s"
            out.append(Contributor(
                "collective_time", label, d_time, f"{label} {d_time:+.2f} ms/step{bwt}",
                key, {F.BUSBW_GBPS.key: bw},
            ))  # fmt: skip
    return out


def _kernel_contributors(bs: list[dict], ns: list[dict]) -> list[Contributor]:
    names: set[str] = set()
    for rep in bs + ns:
        names |= set(R.kernels(rep))
    out = []
    for name in names:
        bv = fmean(R.kernel_figure(r, name) or 0.0 for r in bs)
        nv = fmean(R.kernel_figure(r, name) or 0.0 for r in ns)
        rel = f" ({(nv - bv) / bv * 100:+.0f}%)" if bv else " (new)"
        out.append(Contributor(
            "kernel", name, nv - bv, f"{R.kernel_label(name)} {nv - bv:+.2f} ms/step{rel}", name,
        ))  # fmt: skip
    # nested CPU ops repeat their children's time: keep the largest few
    out.sort(key=lambda c: -abs(c.delta_ms))
    return out[:3]


def _compute_by_rank(side: list[dict]) -> dict:
    acc: dict[Any, list[float]] = {}
    for rep in side:
        for r in R.sample_ranks(rep):
            acc.setdefault(r["rank"], []).append(fmean(r.get(R.LEVEL_KEYS[1]) or [0]))
    return {r: fmean(x) for r, x in acc.items() if len(x) == len(side)}


def _rank_contributors(bs: list[dict], ns: list[dict]) -> list[Contributor]:
    """A rank whose compute grew much more than the others' (a new straggler: one every
    new run flags and no base run does)."""
    out = []
    bc, nc = _compute_by_rank(bs), _compute_by_rank(ns)
    common = sorted(set(bc) & set(nc))
    if len(common) < 2:
        return out
    d = {r: nc[r] - bc[r] for r in common}
    worst = max(common, key=lambda r: d[r])
    rest = sorted(d[r] for r in common if r != worst)
    med = rest[len(rest) // 2]
    new_strag = set.intersection(*map(R.stragglers, ns)) - set.union(*map(R.stragglers, bs))
    if d[worst] - med > 0.02 * (bc[worst] or 1) and (d[worst] > 2 * max(med, 0) or new_strag):
        strag = " (a new straggler)" if worst in new_strag else ""
        out.append(Contributor(
            "rank", f"rank {worst}", d[worst] - med,
            f"rank {worst} computes {d[worst]:+.2f} ms/step, the others {med:+.2f} ms{strag}",
            worst, {"straggler": bool(strag)},
        ))  # fmt: skip
    return out


def attach_causes(
    verdicts: list[Verdict], cause: dict[str, Any], contributors: list[Contributor],
    bs: list[dict], ns: list[dict],
) -> None:  # fmt: skip
    """Each moved verdict's cause: its own contributor (by its entity's key), else the
    step's."""

    def first(kind: str) -> str | None:
        return next((c.text for c in contributors if c.kind == kind), None)

    def own(kinds: tuple[str, ...], key: Any) -> str | None:
        return next((c.text for c in contributors if c.kind in kinds and c.key == key), None)

    for v in verdicts:
        if v.verdict not in ("regressed", "improved", "inconclusive"):
            continue
        if v.family in ("step_time", "mfu", "hfu"):
            v.cause = cause.get("text")
        elif v.family == "exposed_comm":
            v.cause = first("collective") or cause.get("text")
        elif v.family in ("idle", "host_bound", "comm_wait"):
            v.cause = first("rank") or cause.get("text")
        elif v.family == "bubble":
            v.cause = " ; ".join(x for x in (first("bubble"), first("rank")) if x) or None
        elif v.family == "peak_memory":
            v.cause = _memory_cause(bs, ns)
        elif v.family in ("collective_time", "busbw"):
            v.cause = own(_COLLECTIVE_KINDS, v.entity)
        elif v.family == "rank_step_time":
            v.cause = first("rank")
        elif v.family == "kernel_time":
            v.cause = own(("kernel",), v.entity)


def _memory_cause(bs: list[dict], ns: list[dict]) -> str | None:
    def peaks(side: list[dict]) -> dict:
        acc: dict[Any, list[float]] = {}
        for rep in side:
            for rank, peak in R.peak_reserved(rep).items():
                acc.setdefault(rank, []).append(peak)
        return {r: fmean(x) for r, x in acc.items()}

    pb, pn = peaks(bs), peaks(ns)
    common = [r for r in pn if r in pb]
    if not common:
        return None
    r = max(common, key=lambda x: pn[x] - pb[x])
    return (
        f"peak reserved on rank {r}: {pb[r] / 1e9:.2f} → {pn[r] / 1e9:.2f} GB "
        f"({(pn[r] - pb[r]) / 1e9:+.2f} GB)"
    )


def unknown_levels(bs: list[dict], ns: list[dict]) -> list[str]:
    """A note per level whose verdict is unknown on one side and not the other: the gate
    judges figures, never verdicts, and a level that was not measured (ok → unknown, or
    back) is neither an improvement nor a regression — its figures are null on that side
    and not compared."""
    out = []

    def verdicts(reports: list[dict], name: str) -> tuple[set[str], str | None]:
        seen, why = set(), None
        for r in reports:
            for lv in r.get("levels") or []:
                if lv.get("level") == name:
                    seen.add(lv.get("verdict") or "")
                    why = why or lv.get("verdict_reason")
        return seen, why

    names = dict.fromkeys(lv.get("level") for r in bs + ns for lv in r.get("levels") or [])
    for name in names:
        (b, b_why), (n, n_why) = verdicts(bs, name), verdicts(ns, name)
        if ("unknown" in b) == ("unknown" in n) or not b or not n:
            continue
        side, why = ("new", n_why) if "unknown" in n else ("base", b_why)
        out.append(
            f"{name}: verdict {'/'.join(sorted(b))} in base, {'/'.join(sorted(n))} in new — "
            f"unknown in {side} ({why or 'its headline figures are unknown'}): not compared, "
            "neither an improvement nor a regression"
        )
    return out
