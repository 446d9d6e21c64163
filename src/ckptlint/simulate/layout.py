"""Stage 3, layout: what happens when each checkpoint module is loaded into the module the target built.

Compares the stored form (dtype, shape, scales) with the parameters the target allocates for its
decision (``Mismatch``: quantized into unquantized or the reverse) and, for modules built and stored
quantized, with the tensors the scheme requires (``LayoutIssue``: missing, unexpected, mis-named,
mis-shaped or mis-typed tensors), with the consequence and the text the framework would print
(the target data's ``loading`` templates).
"""

from __future__ import annotations

import operator

from ckptlint._ns import wrap
from ckptlint.checkpoint import TORCH_DTYPE
from ckptlint.findings import Consequence, mention
from ckptlint.simulate.model import LayoutIssue, Mismatch, Shard
from ckptlint.simulate.state import Building, State


def _shape(shape) -> str:
    if not shape:
        return "[]"
    return "[" + ", ".join(str(d) for d in shape) + "]"


def predict_all(plan: State, rm: Building, float_dtype: str, firsts: dict[tuple, Shard]) -> list[Mismatch]:
    """``predict`` for every shard of ``rm``; shards with the same stored signature share a verdict,
    so only one of each (``firsts``) is evaluated unless it mismatches."""
    bad = {sig for sig, s in firsts.items() if predict(plan, rm, s, float_dtype) is not None}
    if not bad:
        return []
    out: list[Mismatch] = []
    for s in rm.shards:
        if s.stored.sig in bad:
            m = predict(plan, rm, s, float_dtype)
            if m is not None:
                out.append(m)
    return out


_STORED = operator.attrgetter("stored")
_SIG = operator.attrgetter("stored.sig")


def first_per_sig(shards: "list[Shard] | tuple[Shard, ...]") -> dict[tuple, Shard]:
    """The first shard of each stored signature (C-level: a MoE module has hundreds of expert
    shards and usually one or two signatures). Shards stored alike share one Stored object
    (ckptlint.simulate.stored_form), so they are told apart by identity first, which hashes no
    signature; only if two distinct objects have equal signatures are signatures compared."""
    rev = shards[::-1]
    firsts = dict(zip(map(id, map(_STORED, rev)), rev))  # earlier shards overwrite later ones
    out = {s.stored.sig: s for s in firsts.values()}
    if len(out) == len(firsts):
        return out
    return dict(zip(map(_SIG, rev), rev))


def runtime_float_dtype(config: dict | None) -> str:
    td = (config or {}).get("torch_dtype") or (config or {}).get("dtype")
    return {"float16": "F16", "float32": "F32"}.get(td, "BF16") if isinstance(td, str) else "BF16"


def predict(plan: State, rm: Building, shard: Shard, float_dtype: str) -> Mismatch | None:
    d = rm.decision
    st = shard.stored
    if d is None or st.quantized is None or st.weight is None or d.conflict:
        return None
    if d.quantized and not st.quantized:
        return _float_into_quantized(plan, rm, shard, d.scheme) if d.scheme is not None else None
    if not d.quantized and st.quantized:
        return _quantized_into_float(plan, rm, shard, float_dtype)
    return None


def _float_into_quantized(plan: State, rm: Building, shard: Shard, scheme) -> Mismatch | None:
    """An unquantized weight where the target built ``scheme``: cast into a same-name parameter (same
    shape: silent; other shape: the loader's shape error), or, when the scheme has no parameter of
    that name (GPTQ/AWQ `qweight`, compressed-tensors `weight_packed`), handled by the loader's
    unexpected-name branch while the packed parameters keep their uninitialised memory."""
    w = shard.stored.weight
    n, k = (w.shape[-2], w.shape[-1]) if len(w.shape) >= 2 else (None, None)
    if n is None:
        return None
    wsuffix = w.name.rsplit(".", 1)[-1]
    params = scheme.expected(n, k)
    # a loader that renames the float weight's suffix onto a packed parameter (vLLM gpt-oss maps
    # `.gate_up_proj` and `.gate_up_proj_blocks` alike to w13_weight) meets its shape instead
    if params and wsuffix not in params and _alias(plan, rm, shard, wsuffix) not in params:
        up, cls = unexpected_outcome(plan, rm, shard, wsuffix)
        cons = Consequence(up.consequence) if up.consequence == "load-error" else Consequence.SILENT_CORRUPTION
        text = _fmt(up.error, plan, rm, shard, wsuffix) if up.error else None
        packed = next(iter(params))
        return Mismatch(shard, "unquantized-into-quantized", cons, text,
                        f"a {scheme.name} module has no `{wsuffix}` parameter (it holds `{packed}` …): the "
                        f"{w.dtype} `{shard.ckpt_module}.{wsuffix}` goes to the loader's {_CLASS_WORDS[cls]} branch"
                        + (f", which {up.note}" if up.note and cons is Consequence.LOAD_ERROR else "")
                        + ("" if cons is Consequence.LOAD_ERROR else
                           f" and is dropped{f' ({up.note})' if up.note else ''}; the module's packed weights keep "
                           "their uninitialised memory"))
    if scheme.changes_shape:
        pshape = scheme.weight_shape(n, k)
        a = pshape[-1] if scheme.layout not in ("gptq",) else pshape[0]
        text = _shape_error(plan.target.data.loading, rm, pshape, scheme.weight_dtype, w.shape, w.dtype, a, k)
        return Mismatch(shard, "unquantized-into-quantized", Consequence.LOAD_ERROR, text,
                        f"{scheme.name} allocates {scheme.weight_dtype} {_shape(pshape)} for the "
                        f"{w.dtype} {_shape(w.shape)} weight",
                        f"{w.dtype} {_shape(w.shape)} stored, {scheme.weight_dtype} {_shape(pshape)} allocated")
    return Mismatch(shard, "unquantized-into-quantized", Consequence.SILENT_CORRUPTION, None,
                    f"the {w.dtype} weight is cast into the same-shape {scheme.weight_dtype} parameter "
                    "without error and its scales keep their placeholder values")


def _quantized_into_float(plan: State, rm: Building, shard: Shard, float_dtype: str) -> Mismatch:
    st = shard.stored
    w = st.weight
    k_logical = st.logical_k
    # a packed [N, K/pack] weight loaded into the float [N, K] `weight` (a GPTQ/AWQ `qweight` is stored
    # transposed and has no parameter there at all: the unexpected-name path below)
    if w.dtype in ("U8", "I8", "I32") and k_logical and len(w.shape) >= 2 and k_logical != w.shape[-1] \
            and w.name != "qweight":
        n = w.shape[-2]
        pshape = (n, k_logical)
        text = _shape_error(plan.target.data.loading, rm, pshape, float_dtype, w.shape, w.dtype, k_logical,
                            w.shape[-1])
        return Mismatch(shard, "quantized-into-unquantized", Consequence.LOAD_ERROR, text,
                        f"the unquantized layer allocates {float_dtype} {_shape(pshape)} for the packed "
                        f"{w.dtype} {_shape(w.shape)} weight")
    wsuffix = w.name.rsplit(".", 1)[-1]
    # A packed weight under another name (qweight, weight_packed, *_blocks) has no parameter in
    # an unquantized layer at all; otherwise the first scale is what the loader trips on.
    extra = ([wsuffix] if wsuffix != "weight" else []) + [s for s in st.scales]
    found = [(x, *unexpected_outcome(plan, rm, shard, x)) for x in extra]
    hit = next((f for f in found if f[1].consequence == "load-error"), found[0] if found else None)
    if hit is not None and hit[1].consequence == "load-error":
        x, up, _ = hit
        return Mismatch(shard, "quantized-into-unquantized", Consequence.LOAD_ERROR, _fmt(up.error, plan, rm, shard, x),
                        f"the unquantized layer has no parameter for `{shard.ckpt_module}.{x}`")
    scale_name = f"{shard.ckpt_module}.{hit[0]}" if hit is not None else None
    return Mismatch(shard, "quantized-into-unquantized", Consequence.SILENT_CORRUPTION,
                    _fmt(hit[1].error, plan, rm, shard, hit[0]) if hit is not None and hit[1].error else None,
                    f"the {w.dtype} weight is cast into the unquantized {float_dtype} parameter without "
                    "its scales" + (f"; `{scale_name}` is skipped" if scale_name else ""))


_CLASS_WORDS = {"stacked": "fused-shard", "expert": "expert", "other": "unknown-name", "ignored": "ignored-suffix"}
# the outcome (a target data ``Outcome``, as compiled data holds it) of a name the loader drops by its suffix
_IGNORED = wrap({"consequence": "silent-corruption", "error": None, "note": "skipped silently by its suffix"})


def unexpected_outcome(plan: State, rm: Building | None = None, shard: Shard | None = None,
                       suffix: str | None = None):
    """(what the model's loader does with a checkpoint tensor that has no runtime parameter, the
    name class: "stacked" | "expert" | "other" | "ignored") for ``shard``'s tensor ``suffix``
    (target data ``Architecture.unexpected``, then ``unexpected_param``, then ``Loading``)."""
    arch = plan.arch
    u = arch.unexpected if arch is not None else None
    fallback = arch.unexpected_param if arch is not None and arch.unexpected_param is not None \
        else plan.target.data.loading.unexpected_param
    if u is None or rm is None or shard is None:
        return fallback, "other"
    if rm.kind == "moe":
        cls = "expert"
    elif shard.proj is not None:
        cls = "stacked"
    else:
        cls = "other"
    full = f"{shard.ckpt_module}.{suffix}"
    for x, outcome in u.by_suffix.items():
        if full.endswith(x):
            return outcome, cls
    if cls in u.ignored_classes and any(full.endswith(x) for x in u.ignored_suffixes):
        return _IGNORED, "ignored"
    if cls == "stacked":
        own = u.fused.get(rm.name.rpartition(".")[2])
        if own is not None:
            return own, cls
    return getattr(u, cls) or fallback, cls


def _alias(plan: State, rm: Building, shard: Shard, suffix: str) -> str | None:
    """The parameter suffix the loader renames ``suffix`` to, if it does for this name class."""
    u = plan.arch.unexpected if plan.arch is not None else None
    if u is None or suffix not in u.aliases:
        return None
    cls = "expert" if rm.kind == "moe" else "stacked" if shard.proj is not None else "other"
    return u.aliases[suffix] if cls in u.alias_classes else None


def _fmt(template: str | None, plan: State, rm: Building, shard: Shard, suffix: str) -> str | None:
    if not template:
        return None
    name = _param_name(plan, rm, shard, suffix)
    return template.format(name=name, inner=name[len("model."):] if name.startswith("model.") else name,
                           param=name.rpartition(".")[2], ckpt=f"{shard.ckpt_module}.{suffix}",
                           cls=rm.loader or rm.kind, layer=rm.name)


def _param_name(plan: State, rm: Building, shard: Shard, suffix: str) -> str:
    """The runtime parameter a checkpoint tensor is loaded into (FusedMoE: w13_* for the gate/up
    projections, w2_* for the down projection, ``Architecture.expert_w2``)."""
    if rm.kind == "moe":
        shard_id = "w2" if shard.proj in plan.arch.expert_w2 else "w13"
        return f"{rm.name}.{shard_id}_{suffix}"
    return f"{rm.name}.{suffix}"


def _shape_error(loading, rm: Building, pshape, pdtype: str, lshape, ldtype: str, a: int, b: int) -> str:
    if rm.kind == "moe":
        return loading.moe_shape_mismatch.format(a=a, b=b, dim=max(len(lshape) - 1, 0))
    tmpl = loading.shape_mismatch.get(rm.loader or "", loading.shape_mismatch.get("default", ""))
    return tmpl.format(pshape=_shape(pshape), pdtype=TORCH_DTYPE.get(pdtype, pdtype.lower()),
                       lshape=_shape(lshape), ldtype=TORCH_DTYPE.get(ldtype, ldtype.lower()))


def suggested_entries(plan, rm) -> list[str]:
    """Skip-list entries under which the target would exclude ``rm`` (runtime naming)."""
    method = plan.method
    name = plan.renames.quant_name(rm.name, rm.role)  # the quant-config prefix the entries are tested against
    if method is None:
        return [name]
    last = name.rpartition(".")[2]
    packed = plan.packed
    if rm.kind != "moe" and last in packed and method.fused_shards and not method.direct_fused_match:
        return [name.replace(last, s) for s in packed[last]]
    return [name]


# --- layout of quantized modules ---------------------------------------------------------------
# Suffixes frameworks skip or route elsewhere without error: KV-cache scales (remapped to the
# attention module), biases, GPTQ g_idx (dropped by vLLM's checkpoint mapper), Quark output scales.
IGNORED_SUFFIXES = frozenset({"k_scale", "v_scale", "q_scale", "kv_scale", "prob_output_scale", "output_scale",
                              "bias", "g_idx", "weight_shape", "k_bias", "v_bias", "pre_quant_scale"})


def layout_issues(plan: State, rm: Building, shard: Shard, memo: dict) -> list[LayoutIssue]:
    d = rm.decision
    st = shard.stored
    if d is None or not d.quantized or d.scheme is None or not st.quantized or st.weight is None:
        return []
    # The verdict depends only on the scheme, the module's loader and the tensors' suffix/dtype/shape:
    # identical experts and layers share it (``memo``: one per plan).
    key = (d.scheme, rm.kind, rm.loader, st.sig)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _layout_issues(plan, rm, shard)
        return found
    if not found:
        return found
    return _layout_issues(plan, rm, shard)


def _layout_issues(plan: State, rm: Building, shard: Shard) -> list[LayoutIssue]:
    d = rm.decision
    scheme = d.scheme
    stored = {t.name.rsplit(".", 1)[-1]: (t.dtype, t.shape) for t in shard.tensors}
    dims = scheme.logical_dims(stored)
    if dims is None:
        return []
    n, k = dims[:2]
    loading = plan.target.data.loading
    out: list[LayoutIssue] = []
    if scheme.group and k % scheme.group and scheme.layout != "gptoss_mxfp4":
        out.append(LayoutIssue("group", shard, "", f"in-features {k} is not a multiple of the {scheme.name} group "
                               f"size {scheme.group}", Consequence.LOAD_ERROR))
        return out
    exp = scheme.expected(*dims)
    missing = [s for s, e in exp.items() if e.required and s not in stored]
    unexpected = [s for s in stored if s not in exp and s not in IGNORED_SUFFIXES]
    # A loader that renames a suffix to a registered parameter (Architecture.unexpected.aliases) loads it.
    for u in list(unexpected):
        m = _alias(plan, rm, shard, u)
        if m is not None and m in missing:
            unexpected.remove(u)
            missing.remove(m)
    # A scale under another scale's name (fp8 block `weight_scale` vs `weight_scale_inv`, vLLM #43564).
    scale_pairs = [(m, u) for m in missing for u in unexpected if "scale" in m and "scale" in u]
    for m, u in scale_pairs[:1]:
        missing.remove(m)
        unexpected.remove(u)
        up, _ = unexpected_outcome(plan, rm, shard, u)
        cons = Consequence(up.consequence)
        out.append(LayoutIssue("scale-name", shard, u, f"the checkpoint names the scale `{u}` but "
                               + mention(plan.target.resolved) + f" registers `{m}` for {scheme.name}; "
                               + ("loading fails on the unknown name" if cons is Consequence.LOAD_ERROR else
                                  f"`{u}` is skipped and `{m}` keeps its placeholder value"),
                               cons if cons is Consequence.LOAD_ERROR else Consequence.SILENT_CORRUPTION,
                               _fmt(up.error, plan, rm, shard, u)))
    ms = plan.method.missing_scale if plan.method is not None else None
    for m in missing:
        cons = Consequence(ms.consequence) if ms is not None and "scale" in m else Consequence.SILENT_CORRUPTION
        text = (ms.error or "").format(module=rm.name) if ms is not None and "scale" in m and ms.error else None
        out.append(LayoutIssue("missing", shard, m, f"`{shard.ckpt_module}.{m}` is missing: the parameter keeps "
                               "its initial value (nothing checks that it was loaded)"
                               if cons is not Consequence.LOAD_ERROR else f"`{shard.ckpt_module}.{m}` is missing",
                               cons, text))
    for u in unexpected:
        up, _ = unexpected_outcome(plan, rm, shard, u)
        out.append(LayoutIssue("unexpected", shard, u, f"`{shard.ckpt_module}.{u}` has no parameter in a "
                               f"{scheme.name} module", Consequence(up.consequence), _fmt(up.error, plan, rm, shard, u)))
    for suffix, e in exp.items():
        if suffix not in stored:
            continue
        dtype, shape = stored[suffix]
        if e.shapes is not None and tuple(shape) not in e.shapes:
            want = e.shapes[0]
            text = _shape_error(loading, rm, want, e.dtypes[0], shape, dtype,
                                want[-1] if want else 1, shape[-1] if shape else 1)
            out.append(LayoutIssue("shape", shard, suffix, f"`{shard.ckpt_module}.{suffix}` is {_shape(shape)}, "
                                   f"{scheme.name} expects {' or '.join(_shape(s) for s in e.shapes)} for "
                                   f"[N={n}, K={k}]", Consequence.LOAD_ERROR, text))
        elif dtype not in e.dtypes and (e.integer_coded or suffix in ("weight", "weight_packed", "qweight")
                                         or dtype not in ("BF16", "F16", "F32")):
            out.append(LayoutIssue("dtype", shard, suffix, f"`{shard.ckpt_module}.{suffix}` is {dtype}, "
                                   f"{scheme.name} expects {'/'.join(e.dtypes)}: same shape, so it is cast "
                                   "without error and its values are wrong", Consequence.SILENT_CORRUPTION))
    return out


def quantized_layout_issues(plan: State, rm: Building, firsts: dict[tuple, Shard], memo: dict) -> list[LayoutIssue]:
    """Layout issues of every shard of a module built quantized. Verdicts depend on the tensors'
    suffix/dtype/shape only: one shard per signature is tested (the 768 expert shards of a MoE layer
    usually share one) and the others are named only if it is bad."""
    bad_sigs = {sig for sig, s in firsts.items() if layout_issues(plan, rm, s, memo)}
    if not bad_sigs:
        return []
    return [i for s in rm.shards if s.stored.sig in bad_sigs for i in layout_issues(plan, rm, s, memo)]


def fused_shared_expert(plan: State, rm: Building, moe: Building, float_dtype: str,
                        memo: dict) -> tuple[list[Mismatch], list[LayoutIssue]]:
    """A shared expert loaded as one more routed expert of ``moe`` (shared-experts fusion): its
    shards judged against the FusedMoE's decision."""
    slot = Building(moe.name, "moe", moe.loader, moe.role, decision=moe.decision)
    bad = [m for m in (predict(plan, slot, s, float_dtype) for s in rm.shards) if m is not None]
    issues = [i for s in rm.shards for i in layout_issues(plan, slot, s, memo)]
    return bad, issues
