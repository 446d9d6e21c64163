"""How a method builds FusedMoE layers beyond its skip list: a FusedMoE that the method's Marlin MoE
kernel cannot serve falls back to another MoE method before the skip list is consulted (target data
``MethodRules.moe_fallback``: vLLM's GPTQ sends it to MoeWNA16, built quantized with an empty skip
list, so a `dynamic` `-:` rule never excludes it); and MoE schemes a release refuses to build
(``MethodRules.moe_scheme_refusals``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptlint.findings import mention
from ckptlint.simulate.model import Decision
from ckptlint.simulate.state import Building, State

if TYPE_CHECKING:
    from ckptlint.quant import QuantConfig


def moe_fallback(rm: Building, plan: State, quant: QuantConfig) -> Decision | None:
    """The decision for a FusedMoE the fallback builds, or None when the Marlin path takes it."""
    fb = plan.method.moe_fallback
    if fb is None or rm.kind != "moe":
        return None
    why = _unsupported(rm, plan, quant, fb)
    if why is None:
        return None
    scheme = quant.scheme_for(rm.name, rm.kind, rm.loader)
    if scheme is None:
        return None
    return Decision(True, f"the Marlin MoE kernel does not take it ({why}): built {fb.method}, whose skip list is "
                    "empty, before any `dynamic` rule is consulted", scheme=scheme)


def _unsupported(rm: Building, plan: State, quant: QuantConfig, fb) -> str | None:
    raw = quant.raw if isinstance(quant.raw, dict) else {}
    bits, sym, group = raw.get("bits", 4), raw.get("sym", True), raw.get("group_size", 128)
    if fb.marlin_bits_sym and [bits, sym] not in [list(x) for x in fb.marlin_bits_sym]:
        return f"bits={bits}, sym={sym}: not a Marlin type, the plain GPTQ method serves the model"
    if plan.platform in fb.platforms:
        return f"no Marlin MoE on {plan.platform}"
    if group not in fb.group_sizes:
        return f"group size {group}"
    w13 = plan.arch.expert_w13
    hidden = next((s.stored.logical_k for s in rm.shards if s.proj in w13 and s.stored.logical_k), None)
    inter = next((s.stored.logical_n for s in rm.shards if s.proj in w13 and s.stored.logical_n), None)
    if hidden and hidden % fb.hidden_multiple:
        return f"hidden size {hidden} is not a multiple of {fb.hidden_multiple}"
    d = plan.deployment
    tp = max(1, d.tp // max(1, d.ep))
    if not inter or inter % tp:
        return None
    part = inter // tp
    padding = fb.tile_padding == "always" or (fb.tile_padding == "without_actorder" and not raw.get("desc_act"))
    if padding:
        if group > 0 and part % group:
            return f"intermediate size per partition {part} is not a multiple of the group size {group}"
    elif part % max(fb.inter_multiple_min, group):
        return (f"intermediate size per partition {part} is not a multiple of "
                f"{max(fb.inter_multiple_min, group)}")
    return None


def moe_scheme_refusal(plan: State) -> None:
    """Set ``plan.unsupported`` when a FusedMoE is built with a scheme the release refuses to build
    on the platform (e.g. SGLang compressed-tensors dynamic per-token INT8 MoE, NPU only)."""
    method = plan.method
    if method is None or not method.moe_scheme_refusals:
        return
    for rm in plan.modules.values():
        d = rm.decision
        if rm.kind != "moe" or d is None or not d.quantized or d.scheme is None:
            continue
        for r in method.moe_scheme_refusals:
            if d.scheme.name in r.schemes and plan.platform in r.platforms and \
                    (r.static_input is None or r.static_input == d.scheme.static_input):
                plan.unsupported = (mention(plan.target.resolved) + f" cannot build the FusedMoE `{rm.name}` with the "
                                    f"{d.scheme.name} scheme on {plan.platform}")
                plan.unsupported_error = r.error
                return
