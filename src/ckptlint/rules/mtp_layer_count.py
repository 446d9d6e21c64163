from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.rules.base import Rule, RuleContext
from ckptlint.simulate import too_many_mtp_layers


class MtpLayerCountUnsupported(Rule):
    """
    ## What it does
    Flags a `config.json` that declares more MTP/NextN layers (`num_nextn_predict_layers`) than the
    target's draft model can load, when speculative decoding uses the checkpoint's MTP layers.

    ## Why is this bad?
    SGLang's NextN draft for the DeepSeek and GLM-4.x/GLM-5 families builds exactly one MTP layer:
    loading its weights asserts `num_nextn_predict_layers == 1` and the server stops with
    `AssertionError: Only 1 nextn layer is supported` before any draft weight is loaded. vLLM
    builds one draft layer per declared MTP layer and is not affected.

    ## Example
    A DeepSeek-V3 export with `num_hidden_layers: 61` and `num_nextn_predict_layers: 2` (layers 61
    and 62 stored), served with `--speculative-algorithm EAGLE` on SGLang.

    ## How to fix
    For SGLang, set `num_nextn_predict_layers` to 1: its draft then loads the first MTP layer
    (`model.layers.{num_hidden_layers}`). Or serve without MTP speculative decoding.
    """

    code = "MT703"
    name = "mtp-layer-count-unsupported"
    summary = "config.json declares more MTP layers than the target's draft model loads"
    consequences = (Consequence.LOAD_ERROR,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.simulated or not plan.speculative or not too_many_mtp_layers(plan):
            return
        d = plan.draft
        assert d is not None and d.too_many_layers is not None and d.max_layers is not None
        outcome = d.too_many_layers
        key = plan.mtp_count_key or "MTP layers"
        yield self.finding(
            ctx, Consequence(outcome.consequence),
            f"config.json declares {key}={plan.mtp_count} but " + mention(plan.target.resolved)
            + f" ({d.cls}) loads at most "
            f"{d.max_layers} MTP layer(s)" + (f": {outcome.note}" if outcome.note else ""),
            module=None, file="config.json", error_text=outcome.error,
            hint=f"set {key} to {d.max_layers} for {plan.target.framework} (its draft loads the first MTP layer), "
                 "or serve without MTP speculative decoding (--no-speculative)",
            assumptions=list(plan.assumptions), data={"declared": plan.mtp_count, "supported": d.max_layers})
