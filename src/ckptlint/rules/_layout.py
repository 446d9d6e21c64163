"""Shared by the SC5xx rules: layout issues of every quantized module, computed once per plan."""

from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding
from ckptlint.predict import LayoutIssue, firsts, layout_issues
from ckptlint.rules.base import Rule, RuleContext


def plan_layout_issues(ctx: RuleContext) -> dict[str, list[LayoutIssue]]:
    plan = ctx.plan
    if plan is None or not plan.simulated:
        return {}
    cached = getattr(plan, "_layout_issues", None)
    if cached is None:
        cached = {}
        for key, rm in plan.modules.items():
            if rm.decision is None or not rm.decision.quantized:
                continue
            # Verdicts depend on the tensors' suffix/dtype/shape only: test one shard per signature
            # (the 768 expert shards of a MoE layer usually share one) and name the others only if bad.
            bad_sigs = {sig for sig, s in firsts(rm).items() if layout_issues(plan, rm, s)}
            if bad_sigs:
                cached[key] = [i for s in rm.shards if s.stored.sig in bad_sigs
                                   for i in layout_issues(plan, rm, s)]
        plan._layout_issues = cached  # type: ignore[attr-defined]
    return cached


class LayoutRule(Rule):
    """Base for the SC5xx rules: one finding per runtime module and issue kind."""

    kinds: tuple[str, ...] = ()

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        for key, issues in plan_layout_issues(ctx).items():
            mine = [i for i in issues if i.kind in self.kinds]
            if not mine:
                continue
            rm = plan.modules[key]
            module = rm.name
            first = mine[0]
            worst = Consequence.LOAD_ERROR if any(i.consequence is Consequence.LOAD_ERROR for i in mine) \
                else first.consequence
            more = f" (and {len(mine) - 1} more like it)" if len(mine) > 1 else ""
            yield self.finding(
                ctx, worst, f"`{module}` ({rm.role} {rm.loader or rm.kind}, {rm.decision.scheme.name}): "
                f"{first.detail}{more}", module=module,
                tensors=[f"{i.shard.ckpt_module}.{i.suffix}" if i.suffix else i.shard.ckpt_module for i in mine],
                file=first.shard.tensors[0].file if first.shard.tensors else None,
                error_text=first.error_text, hint=self.hint(first),
                data={"issues": [{"kind": i.kind, "tensor": f"{i.shard.ckpt_module}.{i.suffix}".rstrip(".")}
                                 for i in mine[:50]]},
                assumptions=list(plan.assumptions) if rm.role == "draft" else [])

    def hint(self, issue: LayoutIssue) -> str:  # pragma: no cover - overridden
        return ""
