from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.simulate.layout import suggested_entries
from ckptlint.matching import compile_list
from ckptlint.rules.base import Rule, RuleContext


def _main_module_also_excluded(plan, rm, entries: list[str]) -> str | None:
    """A draft module whose skip-list entries would also exclude a main-model module that is built and
    stored quantized (a draft loaded under the main model's names, e.g. SGLang's Qwen3-Next draft):
    that main module's name, or None."""
    if rm.role != "draft" or not entries:
        return None
    matcher = compile_list(plan.method.match, entries)
    for other in plan.modules.values():
        d = other.decision
        if other.role == "main" and d is not None and d.quantized and not other.mismatches \
                and matcher.first_match(other.name) is not None:
            return other.name
    return None


class QuantizationMismatch(Rule):
    """
    ## What it does
    Simulates, for the selected framework release, which runtime module every checkpoint tensor
    is loaded into and whether that module is built quantized (using that release's own skip-list
    matching for the quant method), and flags every module whose stored form disagrees: an
    unquantized (BF16/F16/F32, no scales) weight loaded into a quantized module, or a quantized
    weight loaded into an unquantized one.

    ## Why is this bad?
    Frameworks decide quantization per module from `quantization_config` when they build the
    model, before reading any tensor. A BF16 weight in a 4-bit slot fails with a shape mismatch
    after minutes of loading; a BF16 weight in a same-shape FP8 slot, or an FP8 weight in a BF16
    slot whose scale is skipped, loads silently and produces garbage. The classic case: Quark
    lists a kept-in-BF16 MTP layer in `exclude` under its checkpoint names `model.layers.78.*`,
    while SGLang's NextN draft queries `model.decoder.*` and `model.eh_proj`.

    ## Example
    GLM-5.2 Quark MXFP4, `exclude` lists `model.layers.78.mlp.experts.0.gate_proj` …
    `model.layers.78.eh_proj`; SGLang 0.5.15 builds the draft's `model.decoder.mlp.experts` and
    `model.eh_proj` MXFP4 and fails with `The size of tensor a (3072) must match the size of
    tensor b (6144)`.

    ## How to fix
    Add the runtime names the finding lists to the skip list (keep the checkpoint names for the
    frameworks that use them), or store the module in the format the framework expects;
    `ckptlint plan` shows the decision and the entry that matched or failed to match.
    """

    code = "QD401"
    name = "quantization-mismatch"
    summary = "A module is built quantized but stored unquantized, or the reverse"
    consequences = (Consequence.LOAD_ERROR, Consequence.SILENT_CORRUPTION)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.simulated or plan.quant is None or plan.method is None:
            return
        raw_set = set(plan.exclude_entries)
        for rm in plan.modules.values():
            d = rm.decision
            if d is None or d.forced_draft or d.conflict or rm.role == "extra" or rm.fused_into:
                continue
            mismatches = rm.mismatches
            if not mismatches:
                continue
            first = mismatches[0]
            worst = Consequence.LOAD_ERROR if any(m.consequence is Consequence.LOAD_ERROR for m in mismatches) \
                else first.consequence
            tensors = [t.name for m in mismatches for t in m.shard.tensors]
            where = f"{rm.role} {rm.loader or rm.kind}".strip()
            key = plan.exclude_key or (plan.method.exclude_keys[0] if plan.method.exclude_keys else "exclude")
            if first.direction == "unquantized-into-quantized":
                ckpt_named = sorted({m.shard.ckpt_module for m in mismatches} & raw_set)
                qname = plan.renames.quant_name(rm.name, rm.role)
                why = f"no `{key}` entry matches `{qname}` under {plan.method.match} matching"
                if qname != rm.name:
                    why += (" (the quant-config prefix " + mention(plan.target.resolved)
                            + f" builds `{rm.name}` with, the name its "
                            f"`{key}` entries are tested against)")
                if ckpt_named:
                    why += (f"; the checkpoint-named entr{'y' if len(ckpt_named) == 1 else 'ies'} "
                            f"`{ckpt_named[0]}`{' …' if len(ckpt_named) > 1 else ''} do{'es' if len(ckpt_named) == 1 else ''} "
                            "not match the runtime name")
                msg = (f"`{rm.name}` ({where}) is built {d.scheme.name if d.scheme else 'quantized'} but the "
                       f"checkpoint stores it unquantized ({first.shard.stored.describe()}"
                       f"{f', and {len(mismatches) - 1} more checkpoint modules like it' if len(mismatches) > 1 else ''}): "
                       + why + f"; {first.detail}")
                adds, hint = _config_hint(plan, rm, key, ckpt_named)
                data = {"direction": first.direction, "scheme": d.scheme.name if d.scheme else None,
                        "failed_entries": ckpt_named[:50], "suggested_entries": adds}
                short = _short_forms(plan, rm, key, where, mismatches, ckpt_named, adds, hint) if adds else {}
                clash = _main_module_also_excluded(plan, rm, adds) if adds else None
                if clash is not None:
                    data["suggested_entries"] = []
                    data["not_fixable"] = (f"the draft loads this module under the main model's name: an entry that "
                                           f"excludes `{rm.name}` also excludes the main model's quantized `{clash}`")
                    short = {}
                    hint = (f"no `{key}` entry can exclude the draft's `{rm.name}` without also excluding the main "
                            f"model's quantized `{clash}`: store the MTP module quantized like the main model, or "
                            "serve without MTP speculative decoding (--no-speculative)")
            else:
                msg = (f"`{rm.name}` ({where}) is built unquantized ({d.reason}) but the checkpoint stores it "
                       f"quantized ({first.shard.stored.describe()}"
                       f"{f', and {len(mismatches) - 1} more checkpoint modules like it' if len(mismatches) > 1 else ''}); {first.detail}")
                hint = (f"remove `{d.entry}` from `quantization_config.{key}`, or store `{rm.name}` unquantized"
                        if d.entry else f"store `{rm.name}` unquantized: " + mention(plan.target.resolved)
                        + " never quantizes it")
                data = {"direction": first.direction, "matched_entry": d.entry}
                short = {}
            yield self.finding(ctx, worst, msg, module=rm.name, tensors=tensors,
                               file=first.shard.tensors[0].file if first.shard.tensors else None,
                               hint=hint, hint_note=KEEP_NOTE if hint and f"({KEEP_NOTE})" in hint else None,
                               error_text=first.error_text, assumptions=list(plan.assumptions) if rm.role == "draft" else [],
                               data=data, **short)


def _short_forms(plan, rm, key: str, where: str, mismatches, ckpt_named: list[str], adds: list[str],
                 hint: str) -> dict[str, str]:
    """The text report's family forms of an "unquantized into quantized" finding whose fix is the
    usual skip-list addition: the explanation its family shares, the shared fix, and this finding's own part
    (nothing is left out: module, loader, stored form, what the scheme allocates, the entries that
    failed and the names to add)."""
    d = rm.decision
    first = mismatches[0]
    prefix = "add the runtime name(s) "
    if not hint.startswith(prefix):
        return {}
    section = f"{_section(plan)}.{key}"
    stored = first.shard.stored.describe()
    detail = first.brief or first.detail
    own = f"`{rm.name}` ({where})"
    if stored not in detail:
        own += f", stored {stored}"
    if len(mismatches) > 1:
        own += f" (and {len(mismatches) - 1} more checkpoint modules like it)"
    own += f": {detail}"
    if ckpt_named:
        own += (f"; checkpoint entr{'y' if len(ckpt_named) == 1 else 'ies'} `{ckpt_named[0]}`"
                f"{' …' if len(ckpt_named) > 1 else ''}")
    if adds != [rm.name]:
        own += f"; add {', '.join(f'`{a}`' for a in adds)}"
    scheme = d.scheme.name if d.scheme else "quantized"
    return {"family": (f"built {scheme} but stored unquantized: no `{key}` entry matches the runtime name "
                       f"under {plan.method.match} matching, nor do the checkpoint-named entries listed"),
            "family_hint": (f"add each runtime name to `{section}`"
                            + (f" ({KEEP_NOTE})" if f"({KEEP_NOTE})" in hint else "")),
            "brief": own}


def _section(plan) -> str:
    """Where the skip list is written: `quantization_config` of config.json, else the `quantization`
    section of hf_quant_config.json."""
    in_config = plan.quant is None or plan.quant.source_file == "config.json"
    return "quantization_config" if in_config else "quantization"


KEEP_NOTE = "keep the checkpoint-named entries for frameworks that use them"


def _config_hint(plan, rm, key: str, ckpt_named: list[str]) -> tuple[list[str], str]:
    """The config edit that makes ``plan``'s target build ``rm`` unquantized, or, where none exists
    (a FusedMoE the method never excludes), what to do instead: never an edit the framework ignores."""
    import re

    method = plan.method
    if rm.kind == "moe" and method.moe == "never":
        return [], (mention(plan.target.resolved)
                    + f" never excludes a FusedMoE for {plan.quant.method_key} (no `{key}` entry or "
                    "rule can make it unquantized): store the experts quantized, or serve with a release or "
                    "method that can exclude them")
    if method.include_key and plan.include is not None and not plan.include_inferred and rm.kind in method.include_kinds:
        hits = [e for e in plan.include if e in rm.name or any(e in s.ckpt_module for s in rm.shards)]
        return [], (f"remove {', '.join(f'`{h}`' for h in hits[:5]) or 'the entries naming it'} from "
                    f"`quantization_config.{method.include_key}` (the list of quantized modules), or store "
                    f"`{rm.name}` quantized")
    adds = suggested_entries(plan, rm)
    if key == "dynamic":
        rules = [f'"-:{re.escape(a)}$": {{}}' for a in adds]
        return adds, f"add {', '.join(rules)} to `quantization_config.dynamic` (a `-:` rule is re.match'ed against the layer name)"
    section = _section(plan)
    return adds, (f"add the runtime name(s) {', '.join(f'`{a}`' for a in adds)} to `{section}.{key}`"
                  + (f" ({KEEP_NOTE})" if ckpt_named else ""))
