from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.rules.base import Rule, RuleContext


class SharedExpertFusionMismatch(Rule):
    """
    ## What it does
    When the target fuses the shared expert into the routed experts' FusedMoE (SGLang's
    shared-experts fusion, at its default for the model, release and GPU), checks that the shared
    expert is stored exactly like the routed experts: same quantization, packing and scales.

    ## Why is this bad?
    The shared expert is loaded as one more routed expert of the same FusedMoE slot. A BF16 shared
    expert next to NVFP4/MXFP4 routed experts does not fit the packed slot: `The size of tensor a
    (3072) must match the size of tensor b (6144)` (GLM-5.2 NVFP4, SGLang PR #40628; Kimi-K2.5 MXFP4,
    PR #25740). Whether fusion is on depends on the release (quant-config gates added in 0.5.18 and
    after 0.5.20) and on the GPU (SGLang's default MoE runner on Blackwell turns it off for
    DeepSeek-family FP8/NVFP4 checkpoints).

    ## Example
    Quark MXFP4 routed experts with `mlp.shared_experts.*` kept in BF16, served with SGLang 0.5.15 on
    an MI355X.

    ## How to fix
    Start SGLang with `--disable-shared-experts-fusion` (a server flag, no checkpoint change), use a
    release whose quant config refuses the fusion, or quantize the shared expert like the routed ones.
    """

    code = "QD403"
    name = "shared-expert-fusion-mismatch"
    summary = "The shared expert is fused into routed experts stored in another format"
    consequences = (Consequence.LOAD_ERROR,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.simulated or not plan.fusion:
            return
        flag = plan.arch.shared_experts_fusion.disable_flag
        for rm in plan.modules.values():
            if not rm.fused_into:
                continue
            moe = plan.modules[rm.fused_into]
            if moe.decision is None:
                continue
            bad = rm.fusion_mismatches
            shape = [i for i in rm.fusion_layout_issues if i.kind in ("shape", "dtype")]
            if not bad and not shape:
                continue
            detail = bad[0].detail if bad else shape[0].detail
            text = bad[0].error_text if bad else shape[0].error_text
            stored = rm.shards[0].stored.describe()
            built = moe.decision.scheme.name if moe.decision.quantized and moe.decision.scheme else "unquantized"
            yield self.finding(
                ctx, Consequence.LOAD_ERROR,
                f"`{rm.name}` is loaded into `{moe.name}` as one more routed expert (shared-experts fusion: "
                + plan.fusion_reason + f"), but it is stored {stored} while the routed experts are built {built}; "
                f"{detail}", module=rm.name, tensors=rm.tensors, error_text=text,
                hint=f"start SGLang with {flag} (a server flag), or store the shared "
                     "expert in the routed experts' format",
                assumptions=["shared-experts fusion at the default for " + mention(plan.target.resolved)
                             + f" on {plan.gpu}"],
                data={"fused_into": moe.name, "server_flag": flag})
