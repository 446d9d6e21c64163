from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.rules.base import Rule, RuleContext


class FusedShardsDisagree(Rule):
    """
    ## What it does
    Flags a fused runtime module (`qkv_proj`, `gate_up_proj`, `fused_qkv_a_proj_with_mqa`, …)
    whose checkpoint shards the selected release's skip list treats differently: some excluded,
    some not.

    ## Why is this bad?
    A fused module is built with one quantization method. When some of its shards are in the
    skip list and others are not, SGLang and vLLM refuse to build the model ("Found different
    quantization schemes …", "Detected some but not all shards … are quantized").

    ## Example
    `exclude = ["model.layers.0.self_attn.q_a_proj"]` without
    `model.layers.0.self_attn.kv_a_proj_with_mqa`: both fuse into
    `fused_qkv_a_proj_with_mqa`.

    SGLang 0.5.5 ModelOpt NVFP4 also stops here when an entry's last component (`q_a_proj`, `kv_b_proj`,
    …) is contained in a layer's last component but the entry or the layer path does not have the
    five components its fused-name rule asserts (`AssertionError`).

    ## How to fix
    List every shard of the fused module in the skip list, or none of them (and store all of
    them in the same format).
    """

    code = "QD402"
    name = "fused-shards-disagree"
    summary = "Shards of a fused module are partly excluded from quantization"
    consequences = (Consequence.LOAD_ERROR,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.simulated:
            return
        for rm in plan.modules.values():
            d = rm.decision
            if d is None or not d.conflict:
                continue
            cons = Consequence(d.error_consequence or "load-error")
            shards = d.reason.startswith("fused shards disagree")
            yield self.finding(
                ctx, cons, f"`{rm.name}` ({rm.role} {rm.loader or rm.kind}): {d.reason}; "
                + (mention(plan.target.resolved) + " refuses to build a fused module whose shards disagree" if shards else
                   mention(plan.target.resolved) + " stops at start-up while it tests the skip list on this module"),
                module=rm.name, tensors=rm.tensors, error_text=d.error,
                hint=(f"list every shard of `{rm.name}` in the skip list, or none of them" if shards else
                      "write the skip-list entry as the module's full path (as many components as the rule asserts)"),
                assumptions=list(plan.assumptions) if rm.role == "draft" else [])
