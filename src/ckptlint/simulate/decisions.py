"""Stage 2b, decisions: whether the target builds each runtime module quantized, and why.

Interprets the method's rules of the target data (``MethodRules``): which module kinds it
quantizes, how an entry matches (``match``), how fused modules and FusedMoE modules are tested
(``packed_modules_mapping``, ``direct_fused_match``, ``moe``, ``fused_tail_names``), the draft's
own rules (forced unquantized, whole-draft exclusion) and the quantized-module list.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ckptlint.matching import CompiledList, compile_list, keeps_mode
from ckptlint.simulate.model import Decision
from ckptlint.simulate.moe_fallback import moe_fallback
from ckptlint.simulate.renames import fmt_mtp
from ckptlint.simulate.skiplists import exclude_lists
from ckptlint.simulate.state import Building, State

if TYPE_CHECKING:
    from ckptlint.quant import QuantConfig
    from ckptlint.targets.schema import MethodRules
    from ckptlint.userregex import RegexScope


def decide(plan: State, regexes: "RegexScope") -> None:
    """Every module's decision; the skip lists' config regexes are compiled in ``regexes`` (the check's)."""
    quant, method, arch = plan.quant, plan.method, plan.arch
    assert quant and method and arch
    exclude_lists(plan)
    main_list = compile_list(method.match, plan.exclude_main, regexes)
    draft_list = compile_list(method.match, plan.exclude_draft, regexes) if plan.draft else main_list
    # the class's mapping as this method sees it: without the entries added at construction when the
    # method copied an empty declared mapping before the model was built (MethodRules.construction_fill)
    sees_fill = method.construction_fill or arch.packed_modules_mapping or method.packed_extra
    cls_mapping = plan.class_packed if sees_fill else dict(arch.packed_modules_mapping)
    packed = plan.packed = {} if method.no_packed_mapping else {**cls_mapping, **method.packed_extra}
    draft_packed = packed if plan.draft is None or plan.draft.packed_mapping else {}
    skipped = method.layer_skipped
    if skipped is not None:
        # the shared skip test: the same entries under its own matching, with the class's packed mapping
        cls_packed = cls_mapping if skipped.class_mapping else {}
        main_skip = _Skipped(skipped, compile_list(skipped.match, plan.exclude_main, regexes), cls_packed)
        draft_skip = _Skipped(skipped, compile_list(skipped.match, plan.exclude_draft, regexes),
                              cls_packed if plan.draft.packed_mapping else {}) if plan.draft else main_skip
    draft = plan.draft
    if draft is not None and draft.whole_draft_check and quant.method_key in draft.whole_draft_check.methods:
        probe = fmt_mtp(draft.whole_draft_check.probe, {"mtp": plan.mtp_layers[0]})
        if method.apply_mapper and plan.renames.draft_skip_list:
            probe = plan.renames.draft_skip_list(probe)
        hit = draft_list.first_match(probe)
        if hit is not None:
            plan.whole_draft_excluded = f"the layer prefix `{probe}` matches exclude entry `{hit}`"
    # why the draft is built unquantized, if it is (None: it is not)
    forced: str | None = None
    if draft is not None and quant.method_key in draft.quant_none_for:
        forced = draft.quant_none_note or f"the draft model is built unquantized for {quant.method_key}"
    elif draft is not None and quant.method_key in draft.quant_none_if_entry:
        rx = re.compile(draft.quant_none_if_entry[quant.method_key])
        hit = next((e for e in plan.exclude_main if rx.search(e)), None)
        if hit is not None:
            forced = (draft.quant_none_entry_note or "the draft model is built unquantized because of the skip-list "
                      "entry `{entry}`").format(entry=hit)
    for rm in plan.modules.values():
        if rm.role == "extra":
            continue
        rm.decision = _decide_module(rm, plan, method, quant, main_list if rm.role != "draft" else draft_list,
                                     packed if rm.role != "draft" else draft_packed, forced,
                                     None if skipped is None else main_skip if rm.role != "draft" else draft_skip)
    ms = method.missing_scale
    if draft is not None and ms is not None and ms.consequence == "load-error" \
            and not any(rm.role == "draft" for rm in plan.modules.values()):
        for probe in _unstored_draft_linears(plan):
            d = _decide_module(probe, plan, method, quant, draft_list, draft_packed, forced,
                               None if skipped is None else draft_skip)
            if d.quantized:
                plan.draft_unloaded = (probe.name, d)
                break


def _unstored_draft_linears(plan: State):
    """The linears of an MTP layer the checkpoint does not store, under the names the draft builds them with:
    the main model's first decoder layer moved to the draft's layer (its checkpoint prefix, then the draft's
    renames), in the main model's order."""
    draft, arch = plan.draft, plan.arch
    first = f"{arch.layer_prefix}0."
    layer = plan.mtp_layers[0]
    target = draft.prefix + "layers.0." if draft.prefix else fmt_mtp(draft.keep_prefix, {"mtp": layer})
    renamed = plan.renames.draft_modules
    for rm in list(plan.modules.values()):
        if rm.role != "main" or rm.kind != "linear" or not rm.name.startswith(first):
            continue
        name = renamed(target + rm.name[len(first):])
        yield Building(name, rm.kind, rm.loader, "draft")


def _quant_named(rm: Building, plan: State) -> Building:
    """``rm`` under the quant-config prefix its class builds it with (Architecture.quant_rename), the name
    the method's lists and schemes are tested against; ``rm`` itself when that is its own name."""
    name = plan.renames.quant_name(rm.name, rm.role)
    if name == rm.name:
        return rm
    return Building(name, rm.kind, rm.loader, rm.role, rm.shards, None, rm.fused_into)


def _decide_module(rm: Building, plan: State, method: MethodRules, quant: QuantConfig,
                   excl: CompiledList, packed: dict[str, list[str]], forced: str | None,
                   skip: _Skipped | None = None) -> Decision:
    mname = quant.method_key
    if rm.kind not in method.quantizes:
        why = {"other": "not a quantizable layer", "plain": "built as a plain nn.Linear (never quantized)",
               "unquantized_linear": "the model class builds it without the quant config: never quantized",
               "router": "router/gate layer built without a quant config",
               "embedding": "embeddings are not quantized", "lm_head": f"{mname} does not quantize the LM head"}
        return Decision(False, why.get(rm.kind, f"{rm.kind} layers are not quantized by {mname}"))
    if rm.role == "draft" and forced:
        return Decision(False, forced, forced_draft=True)
    if rm.role == "draft" and plan.whole_draft_excluded:
        return Decision(False, f"whole draft built unquantized: {plan.whole_draft_excluded}")
    fallback = moe_fallback(rm, plan, quant) if method.moe_fallback is not None else None
    if fallback is not None:
        return fallback
    own = rm
    rm = _quant_named(rm, plan)
    built_as = (f" (the class builds `{own.name}` with the quant-config prefix `{rm.name}`, the name the "
                f"{plan.exclude_key or 'skip list'} is tested against)") if rm is not own else ""
    crash = _fused_tail_crash(rm, method, excl, skip) if method.fused_tail_parts else None
    if crash is not None:
        return crash
    entry, how, error = _excluded(rm, method, excl, packed, skip)
    if error:
        return _shards_disagree(rm, method, error, ", ".join(error))
    if entry is not None:
        mode = skip.rules.match if skip is not None and how.startswith(_SKIPPED) else method.match
        return Decision(False, f"excluded: entry `{entry}` matches {how} ({mode}){built_as}", entry=entry)
    last = rm.name.rpartition(".")[2]
    shards = [rm.name.replace(last, s) for s in packed[last]] if last in packed else None
    key = plan.exclude_key or "skip-list"
    if rm.kind == "moe" and method.moe == "never":
        why = f"{mname} never tests a FusedMoE against the {key} entries"
    else:
        # a rule that matched first and keeps the module (gptq_dynamic `+:`)
        kept = excl.first_rule(rm.name) if keeps_mode(method.match) else None
        why = (f"`{key}` rule `{kept}` matches `{rm.name}` first and keeps it quantized ({method.match})"
               if kept is not None else f"no {key} entry matches under {method.match}")
    why += built_as
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
    config = quant if rm.kind in method.dynamic_overrides else quant.base_config()
    scheme = config.scheme_for(rm.name, rm.kind, rm.loader, shards)
    if scheme is None:
        return Decision(False, "the quantization config assigns it no scheme (no target / layer entry matches)")
    if config is not quant:
        why += f" (its per-module overrides are not applied to a {rm.kind} layer)"
    return Decision(True, f"{why}; built {scheme.name}", scheme=scheme)


def _shards_disagree(rm: Building, method: MethodRules, shards: list[str], detail: str) -> Decision:
    """A fused module whose shards the skip (or quantized-module) list treats differently: the
    framework's mixed-shards error, if the data knows it."""
    err = method.moe_mixed if rm.kind == "moe" and method.moe_mixed else method.mixed_shards
    short = [s.split(" ")[0].rpartition(".")[2] for s in shards]
    text = (err.error or "").format(module=rm.name, shards=repr(short)) if err else None
    return Decision(False, f"fused shards disagree: {detail}", error=text or None,
                    error_consequence=err.consequence if err else "load-error", conflict=True)


class _Skipped:
    """MethodRules.layer_skipped with its compiled entries and the model class's packed mapping."""

    __slots__ = ("rules", "entries", "packed")

    def __init__(self, rules, entries: CompiledList, packed: dict[str, list[str]]):
        self.rules, self.entries, self.packed = rules, entries, packed


_SKIPPED = "is_layer_skipped: "


def _by_shards(name: str, last: str, shard_names, excl: CompiledList,
               how: str) -> tuple[str | None, str, list[str] | None]:
    """A fused module decided through its shards: all excluded (the first entry that matched), some
    (the shards and their states, for the mixed-shard error), or none."""
    # (every occurrence of the fused name is replaced: the frameworks build shard prefixes with
    # str.replace too, e.g. vLLM quantization/utils/quant_utils.py is_layer_skipped)
    shards = [name.replace(last, s) for s in shard_names]
    hits = [excl.first_match(s) for s in shards]
    if all(h is not None for h in hits):
        return hits[0], f"{how}every shard of `{name}`", None
    if any(h is not None for h in hits):
        return None, "", [f"{s} ({'excluded' if h else 'quantized'})" for s, h in zip(shards, hits)]
    return None, "", None


def _layer_skipped(name: str, skip: _Skipped) -> tuple[str | None, str, list[str] | None]:
    """The shared skip test (target data ``LayerSkipped``) on a non-MoE layer."""
    rules, excl = skip.rules, skip.entries
    last = name.rpartition(".")[2]
    mapping = skip.packed if last in skip.packed else rules.fallback_fused
    if last in mapping and rules.fused_name_first:
        hit = excl.first_match(name)
        if hit is not None:
            return hit, f"{_SKIPPED}the fused name `{name}`", None
    if last in mapping:
        return _by_shards(name, last, mapping[last], excl, _SKIPPED)
    hit = excl.first_match(name)
    how = f"{_SKIPPED}`{name}`"
    key = next((k for k in rules.all_listed if k in name), None)
    if key is not None:
        if hit is None and all(name.replace(key, s) in excl.entries for s in rules.all_listed[key]):
            hit = name.replace(key, rules.all_listed[key][0])
            how = f"{_SKIPPED}every part of `{key}` listed"
    elif rules.experts_word in name:
        rev = next((e for e in excl.entries if rules.experts_word in e and name in e), None)
        if rules.experts == "replace" or hit is None:
            hit, how = rev, f"{_SKIPPED}`{name}` as a substring of the entry"
    return hit, how, None


def _fused_tail_crash(rm: Building, method: MethodRules, excl: CompiledList,
                      skip: _Skipped | None) -> Decision | None:
    """The fused-name tail rule's component-count assertion (MethodRules.fused_tail_parts): entries are
    tried in written order, each by its own match first; the first tail hit whose entry or module prefix
    has another number of components stops start-up. Not reached when the shared skip test or an earlier
    entry already excluded the layer."""
    if rm.kind == "moe":
        return None
    if skip is not None and _layer_skipped(rm.name, skip)[0] is not None:
        return None
    parts = rm.name.split(".")
    for entry, pred in zip(excl.entries, excl.preds):
        if pred is not None and pred(rm.name):
            return None
        tail = entry.rpartition(".")[2]
        if tail in method.fused_tail_names and tail in parts[-1]:
            n = len(entry.split("."))
            if len(parts) == method.fused_tail_parts and n == method.fused_tail_parts:
                return None
            return Decision(False, f"the fused-name tail rule meets entry `{entry}` ({n} components) on `{rm.name}` "
                            f"({len(parts)} components) and asserts both have {method.fused_tail_parts}",
                            error=method.fused_tail_error, error_consequence="load-error", conflict=True)
    return None


def _fused_tail(method: MethodRules, excl: CompiledList, last: str) -> str | None:
    for e in excl.entries:
        tail = e.rpartition(".")[2]
        if tail in method.fused_tail_names and tail in last:
            return e
    return None


def _excluded(rm: Building, method: MethodRules, excl: CompiledList,
              packed: dict[str, list[str]], skip: _Skipped | None = None) -> tuple[str | None, str, list[str] | None]:
    name = rm.name
    last = name.rpartition(".")[2]
    if skip is not None and rm.kind != "moe":
        hit, how, error = _layer_skipped(name, skip)
        if hit is not None or error or not skip.rules.or_main:
            return hit, how, error
        # ... or the method's own test of the runtime name, fused names as they are
        tail = _fused_tail(method, excl, last) if method.fused_tail_names else None
        if tail is not None:
            return tail, f"the fused-name tail `{tail.rpartition('.')[2]}`", None
        hit = excl.first_match(name)
        return (hit, f"`{name}`", None) if hit is not None else (None, "", None)
    if method.fused_tail_names:
        tail = _fused_tail(method, excl, last)
        if tail is not None:
            return tail, f"the fused-name tail `{tail.rpartition('.')[2]}`", None
    if rm.kind == "moe":
        if method.moe == "never":
            return None, "", None
        # every mode but "expert0" tests the FusedMoE's own name first; "expert0" only expert 0's projections
        hit = excl.first_match(name) if method.moe != "expert0" else None
        if hit is not None:
            return hit, f"`{name}`", None
        if method.moe == "children":
            start = name + "."
            hit = next((e for e in excl.entries if not e.startswith("re:") and e.startswith(start)), None)
            if hit is not None:
                return hit, f"a child of `{name}` (per-expert entry)", None
        elif method.moe == "reversed_substring":
            hit = next((e for e in excl.entries if method.moe_entry_word in e and name in e), None)
            if hit is not None:
                return hit, f"`{name}` as a substring of the entry", None
        elif method.moe == "expert0":
            projs = tuple(method.expert0_projections)
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
    if last in packed and method.fused_shards:
        if method.direct_fused_match == "literal":
            hit = name if name in excl.entries else None
            if hit is not None:
                return hit, f"the fused name `{name}` (listed literally)", None
        elif method.direct_fused_match:
            hit = excl.first_match(name)
            if hit is not None:
                return hit, f"the fused name `{name}`", None
        return _by_shards(name, last, packed[last], excl, "")
    hit = excl.first_match(name)
    return (hit, f"`{name}`", None) if hit is not None else (None, "", None)