"""Stage 2a, skip lists: the entries a target tests each module against, as it reads them.

The config's list under the first key the method reads (``exclude_keys``), rewritten the way the
framework rewrites it (the model's name mapper, ``model.`` variants, the draft's copy of
checkpoint-named entries), or inferred from the tensor dtypes where the method infers it; and the
list of quantized modules for methods that have one (``include_key``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptlint.simulate.model import SkipEntry
from ckptlint.simulate.renames import fmt_mtp
from ckptlint.simulate.state import State

if TYPE_CHECKING:
    from ckptlint.quant import QuantConfig
    from ckptlint.targets.schema import MethodRules


def _include_list(plan: State, quant: QuantConfig, method: MethodRules) -> tuple[list[str] | None, bool]:
    """The list of quantized modules (MethodRules.include_key), flattened; when it is empty or absent
    and the method infers it: every checkpoint module holding a tensor of another dtype than
    ``include_float_dtypes``.
    None: no list, every layer is quantized (an empty inferred list means the same)."""
    raw = quant.raw.get(method.include_key) if method.include_key else None
    items: list[str] = []
    if isinstance(raw, list):
        for v in raw:
            items += [x for x in v if isinstance(x, str)] if isinstance(v, list) else [v] if isinstance(v, str) else []
    rename = plan.renames.entries if method.include_apply_mapper else None
    if items:
        return [rename(e) if rename else e for e in items], False
    if not method.infer_include_from_dtypes:
        return None, False
    floats = set(method.include_float_dtypes)
    # inferred from checkpoint names, then name-mapped like a given list (the inference runs first)
    inferred = sorted({rename(s.ckpt_module) if rename else s.ckpt_module for rm in plan.modules.values()
                       for s in rm.shards if any(dt not in floats for _, dt, _ in s.stored.sig)})
    return (inferred or None), True


def _where(quant: QuantConfig, key: str | None) -> str:
    """The config key a list is read from, as the user finds it."""
    section = "quantization" if quant.source_file == "hf_quant_config.json" else "quantization_config"
    if key == "dynamic":
        return f"{quant.source_file} {section}.dynamic (rules in order: `-:` excludes, `+:` keeps)"
    return f"{quant.source_file} {section}.{key}" if key else quant.source_file


def exclude_lists(plan: State) -> None:
    quant, method, arch = plan.quant, plan.method, plan.arch
    assert quant and method and arch
    keys = method.exclude_keys_hf_quant_config if quant.source_file == "hf_quant_config.json" and \
        method.exclude_keys_hf_quant_config else method.exclude_keys
    plan.exclude_key, entries = quant.exclude_list(keys)
    plan.exclude_entries = list(entries)
    where = _where(quant, plan.exclude_key)
    origins: list[SkipEntry] = []
    mapper = f"{arch_label(plan)}'s name mapper, applied to the skip list"

    def variants(items: list[SkipEntry], applies_to: str) -> list[SkipEntry]:
        if not method.model_prefix_variants:
            return items
        out = []
        for e in items:
            out.append(e)
            other = e.text[len("model."):] if e.text.startswith("model.") else "model." + e.text
            out.append(SkipEntry(other, "framework", f"{quant.method_key} is_layer_skipped also tests the entry "
                                 "with `model.` added or removed", e.original or e.text, applies_to))
        return out

    main: list[SkipEntry] = []
    rename = plan.renames.skip_list if method.apply_mapper else None
    for e in entries:
        text = rename(e) if rename else e
        main.append(SkipEntry(e, "config", where) if text == e else SkipEntry(text, "framework", mapper, e))
    if not main and method.infer_skip_from_dtypes:
        # vLLM AWQ: an empty modules_to_not_convert is inferred from the checkpoint: every module
        # whose tensors are all floating point is skipped.
        how = (f"inferred from the safetensors dtypes (the {plan.exclude_key or 'skip list'} is empty: modules whose "
               "tensors are all floating point)")
        rename = plan.renames.entries if method.apply_mapper else None
        main = [SkipEntry(m, "inferred", how) for m in sorted(
            {rename(s.ckpt_module) if rename else s.ckpt_module for rm in plan.modules.values() for s in rm.shards
             if s.stored.quantized is False})]
    main = variants(main, "main")
    plan.exclude_main = [e.text for e in main]
    origins += main
    if method.include_key:
        plan.include, plan.include_inferred = _include_list(plan, quant, method)
        how = (f"inferred from the safetensors dtypes ({method.include_key} is absent: modules holding a "
               "non-float tensor)" if plan.include_inferred else _where(quant, method.include_key))
        origins += [SkipEntry(e, "inferred" if plan.include_inferred else "config", how, None, "include")
                    for e in plan.include or []]
    draft = plan.draft
    if draft is not None:
        origins += _draft_list(plan, entries, where, variants)
    plan.skip_entries = origins


def arch_label(plan: State) -> str:
    return plan.arch_name or "the model class"


def _draft_list(plan: State, entries: list[str], where: str, variants) -> list[SkipEntry]:
    """The draft model's skip list: the config's entries through the draft's own mapper, plus the
    draft class's copies of checkpoint-named entries (Draft.exclude_copy)."""
    quant, method, draft = plan.quant, plan.method, plan.draft
    d_entries: list[SkipEntry] = []
    rename = plan.renames.draft_skip_list if method.apply_mapper else None
    for e in entries:
        text = rename(e) if rename else e
        d_entries.append(SkipEntry(e, "config", where, None, "draft") if text == e else
                         SkipEntry(text, "framework", f"{draft.cls}'s name mapper, applied to the skip list", e, "draft"))
    copy = draft.exclude_copy
    if copy is not None and quant.method_key in copy.methods:
        lit = fmt_mtp(copy.prefix, {"mtp": plan.mtp_layers[0]})
        renamed = plan.renames.draft_modules
        how = f"{draft.cls} copies `{lit}` entries under the draft's module names"
        seen: set[str] = set()
        for e in entries:
            if e.startswith(lit):
                mapped = renamed(e)
                d_entries.append(SkipEntry(mapped, "framework", how, e, "draft"))
                for needle, add in copy.add_if_contains.items():
                    if needle in mapped and add not in seen:
                        seen.add(add)
                        d_entries.append(SkipEntry(add, "framework", how + f" (and `{add}` for an excluded expert)",
                                                   e, "draft"))
    d_entries = variants(d_entries, "draft")
    plan.exclude_draft = [e.text for e in d_entries]
    return d_entries
