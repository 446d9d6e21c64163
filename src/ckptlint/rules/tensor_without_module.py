from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.rules.base import Rule, RuleContext


class TensorWithoutModule(Rule):
    """
    ## What it does
    Reports checkpoint tensors of modules that the target's model class does not build at all (for
    example the vision tower of Qwen-VL-Chat, whose `QWenLMHeadModel` class is the text model only),
    with what that release's loader does with them (target data `absent`): raise on the first such
    name, or skip them.

    ## Why is this bad?
    Loaders that index every checkpoint name without a guard stop with `KeyError` after minutes
    of loading; loaders that skip unknown names serve the model without those weights, which is
    only right when the part is meant to be dropped.

    ## Example
    Qwen-VL-Chat-Int4 (`QWenLMHeadModel`, with `transformer.visual.*` tensors) on SGLang 0.5.5-0.5.17:
    `KeyError: 'transformer.visual.conv1.weight'`; from 0.5.18 the loader skips the vision tower.

    ## How to fix
    Serve the checkpoint with a release or model class that builds those modules, or remove the
    tensors from the checkpoint (and its index) when the part is not needed.
    """

    code = "LD901"
    name = "tensor-without-module"
    summary = "A checkpoint tensor belongs to a module the target's model class does not build"
    consequences = (Consequence.LOAD_ERROR, Consequence.SILENT_CORRUPTION)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.simulated or not plan.absent:
            return
        for (pattern, consequence, error, note), tensors in plan.absent.items():
            first = tensors[0]
            module = first.rpartition(".")[0]
            yield self.finding(
                ctx, Consequence(consequence),
                f"{len(tensors)} checkpoint tensor(s) matching `{pattern}` (e.g. `{first}`) belong to modules "
                f"{plan.arch_name} does not build on " + mention(plan.target.resolved) + (f": {note}" if note else ""),
                module=module, tensors=list(tensors[:50]), file=None,
                error_text=(error or "").format(ckpt=first) or None,
                hint="serve with a release or model class that has these modules, or drop the tensors",
                data={"count": len(tensors), "pattern": pattern})
