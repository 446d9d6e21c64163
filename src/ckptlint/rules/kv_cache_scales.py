"""KV-cache scales: the loader's outcome for every stored form (SC506) and their completeness (SC507),
from the plan's ``kv_cache`` (ckptlint.simulate.kvcache)."""

from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.rules.base import Rule, RuleContext

_FORM_WORDS = {"proj": "ModelOpt-style `…self_attn.{k,v}_proj.{k,v}_scale`",
               "output": "Quark-style `…self_attn.{k,v}_proj.output_scale`",
               "attn": "llm-compressor-style `…self_attn.{k,v}_scale`"}


def _cache_words(kv) -> str:
    return (f"the server runs the KV cache in FP8 by default for this quant config ({kv.fp8_reason})"
            if kv.fp8 else "the server keeps the KV cache in the model dtype by default (`--kv-cache-dtype auto`), "
            "so the scales are unused unless an FP8 cache is requested")


def _file(ctx: RuleContext, name: str) -> str | None:
    t = ctx.checkpoint.tensors.get(name)
    return t.file if t is not None else None


def _mapped_forms(plan, ks) -> list[str]:
    """Stored forms the loader maps onto the attention's scale parameter (hook forms of the method included)."""
    kvl = plan.target.data.loading.kv
    forms = {f for f, p in (ks.forms if ks is not None else {}).items() if p.simulated and p.to == kvl.param}
    rules = plan.method.kv_cache if plan.method is not None else None
    if ks is not None and ks.hook is not None and ks.hook.to == kvl.param and rules is not None:
        forms |= set(rules.hook_forms)
    return sorted(forms)


class KvScaleNotLoaded(Rule):
    """
    ## What it does
    Follows every KV-cache scale tensor the checkpoint stores (ModelOpt `…k_proj.k_scale`, Quark
    `…k_proj.output_scale`, llm-compressor `…self_attn.k_scale`) through the target's loader: the
    quant config's cache-scale mapping, the model's stacked-params rename and its scale-name remap, in
    the order that release runs them, to the attention's `k_scale` / `v_scale` parameter. Reports the
    tensors that fail the load or are dropped, and a config that declares an FP8 KV cache the server
    enables by default while no scale is stored at all.

    ## Why is this bad?
    A loader that renames `k_proj.k_scale` to `qkv_proj.k_scale` before remapping it, and then indexes
    its parameters unguarded, stops with a `KeyError`. A loader that drops the scale (with a warning, or
    silently), or an attention layer built without a scale parameter, leaves the cache at its default
    scale 1.0: when the server runs the cache in FP8 by default for a config that declares it
    (`kv_cache_quant_algo: FP8`, `kv_cache_scheme`), keys and values are quantized with the wrong scale
    and accuracy drops, without an error.

    ## Example
    A ModelOpt FP8 Mixtral export with `kv_cache_quant_algo: FP8` and
    `model.layers.0.self_attn.k_proj.k_scale` on SGLang: `KeyError: 'model.layers.0.self_attn.qkv_proj.k_scale'`.
    The same tensors on a Qwen2 export load nowhere on SGLang, and the FP8 cache runs at unit scale.

    ## How to fix
    Rename the scales to the form the target maps (`…self_attn.k_proj.k_scale` → `…self_attn.k_scale`
    where the target's loader remaps that one, or the reverse), pick a target release whose loader maps
    the stored form, or serve with `--kv-cache-dtype auto`/`bfloat16` where the FP8 cache would run
    unscaled.
    """

    code = "SC506"
    name = "kv-scale-not-loaded"
    summary = "A stored KV-cache scale fails the load or is dropped, or an FP8 KV cache has no scale"
    consequences = (Consequence.LOAD_ERROR, Consequence.DEGRADED, Consequence.HYGIENE)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        kv = plan.kv_cache if plan is not None and plan.simulated else None
        if kv is None:
            return
        who = mention(plan.target.resolved)
        for g in kv.groups:
            if g.outcome == "loaded":
                continue
            first = g.tensors[0]
            role = "the MTP draft's" if g.role == "draft" else "the"
            loader = (plan.draft.cls if g.role == "draft" and plan.draft is not None else plan.arch_name) or "the model"
            ks = (plan.draft.kv_scales if g.role == "draft" and plan.draft is not None and plan.draft.kv_scales
                  is not None else plan.arch.kv_scales)
            how = f" ({ks.note})" if ks is not None and ks.note else ""
            via = " after the quant config's cache-scale mapping" if g.hooked else ""
            if g.outcome == "load-error":
                msg = (f"{len(g.tensors)} {_FORM_WORDS.get(g.form, g.form)} KV-cache scale tensor(s) fail " + who + f"'s "
                       f"{loader} loader: `{first}` is looked up as `{g.looked_up}`{via}, which is not a "
                       f"parameter of {role} model{how}")
                mapped = _mapped_forms(plan, ks)
                hint = ("store the scales in a form " + who + f" maps to `{g.param}` ("
                        + ", ".join(_FORM_WORDS.get(f, f) for f in mapped) + "), or use a release whose loader "
                        "remaps this form" if mapped else
                        "no stored form reaches the attention's scale parameter on this release: drop the scale "
                        "tensors (the cache then runs unscaled) or use a release whose loader remaps them")
            else:
                why = ("no such parameter exists: the attention layer has no KV-cache method under this quant "
                       "config" if g.looked_up == g.param else f"it is looked up as `{g.looked_up}`, not the "
                       f"attention's `{g.param}`")
                msg = (f"{len(g.tensors)} {_FORM_WORDS.get(g.form, g.form)} KV-cache scale tensor(s) are dropped by "
                       + who + f"'s {loader} loader{' with a warning' if g.warns else ', silently'}{via}: "
                       f"for `{first}` {why}{how}; {_cache_words(kv)}"
                       + (", and it runs at the default scale 1.0" if kv.fp8 else ""))
                mapped = _mapped_forms(plan, ks)
                if g.looked_up == g.param or not mapped:
                    hint = ("no stored form reaches the attention's scale parameter on this release"
                            if g.looked_up != g.param else "the quant config gives the attention no scale parameter")
                    hint += "; serve with `--kv-cache-dtype bfloat16`" if kv.fp8 else "; nothing to do unless an FP8 cache is requested"
                else:
                    hint = ("store the scales in a form " + who + f" maps to `{g.param}` ("
                            + ", ".join(_FORM_WORDS.get(f, f) for f in mapped) + ")"
                            + (", or serve with `--kv-cache-dtype bfloat16`" if kv.fp8 else ""))
            yield self.finding(ctx, g.consequence, msg, module=g.param.rpartition(".")[0], tensors=list(g.tensors),
                               file=_file(ctx, first), error_text=g.error, hint=hint,
                               assumptions=list(plan.assumptions) if g.role == "draft" else [],
                               # `direction` keeps the engine from folding a draft finding into the main one
                               data={"form": g.form, "outcome": g.outcome, "looked_up": g.looked_up,
                                     "kv_cache_fp8": kv.fp8, "role": g.role, "direction": f"{g.role} {g.form}"})
        if kv.unscaled:
            yield self.finding(
                ctx, Consequence.DEGRADED,
                f"the quant config declares an FP8 KV cache ({kv.fp8_reason}) and " + who + " enables it by default, "
                "but the checkpoint stores no KV-cache scale: every attention layer's K and V are quantized at "
                "the default scale 1.0", file=plan.quant.source_file,
                hint="export the KV-cache scales with the checkpoint, or serve with `--kv-cache-dtype bfloat16`",
                data={"kv_cache_fp8": True, "outcome": "absent"})


class KvScaleIncomplete(Rule):
    """
    ## What it does
    Checks, per attention layer whose KV-cache scales the target loads, that both `k_scale` and
    `v_scale` arrive, as the release's KV-cache method checks after loading.

    ## Why is this bad?
    The frameworks' KV-cache method starts both scales at -1.0 and, after loading, accepts both
    set or both unset; with one of them it asserts `k_scale > 0` (only `v_scale` loaded: the load
    fails with an `AssertionError`) or uses `k_scale` for V as well (only `k_scale` loaded: V is
    quantized with K's scale). SGLang runs the check on every attention layer with scale
    parameters; vLLM only when the KV cache is quantized.

    ## Example
    A Quark FP8-KV Llama export whose re-sharding lost `model.layers.5.self_attn.k_proj.output_scale`
    but kept `…v_proj.output_scale`: SGLang stops with `AssertionError`.

    ## How to fix
    Store both scales of every attention layer (re-export, or re-download the shard that should hold
    the missing one).
    """

    code = "SC507"
    name = "kv-scale-incomplete"
    summary = "An attention layer gets only one of its two KV-cache scales"
    consequences = (Consequence.LOAD_ERROR, Consequence.DEGRADED)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        kv = plan.kv_cache if plan is not None and plan.simulated else None
        if kv is None or not kv.incomplete:
            return
        by: dict[tuple, list] = {}
        for i in kv.incomplete:
            by.setdefault((i.loaded, i.consequence, i.error, i.note, i.role), []).append(i)
        for (loaded, cons, error, note, role), items in by.items():
            missing = "v" if loaded == "k" else "k"
            first = items[0]
            msg = (f"{len(items)} attention layer(s) get only their {loaded}_scale from the checkpoint on "
                   + mention(plan.target.resolved) + f" (first: `{first.attention}`, no loaded {missing}_scale)"
                   + (f": {note}" if note else ""))
            yield self.finding(ctx, cons, msg, module=first.attention,
                               tensors=[t for i in items for t in i.tensors],
                               file=_file(ctx, first.tensors[0]), error_text=error,
                               hint=f"store the {missing}_scale of every attention layer next to its {loaded}_scale",
                               assumptions=list(plan.assumptions) if role == "draft" else [],
                               data={"layers": len(items), "loaded": loaded, "role": role, "direction": role})
