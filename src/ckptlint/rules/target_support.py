from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding, Severity, mention
from ckptlint.rules.base import Rule, RuleContext


class TargetUnsupported(Rule):
    """
    ## What it does
    Reports, once per target, that the selected framework release has no model class for the
    checkpoint's architecture, does not support its quantization method at all, or refuses the
    quantization config as written (target data: `refusals`, `rejected_in`), so no per-module
    simulation was made. Architectures and methods the hand-written data does not name are looked up
    in the release's own model and quantization-method registries, extracted from its wheel: a name
    the release does not register is refused with the release's own text (for an architecture,
    assuming the installed transformers library has no class of that name for the release's
    Transformers-backend fallback). Not when no listed architecture is registered but config.json's
    `auto_map` names the remote-code class that fallback takes (vLLM: any key starting with
    `AutoModel`; SGLang: the key `AutoModel` itself; extracted from each wheel): the server loads
    that code instead of refusing, and the load is not simulated (TG603), whether or not the
    hand-written data marks the architecture unsupported.

    ## Why is this bad?
    The server refuses to start ("Model architectures [...] are not supported", "Unknown
    quantization method", "Unsupported quantization config: bits=3, sym=True"), whatever the
    tensors hold.

    ## Example
    `--target vllm==0.33.0` on a checkpoint with `quant_method: "bitsandbytes"` (removed from
    vLLM's quantization registry), or on a GPTQ act-order export (`desc_act: true`,
    `group_size: 128`), which vLLM 0.30+ no longer loads; any target, for a config.json whose
    `architectures` has a typo (`GlmMoeDsaXForCausalLM`).

    ## How to fix
    Serve the checkpoint with a framework release that supports the architecture and method, or
    re-export it in a supported format (for GPTQ act-order: static activation ordering or
    `desc_act: false`); correct a misspelt `architectures` entry.
    """

    code = "TG601"
    name = "target-unsupported"
    summary = "The target release cannot load this architecture or quant method at all"
    consequences = (Consequence.LOAD_ERROR,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or plan.unsupported is None or ctx.checkpoint.config is None:
            return
        hint = "pick a target that supports it (`ckptlint targets`)"
        # the text report says the refusal once for every release that refuses the same way, then what
        # each release prints (its own text, from its wheel)
        yield self.finding(ctx, Consequence.LOAD_ERROR, plan.unsupported, file="config.json",
                           error_text=plan.unsupported_error, hint=hint,
                           family="config.json: " + plan.unsupported, family_hint=hint, brief="")


class NotSimulated(Rule):
    """
    ## What it does
    Says, once per target, that ckptlint has no loading data for the checkpoint's architecture or
    quantization method on that release, so only the checks that need no simulation ran (a method the
    release registers, per the registry extracted from its wheel, that the target data does not
    model; an architecture the release does not register whose config.json `auto_map` names remote
    code that the release's Transformers backend loads, which ckptlint cannot read).

    ## Why is this bad?
    It is not a defect of the checkpoint: it means "no verdict" for that target. A clean report
    must not be read as "this will load" there.

    ## Example
    A `Qwen2ForCausalLM` checkpoint checked against a release whose data file has no entry for it;
    a `KimiK2ForCausalLM` config.json with `auto_map.AutoModel` (remote code).

    ## How to fix
    Nothing to fix in the checkpoint; check against a target that has data for it, or add the
    architecture to the target data.
    """

    code = "TG603"
    name = "not-simulated"
    summary = "ckptlint has no loading data for this architecture or quant method on the target"
    consequences = (Consequence.HYGIENE,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or plan.not_simulated is None or ctx.checkpoint.config is None:
            return
        yield self.finding(ctx, Consequence.HYGIENE, plan.not_simulated, file="config.json")


class GenericSimulation(Rule):
    """
    ## What it does
    Says, once per target, that the checkpoint's architecture, which the release registers, has no
    entry of its own in the target data and no class facts extracted from the release's wheel (TG605
    covers those), so its load was simulated with the generic rules alone (q/k/v -> `qkv_proj`,
    gate/up -> `gate_up_proj`, experts -> one FusedMoE, routers and norms unquantized).

    ## Why is this bad?
    Model-specific renames, fused modules and loader strictness are not known: findings are
    likely but not certain, and a clean result is weaker evidence than for a known architecture.

    ## Example
    A `LlamaBidirectionalModel` checkpoint on `vllm==0.33.0`: the release registers the class, but
    builds its base class at run time, so nothing about it could be extracted.

    ## How to fix
    Nothing to fix in the checkpoint; add the architecture to the target data to get exact
    predictions.
    """

    code = "TG604"
    name = "generic-simulation"
    summary = "The architecture was simulated with the generic loading rules"
    consequences = (Consequence.HYGIENE,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.generic or not plan.simulated:
            return
        yield self.finding(ctx, Consequence.HYGIENE,
                           mention(plan.target.resolved) + f" data has no entry for {plan.arch_name}: simulated with the "
                           "generic loading rules (fused q/k/v and gate/up, experts, routers and norms unquantized)",
                           file="config.json")


class TargetNotVerified(Rule):
    """
    ## What it does
    Says when the requested framework version is not one whose source ckptlint's target data
    was transcribed from: a version between two verified releases is checked with the older one
    (info); a version newer than every verified release is checked with the newest (warning).

    ## Why is this bad?
    Behaviour that changed in an unverified release is not reflected in the prediction.

    ## Example
    `--target sglang==0.5.17` is checked with the rules of `sglang==0.5.16`.

    ## How to fix
    Nothing to fix in the checkpoint; `ckptlint targets` lists the verified releases.
    """

    code = "TG602"
    name = "target-not-verified"
    summary = "The requested release is checked with the rules of a nearby verified release"
    consequences = (Consequence.HYGIENE,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        t = ctx.target
        if t is None or not t.note:
            return
        sev = Severity.WARNING if t.note_level == "warning" else Severity.INFO
        yield self.finding(ctx, Consequence.HYGIENE, t.note, severity=sev,
                           data={"resolved": t.resolved})
