"""Load simulation: how one framework release maps every checkpoint tensor to a runtime module
and decides, per runtime module, whether it is built quantized.

Everything release-specific comes from the target data (ckptlint/targets/data); this module
only interprets it. The result is a ``Plan``, shared by every target-scoped rule and shown by
``ckptlint plan``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ckptlint.checkpoint import FLOAT_DTYPES, Checkpoint, TensorInfo
from ckptlint.deployment import Deployment
from ckptlint.matching import CompiledList, compile_list
from ckptlint.quant import QuantConfig, Scheme, parse_quant_config
from ckptlint.targets import Target

if TYPE_CHECKING:
    from ckptlint.targets.schema import Architecture, Draft, KindRule, MethodRules

QUANT_SUFFIXES = frozenset({
    "weight_scale", "weight_scale_inv", "weight_scale_2", "input_scale", "weight_packed",
    "qweight", "qzeros", "scales", "weight_zero_point", "weight_global_scale",
    "input_global_scale", "g_idx", "weight_shape",
})
WEIGHT_SUFFIXES = ("weight", "weight_packed", "qweight", "gate_up_proj_blocks", "gate_up_proj")


@dataclass(slots=True)
class Stored:
    """What the checkpoint holds for one checkpoint module, as its tensors' (suffix, dtype, shape)
    signature says. One object per distinct signature: the modules stored alike (thousands of
    experts) share it."""

    quantized: bool | None  # None: nothing weight-like stored
    weight: TensorInfo | None  # the weight tensor's suffix (as its name), dtype and shape; file ""
    scales: list[str]
    logical_k: int | None = None  # in-features, undoing packing
    logical_n: int | None = None
    sig: tuple = ()  # (suffix, dtype, shape) of every tensor: what layout verdicts depend on

    def describe(self) -> str:
        if self.weight is None:
            return "no weight"
        w = self.weight
        extra = f" + {', '.join(self.scales)}" if self.scales else ""
        return f"{w.dtype} {list(w.shape)}{extra}"


class Shard(NamedTuple):
    """One checkpoint module as a part of a runtime module (a named tuple: built in bulk)."""

    ckpt_module: str  # checkpoint module path (tensor name without parameter suffix)
    query: str  # the name the framework tests in its skip list for this shard
    tensors: list[TensorInfo]
    stored: Stored
    expert: int | None = None
    proj: str | None = None


@dataclass(slots=True)
class Decision:
    quantized: bool
    reason: str
    entry: str | None = None  # the skip-list entry that matched
    scheme: Scheme | None = None
    forced_draft: bool = False
    error: str | None = None  # construction-time error text (e.g. mixed fused shards)
    error_consequence: str | None = None
    conflict: bool = False  # the skip list treats the shards of this fused module differently


@dataclass(slots=True)
class RuntimeModule:
    name: str
    kind: str
    loader: str | None
    role: str  # "main" | "draft"
    shards: list[Shard] = field(default_factory=list)
    decision: Decision | None = None
    fused_into: str | None = None  # shared expert loaded into this FusedMoE (shared-experts fusion)
    # (number of shards, ckptlint.predict.first_per_sig of them): computed once for all the rules
    firsts: tuple[int, dict] | None = field(default=None, repr=False, compare=False)

    @property
    def tensors(self) -> list[str]:
        return [t.name for s in self.shards for t in s.tensors]


@dataclass
class Plan:
    target: Target
    arch_name: str | None
    arch: Architecture | None
    quant: QuantConfig | None
    method: MethodRules | None
    modules: dict[str, RuntimeModule] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)  # tensor -> why the target ignores it
    num_hidden_layers: int | None = None
    mtp_layers: list[int] = field(default_factory=list)  # the first MAX_LISTED_MTP_LAYERS of them
    mtp_count: int = 0  # MTP layers config.json declares (its count key)
    mtp_count_key: str | None = None
    speculative: bool = False
    draft: Draft | None = None
    exclude_key: str | None = None
    exclude_main: list[str] = field(default_factory=list)
    exclude_entries: list[str] = field(default_factory=list)  # the skip list as the config writes it
    include: list[str] | None = None  # MethodRules.include_key's list (None: every layer is quantized)
    include_inferred: bool = False
    exclude_draft: list[str] = field(default_factory=list)
    whole_draft_excluded: str | None = None
    assumptions: list[str] = field(default_factory=list)
    unsupported: str | None = None  # why the framework release cannot load the checkpoint at all
    unsupported_error: str | None = None  # the error it prints then, where the data knows it
    not_simulated: str | None = None  # why ckptlint has no simulation for it (no data: not a verdict)
    gpu: str | None = None
    platform: str | None = None
    deployment_text: str | None = None
    generic: bool = False  # simulated with the generic architecture rules
    gpu_arch: str | None = None  # architecture of the assumed GPU (gpus.toml), e.g. "sm100"
    fusion: bool = False  # SGLang shared-experts fusion active
    fusion_reason: str | None = None  # why it is on or off
    cache: dict[str, Any] = field(default_factory=dict, repr=False)  # memoised per-plan verdicts

    @property
    def simulated(self) -> bool:
        return self.unsupported is None and self.not_simulated is None and self.arch is not None


# ---------------------------------------------------------------------------------------------
_WEIGHT_RANK = {s: i for i, s in enumerate(WEIGHT_SUFFIXES)}


def stored_form(sig: tuple) -> tuple[Stored, bool]:
    """The stored form of a module whose tensors have this (suffix, dtype, shape) signature (in
    checkpoint order), and whether it has a matrix; computed once per distinct signature."""
    form = _FORMS.get(sig)
    if form is not None:
        return form
    weight: int | None = None
    rank = len(WEIGHT_SUFFIXES)
    scales: list[str] = []
    sc: tuple[int, ...] | None = None  # the weight_scale's shape
    for i, (suffix, _, shape) in enumerate(sig):
        r = _WEIGHT_RANK.get(suffix)
        if r is not None and r < rank:
            weight, rank = i, r
        elif suffix in QUANT_SUFFIXES or suffix.endswith("_scales"):
            scales.append(suffix)
            if suffix == "weight_scale":
                sc = shape
    scales.sort()
    has_matrix = bool(scales) or any(len(shape) >= 2 for _, _, shape in sig)
    if weight is None:
        stored = Stored(None, None, scales, sig=sig)
    else:
        suffix, dtype, shape = sig[weight]
        quantized = (dtype not in FLOAT_DTYPES) or bool(scales)
        n = k = None
        if len(shape) >= 2:
            n, k = shape[-2], shape[-1]
            if quantized and dtype in ("U8", "I8") and sc is not None:
                # FP4 packed two per byte: the weight_scale grid tells K (group 16 or 32).
                if len(sc) == len(shape) and sc[-1] > 0 and (sc[-1] * 16 == 2 * shape[-1] or sc[-1] * 32 == 2 * shape[-1]):
                    k = 2 * shape[-1]
        stored = Stored(quantized, TensorInfo(suffix, dtype, shape, ""), scales, logical_k=k, logical_n=n, sig=sig)
    form = _FORMS[sig] = (stored, has_matrix)
    return form


_FORMS: dict[tuple, tuple[Stored, bool]] = {}
# The same forms keyed by a flat (suffix, dtype, shape, suffix, dtype, shape) tuple for modules of one
# or two tensors (module_groups' fast path); any other signature is its own key.
_FLAT_FORMS: dict[tuple, tuple[Stored, bool]] = {}


def _fmt(template: str, mapping: dict[str, Any]) -> str:
    return template.replace("{mtp}", str(mapping["mtp"])) if "{mtp}" in template else template


def _rename_entry(entry: str, rules) -> str:
    # A name mapper rewrites plain names; it cannot translate `re:` or glob entries (vLLM #28072).
    if entry.startswith("re:") or "*" in entry:
        return entry
    for r in rules:
        new, n = re.subn(r.pattern, r.to, entry, count=1)
        if n:
            return new
    return entry


def _map_substr(entry: str, mapper: dict[str, str]) -> str:
    # WeightsMapper semantics: at most one substring rule (longest key first), first occurrence.
    for key in sorted(mapper, key=len, reverse=True):
        if key in entry:
            return entry.replace(key, mapper[key], 1)
    return entry


class _Namer:
    """Checkpoint module path -> (runtime module, shard query, expert, proj) for one role."""

    def __init__(self, arch: Architecture, config: dict[str, Any]):
        self.experts = re.compile(arch.experts) if arch.experts else None
        self.stacked: dict[str, str] = {}
        for st in arch.stacked:
            if st.requires_config and config.get(st.requires_config) in (None, 0, False):
                continue
            for shard in st.shards:
                self.stacked[shard] = st.fused

    def name(self, module: str) -> tuple[str, str, int | None, str | None]:
        if self.experts is not None:
            m = self.experts.match(module)
            if m:
                moe, expert, proj = _expert_fields(m)
                return moe, module, expert, proj
        head, _, last = module.rpartition(".")
        fused = self.stacked.get(last)
        if fused is not None:
            return f"{head}.{fused}" if head else fused, module, None, last
        return module, module, None, None


def _expert_fields(m: re.Match[str]) -> tuple[str, int, str]:
    """(FusedMoE module, expert index, projection) from a match of an architecture's expert rule."""
    moe, expert, proj = m.group("moe", "expert", "proj")
    return moe, int(expert), proj


def _renamed(name: str, rules: list[tuple[re.Pattern[str], str]]) -> str:
    """``name`` after the first rule whose pattern it contains (a name mapper applies one)."""
    for rx, to in rules:
        if rx.search(name):
            return rx.sub(to, name, count=1)
    return name


def _kind(name: str, rules: list[tuple[re.Pattern[str], KindRule]], method: str | None,
          has_matrix: bool) -> tuple[str, str | None]:
    for rx, r in rules:
        if r.methods is not None and method not in r.methods:
            continue
        if rx.search(name):
            return r.kind, r.loader
    return ("linear" if has_matrix else "other"), None


# MTP layers simulated at most: real models declare one to a few; a config that declares millions
# (or 10**30) still gets a plan, and the rules report the layers it lacks.
MAX_LISTED_MTP_LAYERS = 64


def _refusal(quant: QuantConfig, method: MethodRules) -> tuple[str, str] | None:
    """(what, error) of the first MethodRules.refusals entry the quant config meets, or None."""
    raw = quant.raw if isinstance(quant.raw, dict) else {}

    def is_(value: Any, want: Any) -> bool:
        return value in want if isinstance(want, list) else value == want

    def values(cfg: dict[str, Any], r: Any, key: str) -> list[Any]:
        if "." not in key:
            return [cfg.get(key, r.defaults.get(key))]
        level: list[Any] = [cfg]
        for part in key.split("."):
            nxt: list[Any] = []
            for node in level:
                if isinstance(node, dict):
                    nxt += list(node.values()) if part == "*" else [node[part]] if part in node else []
            level = nxt
        return level

    def meets(cfg: dict[str, Any], r: Any) -> bool:
        def has(k: str, want: Any) -> bool:
            return any(is_(v, want) for v in values(cfg, r, k))
        return all(has(k, v) for k, v in r.all.items()) and not any(has(k, v) for k, v in r.none.items())

    def fill(text: str, r: Any, cfg: dict[str, Any], pattern: str | None = None) -> str:
        def one(m: re.Match[str]) -> str:
            k = m.group(1)
            if k == "pattern" and pattern is not None:
                return repr(pattern)
            return str(cfg[k]) if k in cfg else str(r.defaults[k]) if k in r.defaults else m.group(0)
        return re.sub(r"\{(\w+)\}", one, text)

    def describe(cfg: dict[str, Any], r: Any) -> str:
        out = []
        for k in [*r.all, *r.none]:
            vs = values(cfg, r, k)
            out.append(f"{k}={vs[0] if len(vs) == 1 else vs!r}")
        return ", ".join(out)

    for r in method.refusals:
        if meets(raw, r):
            return describe(raw, r), fill(r.error, r, raw)
        dyn = raw.get("dynamic") if r.dynamic else None
        for pattern, over in (dyn.items() if isinstance(dyn, dict) else ()):
            if isinstance(pattern, str) and not pattern.startswith("-:") and isinstance(over, dict):
                merged = {**raw, **over}
                if meets(merged, r):
                    return (f"`dynamic` rule {pattern!r} sets {describe(merged, r)}",
                            fill(r.error_dynamic or r.error, r, merged, pattern))
    return None


def too_many_mtp_layers(plan: Plan) -> bool:
    """The draft loader refuses the declared number of MTP layers (Draft.too_many_layers)."""
    d = plan.draft
    return d is not None and d.max_layers is not None and d.too_many_layers is not None \
        and plan.mtp_count > d.max_layers


def simulate(ckpt: Checkpoint, target: Target, deployment: Deployment) -> Plan:
    config = ckpt.config if isinstance(ckpt.config, dict) else {}
    archs = config.get("architectures")
    arch_name = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    quant, _ = parse_quant_config(ckpt.config if isinstance(ckpt.config, dict) else None,
                                          ckpt.hf_quant_config)
    arch = target.architecture(arch_name) if arch_name else None
    generic = False
    if arch is None and arch_name is not None:
        arch = target.architecture("*")
        generic = arch is not None
    method = target.data.methods.get(quant.method_key) if quant else None
    plan = Plan(target, arch_name, arch, quant, method)
    plan.generic = generic
    what = (quant.method if quant.method_key == quant.method else f"{quant.method} ({quant.method_key})") if quant else None
    if quant is not None and method is not None and not method.supported:
        plan.unsupported = f"{target.resolved} does not support quantization method {what}" + (
            f": {method.note}" if method.note else "")
        return plan
    refused = _refusal(quant, method) if quant is not None and method is not None else None
    if refused is not None:
        plan.unsupported, plan.unsupported_error = (
            f"{target.resolved} refuses this {what} config at start-up, before any weight is loaded: {refused[0]}",
            refused[1])
        return plan
    if quant is not None and method is not None and quant.source_file in method.rejected_in:
        plan.unsupported_error = method.rejected_in[quant.source_file]
        plan.unsupported = (f"{target.resolved} refuses quantization method {what} as {quant.source_file} declares it, "
                            "at start-up, before any weight is loaded" + (f" ({method.note})" if method.note else ""))
        return plan
    if arch is not None and not arch.supported:
        plan.unsupported = f"{target.resolved} has no model class for architecture {arch_name}"
        return plan
    if arch_name is None:
        plan.not_simulated = "config.json names no architecture (`architectures`)"
        return plan
    if arch is None:
        plan.not_simulated = (f"ckptlint has no {target.framework} loading data for architecture {arch_name}; "
                              "the load was not simulated")
        return plan
    if quant is not None and method is not None and not method.simulated:
        plan.not_simulated = f"{target.resolved} supports {what}, but ckptlint does not simulate it" + (
            f" ({method.note})" if method.note else "")
        return plan
    if quant is not None and method is None:
        plan.not_simulated = (f"ckptlint has no {target.resolved} data for quantization method {what}; "
                              "the load was not simulated")
        return plan

    nhl = config.get("num_hidden_layers")
    plan.num_hidden_layers = nhl if isinstance(nhl, int) and not isinstance(nhl, bool) and nhl >= 0 else None
    draft = arch.draft
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
    from ckptlint.deployment import default_hardware

    scheme = quant.default_scheme.name if quant and quant.default_scheme else None
    plan.gpu, plan.platform = default_hardware(quant.method if quant else None, scheme, deployment.platform,
                                               deployment.gpu)
    plan.gpu_arch = _gpu_arch(quant.method if quant else None, scheme, deployment)
    plan.deployment_text = deployment.describe(platform=plan.platform, gpu=plan.gpu, speculative=plan.speculative)
    if plan.mtp_layers:
        plan.assumptions.append(
            "speculative decoding with the checkpoint's own MTP/NextN layer "
            + ("on (default when config.json declares one)" if deployment.speculative is None
               else ("on" if plan.speculative else "off (--no-speculative)")))

    _build_modules(ckpt, plan, config)
    if quant is not None and method is not None:
        _decide(plan, config)
        _shared_experts_fusion(plan, config, deployment)
    return plan


def _gpu_arch(method: str | None, scheme: str | None, deployment: Deployment) -> str | None:
    from ckptlint.deployment import default_gpu_key
    from ckptlint.hardware import get_gpu

    key = default_gpu_key(method, scheme, deployment.platform, deployment.gpu)
    gpu = get_gpu(key) if key else None
    return gpu.architecture if gpu is not None else None


def _shared_experts_fusion(plan: Plan, config: dict[str, Any], deployment: Deployment) -> None:
    """SGLang's shared-experts fusion decision (target data `shared_experts_fusion`), then mark every
    main-model shared-expert module as loaded into its layer's FusedMoE."""
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
        reason = "--disable-shared-experts-fusion"
    elif rules.architecture is not None and archs[0] != rules.architecture:
        reason = f"config.json architectures[0] is not {rules.architecture}"
    elif rules.routed_counts and routed not in rules.routed_counts:
        reason = f"{rules.routed_key}={routed} is not one of {rules.routed_counts}"
    elif rules.shared_count is not None and shared != rules.shared_count:
        reason = f"{rules.shared_key}={shared} is not {rules.shared_count}"
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
    if reason is None and method in rules.quant_gate:
        reason = _quant_gate(plan, rules, method)
    plan.fusion = reason is None
    plan.fusion_reason = reason or (f"on by default for {archs[0]} ({plan.target.resolved}, {plan.gpu})")
    if not plan.fusion:
        return
    mark = "." + rules.shared_module + "."
    for rm in plan.modules.values():
        if rm.role == "main" and mark in rm.name + ".":
            moe = rm.name.split(mark)[0] + ".mlp.experts"
            if moe in plan.modules:
                rm.fused_into = moe


def _off_scheme(plan: Plan, rules: Any) -> str | None:
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


def _quant_gate(plan: Plan, rules: Any, method: str) -> str | None:
    """can_fuse_shared_expert() of the quant config (sglang-loading.md §2.5). Quark refuses when an
    exclude entry's text names a shared expert (a substring test, not a resolution of modules; the
    draft entries of ``rules.quark_gate_exempt`` do not count) or, where ``rules.quark_gate_schemes``
    says it finds them, when the shared and routed experts use different schemes; ModelOpt NVFP4
    (0.5.21+) when an `exclude_modules` entry names a shared expert."""
    mark = "." + rules.shared_module + "."
    if method == "quark":
        exempt = [re.compile(_fmt(p, {"mtp": layer})) for p in rules.quark_gate_exempt
                  for layer in (plan.mtp_layers if "{mtp}" in p else [None])]
        hit = next((e for e in plan.exclude_entries if _names_shared_expert(e, rules)
                    and not any(rx.search(e) for rx in exempt)), None)
        if hit is not None:
            return f"Quark can_fuse_shared_expert: exclude entry `{hit}` names a shared expert"
        if rules.quark_gate_schemes:
            for rm in plan.modules.values():
                if rm.role == "main" and mark in rm.name + "." and rm.decision is not None and rm.decision.quantized:
                    moe = plan.modules.get(rm.name.split(mark)[0] + ".mlp.experts")
                    if moe is not None and moe.decision is not None and moe.decision.scheme != rm.decision.scheme:
                        return "Quark can_fuse_shared_expert: shared and routed experts use different schemes"
        return None
    if method == "modelopt_fp4":
        hit = next((e for e in plan.exclude_main if _names_shared_expert(e, rules)), None)
        return f"ModelOpt can_fuse_shared_expert: exclude entry `{hit}` names a shared expert" if hit else None
    return None


def _names_shared_expert(entry: str, rules: Any) -> bool:
    return rules.gate_entry_word in entry and rules.gate_entry_not not in entry


def _build_modules(ckpt: Checkpoint, plan: Plan, config: dict[str, Any]) -> None:
    arch = plan.arch
    assert arch is not None
    namer = _Namer(arch, config)
    method_name = plan.quant.method_key if plan.quant else None
    mtp = set(plan.mtp_layers)
    nhl = plan.num_hidden_layers
    draft = plan.draft
    main_kinds = [(re.compile(r.pattern), r) for r in arch.kinds]
    draft_kinds = [(re.compile(r.pattern), r) for r in draft.kinds] + main_kinds if draft else main_kinds
    renames = [(re.compile(_fmt(r.pattern, {"mtp": plan.mtp_layers[0]})), r.to) for r in draft.rename] if draft else []
    arch_renames = [(re.compile(r.pattern), r.to) for r in arch.rename]
    modules = plan.modules
    named: dict[str, tuple[str, str, int | None, str | None]] = ckpt.cache.setdefault(
        ("namer", arch.experts, tuple(sorted(namer.stacked.items()))), {})
    draft_prefix = arch.draft.prefix if arch.draft is not None else None

    def one(module: str, tensors: list[TensorInfo], stored: Stored, has_matrix: bool, layer: int | None) -> None:
        """One checkpoint module whose role this target decides (draft, dropped or extra)."""
        role = "main"
        if draft_prefix and (module + ".").startswith(draft_prefix):
            if draft is None:
                for t in tensors:
                    plan.dropped[t.name] = "MTP weights are not loaded with speculative decoding off"
                return
            role = "draft"
        elif layer is not None and layer in mtp and not draft_prefix:
            if draft is None:
                for t in tensors:
                    plan.dropped[t.name] = "MTP layer weights are not loaded with speculative decoding off"
                return
            role = "draft"
        elif layer is not None and nhl is not None and layer >= nhl:
            role = "extra"
        name = module
        if role != "draft" and arch_renames:
            name = _renamed(name, arch_renames)
        if role == "draft":
            keep = _fmt(draft.keep_prefix, {"mtp": layer})
            if not (module + ".").startswith(keep):
                return
            hit = next((d for d in draft.drop if d in module), None)
            if hit is not None:
                for t in tensors:
                    plan.dropped[t.name] = f"the draft loader drops `{hit}` weights (shared with the target model)"
                return
            name = _renamed(name, renames)
        hit = named.get(name)
        if hit is None:
            hit = named[name] = namer.name(name)
        runtime, query, expert, proj = hit
        key = runtime
        other = modules.get(runtime)
        if other is not None and other.role != role and "draft" in (role, other.role):
            # The draft reuses a main-model prefix (SGLang's Qwen3-Next draft builds model.layers.0):
            # keep both, the draft's under "<name>@draft".
            if role == "draft":
                key = runtime + "@draft"
            else:
                modules[runtime + "@draft"] = modules.pop(runtime)
        rm = modules.get(key)
        if rm is None:
            kind, loader = _kind(runtime, draft_kinds if role == "draft" else main_kinds, method_name, has_matrix)
            rm = modules[key] = RuntimeModule(runtime, kind, loader, role)
        rm.shards.append(Shard(module, query, tensors, stored, expert, proj))

    # Most modules of a MoE checkpoint are experts of main-model layers, whose runtime module and
    # shard do not depend on the target beyond its expert naming rule: those come precomputed,
    # one run of consecutive modules per runtime module (e.g. one layer's 768 expert projections).
    for runtime, layer, in_draft_prefix, shards, groups in _expert_runs(ckpt, arch, draft_prefix):
        if runtime is None or in_draft_prefix or (layer is not None and (
                (layer in mtp and not draft_prefix) or (nhl is not None and layer >= nhl))):
            for g in groups:
                one(*g)
            continue
        rm = modules.get(runtime)
        if rm is not None and rm.role == "draft":
            modules[runtime + "@draft"] = modules.pop(runtime)
            rm = None
        if rm is None:
            kind, loader = _kind(runtime, main_kinds, method_name, groups[0][3])
            rm = modules[runtime] = RuntimeModule(runtime, kind, loader, "main")
        rm.shards.extend(shards)


Run = tuple["str | None", "int | None", bool, list[Shard], list[tuple[str, list[TensorInfo], Stored, bool, "int | None"]]]


def _expert_runs(ckpt: Checkpoint, arch: Architecture, draft_prefix: str | None) -> list[Run]:
    """The checkpoint's modules in checkpoint order, cut into runs: (runtime, layer, in draft
    prefix, shards, module groups). Consecutive expert modules (``arch.experts``, after the
    architecture's renames) of one FusedMoE module, layer and draft-prefix membership form one
    run with their shards built as main-model shards; every other module is in a run whose
    runtime is None, named per target. Depends only on the expert rule, renames and prefixes, so
    targets that share them (the SGLang and vLLM classes of one model usually do) share the work."""
    key = ("runs", arch.layer_prefix, arch.experts, tuple((r.pattern, r.to) for r in arch.rename), draft_prefix)
    runs = ckpt.cache.get(key)
    if runs is not None:
        return runs
    runs = []
    arch_renames = [(re.compile(r.pattern), r.to) for r in arch.rename]
    rx = re.compile(arch.experts) if arch.experts else None
    match = rx.match if rx is not None else None
    # the (moe, expert, proj) groups: all of the match's groups, in that order, in the usual rule
    plain = rx is not None and rx.groups == 3 and rx.groupindex == {"moe": 1, "expert": 2, "proj": 3}
    ints: dict[str, int] = {}  # expert index text -> int (a few hundred distinct values)
    last_rt: str | None = None
    last_layer: int | None = None
    last_dp = False
    cur_shards: list[Shard] = []
    cur_groups: list = []
    new_shard = tuple.__new__
    started = False
    for g in module_groups(ckpt, arch.layer_prefix):
        module = g[0]
        layer = g[4]
        name = _renamed(module, arch_renames) if arch_renames else module
        m = match(name) if match is not None else None
        in_dp = draft_prefix is not None and (module + ".").startswith(draft_prefix)
        if m is not None:
            moe, e, proj = m.groups() if plain else m.group("moe", "expert", "proj")
            expert = ints.get(e)
            if expert is None:
                expert = ints[e] = int(e)
        else:
            moe = None
        if moe != last_rt or layer != last_layer or in_dp != last_dp or not started:
            cur_shards, cur_groups = [], []
            runs.append((moe, layer, in_dp, cur_shards, cur_groups))
            last_rt, last_layer, last_dp, started = moe, layer, in_dp, True
        if m is not None:
            cur_shards.append(new_shard(Shard, (module, name, g[1], g[2], expert, proj)))
        cur_groups.append(g)
    ckpt.cache[key] = runs
    return runs


def module_groups(ckpt: Checkpoint, prefix: str) -> list[tuple[str, list[TensorInfo], Stored, bool, int | None]]:
    """Checkpoint modules (tensor name minus its last component) with their tensors, stored form,
    whether they hold a matrix, and layer index under ``prefix``: the same for every target, so
    computed once per checkpoint (per layer prefix)."""
    key = ("groups", prefix)
    out = ckpt.cache.get(key)
    if out is not None:
        return out
    groups: dict[str, list] = {}
    get = groups.get
    for name, t in ckpt.tensors.items():
        module, _, suffix = name.rpartition(".")
        g = get(module)
        if g is None:
            groups[module] = [suffix, t]
        else:
            g += (suffix, t)
    out = []
    append = out.append
    flat_get = _FLAT_FORMS.get
    n = len(prefix)
    last_head: str | None = None
    last_layer: int | None = None
    for module, g in groups.items():
        # (suffix, tensor) pairs, flat; one or two tensors is the common case, looked up by a flat
        # key (one tuple, not three) in a cache in front of the signature's
        if len(g) == 4:
            s0, t0, s1, t1 = g
            flat: tuple = (s0, t0[1], t0[2], s1, t1[1], t1[2])
            tensors = [t0, t1]
        elif len(g) == 2:
            s0, t0 = g
            flat = (s0, t0[1], t0[2])
            tensors = [t0]
        else:
            tensors = g[1::2]
            flat = tuple(zip(g[0::2], [t.dtype for t in tensors], [t.shape for t in tensors]))
        form = flat_get(flat)
        if form is None:
            if len(g) == 4:
                sig: tuple = ((s0, t0[1], t0[2]), (s1, t1[1], t1[2]))
            elif len(g) == 2:
                sig = ((s0, t0[1], t0[2]),)
            else:
                sig = flat
            form = _FLAT_FORMS[flat] = stored_form(sig)
        layer = None
        if module.startswith(prefix):
            # the component after the prefix; consecutive modules are mostly of one layer
            j = module.find(".", n)
            head = module[n:j] if j >= 0 else module[n:]
            if head == last_head:
                layer = last_layer
            elif head.isdecimal():  # (what int() reads: isdigit() also takes '²')
                layer = last_layer = int(head)
                last_head = head
        append((module, tensors, form[0], form[1], layer))
    ckpt.cache[key] = out
    return out


def unreadable_shards(ckpt: Checkpoint) -> set[str]:
    """Shard files whose tensors are unknown: listed, but the header could not be read (LFS pointers,
    broken or missing files). Rules that conclude from an absence stay quiet when there are any."""
    bad = {f.file for f in ckpt.issues
           if f.consequence.value == "load-error" and f.code[:2] in ("SF", "IX") and f.file}
    return {name for name, info in ckpt.shards.items() if info.n_tensors == 0 and name in bad} | \
        {f.data.get("shard") for f in ckpt.issues if f.code == "IX204" and f.data.get("shard")}


def present_layers(ckpt: Checkpoint, prefix: str) -> set[int]:
    """Layer indices that have at least one tensor (for the MTP completeness rule); once per checkpoint."""
    key = ("layers", prefix)
    out = ckpt.cache.get(key)
    if out is None:
        out = ckpt.cache[key] = {g[4] for g in module_groups(ckpt, prefix)}
        out.discard(None)
    return out


def _include_list(plan: Plan, quant: QuantConfig, method: MethodRules) -> tuple[list[str] | None, bool]:
    """The list of quantized modules (MethodRules.include_key), flattened; when it is empty or absent
    and the method infers it: every checkpoint module holding a tensor of another dtype than
    ``include_float_dtypes``.
    None: no list, every layer is quantized (an empty inferred list means the same)."""
    raw = quant.raw.get(method.include_key) if method.include_key else None
    items: list[str] = []
    if isinstance(raw, list):
        for v in raw:
            items += [x for x in v if isinstance(x, str)] if isinstance(v, list) else [v] if isinstance(v, str) else []
    if items:
        return items, False
    if not method.infer_include_from_dtypes:
        return None, False
    floats = set(method.include_float_dtypes)
    inferred = sorted({s.ckpt_module for rm in plan.modules.values() for s in rm.shards
                       if any(dt not in floats for _, dt, _ in s.stored.sig)})
    return (inferred or None), True


def _exclude_lists(plan: Plan) -> None:
    quant, method, arch = plan.quant, plan.method, plan.arch
    assert quant and method and arch
    keys = method.exclude_keys_hf_quant_config if quant.source_file == "hf_quant_config.json" and \
        method.exclude_keys_hf_quant_config else method.exclude_keys
    plan.exclude_key, entries = quant.exclude_list(keys)
    plan.exclude_entries = list(entries)

    def variants(items: list[str]) -> list[str]:
        if not method.model_prefix_variants:
            return items
        out = []
        for e in items:
            out.append(e)
            out.append(e[len("model."):] if e.startswith("model.") else "model." + e)
        return out

    main = [_map_substr(e, arch.mapper_substr) for e in entries] if (method.apply_mapper and arch.mapper_substr) else list(entries)
    if method.apply_mapper and arch.rename:
        main = [_rename_entry(e, arch.rename) for e in main]
    if not main and method.infer_skip_from_dtypes:
        # vLLM AWQ: an empty modules_to_not_convert is inferred from the checkpoint: every module
        # whose tensors are all floating point is skipped.
        main = sorted({s.ckpt_module for rm in plan.modules.values() for s in rm.shards
                       if s.stored.quantized is False})
    plan.exclude_main = variants(main)
    if method.include_key:
        plan.include, plan.include_inferred = _include_list(plan, quant, method)
    draft = plan.draft
    if draft is None:
        return
    if method.apply_mapper and draft.mapper_substr:
        d_entries = [_map_substr(e, draft.mapper_substr) for e in entries]
    else:
        d_entries = list(entries)
    copy = draft.exclude_copy
    if copy is not None and quant.method_key in copy.methods:
        lit = _fmt(copy.prefix, {"mtp": plan.mtp_layers[0]})
        renames = [(re.compile(_fmt(r.pattern, {"mtp": plan.mtp_layers[0]})), r.to) for r in draft.rename]
        extra: list[str] = []
        for e in entries:
            if e.startswith(lit):
                mapped = _renamed(e, renames)
                extra.append(mapped)
                for needle, add in copy.add_if_contains.items():
                    if needle in mapped and add not in extra:
                        extra.append(add)
        d_entries += extra
    plan.exclude_draft = variants(d_entries)


def _decide(plan: Plan, config: dict[str, Any]) -> None:
    quant, method, arch = plan.quant, plan.method, plan.arch
    assert quant and method and arch
    _exclude_lists(plan)
    main_list = compile_list(method.match, plan.exclude_main)
    draft_list = compile_list(method.match, plan.exclude_draft) if plan.draft else main_list
    packed = {} if method.no_packed_mapping else {**arch.packed_modules_mapping, **method.packed_extra}
    draft_packed = packed if plan.draft is None or plan.draft.packed_mapping else {}
    draft = plan.draft
    if draft is not None and draft.whole_draft_check and quant.method_key in draft.whole_draft_check.methods:
        probe = _fmt(draft.whole_draft_check.probe, {"mtp": plan.mtp_layers[0]})
        if method.apply_mapper and draft.mapper_substr:
            probe = _map_substr(probe, draft.mapper_substr)
        hit = draft_list.first_match(probe)
        if hit is not None:
            plan.whole_draft_excluded = f"the layer prefix `{probe}` matches exclude entry `{hit}`"
    forced = draft is not None and quant.method_key in draft.quant_none_for
    if draft is not None and quant.method_key in draft.quant_none_if_entry:
        rx = re.compile(draft.quant_none_if_entry[quant.method_key])
        forced = forced or any(rx.search(e) for e in plan.exclude_main)
    for rm in plan.modules.values():
        if rm.role == "extra":
            continue
        rm.decision = _decide_module(rm, plan, method, quant, main_list if rm.role != "draft" else draft_list,
                                     packed if rm.role != "draft" else draft_packed, forced)


def _decide_module(rm: RuntimeModule, plan: Plan, method: MethodRules, quant: QuantConfig,
                   excl: CompiledList, packed: dict[str, list[str]], forced: bool) -> Decision:
    mname = quant.method_key
    if rm.kind not in method.quantizes:
        why = {"other": "not a quantizable layer", "plain": "built as a plain nn.Linear (never quantized)",
               "router": "router/gate layer built without a quant config",
               "embedding": "embeddings are not quantized", "lm_head": f"{mname} does not quantize the LM head"}
        return Decision(False, why.get(rm.kind, f"{rm.kind} layers are not quantized by {mname}"))
    if rm.role == "draft" and forced:
        return Decision(False, plan.draft.quant_none_note or f"the draft model is built unquantized for {mname}",
                        forced_draft=True)
    if rm.role == "draft" and plan.whole_draft_excluded:
        return Decision(False, f"whole draft built unquantized: {plan.whole_draft_excluded}")
    entry, how, error = _excluded(rm, method, excl, packed)
    if error:
        return _shards_disagree(rm, method, error, ", ".join(error))
    if entry is not None:
        return Decision(False, f"excluded: entry `{entry}` matches {how} ({method.match})", entry=entry)
    last = rm.name.rpartition(".")[2]
    shards = [rm.name.replace(last, s) for s in packed[last]] if last in packed else None
    if plan.include is not None and rm.kind in method.include_kinds:
        where = (f"{method.include_key} (inferred from the tensor dtypes)" if plan.include_inferred
                 else method.include_key)
        names = shards or [rm.name]
        ins = [any(e in n for e in plan.include) for n in names]
        if len(set(ins)) > 1:
            return _shards_disagree(rm, method, names, ", ".join(
                f"{n} ({'quantized' if i else 'not listed'})" for n, i in zip(names, ins)) + f" in {where}")
        if not ins[0]:
            return Decision(False, f"not listed in {where}: built unquantized")
    scheme = quant.scheme_for(rm.name, rm.kind, rm.loader, shards)
    if scheme is None:
        return Decision(False, "the quantization config assigns it no scheme (no target / layer entry matches)")
    return Decision(True, f"no {plan.exclude_key or 'skip-list'} entry matches under {method.match}; "
                    f"built {scheme.name}", scheme=scheme)


def _shards_disagree(rm: RuntimeModule, method: MethodRules, shards: list[str], detail: str) -> Decision:
    """A fused module whose shards the skip (or quantized-module) list treats differently: the
    framework's mixed-shards error, if the data knows it."""
    err = method.moe_mixed if rm.kind == "moe" and method.moe_mixed else method.mixed_shards
    short = [s.split(" ")[0].rpartition(".")[2] for s in shards]
    text = (err.error or "").format(module=rm.name, shards=repr(short)) if err else None
    return Decision(False, f"fused shards disagree: {detail}", error=text or None,
                    error_consequence=err.consequence if err else "load-error", conflict=True)


def _excluded(rm: RuntimeModule, method: MethodRules, excl: CompiledList,
              packed: dict[str, list[str]]) -> tuple[str | None, str, list[str] | None]:
    name = rm.name
    last = name.rpartition(".")[2]
    if method.fused_tail_names:
        for e in excl.entries:
            tail = e.rpartition(".")[2]
            if tail in method.fused_tail_names and tail in last:
                return e, f"the fused-name tail `{tail}`", None
    if rm.kind == "moe":
        if method.moe == "never":
            return None, "", None
        hit = excl.first_match(name)
        if hit is not None:
            return hit, f"`{name}`", None
        if method.moe == "children":
            start = name + "."
            hit = next((e for e in excl.entries if not e.startswith("re:") and e.startswith(start)), None)
            if hit is not None:
                return hit, f"a child of `{name}` (per-expert entry)", None
        elif method.moe == "reversed_substring":
            hit = next((e for e in excl.entries if "experts" in e and name in e), None)
            if hit is not None:
                return hit, f"`{name}` as a substring of the entry", None
        elif method.moe == "expert0":
            projs = ("gate_proj", "up_proj", "down_proj")
            if method.expert0_model_names and rm.shards and rm.shards[0].proj:
                own = sorted({s.proj for s in rm.shards if s.proj})
                projs = tuple(own) if own else projs
            shards = [f"{name}.0.{p}" for p in projs]
            hits = [excl.first_match(s) for s in shards]
            if all(hits):
                return hits[0], "expert 0's projections", None
            if any(hits):
                return None, "", [s for s, h in zip(shards, hits) if h is None]
        return None, "", None
    if last in packed:
        if method.direct_fused_match:
            hit = excl.first_match(name)
            if hit is not None:
                return hit, f"the fused name `{name}`", None
        shards = [name.replace(last, s) for s in packed[last]]
        hits = [excl.first_match(s) for s in shards]
        if all(h is not None for h in hits):
            return hits[0], f"every shard of `{name}`", None
        if any(h is not None for h in hits):
            return None, "", [f"{s} ({'excluded' if h else 'quantized'})" for s, h in zip(shards, hits)]
        return None, "", None
    hit = excl.first_match(name)
    return (hit, f"`{name}`", None) if hit is not None else (None, "", None)
