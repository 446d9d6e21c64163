"""Stage 2c, shared-experts fusion: SGLang loads a layer's shared expert as one more routed expert of
its FusedMoE when the model, GPU, flags and quant config allow it (target data
``shared_experts_fusion``); the shared-expert modules are then marked ``fused_into`` that FusedMoE.
"""

from __future__ import annotations

import re
from typing import Any

from ckptlint.simulate.names import fmt_mtp
from ckptlint.simulate.state import State


def shared_experts_fusion(plan: State, config: dict[str, Any]) -> None:
    """SGLang's shared-experts fusion decision (target data `shared_experts_fusion`), then mark every
    main-model shared-expert module as loaded into its layer's FusedMoE."""
    deployment = plan.deployment
    rules = plan.arch.shared_experts_fusion if plan.arch else None
    if rules is None:
        return
    method = plan.quant.method_key if plan.quant else "none"
    archs = config.get("architectures") or [None]
    routed = config.get(rules.routed_key)
    shared = config.get(rules.shared_key, rules.shared_default)
    unequal = len({repr(config.get(k)) for k in rules.equal_keys}) > 1
    reason = None
    if deployment.shared_experts_fusion is False:
        reason = rules.disable_flag
    elif rules.architecture is not None and archs[0] != rules.architecture:
        reason = f"config.json architectures[0] is not {rules.architecture}"
    elif rules.routed_counts and routed not in rules.routed_counts:
        reason = f"{rules.routed_key}={routed} is not one of {rules.routed_counts}"
    elif rules.shared_count is not None and shared != rules.shared_count:
        reason = f"{rules.shared_key}={shared} is not {rules.shared_count}"
        if rules.shared_count_assert and shared and _fusion_allowed(plan, rules):
            plan.unsupported = (f"{plan.target.resolved} asserts while building the model: shared-experts fusion "
                                f"takes {rules.shared_count} shared expert and config.json sets {rules.shared_key}={shared} "
                                f"({rules.disable_flag} avoids it)")
            plan.unsupported_error = rules.shared_count_error
    elif unequal:
        reason = " != ".join(f"{k}={config.get(k)}" for k in rules.equal_keys)
    elif str(routed) in rules.only_methods_for_count and method not in rules.only_methods_for_count[str(routed)]:
        reason = f"{routed} routed experts fuse only with {', '.join(rules.only_methods_for_count[str(routed)])}"
    elif method in rules.off_methods:
        reason = f"not for {method}"
    elif (hit := _off_scheme(plan, rules)) is not None:
        reason = f"not for {hit} Linear layers ({method})"
    elif plan.platform not in rules.platforms:
        reason = f"not on {plan.platform} in this release"
    elif deployment.ep > 1 and plan.platform not in rules.ep_platforms:
        reason = f"expert parallelism (EP {deployment.ep}) on {plan.platform}"
    else:
        for off in rules.runner_off:
            if plan.gpu_arch in off.gpu_archs and method in off.methods:
                reason = off.reason
                break
    if reason is None and method in rules.quant_gates:
        reason = _quant_gate(plan, rules, rules.quant_gates[method])
    plan.fusion = reason is None
    plan.fusion_reason = reason or (f"on by default for {archs[0]} ({plan.target.resolved}, {plan.gpu})")
    if not plan.fusion:
        return
    mark = "." + rules.shared_module + "."
    for rm in plan.modules.values():
        if rm.role == "main" and mark in rm.name + ".":
            moe = rm.name.split(mark)[0] + "." + rules.routed_module
            if moe in plan.modules:
                rm.fused_into = moe


def _off_scheme(plan: State, rules: Any) -> str | None:
    """The name of the quant config's Linear scheme if it is one of ``rules.off_schemes``."""
    if not rules.off_schemes or plan.quant is None:
        return None
    s = plan.quant.scheme_for("", "linear", "Linear")
    if s is None:
        return None
    for o in rules.off_schemes:
        if o.name == s.name and (o.symmetric is None or o.symmetric == bool(s.symmetric)):
            return s.name
    return None


def _quant_gate(plan: State, rules: Any, gate: Any) -> str | None:
    """The quant config's can_fuse_shared_expert() (target data ``QuantGate``): it refuses when a skip-list
    entry's text names a shared expert (the draft entries of ``gate.exempt`` do not count) or, with
    ``gate.compare_schemes``, when the shared and routed experts are built with different schemes."""
    mark = "." + rules.shared_module + "."
    exempt = [re.compile(fmt_mtp(p, {"mtp": layer})) for p in gate.exempt
              for layer in (plan.mtp_layers if "{mtp}" in p else [None])]
    entries = plan.exclude_entries if gate.entries == "written" else plan.exclude_main
    hit = next((e for e in entries if gate.entry_word in e and gate.entry_not not in e
                and not any(rx.search(e) for rx in exempt)), None)
    if hit is not None:
        return f"{gate.who} can_fuse_shared_expert: exclude entry `{hit}` names a shared expert"
    if gate.compare_schemes:
        for rm in plan.modules.values():
            if rm.role == "main" and mark in rm.name + "." and rm.decision is not None and rm.decision.quantized:
                moe = plan.modules.get(rm.name.split(mark)[0] + "." + rules.routed_module)
                if moe is not None and moe.decision is not None and moe.decision.scheme != rm.decision.scheme:
                    return f"{gate.who} can_fuse_shared_expert: shared and routed experts use different schemes"
    return None


def _fusion_allowed(plan: State, rules: Any) -> bool:
    """Whether nothing but the shared-expert count stops fusion (the platform, flags and EP allow it)."""
    d = plan.deployment
    return plan.platform in rules.platforms and (d.ep <= 1 or plan.platform in rules.ep_platforms)
