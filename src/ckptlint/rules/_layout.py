"""Shared by the SC5xx rules: layout issues of every quantized module, computed once per plan."""

from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding
from ckptlint.rules.base import Rule, RuleContext
from ckptlint.simulate import LayoutIssue


class LayoutRule(Rule):
    """Base for the SC5xx rules: one finding per runtime module and issue kind."""

    kinds: tuple[str, ...] = ()

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.simulated:
            return
        for rm in plan.modules.values():
            mine = [i for i in rm.layout_issues if i.kind in self.kinds]
            if not mine:
                continue
            module = rm.name
            first = mine[0]
            worst = Consequence.LOAD_ERROR if any(i.consequence is Consequence.LOAD_ERROR for i in mine) \
                else first.consequence
            more = f" (and {len(mine) - 1} more like it)" if len(mine) > 1 else ""
            yield self.finding(
                ctx, worst, f"`{module}` ({rm.role} {rm.loader or rm.kind}, {rm.decision.scheme.name}): "
                + first.detail + more, module=module,
                tensors=[f"{i.shard.ckpt_module}.{i.suffix}" if i.suffix else i.shard.ckpt_module for i in mine],
                file=first.shard.tensors[0].file if first.shard.tensors else None,
                error_text=first.error_text, hint=self.hint(first),
                data={"issues": [{"kind": i.kind, "tensor": f"{i.shard.ckpt_module}.{i.suffix}".rstrip(".")}
                                 for i in mine[:50]]},
                assumptions=list(plan.assumptions) if rm.role == "draft" else [])

    def hint(self, issue: LayoutIssue) -> str:  # pragma: no cover - overridden
        return ""
