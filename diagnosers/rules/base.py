"""The rule base class: what every finding kind declares (see `diagnosers.rules`)."""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from diagnosers.findings import Finding

if TYPE_CHECKING:
    from diagnosers.context import Context

SECTIONS = ("What it detects", "Why it matters", "Example", "Fix")


class Rule:
    """One finding kind. Subclasses set the class attributes and write `check`."""

    code: ClassVar[str]
    kind: ClassVar[str]
    name: ClassVar[str]
    level: ClassVar[str]
    raised_when: ClassVar[str] = ""  # a format string over the rule's attributes
    status: ClassVar[str] = "stable"
    since: ClassVar[str] = "0.1.0"

    def check(self, ctx: Context) -> Iterable[Finding]:
        raise NotImplementedError

    def candidates(self, ctx: Context, finding: Finding) -> list[str]:
        """The what-if changes (`tracekit whatif --change` specs) that would fix
        `finding`: each is replayed by the step model, the best saving is the finding's
        impact (`diagnosers.impact.impacts`). None by default: the finding
        keeps the impact its rule estimates."""
        return []

    def refuted(self, finding: Finding) -> str:
        """`finding`'s title once its candidates were replayed and none saves time
        (`diagnosers.impact.impacts`): a title must not claim a gain its own replay
        refutes. The title as it is by default (most titles state what was measured)."""
        return finding.title

    @staticmethod
    def faster_compute(ctx: Context, saved_ms: float) -> list[str]:
        """`compute-speed=F` that takes `saved_ms` out of the mean rank's compute time:
        F = compute ÷ (compute − saved); none where nothing is saved or it exceeds it."""
        comp = [
            r.compute_fraction * r.step_ms
            for r in ctx.ranks
            if r.compute_fraction and getattr(r, "step_ms", None)
        ]
        if saved_ms <= 0 or not comp:
            return []
        c = sum(comp) / len(comp)
        return [f"compute-speed={c / (c - saved_ms):.3g}"] if c > saved_ms else []

    @classmethod
    def docs(cls) -> dict[str, str]:
        """The four sections of the docstring, each as one paragraph of text."""
        text = inspect.cleandoc(cls.__doc__ or "")
        out: dict[str, str] = {}
        names = "|".join(re.escape(s) for s in SECTIONS)
        parts = re.split(rf"^({names})\s*$", text, flags=re.M)
        for head, body in zip(parts[1::2], parts[2::2], strict=False):
            out[head] = " ".join(body.split())
        return out

    @classmethod
    def when(cls) -> str:
        """When it is raised, with its thresholds (the docs table's last column)."""
        values = {k: getattr(cls, k) for k in dir(cls) if not k.startswith("_")}
        return cls.raised_when.format(**values)

    @classmethod
    def explain(cls) -> str:
        d = {**cls.docs(), "Raised when": cls.when()}

        def para(text: str) -> str:
            return textwrap.fill(text, 88, initial_indent="  ", subsequent_indent="  ")

        head = f"{cls.code} {cls.name} ({cls.kind}) — {cls.status}, since {cls.since}"
        body = "\n\n".join(f"{s}\n{para(d.get(s, ''))}" for s in (*SECTIONS, "Raised when"))
        return f"{head}\n\n{body}\n"

    def finding(self, severity: str, title: str, **kw) -> Finding:
        return Finding(type(self), severity, title, **kw)
