"""The rule contract.

A rule is a small class with a ``code`` (two-letter family + three digits), a kebab-case
``name``, and a docstring: a one-line summary (the ``summary``, unless the class sets one), then
the sections What it does / Why is this bad? / Example / How to fix. ``check(ctx)`` yields findings; the consequence (and so
the default severity) belongs to each finding, not to the rule.

Rules with ``scope = "checkpoint"`` run once per checkpoint (``ctx.target`` is None);
rules with ``scope = "target"`` run once per requested framework target, on the
simulated load plan of that target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

from ckptlint.findings import Consequence, Finding

if TYPE_CHECKING:
    from ckptlint.checkpoint import Checkpoint
    from ckptlint.deployment import Deployment
    from ckptlint.simulate import Plan
    from ckptlint.targets import Target

DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "How to fix")
_SECTION_RE = re.compile(r"^## (.+?)\s*$", re.M)


@dataclass(frozen=True, init=False)
class RuleContext:
    """What a rule reads: the checkpoint, the deployment and, for a target-scoped rule, the target's
    frozen Plan. The target has one source: the plan's (``plan.target``); only a target-scoped run
    without a plan (no config.json to simulate) holds its release itself. Checkpoint-scoped rules get
    neither (``target`` None)."""

    checkpoint: "Checkpoint"
    deployment: "Deployment"
    plan: "Plan | None"
    _unsimulated: "Target | None"  # the release when there is no plan

    def __init__(self, checkpoint: "Checkpoint", deployment: "Deployment", target: "Target | None" = None,
                 plan: "Plan | None" = None) -> None:
        if plan is not None and target is not None and target is not plan.target:
            raise ValueError(f"the context's target {target.id} is not its plan's ({plan.target.id})")
        object.__setattr__(self, "checkpoint", checkpoint)
        object.__setattr__(self, "deployment", deployment)
        object.__setattr__(self, "plan", plan)
        object.__setattr__(self, "_unsimulated", target if plan is None else None)

    @property
    def target(self) -> "Target | None":
        plan = self.plan
        return plan.target if plan is not None else self._unsimulated


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    scope: ClassVar[str] = "target"
    # Consequences this rule can predict (documentation; each finding picks one).
    consequences: ClassVar[tuple[Consequence, ...]] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "summary" not in cls.__dict__ and cls.__doc__:
            cls.summary = cls.__doc__.strip().splitlines()[0].rstrip(".")

    def check(self, ctx: RuleContext) -> Iterator[Finding]:  # pragma: no cover - interface
        raise NotImplementedError

    def finding(self, ctx: RuleContext, consequence: Consequence, message: str, **kw: Any) -> Finding:
        kw.setdefault("target", ctx.target.id if ctx.target is not None else None)
        return Finding(code=self.code, name=self.name, consequence=consequence, message=message, **kw)

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        return parse_doc_sections(cls.__doc__ or "")


class ReaderRule(Rule):
    """A rule whose findings are detected while reading the checkpoint.

    The class is declared in this package like every rule (code, name, documentation); its
    detection is in :mod:`ckptlint.reader`, which imports the class and records its findings,
    already carrying the rule's code and name, in ``Checkpoint.issues``. ``check`` surfaces them
    (so they can be selected, ignored and documented like any other).
    """

    scope: ClassVar[str] = "checkpoint"

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        code = self.code
        return (issue for issue in ctx.checkpoint.issues if issue.code == code)


def parse_doc_sections(doc: str) -> dict[str, str]:
    import inspect

    text = inspect.cleandoc(doc)
    sections: dict[str, str] = {}
    matches = list(_SECTION_RE.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        sections[m.group(1)] = text[m.end():end].strip()
    return sections
