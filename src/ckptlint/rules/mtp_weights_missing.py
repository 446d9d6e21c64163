from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.rules.base import Rule, RuleContext
from ckptlint.simulate import too_many_mtp_layers


class MtpWeightsMissing(Rule):
    """
    ## What it does
    Flags a checkpoint whose `config.json` declares MTP/NextN layers (`num_nextn_predict_layers`
    ≥ 1, …) while no tensor of the MTP layer (`model.layers.{num_hidden_layers}.*`) is stored.

    ## Why is this bad?
    With speculative decoding on, the draft model loads the MTP layer from the checkpoint.
    vLLM 0.33 refuses to start for DeepSeek-family MTP ("MTP speculative decoding layer 78
    weights missing from checkpoint"); SGLang and older vLLM load nothing, silently: the draft
    runs on uninitialised memory and no draft token is ever accepted — the deployment is
    slower than without speculation. Where the target builds the draft's linears with a post-load
    sentinel (vLLM 0.30+ fills ModelOpt NVFP4 `weight_scale` with NaN and raises for a layer whose
    scale was never loaded), a missing NVFP4 draft is a load error there too, even for drafts whose
    loader has no missing-weights check (GLM-4.x `Glm4MoeMTP`, Qwen3-Next MTP).

    ## Example
    A GLM-5 NVFP4 export with `num_hidden_layers: 78`, `num_nextn_predict_layers: 1` and no
    `model.layers.78.*` tensors.

    The finding exists only with MTP speculative decoding on, which ckptlint assumes by default
    whenever `config.json` declares MTP layers (the message says so); `--no-speculative` checks the
    deployment without it, where the main model skips the MTP names and loads.

    ## How to fix
    Export the MTP layer with the checkpoint (quantizers often drop it), or set
    `num_nextn_predict_layers` to 0 and serve without MTP speculative decoding.
    """

    code = "MT701"
    name = "mtp-weights-missing"
    summary = "config.json declares MTP layers that the checkpoint does not store"
    consequences = (Consequence.LOAD_ERROR, Consequence.DEGRADED)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.simulated or not plan.speculative or plan.draft is None:
            return
        if too_many_mtp_layers(plan):
            return  # the draft loader refuses the layer count before loading anything (MT703)
        prefix = plan.draft.prefix or plan.arch.layer_prefix
        present = plan.present_layers
        if plan.unreadable_shards:
            return  # weights may sit in a shard whose header could not be read: the SF finding says so
        if plan.draft.prefix and present:  # Qwen-style `mtp.` prefix: the draft needs some tensor under it
            return
        outcome = plan.draft.missing_weights
        sentinel = None
        if outcome.consequence != "load-error" and plan.draft_unloaded is not None:
            # the draft's linears are built with a post-load sentinel check (vLLM 0.30+ ModelOpt NVFP4:
            # weight_scale initialised to NaN) and nothing writes them: the check refuses the load
            name, decision = plan.draft_unloaded
            ms = plan.method.missing_scale
            sentinel = (name, decision, ms)
        for layer in (plan.mtp_layers[:1] if plan.draft.prefix else plan.mtp_layers):
            if layer in present:
                continue
            where = f"{prefix}*" if plan.draft.prefix else f"{prefix}{layer}.*"
            key = next((k for k in plan.draft.count_keys if k in (ctx.checkpoint.config or {})), "MTP")
            assumed = ("with MTP speculative decoding on (ckptlint's default when config.json declares MTP layers; "
                       "--no-speculative removes this finding)" if ctx.deployment.speculative is None
                       else "with MTP speculative decoding on (--speculative)")
            if sentinel is not None:
                name, decision, ms = sentinel
                cons, error = Consequence.LOAD_ERROR, (ms.error or "").format(module=name) or None
                what = (f"builds the draft's `{name}` {decision.scheme.name} and, after loading, refuses a layer "
                        f"whose scale was never written ({ms.note or 'post-load check'})"
                        + f"; {plan.draft.cls} itself has no missing-weights check")
            else:
                cons, error = Consequence(outcome.consequence), (outcome.error or "").format(layer=layer) or None
                what = (("refuses to load" if outcome.consequence == "load-error" else
                         "loads nothing for the draft, silently") + (f": {outcome.note}" if outcome.note else ""))
            msg = (f"Only {assumed}: config.json declares {key}={ctx.checkpoint.config.get(key)} but the checkpoint "
                   f"stores no `{where}` tensors; " + mention(plan.target.resolved) + f" ({plan.draft.cls}) {what}"
                   + ". Without speculative decoding the main model skips the MTP names and loads.")
            yield self.finding(
                ctx, cons, msg, module=where.rstrip(".*") or where,
                file="config.json", error_text=error,
                hint=f"export the `{where}` MTP weights, or set {key} to 0 / serve with --no-speculative",
                assumptions=list(plan.assumptions), data={"layer": layer})
