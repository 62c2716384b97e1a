"""What each finding's remedy wins: its rule's candidate changes (`Rule.candidates`:
overlap for exposed communication, the predicted bus bandwidth for a slow collective, no
straggler, no host gaps, more microbatches or an interleaved schedule for a pipeline
bubble …) replayed by the step model (`tracekit.analysis.whatif_plan.what_if`), so the
finding's `impact_ms` is the step time the best of them saves in the replay, not a
per-finding estimate; a critical finding whose replay refutes its remedy is a warning.
"""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures import wait as _wait
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracekit.analysis.whatif_plan import prepared, replay_beside, replays_beside, what_if
from tracekit.stepmodel import changes as C
from tracekit.stepmodel.model import Outcome

if TYPE_CHECKING:
    from diagnosers.context import Context
    from diagnosers.findings import Finding


GAIN_MS = 0.05  # a change saving less than this …
GAIN_SHARE = 0.005  # … or than this share of the replayed step wins nothing
# a critical finding claims the fix to do first: its best replayed remedy saves at least
# this share of the replayed step, else it is a warning (a straggler finding on
# v100_dlrm_8rank was critical on 0.51 ms of a 16 ms step)
CRITICAL_SHARE = 0.05
REPLAYED = ("warning", "critical")  # the severities whose candidates are replayed


def candidates(ctx: Context, f: Finding) -> list[str]:
    """The changes a finding's remedy would make: its rule's `candidates` (each rule owns
    them, `diagnosers.rules.base.Rule.candidates`), without repeats."""
    try:
        specs = f.rule().candidates(ctx, f)
    except Exception:  # a rule's candidates must not break the report
        return []
    return list(dict.fromkeys(s for s in specs or [] if s))


def gainful(o: Outcome) -> bool:
    """Whether a replayed change saves time worth naming (≥ GAIN_MS and ≥ GAIN_SHARE of
    the replayed step)."""
    return o.saved_ms >= max(GAIN_MS, GAIN_SHARE * o.replayed_step_ms)


@dataclass
class Replays:
    """The findings' candidate changes (`specs`: each replayed finding and its specs, in
    the findings' order) being replayed on the step model's thread (`future`, one result
    a spec: `whatif_plan.replay_beside`)."""

    specs: list[tuple[Finding, list[str]]]
    future: Future

    def wait(self) -> None:
        """Until the thread is done with the model (its graph is read after)."""
        _wait([self.future])


def replayed(ctx: Context, findings: list[Finding]) -> Replays | None:
    """Start replaying each finding's candidates (`impacts`) on the step model's thread
    while the caller makes the rest of the report. The candidates, and what the changes
    read of the run (`pipeline_shape`, `contended`: the facts' cached properties, which
    must not be computed on two threads at once), are made here, on the caller's thread.
    None where the model has no thread (`impacts` replays them itself)."""
    if not replays_beside(ctx):
        return None  # nothing prepared that `impacts` would prepare again
    specs = _specs(ctx, findings)
    if not specs:
        return None  # nothing to replay
    future = replay_beside(ctx, _jobs(ctx, specs), path=False)  # the report shows no path
    return None if future is None else Replays(specs, future)


def _jobs(ctx: Context, specs: list[tuple[Finding, list[str]]]) -> list:
    """Each spec's changes (`whatif_plan.prepared`) or what preparing them raised; none
    after an error that is not `NotApplicable` (`impacts` raises it, as `what_if` would)."""
    jobs: list = []
    for _f, fspecs in specs:
        for spec in fspecs:
            try:
                jobs.append(prepared(ctx, [spec]))
            except Exception as exc:
                jobs.append(exc)
                if not isinstance(exc, C.NotApplicable):
                    return jobs
    return jobs


def _specs(ctx: Context, findings: list[Finding]) -> list[tuple[Finding, list[str]]]:
    """The findings whose candidates are replayed, with their candidates."""
    out = []
    for f in findings:
        if f.severity not in REPLAYED:
            continue
        specs = candidates(ctx, f)
        if specs:
            out.append((f, specs))
    return out


def impacts(ctx: Context, of: list[Finding] | Replays) -> list[tuple[Finding, Outcome]]:
    """Each warning or critical finding's candidate changes replayed: `of` the findings,
    replayed here, or the `Replays` that `replayed` started for them on the step model's
    thread (which hold the findings they replay). The finding gets
    `remedies` (each change, its predicted step and saving, best first) and `impact_ms`
    = the best saving (≥ 0; 0 when no candidate applies). Its remedy text leads with the
    replay: the best change and what it saves, or that none saves time and what each
    cost. A finding none of whose candidates wins is not critical on a remedy the replay
    refutes: its severity is capped at warning (docs/findings.md), and its title drops
    a gain it claims (`Rule.refuted`). Returns every (finding, replay)."""
    out = []
    if ctx.step_model is None:
        return out
    if isinstance(of, Replays):
        specs, results = of.specs, iter(of.future.result() or ())
    else:
        specs, results = _specs(ctx, of), None
    for f, fspecs in specs:
        done: list[Outcome] = []
        skipped: list[str] = []
        for spec in fspecs:
            try:
                if results is None:
                    o = what_if(ctx, [spec], path=False)  # the report shows no path
                else:
                    o = next(results)
                    if isinstance(o, BaseException):
                        raise o
                done.append(o)
            except C.NotApplicable as exc:
                why = str(exc).removeprefix(f"--change {spec}: ")
                skipped.append(f"{spec} does not apply ({why})")
        done.sort(key=lambda o: -o.saved_ms)
        f.remedies = [
            {
                "change": " + ".join(o.change),
                "predicted_step_ms": o.predicted_step_ms,
                "saved_ms": o.saved_ms,
            }
            for o in done
        ]
        f.impact_ms = max(done[0].saved_ms, 0.0) if done else 0.0
        f.remedy = lead(done, skipped) + ("; " + f.remedy if f.remedy else "")
        wins = bool(done) and gainful(done[0])
        if done and not wins:
            f.title = _refuted(f)
        if f.severity == "critical" and not (
            wins and done[0].saved_ms >= CRITICAL_SHARE * done[0].replayed_step_ms
        ):
            f.severity = "warning"
        out += [(f, o) for o in done]
    _same_change([f for f, _ in specs])  # the replayed ones: only they have remedies
    return out


def _refuted(f: Finding) -> str:
    """The title its rule gives a finding whose replays save no time (`Rule.refuted`);
    the title as it is where that raises."""
    try:
        title = f.rule().refuted(f)
    except Exception:  # a rule's wording must not break the report
        return f.title
    return title if isinstance(title, str) and title else f.title


def _same_change(findings: list[Finding]) -> None:
    """Two findings whose best remedy is the same change claim one saving, not two: the
    later ones (by impact) say so, naming the first (a100_sendrecv_2rank: TK-C202 and
    TK-C203 each claimed no-host-gaps' 202.4 ms)."""
    first: dict[str, Finding] = {}
    ranked = [f for f in findings if f.remedies and (f.impact_ms or 0) > 0]
    for f in sorted(ranked, key=lambda f: -(f.impact_ms or 0)):
        change = f.remedies[0]["change"]
        if change in first:
            f.remedy += f"; the same change as {first[change].code}'s remedy: one saving, not two"
        else:
            first[change] = f


def lead(done: list[Outcome], skipped: list[str]) -> str:
    """The remedy's first words: the best replayed change and what it saves, then what
    each other candidate did — or that none saves time."""

    def what(o: Outcome) -> str:
        spec = " + ".join(o.change)
        if o.saved_ms < 0:
            return f"{spec} makes the step {-o.saved_ms:.2f} ms longer"
        return f"{spec} saves {o.saved_ms:.2f} ms"

    parts = [what(o) for o in done]
    parts += skipped
    if done and gainful(done[0]):
        return (
            f"replayed, {what(done[0])} a step ({done[0].replayed_step_ms:.2f} → "
            f"{done[0].predicted_step_ms:.2f} ms)" + "".join(f"; {p}" for p in parts[1:])
        )
    return "replayed, none of the candidate changes saves time: " + "; ".join(parts)
