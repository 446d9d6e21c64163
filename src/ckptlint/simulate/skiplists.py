"""Stage 2a, skip lists: the entries a target tests each module against, as it reads them.

The config's list under the first key the method reads (``exclude_keys``), rewritten the way the
framework rewrites it (the model's name mapper, ``model.`` variants, the draft's copy of
checkpoint-named entries), or inferred from the tensor dtypes where the method infers it; and the
list of quantized modules for methods that have one (``include_key``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ckptlint.simulate.names import fmt_mtp, map_substr, rename_entry, renamed
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
    if items:
        return items, False
    if not method.infer_include_from_dtypes:
        return None, False
    floats = set(method.include_float_dtypes)
    inferred = sorted({s.ckpt_module for rm in plan.modules.values() for s in rm.shards
                       if any(dt not in floats for _, dt, _ in s.stored.sig)})
    return (inferred or None), True


def exclude_lists(plan: State) -> None:
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

    main = [map_substr(e, arch.mapper_substr) for e in entries] if (method.apply_mapper and arch.mapper_substr) else list(entries)
    if method.apply_mapper and arch.rename:
        main = [rename_entry(e, arch.rename) for e in main]
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
        d_entries = [map_substr(e, draft.mapper_substr) for e in entries]
    else:
        d_entries = list(entries)
    copy = draft.exclude_copy
    if copy is not None and quant.method_key in copy.methods:
        lit = fmt_mtp(copy.prefix, {"mtp": plan.mtp_layers[0]})
        renames = [(re.compile(fmt_mtp(r.pattern, {"mtp": plan.mtp_layers[0]})), r.to) for r in draft.rename]
        extra: list[str] = []
        for e in entries:
            if e.startswith(lit):
                mapped = renamed(e, renames)
                extra.append(mapped)
                for needle, add in copy.add_if_contains.items():
                    if needle in mapped and add not in extra:
                        extra.append(add)
        d_entries += extra
    plan.exclude_draft = variants(d_entries)

