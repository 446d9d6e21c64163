"""Load simulation: how one framework release maps every checkpoint tensor to a runtime module,
decides per runtime module whether it is built quantized, and what loading each tensor into it does.

Everything release-specific comes from the target data (ckptlint/targets/data); this package only
interprets it, in stages:

0. ``startup``    — does the release load this architecture and quant config at all?
1. ``names``      — tensors -> runtime modules (renames, fused modules, FusedMoE, draft roles, kinds)
2. ``decisions``  — skip lists (``skiplists``) and per-module quantized/unquantized decisions, then
                    SGLang's shared-experts fusion (``fusion``)
3. ``layout``     — stored form vs. the built module: mismatches and layout issues per shard;
   ``kvcache``    — stored KV-cache scales: the loader's outcome for each, and the KV-cache dtype
4. ``placements`` — the assumed GPU and how TP/EP split each module

The result is one frozen ``Plan``, shared by every target-scoped rule and shown by ``ckptlint plan``.
Rules only read it.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ckptlint.deployment import default_hardware
from ckptlint.quant import parse_quant_config
from ckptlint.simulate.decisions import decide
from ckptlint.simulate.forms import module_groups, present_layers, stored_form, unreadable_shards
from ckptlint.simulate.fusion import shared_experts_fusion
from ckptlint.simulate.kvcache import kv_cache
from ckptlint.simulate.layout import (first_per_sig, fused_shared_expert, predict_all, quantized_layout_issues,
                                      runtime_float_dtype)
from ckptlint.simulate.model import (QUANT_SUFFIXES, Decision, LayoutIssue, Mismatch, Placement, Plan, RuntimeModule,
                                     Shard, SkipEntry, Stored)
from ckptlint.simulate.moe_fallback import moe_scheme_refusal
from ckptlint.simulate.names import build_modules, class_packed
from ckptlint.simulate.placements import assumed_gpu, module_placements
from ckptlint.simulate.renames import Renames
from ckptlint.simulate.startup import startup_verdict
from ckptlint.simulate.state import State, freeze
from ckptlint.userregex import RegexScope

if TYPE_CHECKING:
    from ckptlint.checkpoint import Checkpoint
    from ckptlint.deployment import Deployment
    from ckptlint.targets import Target

__all__ = ["QUANT_SUFFIXES", "Decision", "LayoutIssue", "Mismatch", "Placement", "Plan", "RuntimeModule", "Shard",
           "SkipEntry",
           "Stored", "module_groups", "present_layers", "simulate", "stored_form", "too_many_mtp_layers",
           "unreadable_shards", "MAX_LISTED_MTP_LAYERS"]

# MTP layers simulated at most: real models declare one to a few; a config that declares millions
# (or 10**30) still gets a plan, and the rules report the layers it lacks.
MAX_LISTED_MTP_LAYERS = 64


def too_many_mtp_layers(plan: Plan) -> bool:
    """The draft loader refuses the declared number of MTP layers (Draft.too_many_layers)."""
    d = plan.draft
    return d is not None and d.max_layers is not None and d.too_many_layers is not None \
        and plan.mtp_count > d.max_layers


def simulate(ckpt: Checkpoint, target: Target, deployment: Deployment, regexes: RegexScope | None = None) -> Plan:
    """The frozen Plan of ``target`` loading ``ckpt``. The config's regular expressions are matched in
    ``regexes`` (the check's scope, shared by its targets; None: one of this simulation's own); what
    it left undecided so far is the plan's ``undecided_regexes``."""
    if regexes is None:
        regexes = RegexScope()

    config = ckpt.config if isinstance(ckpt.config, dict) else {}
    archs = config.get("architectures")
    arch_name = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    quant, _ = parse_quant_config(ckpt.config if isinstance(ckpt.config, dict) else None, ckpt.hf_quant_config,
                                  regexes)
    arch = target.architecture(arch_name) if arch_name else None
    generic = False
    extracted = _extracted(target, arch_name, arch)
    if extracted is not None:
        arch = extracted.arch
    elif arch is None and arch_name is not None:
        arch = target.architecture("*")
        generic = arch is not None
    elif arch is not None and arch.generic:
        generic = True
    method = target.data.methods.get(quant.method_key) if quant else None
    plan = State(target=target, deployment=deployment, arch_name=arch_name, arch=arch, quant=quant, method=method,
                 generic=generic)
    if extracted is not None:
        plan.extracted = extracted.key
        plan.extracted_facts = tuple(extracted.extracted)
        plan.extracted_notes = tuple(extracted.notes)
        plan.hand_facts = tuple(sorted(k for k, v in extracted.provenance.items() if v == "hand"))
    startup_verdict(plan, config)
    if plan.unsupported is not None or plan.not_simulated is not None:
        plan.undecided_regexes = regexes.undecided()
        return freeze(plan)
    _mtp_and_deployment(plan, config)
    modules = _stages(ckpt, plan, config, regexes)
    plan.undecided_regexes = regexes.undecided()
    return freeze(plan, modules)


def _extracted(target: Target, arch_name: str | None, arch: Any):
    """The architecture simulated from the release's extracted class facts (targets.extracted_classes),
    where the hand-written data has no entry of its own for it (none, or a ``generic`` placeholder)."""
    if arch_name is None or (arch is not None and (not arch.generic or not arch.supported)):
        return None
    from ckptlint.targets.extracted_classes import extracted_model

    return extracted_model(target, arch_name)


def _mtp_and_deployment(plan: State, config: dict[str, Any]) -> None:
    """The MTP layers and speculative decoding, the assumed GPU, and the assumptions stated."""
    deployment, quant = plan.deployment, plan.quant
    nhl = config.get("num_hidden_layers")
    plan.num_hidden_layers = nhl if isinstance(nhl, int) and not isinstance(nhl, bool) and nhl >= 0 else None
    draft = plan.arch.draft
    nextn = 0
    if draft is not None:
        for key in draft.count_keys:
            v = config.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                nextn = plan.mtp_count = v
                plan.mtp_count_key = key
                break
    listed = min(nextn, MAX_LISTED_MTP_LAYERS)
    if draft is not None and draft.prefix and nextn:
        plan.mtp_layers = list(range(listed))  # local indices under the draft prefix
    elif plan.num_hidden_layers is not None and nextn:
        base = plan.num_hidden_layers
        if draft is not None and draft.single_layer_config_uses_layer0 and base == 1:
            base = 0
        plan.mtp_layers = [base + i for i in range(listed)]
    plan.speculative = deployment.speculative if deployment.speculative is not None else bool(plan.mtp_layers)
    if plan.speculative and not plan.mtp_layers:
        plan.speculative = False
    plan.draft = draft if plan.speculative else None
    scheme = quant.default_scheme.name if quant and quant.default_scheme else None
    plan.gpu, plan.platform = default_hardware(quant.method if quant else None, scheme, deployment.platform,
                                               deployment.gpu)
    plan.gpu_info = assumed_gpu(quant.method if quant else None, scheme, deployment)
    plan.gpu_arch = plan.gpu_info.architecture if plan.gpu_info is not None else None
    plan.deployment_text = deployment.describe(platform=plan.platform, gpu=plan.gpu, speculative=plan.speculative)
    plan.float_dtype = runtime_float_dtype(config)
    if plan.mtp_layers:
        plan.assumptions.append(
            "speculative decoding with the checkpoint's own MTP/NextN layer "
            + ("on (default when config.json declares one)" if deployment.speculative is None
               else ("on" if plan.speculative else "off (--no-speculative)")))


def _stages(ckpt: Checkpoint, plan: State, config: dict[str, Any], regexes: RegexScope) -> dict[str, RuntimeModule]:
    """Stages 1-4 on a target that can load the checkpoint: the finished runtime modules."""
    plan.class_packed = class_packed(plan.arch, config)
    plan.renames = Renames(plan.arch, plan.draft, plan.mtp_layers[0] if plan.draft is not None else None)
    build_modules(ckpt, plan, config)
    if plan.quant is not None and plan.method is not None:
        decide(plan, regexes)
        moe_scheme_refusal(plan)
        shared_experts_fusion(plan, config)
    plan.unreadable_shards = unreadable_shards(ckpt)
    plan.kv_cache = kv_cache(ckpt, plan)
    if plan.draft is not None:
        if plan.draft.prefix:  # Qwen-style `mtp.` prefix: the draft needs some tensor under it
            plan.present_layers = {0} if any(n.startswith(plan.draft.prefix) for n in ckpt.tensors) else set()
        else:
            plan.present_layers = present_layers(ckpt, plan.arch.layer_prefix)
    return _judged(plan, module_placements(plan, config))


def _judged(plan: State, placements: dict[str, Placement]) -> dict[str, RuntimeModule]:
    """Stage 3 on every module, and the frozen runtime modules."""
    memo: dict = {}
    fdt = plan.float_dtype
    out: dict[str, RuntimeModule] = {}
    modules = plan.modules
    for key, b in modules.items():
        firsts = first_per_sig(b.shards)
        d = b.decision
        mismatches = issues = fm = fl = ()
        if d is not None and not d.conflict:
            mismatches = tuple(predict_all(plan, b, fdt, firsts))
            if d.quantized:
                issues = tuple(quantized_layout_issues(plan, b, firsts, memo))
        if b.fused_into is not None:
            moe = modules[b.fused_into]
            if moe.decision is not None:
                bad, li = fused_shared_expert(plan, b, moe, fdt, memo)
                fm, fl = tuple(bad), tuple(li)
        out[key] = RuntimeModule(b.name, b.kind, b.loader, b.role, tuple(b.shards), d, b.fused_into,
                                 MappingProxyType(firsts), mismatches, issues, fm, fl, placements.get(key))
    return out
