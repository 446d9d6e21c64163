"""Stage 3b, KV-cache scales: what the target's loader does with the KV-cache scale tensors the
checkpoint stores, and which KV-cache dtype the server picks for it by default.

Everything comes from the target data:

* ``Loading.kv``: the stored forms of a KV-cache scale (ModelOpt `…self_attn.k_proj.k_scale`,
  Quark / compressed-tensors `…self_attn.k_proj.output_scale`, llm-compressor `…self_attn.k_scale`),
  the attention's own scale parameter, and the KV-cache method's check after loading;
* ``MethodRules.kv_cache``: whether the quant config gives attention layers a KV-cache method (so the
  `k_scale`/`v_scale` parameters exist), which forms its own cache-scale mapping renames, and when
  `--kv-cache-dtype auto` runs the cache in FP8;
* ``Architecture.kv_scales`` / ``Draft.kv_scales``: the name the model's loader looks each form up
  under (after its stacked-params rename, or its cache-scale remap, whichever comes first) and
  what it does when that parameter does not exist (drop the tensor, or a KeyError).

The result (``KvCachePlan``) is read by the SC506/SC507 rules and shown by ``ckptlint plan``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptlint.findings import Consequence

if TYPE_CHECKING:
    from ckptlint.checkpoint import Checkpoint
    from ckptlint.simulate.state import State


@dataclass(frozen=True)
class KvScaleGroup:
    """Stored KV-cache scales of one form that the loader handles alike."""

    role: str  # "main" | "draft"
    form: str  # Loading.kv.forms name
    outcome: str  # "loaded" | "dropped" | "load-error"
    consequence: Consequence | None  # None: loaded
    looked_up: str  # the name the loader looks the first tensor up under
    param: str  # the attention's scale parameter for it
    hooked: bool  # renamed by the quant config's own cache-scale mapping
    warns: bool
    error: str | None
    note: str | None
    tensors: tuple[str, ...]


@dataclass(frozen=True)
class KvIncomplete:
    """An attention layer for which only one of its two scales is loaded."""

    role: str
    attention: str  # the attention's scale parameter prefix, e.g. model.layers.3.self_attn.attn
    loaded: str  # "k" | "v"
    consequence: Consequence
    error: str | None
    note: str | None
    tensors: tuple[str, ...]


@dataclass(frozen=True)
class KvCachePlan:
    fp8: bool  # `--kv-cache-dtype auto` runs the KV cache in FP8 for this quant config
    fp8_reason: str | None  # the declaration that makes it FP8
    scale_params: bool  # the main model's attention layers register k_scale / v_scale
    stored: int  # KV-cache scale tensors the checkpoint stores (any form, main and draft)
    groups: tuple[KvScaleGroup, ...]
    incomplete: tuple[KvIncomplete, ...]
    unscaled: bool  # FP8 cache and scale parameters, but the main model stores no scale at all


_MISSING = object()


def _value(raw: Any, path: str) -> Any:
    cur = raw
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    # the frameworks test the value's truth (`if self.kv_cache_quant_algo`): "" or {} is not a declaration
    return cur if cur or cur == 0 and not isinstance(cur, bool) else _MISSING


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def declared(decls, raw: Any) -> str | None:
    """The first of ``decls`` (KvDecl) that ``raw`` (the quant config) declares, as text; None if none."""
    for d in decls or ():
        keys = d.match
        ok = True
        for key, values in keys.items():
            v = _value(raw, key)
            if v is _MISSING or (values and not any(_same(v, x) for x in values)):
                ok = False
                break
        if ok and keys:
            return ", ".join(f"`{k}: {_value(raw, k)}`" for k in keys)
    return None


@lru_cache(maxsize=64)
def _compiled_forms(forms: tuple[tuple[str, str], ...]) -> list[tuple[str, re.Pattern]]:
    return [(name, re.compile(rx)) for name, rx in forms]


def _forms(kvl) -> list[tuple[str, re.Pattern]]:
    """The stored KV-scale forms of the target data, compiled once per distinct set of forms."""
    return _compiled_forms(tuple(kvl.forms.items()))


def _layer_of(name: str, prefix: str) -> int | None:
    if not name.startswith(prefix):
        return None
    head = name[len(prefix):].partition(".")[0]
    return int(head) if head.isdecimal() and head.isascii() else None


def _role(plan: "State", name: str) -> str | None:
    """"main", "draft", or None for a tensor of an MTP layer the deployment does not load."""
    draft = plan.arch.draft
    if draft is None or not plan.mtp_layers:
        return "main"
    if draft.prefix:  # (as the name placement does: under the prefix, or naming its word anywhere)
        in_mtp = name.startswith(draft.prefix) or bool(draft.keep_substring and draft.keep_substring in name)
    else:
        in_mtp = _layer_of(name, plan.arch.layer_prefix) in plan.mtp_layers
    if not in_mtp:
        return "main"
    return "draft" if plan.draft is not None else None


def kv_cache(ckpt: "Checkpoint", plan: "State") -> KvCachePlan | None:
    kvl = plan.target.data.loading.kv
    arch = plan.arch
    if kvl is None or arch is None or arch.kv_scales is None or not arch.kv_scales.simulated or plan.quant is None:
        return None  # (an unquantized checkpoint: its loaders' handling of scale names is not described)
    rules = plan.method.kv_cache if plan.method is not None else None
    raw = plan.quant.raw if plan.quant is not None else {}
    fp8_reason = declared(rules.fp8_when, raw) if rules is not None else None
    fp8 = fp8_reason is not None
    params = bool(rules is not None and rules.scale_params
                  and (not rules.scale_params_when or declared(rules.scale_params_when, raw) is not None))
    draft = plan.draft
    draft_params = params and not (draft is not None and plan.method is not None
                                   and plan.quant.method_key in (draft.quant_none_for or ()))
    hook_forms = set(rules.hook_forms) if rules is not None else set()
    forms = _forms(kvl)
    suffixes = tuple(kvl.suffixes)
    groups: dict[tuple, list] = {}
    loaded: dict[tuple[str, str], dict[str, str]] = {}
    stored = main_stored = 0
    for name in ckpt.tensors:
        if not name.endswith(suffixes):
            continue
        for form, rx in forms:
            m = rx.fullmatch(name)
            if m is not None:
                break
        else:
            continue
        stored += 1
        role = _role(plan, name)
        if role is None:
            continue
        if role == "main":
            main_stored += 1
        ks = (draft.kv_scales if role == "draft" and draft.kv_scales is not None else arch.kv_scales)
        if not ks.simulated:
            continue
        hooked = ks.hook is not None and form in hook_forms
        path = ks.hook if hooked else ks.forms.get(form)
        if path is None or not path.simulated:
            continue  # a form this loader's data does not describe: not simulated
        g = m.groupdict()
        pre, kv = g.get("pre", ""), g.get("kv", "")
        looked = path.to.format(pre=pre, kv=kv)
        param = kvl.param.format(pre=pre, kv=kv)
        has = draft_params if role == "draft" else params
        outcome = "loaded" if looked == param and has else path.absent
        key = (role, form, outcome, hooked)
        entry = groups.get(key)
        if entry is None:
            entry = groups[key] = [path, looked, param, []]
        entry[3].append(name)
        if outcome == "loaded":
            loaded.setdefault((role, param.rpartition(".")[0]), {})[kv] = name
    out_groups = []
    for (role, form, outcome, hooked), (path, looked, param, names) in groups.items():
        if outcome == "loaded":
            cons = None
        elif outcome == "load-error":
            cons = Consequence.LOAD_ERROR
        else:
            cons = Consequence.DEGRADED if fp8 else Consequence.HYGIENE
        error = None
        if path.error and outcome == "load-error":
            error = path.error.format(name=looked, inner=looked[len("model."):] if looked.startswith("model.")
                                      else looked)
        out_groups.append(KvScaleGroup(role, form, outcome, cons, looked, param, hooked, path.warns, error, path.note,
                                       tuple(names)))
    incomplete = []
    post = kvl.post_load
    if post is not None and (post.when == "always" or fp8):
        for (role, attention), got in loaded.items():
            if len(got) != 1:
                continue
            which = next(iter(got))
            o = post.only_k if which == "k" else post.only_v
            incomplete.append(KvIncomplete(role, attention, which, Consequence(o.consequence), o.error, o.note,
                                           tuple(got.values())))
    unscaled = fp8 and params and main_stored == 0
    return KvCachePlan(fp8, fp8_reason, params, stored, tuple(out_groups), tuple(incomplete), unscaled)
