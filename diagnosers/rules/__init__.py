"""Findings as rules (Ruff's registry, sqlfluff's plugins).

A rule is one small class per code: its kind (`communication.exposed`), a stable code
(`TK-N301`), a name stating the problem (never the fix), its level, its thresholds as
named class attributes, its docs in four fixed sections of its docstring — *What it
detects*, *Why it matters*, *Example*, *Fix* — and `check(ctx)`, which reads the typed
facts of `diagnosers.context.Context` and yields `Finding`s. `raised_when` is the line
of the docs' table (docs/findings.md, docs/reference/rules.md), written with the rule's
own thresholds, so the docs cannot drift from the code (a test holds them equal).

The built-in rules are listed here; a team adds its own from its package through the
`tracekit.rules` entry-point group (a `Rule` subclass):

    [project.entry-points."tracekit.rules"]
    my-rule = "my_pkg.rules:MyRule"

`--select` / `--ignore` (and `select` / `ignore` in `[tool.tracekit]`) take codes or
their prefixes (`TK-N`), kinds or names. A rule that raises becomes a `diagnoser.error`
finding (TK-E001) charged to it — never a crash of the run; a plugin that cannot be
loaded is charged the same way.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING

from diagnosers.findings import Finding
from diagnosers.rules.base import Rule
from diagnosers.rules.rule_error import error_finding
from tracekit.config import rule_plugins
from tracekit.errors import TracekitError

if TYPE_CHECKING:
    from diagnosers.context import Context


# module:class of every built-in rule, in the order they run (memory → scaling); the
# error rule last
BUILTIN = (
    "memory_near_capacity:MemoryNearCapacity",
    "memory_above_model:MemoryAboveModel",
    "low_mfu:LowMfu",
    "fp32_gemms:Fp32Matmuls",
    "host_bound:HostBound",
    "device_idle:DeviceIdle",
    "input_bound:InputBound",
    "fusion:Unfused",
    "slow_collective:SlowCollective",
    "exposed_communication:ExposedCommunication",
    "pipeline_bubble:PipelineBubble",
    "straggler:Straggler",
    "poor_projection:PoorProjection",
    "rule_error:RuleError",
)


class PluginLoadError(Exception):
    pass


def _failed_plugin(ep_name: str, exc: Exception) -> type[Rule]:
    """A plugin that cannot be loaded: a rule that raises its error when run."""

    class Broken(Rule):
        code = f"plugin:{ep_name}"
        kind = f"plugin.{ep_name}"
        name = ep_name
        level = "scaling"

        def check(self, ctx: Context) -> Iterable[Finding]:
            raise PluginLoadError(f"the plugin rule {ep_name!r} could not be loaded: {exc}")

    return Broken


def builtin() -> list[type[Rule]]:
    """The built-in rules (`BUILTIN`), their modules imported."""
    rules: list[type[Rule]] = []
    for spec in BUILTIN:
        mod, cls = spec.split(":")
        rules.append(getattr(import_module(f"diagnosers.rules.{mod}"), cls))
    return rules


@cache
def registry() -> tuple[type[Rule], ...]:
    """Every rule: the built-in ones, then the plugins' (`tracekit.rules` entry points)."""
    rules = builtin()
    codes = {r.code for r in rules}
    for ep in rule_plugins():  # `tracekit.rules`, scanned once a process
        try:
            rule = ep.load()
            if not (isinstance(rule, type) and issubclass(rule, Rule)):
                raise TypeError(f"{ep.value} is not a tracekit Rule subclass")
            if rule.code in codes:
                raise ValueError(f"its code {rule.code} is taken")
        except Exception as exc:  # a broken plugin must not break the report
            rule = _failed_plugin(ep.name, exc)
        codes.add(rule.code)
        rules.append(rule)
    # the error rule runs no check; keep it last
    rules.sort(key=lambda r: r.kind == "diagnoser.error")
    return tuple(rules)


def kinds() -> dict[str, type[Rule]]:
    """kind → its rule, built-in and plugin rules alike."""
    return {rule.kind: rule for rule in registry()}


def lookup(code_or_kind: str) -> type[Rule] | None:
    """The rule of a code (`TK-N301`), a kind (`communication.exposed`) or a name."""
    key = code_or_kind.strip()
    rules = registry()
    return (
        next((r for r in rules if r.code == key.upper()), None)
        or kinds().get(key)
        or next((r for r in rules if r.name == key), None)
    )


def _matches(rule: type[Rule], token: str) -> bool:
    t = token.strip()
    return rule.code.startswith(t.upper()) or t in (rule.kind, rule.name)


def selected(select: Iterable[str] = (), ignore: Iterable[str] = ()) -> list[type[Rule]]:
    """The rules `--select` / `--ignore` leave (Ruff's rule: select first, then ignore;
    a token is a code or its prefix, a kind or a name). An unknown token is exit 2."""
    rules = list(registry())
    select, ignore = list(select), list(ignore)
    for token in [*select, *ignore]:
        if not any(_matches(r, token) for r in rules):
            codes = ", ".join(r.code for r in rules if r.kind != "diagnoser.error")
            raise TracekitError(
                f"no rule matches {token!r}; codes: {codes} (`tracekit explain` lists them)"
            )
    if select:
        rules = [r for r in rules if any(_matches(r, t) for t in select)]
    rules = [r for r in rules if not any(_matches(r, t) for t in ignore)]
    return [r for r in rules if r.kind != "diagnoser.error"]


def run_rules(ctx: Context, rules: list[type[Rule]], debug: bool = False) -> list[Finding]:
    """Each rule's findings, in rule order; `ctx.raised` grows as they run. A rule that
    raises is charged a `diagnoser.error` finding."""
    for rule in rules:
        try:
            found = list(rule().check(ctx))
        except Exception as exc:
            if debug:
                traceback.print_exc()
            found = [error_finding(f"the {rule.code} rule ({rule.name})", exc, rule.level)]
        ctx.raised.extend(found)
    return list(ctx.raised)


def markdown_table() -> str:
    """The docs' table of rules: code, kind, when raised — written from the rules."""
    rows = ["| code | kind | raised when |", "|---|---|---|"]
    rows += [f"| {r.code} | `{r.kind}` | {r.when()} |" for r in registry()]
    return "\n".join(rows) + "\n"


__all__ = [
    "Rule",
    "error_finding",
    "kinds",
    "lookup",
    "markdown_table",
    "registry",
    "run_rules",
    "selected",
]
