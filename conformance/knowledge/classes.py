"""Per model class loading facts of a release, read from its sources by AST (nothing is imported or run).

``extract_classes("vllm", "0.33.0", source_dir)`` walks the release's model packages
(``sglang/srt/models``; ``vllm/model_executor/models`` and ``vllm/models``) and returns, keyed by
``"module:Class"``, what each model class declares about how checkpoint names become runtime modules:

* ``packed_modules_mapping``: the class-level literal (or the one it names, e.g. ``Other.packed_modules_mapping``),
  and ``packed_init``: entries ``__init__`` adds (``self.packed_modules_mapping[k] = [...]``, ``.update({...})``
  or a new dict), each with the config key of the ``if`` it sits under when that is a plain test of one key;
* ``stacked``: the ``stacked_params_mapping`` table of ``load_weights`` where it is a literal list of
  ``(param, shard, shard_id)`` tuples (conditional additions carry their config key);
* ``expert_mapping``: the checkpoint projection names passed to ``make_expert_params_mapping`` (or a FusedMoE's
  ``ckpt_names``), as ``{"gate": .., "down": .., "up": ..}``;
* ``mappers``: ``WeightsMapper`` rules of ``hf_to_vllm_mapper`` / ``hf_to_sglang_mapper`` class attributes
  (``orig_to_new_prefix/suffix/substr/stacked``; a value that is not a literal is recorded as ``"<dynamic>"``);
* ``unexpected_other``: whether ``load_weights`` indexes ``params_dict[name]`` for a name no stacked or
  expert row matched without a membership test (``{"guard": "unguarded"}``, ``"bias_skipped"`` when only
  ``.bias`` names are skipped) or with one (``"guarded"``); absent when the loader's shape is not recognised;
* ``children``: the sub-modules ``__init__`` builds (attribute, class called, the name its ``prefix`` argument
  gives it, and whether the quant config is passed, passed as ``None`` or not passed at all);
* for classes that load weights (``load_weights``) or are draft models: ``tree``, the resolved module tree below
  the class (paths with ``{N}`` for a layer list): every leaf layer with its class and quant-config use, the
  FusedMoE paths, and the stacked tables of every class in the tree.

Draft/MTP/NextN classes carry ``draft``: the architecture they serve (from the release's draft override in its
model config where it has one, else from the class name) and their layer naming (``model.layers.{N}`` or
``model.decoder``). The output is deterministic (sorted keys) so regeneration is reproducible.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any

MODEL_DIRS = {
    "sglang": ["sglang/srt/models"],
    "vllm": ["vllm/model_executor/models", "vllm/models"],
}
# Where a release rewrites a draft model's architecture (speculative decoding): scanned for
# `architectures[0] == "X"` ... `architectures[0] = "Y"` (SGLang) and `model_type == "x"` ...
# `"architectures": ["Y"]` (vLLM).
DRAFT_OVERRIDE_FILES = {
    "sglang": ["sglang/srt/configs/model_config.py"],
    "vllm": ["vllm/config/speculative.py", "vllm/transformers_utils/configs/speculators/algos.py"],
}
DRAFT_NAME = re.compile(r"(NextN|MTP|Mtp|Eagle3?|EAGLE3?|Medusa|MLPSpeculator|Dflash|DFlash|DSpark|Draft)")
_DRAFT_SUFFIX = re.compile(r"(ForCausalLM)?(NextN|MTP|Mtp|Eagle3?|EAGLE3?|Medusa|Draft)(Model|ForCausalLM)?$")
MAPPER_ATTRS = ("hf_to_vllm_mapper", "hf_to_sglang_mapper")
MAPPER_RULES = ("orig_to_new_prefix", "orig_to_new_suffix", "orig_to_new_substr", "orig_to_new_stacked")
LAYER_LIST_CALLS = {"make_layers", "ModuleList", "nn.ModuleList", "make_layers_non_pp", "ModuleDict", "nn.ModuleDict"}
DYNAMIC = "<dynamic>"
# leaf layers worth recording: what a checkpoint stores weights for and a quant method may build
_LEAF = re.compile(r"Linear|LMHead|Embedding|MoE|Moe|Experts|Gate|Router|Attention|\(\)$|Conv|Lora")
_SKIP_CHILD = {"PPMissingLayer", "None", "Identity", "nn.Identity"}


# --- literals ---------------------------------------------------------------------------------

def _lit(node: ast.AST | None) -> Any:
    """A JSON-able literal, or DYNAMIC."""
    if node is None:
        return None
    try:
        v = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        if isinstance(node, ast.JoinedStr):
            return "".join(str(p.value) if isinstance(p, ast.Constant) else "{" + ast.unparse(p.value) + "}"
                           for p in node.values)
        return DYNAMIC
    return _jsonable(v)


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return repr(v)


def _text(node: ast.AST) -> str:
    return ast.unparse(node)


def _cond_key(test: ast.expr) -> str | None:
    """The config key a plain test reads: `config.k`, `getattr(config, "k", ..)`, `config.k is not None`,
    `hasattr(config, "k")`, `self.config.k`, `not ...` -> "!k"."""
    neg = False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        neg, test = True, test.operand
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None:
        neg ^= isinstance(test.ops[0], (ast.Is, ast.Eq))
        test = test.left
    key = None
    if isinstance(test, ast.Attribute) and "config" in _text(test.value):
        key = test.attr
    elif isinstance(test, ast.Call) and _text(test.func) in ("getattr", "hasattr") and len(test.args) >= 2 \
            and isinstance(test.args[1], ast.Constant) and "config" in _text(test.args[0]):
        key = str(test.args[1].value)
    if key is None:
        return _text(test)[:120] if not neg else "!" + _text(test)[:120]
    return ("!" if neg else "") + key


def _walk_with_cond(body: list[ast.stmt], cond: str | None = None):
    """Statements of a function body with the condition of the innermost `if` around them (nested
    functions and classes are not entered)."""
    for st in body:
        yield st, cond
        if isinstance(st, ast.If):
            c = _cond_key(st.test)
            yield from _walk_with_cond(st.body, c)
            yield from _walk_with_cond(st.orelse, ("!" + c) if c and not c.startswith("!") else (c[1:] if c else None))
        elif isinstance(st, (ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith)):
            for part in ("body", "orelse", "finalbody"):
                yield from _walk_with_cond(getattr(st, part, []) or [], cond)
            for h in getattr(st, "handlers", []) or []:
                yield from _walk_with_cond(h.body, cond)
        elif isinstance(st, ast.Match):
            for case in st.cases:
                yield from _walk_with_cond(case.body, cond)


# --- one class ----------------------------------------------------------------------------------

def _kw(call: ast.Call, name: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def _prefix_name(node: ast.expr | None) -> str | None:
    """The module name a `prefix=` argument gives: add_prefix("x", prefix), maybe_prefix(prefix, "x"),
    f"{prefix}.x", prefix + ".x" -> "x" (several components kept dotted; "{...}" for a computed part)."""
    if node is None:
        return None
    if isinstance(node, ast.Call) and node.args:
        fn = _text(node.func)
        if fn.endswith("add_prefix") and isinstance(node.args[0], (ast.Constant, ast.JoinedStr)):
            return str(_lit(node.args[0]))
        if fn.endswith("maybe_prefix") and len(node.args) >= 2:
            return str(_lit(node.args[1]))
    if isinstance(node, ast.JoinedStr):
        s = _lit(node)
        s = re.sub(r"^\{[^}]*prefix[^}]*\}\.?", "", s)
        return s or None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.Constant):
        return str(node.right.value).lstrip(".")
    if isinstance(node, ast.Name) and node.id == "prefix":
        return ""
    return "{" + _text(node)[:60] + "}"


def _quant_use(call: ast.Call) -> str:
    v = _kw(call, "quant_config")
    if v is None:
        if any(isinstance(a, ast.Name) and a.id == "quant_config" for a in call.args):
            return "passed"
        return "absent"
    if isinstance(v, ast.Constant) and v.value is None:
        return "none"
    if isinstance(v, (ast.IfExp, ast.BoolOp)):
        return "conditional"
    return "passed" if "quant" in _text(v) else "other:" + _text(v)[:60]


def _callee(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Call):  # get_moe_impl_class(quant_config)(...)
        return _text(f.func) + "()"
    return _text(f)


def _is_list_call(callee: str) -> bool:
    last = callee.split(".")[-1]
    return last in LAYER_LIST_CALLS or (last.startswith("make_") and "layers" in last)


def _child_of(attr: str, call: ast.Call, cond: str | None,
              local_fns: dict[str, ast.Call] | None = None) -> dict[str, Any] | None:
    callee = _callee(call)
    last = callee.split(".")[-1]
    if callee in _SKIP_CHILD or not (last[:1].isupper() or callee.endswith("()") or _is_list_call(callee)):
        return None
    out: dict[str, Any] = {"attr": attr, "class": callee, "quant": _quant_use(call)}
    pn = _prefix_name(_kw(call, "prefix"))
    if pn is not None and pn != attr:
        out["prefix"] = pn
    if cond:
        out["if"] = cond
    ck = _kw(call, "ckpt_names")
    if ck is not None:
        out["ckpt_names"] = _lit(ck)
    if _is_list_call(callee):
        inner = [n for n in ast.walk(call) if isinstance(n, ast.Call) and n is not call
                 and _callee(n) not in ("range", "len", "str", "int") and _callee(n)[:1].isupper()]
        if not inner and local_fns:
            inner = [local_fns[n.id] for n in ast.walk(call) if isinstance(n, ast.Name) and n.id in local_fns]
        if inner:
            out["list_of"] = _callee(inner[0])
            out["quant"] = _quant_use(inner[0])
            ipn = _prefix_name(_kw(inner[0], "prefix"))
            if ipn and not ipn.startswith("{"):
                out["item_prefix"] = ipn
        out["class"] = callee.split(".")[-1]
    return out


def _class_facts(cls: ast.ClassDef) -> dict[str, Any]:
    facts: dict[str, Any] = {"bases": [_text(b) for b in cls.bases]}
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for st in cls.body:
        targets: list[ast.expr] = []
        value = None
        if isinstance(st, ast.Assign):
            targets, value = st.targets, st.value
        elif isinstance(st, ast.AnnAssign) and st.value is not None:
            targets, value = [st.target], st.value
        for t in targets:
            if not isinstance(t, ast.Name):
                continue
            if t.id == "packed_modules_mapping":
                facts["packed_modules_mapping"] = _mapping_value(value)
            elif t.id in MAPPER_ATTRS:
                facts.setdefault("mappers", {})[t.id] = _mapper_value(value)
    init = methods.get("__init__")
    if init is not None:
        _init_facts(init, facts)
    lw = methods.get("load_weights")
    if lw is not None:
        facts["load_weights"] = True
        _loader_facts([lw] + [m for n, m in methods.items() if n.startswith("_load") or "weight" in n and n != "load_weights"],
                      facts)
        guard = _other_names_guard(lw)
        if guard is not None:
            facts["unexpected_other"] = guard
    return facts


# --- what load_weights does with an other name it has no parameter for -----------------------------

def _is_mapping_loop(st: ast.stmt, word: str) -> bool:
    return isinstance(st, ast.For) and word in _text(st.iter)


def _final_else(lw: ast.FunctionDef) -> list[ast.stmt] | None:
    """The branch of ``load_weights``' loop over the checkpoint names that handles the names no stacked
    (and no expert) mapping row matched: ``for row in stacked_params_mapping: ... else:`` [``for row in
    expert_params_mapping: ... else:``] *body*. None when the loader has no such shape."""
    for node in ast.walk(lw):
        if not (isinstance(node, ast.For) and isinstance(node.target, ast.Tuple)):
            continue
        for i, st in enumerate(node.body):
            if _is_mapping_loop(st, "stacked_params_mapping") and st.orelse:
                body = st.orelse
                if len(body) == 1 and _is_mapping_loop(body[0], "expert") and body[0].orelse:
                    body = body[0].orelse
                elif any(_is_mapping_loop(b, "expert") for b in body):
                    return None  # an expert loop followed by more statements: not the common shape
                return body
    return None


def _is_continue_if(st: ast.stmt) -> bool:
    return isinstance(st, ast.If) and not st.orelse and len(st.body) == 1 and isinstance(st.body[0], ast.Continue)


def _not_in_params(test: ast.expr) -> bool:
    return (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn)
            and _text(test.left) == "name" and _text(test.comparators[0]) == "params_dict")


def _bias_only(test: ast.expr) -> bool:
    """``name.endswith(".bias") and name not in params_dict``."""
    return (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and len(test.values) == 2
            and _text(test.values[0]) == "name.endswith('.bias')" and _not_in_params(test.values[1]))


_REMAP_CALLS = ("maybe_remap_kv_scale_name",)  # returns the name unchanged unless it is a KV-cache scale


def _other_names_guard(lw: ast.FunctionDef) -> dict[str, Any] | None:
    """Whether ``load_weights`` indexes ``params_dict[name]`` for an other (non-stacked, non-expert) name
    without testing membership first: ``{"guard": "unguarded"}`` (``.bias`` names skipped when
    ``bias_skipped``) or ``{"guard": "guarded"}``; None (unknown) for any shape not recognised.

    Read conservatively, statement by statement, in the branch the name reaches when no mapping row
    matched: ``if name not in params_dict: continue`` guards; ``if name.endswith(".bias") and name not in
    params_dict: continue`` guards biases only; ``if is_pp_missing_parameter(name, self): continue`` and
    other ``if <test without params_dict>: continue`` skips guard nothing in general; ``name =
    maybe_remap_kv_scale_name(name, params_dict)`` (+ ``if name is None: continue``) leaves other names
    unchanged; a plain ``param = params_dict[name]`` reached after those is unguarded. Anything else that
    reads ``params_dict`` (a lookup with a default, another helper, a try) makes it unknown."""
    body = _final_else(lw)
    if body is None:
        return None
    bias = False
    for st in body:
        txt = _text(st)
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and _text(st.targets[0]) == "param" \
                and _text(st.value) == "params_dict[name]":
            return {"guard": "unguarded", **({"bias_skipped": True} if bias else {})}
        if "params_dict" not in txt:
            if isinstance(st, (ast.Try, ast.With)) or (isinstance(st, ast.If) and not _is_continue_if(st)):
                return None  # a branch we do not follow
            continue
        if _is_continue_if(st):
            if _not_in_params(st.test):
                return {"guard": "guarded"}
            if _bias_only(st.test):
                bias = True
                continue
            return None
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and _text(st.targets[0]) == "name" \
                and isinstance(st.value, ast.Call) and _text(st.value.func) in _REMAP_CALLS:
            continue
        return None
    return None


def _mapping_value(value: ast.expr) -> Any:
    v = _lit(value)
    if v == DYNAMIC and isinstance(value, (ast.Attribute, ast.Name)):
        return {"ref": _text(value)}
    if v == DYNAMIC and isinstance(value, ast.Dict):
        out: dict[str, Any] = {}
        for k, x in zip(value.keys, value.values):
            if k is None:
                out["**" + _text(x)] = DYNAMIC
            else:
                out[str(_lit(k))] = _lit(x)
        return out
    return v


def _mapper_value(value: ast.expr) -> Any:
    """A WeightsMapper(...) (or `A | B`, or a reference) as {rule: {from: to}} / {"ref": ..} / a list of those."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr):
        left, right = _mapper_value(value.left), _mapper_value(value.right)
        return (left if isinstance(left, list) else [left]) + (right if isinstance(right, list) else [right])
    if isinstance(value, ast.Call) and _text(value.func).endswith("WeightsMapper"):
        out: dict[str, Any] = {}
        for k in value.keywords:
            if k.arg in MAPPER_RULES:
                out[k.arg] = _mapping_value(k.value)
        return out
    if isinstance(value, (ast.Attribute, ast.Name)):
        return {"ref": _text(value)}
    return DYNAMIC


def _self_attr(t: ast.expr) -> str | None:
    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
        return t.attr
    return None


def _init_facts(init: ast.FunctionDef, facts: dict[str, Any]) -> None:
    children: list[dict[str, Any]] = []
    packed_init: list[dict[str, Any]] = []
    local_fns: dict[str, ast.Call] = {}  # local `def layer_fn(...)`: the first class it builds
    for st in ast.walk(init):
        if isinstance(st, ast.FunctionDef) and st is not init:
            calls = [n for n in ast.walk(st) if isinstance(n, ast.Call) and _callee(n)[:1].isupper()]
            if calls:
                local_fns[st.name] = calls[0]
    for st, cond in _walk_with_cond(init.body):
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            value = st.value
            if value is None:
                continue
            for t in targets:
                # self.a, self.b, self.layers = make_layers(...)
                elts = t.elts if isinstance(t, ast.Tuple) else [t]
                attrs = [_self_attr(e) for e in elts]
                if isinstance(t, ast.Subscript) and _self_attr(t.value) == "packed_modules_mapping":
                    packed_init.append({"set": {str(_lit(t.slice)): _lit(value)}, **({"if": cond} if cond else {})})
                    continue
                name = attrs[-1] if attrs else None
                if len(attrs) > 1:  # self.layers, self.start_layer, self.end_layer = make_layers(...)
                    named = [a for a in attrs if a and not a.startswith(("start_", "end_"))]
                    name = named[0] if named else name
                if name == "packed_modules_mapping" and len(elts) == 1:
                    packed_init.append({"assign": _mapping_value(value), **({"if": cond} if cond else {})})
                    continue
                if name in MAPPER_ATTRS and len(elts) == 1:
                    facts.setdefault("mappers_init", []).append(
                        {"attr": name, "mapper": _mapper_value(value), **({"if": cond} if cond else {})})
                    continue
                call = value
                if isinstance(call, ast.IfExp):
                    call = call.body
                if isinstance(call, ast.Call) and name:
                    ch = _child_of(name, call, cond, local_fns)
                    if ch is not None:
                        children.append(ch)
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            call = st.value
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr == "update" and _self_attr(f.value) == "packed_modules_mapping" \
                    and call.args:
                packed_init.append({"update": _mapping_value(call.args[0]), **({"if": cond} if cond else {})})
    if children:
        facts["children"] = children
    if packed_init:
        facts["packed_init"] = packed_init


def _tuple_rows(node: ast.expr) -> list[list[Any]] | None:
    v = _lit(node)
    if isinstance(v, list) and v and all(isinstance(r, list) and len(r) >= 2 for r in v):
        return v
    return None


def _loader_facts(funcs: list[ast.FunctionDef], facts: dict[str, Any]) -> None:
    stacked: list[dict[str, Any]] = []
    experts: list[dict[str, Any]] = []
    for fn in funcs:
        for node in ast.walk(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                t = node.targets[0] if isinstance(node, ast.Assign) else node.target
                tname = _text(t)
                if "stacked_params_mapping" in tname and "bitsandbytes" not in tname and node.value is not None:
                    rows = _tuple_rows(node.value)
                    if rows is not None:
                        stacked.append({"rows": rows, **({"add": True} if isinstance(node, ast.AugAssign) else {})})
                    elif isinstance(node.value, (ast.Name, ast.Attribute)):
                        stacked.append({"rows": DYNAMIC, "ref": _text(node.value)})
                    elif not isinstance(node.value, ast.Call) or "make_expert" not in _text(node.value):
                        stacked.append({"rows": DYNAMIC, "expr": _text(node.value)[:200]})
            if isinstance(node, ast.Call):
                f = _text(node.func)
                if f.endswith("make_expert_params_mapping"):
                    names: dict[str, Any] = {}
                    pos = ["gate", "down", "up"]
                    args = [a for a in node.args if not (isinstance(a, ast.Name) and a.id in ("self", "model"))]
                    for i, a in enumerate(args[:3]):
                        names[pos[i]] = _lit(a)
                    for k in node.keywords:
                        if k.arg and k.arg.startswith("ckpt_") and k.arg.endswith("_name"):
                            names[k.arg[len("ckpt_"):-len("_proj_name")]] = _lit(k.value)
                    experts.append(names)
                elif isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend") \
                        and "stacked_params_mapping" in _text(node.func.value) and node.args:
                    a = node.args[0]
                    rows = [_lit(a)] if node.func.attr == "append" else _tuple_rows(a)
                    stacked.append({"rows": rows if rows and rows != [DYNAMIC] else DYNAMIC, "add": True})
    if stacked:
        facts["stacked"] = stacked
    if experts:
        facts["expert_mapping"] = experts


# --- one release ----------------------------------------------------------------------------------

class _Module:
    def __init__(self, name: str, tree: ast.Module, is_pkg: bool):
        self.name = name
        self.imports: dict[str, str] = {}  # local name -> "module:Name"
        self.classes: dict[str, ast.ClassDef] = {}
        self.entry: list[str] = []
        self.consts: dict[str, Any] = {}  # module-level literal tables (a loader may name one)
        self.class_aliases: dict[str, str] = {}  # `Layer = CudaLayer if _is_cuda else OtherLayer` (CUDA's)
        for st in _module_level(tree.body):
            if isinstance(st, ast.ImportFrom):
                base = st.module or ""
                if st.level:
                    # (a package's __init__ is its own level-1 base)
                    parts = name.split(".")[: len(name.split(".")) - st.level + (1 if is_pkg else 0)]
                    base = ".".join(parts + ([base] if base else []))
                for a in st.names:
                    self.imports[a.asname or a.name] = f"{base}:{a.name}"
            elif isinstance(st, ast.Import):  # import a.b.models.x as x
                for a in st.names:
                    if a.asname:
                        self.imports[a.asname] = a.name + ":"
            elif isinstance(st, ast.ClassDef):
                self.classes[st.name] = st
            elif isinstance(st, (ast.Assign, ast.AnnAssign)) and any(
                    isinstance(t, ast.Name) and t.id == "EntryClass"
                    for t in (st.targets if isinstance(st, ast.Assign) else [st.target])) and st.value is not None:
                v = st.value
                elts = v.elts if isinstance(v, (ast.List, ast.Tuple)) else [v]
                self.entry = [_text(e) for e in elts]
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                alias = _class_alias(st.value)
                if alias is not None:
                    self.class_aliases[st.targets[0].id] = alias
                else:  # (a later binding to something else replaces an alias)
                    self.class_aliases.pop(st.targets[0].id, None)
            if isinstance(st, (ast.Assign, ast.AnnAssign)) and isinstance(st.value, (ast.List, ast.Tuple)):
                t = st.targets[0] if isinstance(st, ast.Assign) else st.target
                if isinstance(t, ast.Name):
                    rows = _tuple_rows(st.value)
                    if rows is not None:
                        self.consts[t.id] = rows


def _module_level(body: list[ast.stmt]):
    """Module-level statements, also inside top-level if/try (platform-dependent imports: the last
    binding wins, which is the CUDA default branch where a module picks per platform)."""
    for st in body:
        if isinstance(st, ast.If):
            # the branch taken on CUDA last (its bindings win): `if not is_rocm()` / `if is_cuda()` pick the
            # body, `if is_rocm()` / `is_xpu()` / ... the else branch
            test = ast.unparse(st.test)
            other = re.search(r"rocm|xpu|cpu|tpu|hip|npu|hpu", test) and not re.search(r"\bnot\b|cuda", test)
            if test == "TYPE_CHECKING":  # (never taken at run time)
                other = True
            first, last = (st.body, st.orelse) if other else (st.orelse, st.body)
            if not st.orelse:
                first, last = [], st.body
            yield from _module_level(first)
            yield from _module_level(last)
        elif isinstance(st, ast.Try):
            yield from _module_level(st.body)
            for h in st.handlers:
                yield from _module_level(h.body)
            yield from _module_level(st.orelse)
        else:
            yield st


def _class_alias(value: ast.expr) -> str | None:
    """The class a module-level alias names: `A = B`, or `A = B if <platform test> else C` (the branch
    taken on CUDA)."""
    if isinstance(value, ast.IfExp) and isinstance(value.body, ast.Name) and isinstance(value.orelse, ast.Name):
        test = ast.unparse(value.test)
        other = re.search(r"rocm|xpu|cpu|tpu|hip|npu|hpu", test) and not re.search(r"\bnot\b|cuda", test)
        return (value.orelse if other else value.body).id
    if isinstance(value, ast.Name) and value.id[:1].isupper():
        return value.id
    return None


def _module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, RecursionError):
        return None


class _Release:
    def __init__(self, framework: str, root: Path):
        self.framework = framework
        self.root = root
        self.modules: dict[str, _Module] = {}
        self.facts: dict[str, dict[str, Any]] = {}
        for d in MODEL_DIRS[framework]:
            base = root / d
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*.py")):
                tree = _parse(path)
                if tree is None:
                    continue
                m = _Module(_module_name(root, path), tree, path.name == "__init__.py")
                self.modules[m.name] = m
                for cname, cls in m.classes.items():
                    self.facts[f"{m.name}:{cname}"] = _class_facts(cls)
        for key, f in self.facts.items():  # stacked tables named by a module-level constant
            for t in f.get("stacked", []):
                if "ref" in t:
                    rows = self.constant(key.partition(":")[0], t["ref"])
                    if rows is not None:
                        t["rows"] = rows
        self.ckpt_defaults = _ckpt_name_defaults(root, framework)

    def constant(self, module: str, name: str, depth: int = 0) -> Any:
        """A module-level literal table named in ``module`` (its own, or imported from the release)."""
        m = self.modules.get(module)
        if m is None or depth > 4:
            return None
        if name in m.consts:
            return m.consts[name]
        target = m.imports.get(name)
        if target is not None:
            mod, _, n = target.partition(":")
            return self.constant(mod, n, depth + 1)
        return None

    def resolve(self, module: str, name: str, depth: int = 0) -> str | None:
        """"module:Class" of a class name used in ``module`` (same file, an import, a re-export)."""
        if depth > 6:
            return None
        m = self.modules.get(module)
        if m is None:
            return None
        head, _, tail = name.partition(".")
        if tail:  # module.Class
            target = m.imports.get(head)
            if target is None:
                return None
            mod = target[:-1] if target.endswith(":") else target.replace(":", ".")
            return self.resolve(mod, tail, depth + 1) if mod in self.modules else None
        if name in m.classes:
            return f"{module}:{name}"
        if name in m.class_aliases and m.class_aliases[name] != name:
            return self.resolve(module, m.class_aliases[name], depth + 1)
        target = m.imports.get(name)
        if target is None:
            return None
        mod, _, cname = target.partition(":")
        if mod in self.modules:
            return self.resolve(mod, cname, depth + 1)
        return None

    def lookup_attr(self, key: str, attr: str, depth: int = 0) -> Any:
        """A class attribute fact (own, else inherited from a base class the release defines)."""
        f = self.facts.get(key)
        if f is None or depth > 8:
            return None
        val = f.get(attr) if attr == "packed_modules_mapping" else (f.get("mappers") or {}).get(attr)
        if val is not None:
            return self._deref(key, val, attr, depth)
        module = key.partition(":")[0]
        for b in f["bases"]:
            bk = self.resolve(module, b)
            if bk is not None:
                v = self.lookup_attr(bk, attr, depth + 1)
                if v is not None:
                    return v
        return None

    def _deref(self, key: str, val: Any, attr: str, depth: int) -> Any:
        if isinstance(val, list):
            return [self._deref(key, v, attr, depth) for v in val]
        if isinstance(val, dict) and set(val) == {"ref"}:
            ref = val["ref"]
            owner, _, a = ref.rpartition(".")
            if owner:
                ok = self.resolve(key.partition(":")[0], owner)
                if ok is not None:
                    got = self.lookup_attr(ok, a, depth + 1)
                    if got is not None:
                        return got
            return {"ref": ref, "unresolved": True}
        return val

    def tree(self, key: str) -> dict[str, Any]:
        """Leaf layers, FusedMoE paths and stacked tables below a model class."""
        leaves: list[dict[str, Any]] = []
        stacked: list[dict[str, Any]] = []
        experts: list[dict[str, Any]] = []
        seen: set[str] = set()

        def walk(k: str, path: str, prefix_path: str, depth: int) -> None:
            if depth > 10 or (k, path) in seen:
                return
            seen.add((k, path))
            owner, _ = self.inherited(k, "load_weights")  # the tables of the load_weights that runs
            lf = self.facts.get(owner, {}) if owner is not None else {}
            for s in lf.get("stacked", []):
                stacked.append({"class": owner, "at": path, **s})
            for e in lf.get("expert_mapping", []):
                experts.append({"class": owner, "at": path, **e})
            for ch in self._children(k):
                name = ch["attr"]
                pname = ch.get("prefix", name)
                sub = f"{path}.{name}" if path else name
                psub = f"{prefix_path}.{pname}" if prefix_path and pname else (pname or prefix_path)
                cls_name = ch.get("list_of") or ch["class"]
                if "list_of" in ch:
                    sub, psub = sub + ".{N}", psub + ".{N}"
                target = self.resolve(k.partition(":")[0], cls_name.rstrip("()"))
                if target is not None and target != k:
                    walk(target, sub, psub, depth + 1)
                elif _LEAF.search(cls_name):
                    leaf = {"path": sub, "class": cls_name, "quant": ch["quant"]}
                    if psub != sub:
                        leaf["prefix"] = psub
                    if "if" in ch:
                        leaf["if"] = ch["if"]
                    if "ckpt_names" in ch:
                        leaf["ckpt_names"] = ch["ckpt_names"]
                    elif cls_name.rpartition(".")[2] in self.ckpt_defaults:
                        leaf["ckpt_names"] = self.ckpt_defaults[cls_name.rpartition(".")[2]]
                        leaf["ckpt_names_default"] = True
                    leaves.append(leaf)

        walk(key, "", "", 0)
        out: dict[str, Any] = {"leaves": leaves}
        if stacked:
            out["stacked"] = stacked
        if experts:
            out["expert_mapping"] = experts
        return out

    def _children(self, key: str, depth: int = 0) -> list[dict[str, Any]]:
        """Children built by the class's own __init__, else by the nearest base class that has one."""
        f = self.facts.get(key)
        if f is None or depth > 8:
            return []
        if "children" in f:
            return f["children"]
        module = key.partition(":")[0]
        for b in f["bases"]:
            bk = self.resolve(module, b)
            if bk is not None:
                got = self._children(bk, depth + 1)
                if got:
                    return got
        return []

    def inherited(self, key: str, fact: str, depth: int = 0) -> tuple[str | None, Any]:
        """(class that defines it, value) for a per-class fact, own or inherited."""
        f = self.facts.get(key)
        if f is None or depth > 8:
            return None, None
        if fact in f:
            return key, f[fact]
        module = key.partition(":")[0]
        for b in f["bases"]:
            bk = self.resolve(module, b)
            if bk is not None:
                got = self.inherited(bk, fact, depth + 1)
                if got[0] is not None:
                    return got
        return None, None


MOE_LAYER_DIRS = {"sglang": ["sglang/srt/layers/moe"], "vllm": ["vllm/model_executor/layers/fused_moe"]}


def _ckpt_name_defaults(root: Path, framework: str) -> dict[str, Any]:
    """The default ``ckpt_names`` (gate, down, up) of the release's MoE layer constructors, by the name a
    model calls (a function, or a class whose ``__init__`` takes it)."""
    out: dict[str, Any] = {}
    for d in MOE_LAYER_DIRS[framework]:
        for path in sorted((root / d).rglob("*.py")) if (root / d).is_dir() else []:
            tree = _parse(path)
            if tree is None:
                continue
            owners = [(n.name, n) for n in tree.body if isinstance(n, ast.FunctionDef)]
            owners += [(c.name, f) for c in tree.body if isinstance(c, ast.ClassDef) for f in c.body
                       if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
            for name, fn in owners:
                args = fn.args.args + fn.args.kwonlyargs
                defaults = [None] * (len(fn.args.args) - len(fn.args.defaults)) + list(fn.args.defaults) \
                    + list(fn.args.kw_defaults)
                for a, dv in zip(args, defaults):
                    if a.arg == "ckpt_names" and dv is not None:
                        v = _lit(dv)
                        if isinstance(v, list) and len(v) == 3:
                            out[name] = v
    return out


def _draft_overrides(framework: str, root: Path) -> dict[str, list[str]]:
    """What the release rewrites a draft model's architecture to: {"arch:X" or "model_type:x": [Y, ...]}."""
    out: dict[str, set[str]] = {}
    for rel in DRAFT_OVERRIDE_FILES[framework]:
        tree = _parse(root / rel)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.If):
                continue
            keys = _override_keys(node.test)
            if not keys:
                continue
            targets: set[str] = set()
            for st in node.body:
                for sub in ast.walk(st):
                    if isinstance(sub, ast.Assign) and "architectures" in _text(sub.targets[0]):
                        v = _lit(sub.value)
                        targets.update([v] if isinstance(v, str) else [x for x in v if isinstance(x, str)]
                                       if isinstance(v, list) else [])
                    elif isinstance(sub, ast.Dict):
                        for k, v in zip(sub.keys, sub.values):
                            if isinstance(k, ast.Constant) and k.value == "architectures":
                                lv = _lit(v)
                                if isinstance(lv, list):
                                    targets.update(x for x in lv if isinstance(x, str))
            targets = {t for t in targets if DRAFT_NAME.search(t)}
            for k in keys:
                if targets:
                    out.setdefault(k, set()).update(targets)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _override_keys(test: ast.expr) -> list[str]:
    keys: list[str] = []
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left = _text(node.left)
            kind = "arch" if "architectures" in left else "model_type" if left.endswith("model_type") else None
            if kind is None:
                continue
            v = _lit(node.comparators[0])
            vals = [v] if isinstance(v, str) else [x for x in v if isinstance(x, str)] if isinstance(v, list) else []
            if isinstance(node.ops[0], (ast.Eq, ast.In)):
                keys += [f"{kind}:{x}" for x in vals]
    return keys


def _layer_naming(tree: dict[str, Any]) -> str | None:
    paths = [leaf["path"] for leaf in tree.get("leaves", [])]
    if any(p.startswith("model.decoder.") or p.startswith("decoder.") for p in paths):
        return "model.decoder"
    if any(".layers.{N}." in "." + p for p in paths):
        return "model.layers.{N}"
    return None


def extract_classes(framework: str, version: str, source_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Per-class loading facts of ``framework==version`` from its unpacked sources (see module docs).

    Returns ``{"classes": {"module:Class": facts}, "draft_overrides": {...}}``; the caller stamps it
    (wheel digest, extractor version)."""
    root = Path(source_dir)
    rel = _Release(framework, root)
    overrides = _draft_overrides(framework, root)
    by_target: dict[str, list[str]] = {}
    for k, targets in overrides.items():
        for t in targets:
            by_target.setdefault(t, []).append(k)
    classes: dict[str, Any] = {}
    for key, f in sorted(rel.facts.items()):
        cname = key.partition(":")[2]
        is_draft = bool(DRAFT_NAME.search(cname))
        out = {k: v for k, v in f.items() if k not in ("children", "bases")}
        pk = rel.lookup_attr(key, "packed_modules_mapping")
        if pk is not None and "packed_modules_mapping" not in f:
            out["packed_modules_mapping_inherited"] = pk
        elif "packed_modules_mapping" in f:
            out["packed_modules_mapping"] = pk
        for attr in MAPPER_ATTRS:
            mv = rel.lookup_attr(key, attr)
            if mv is not None:
                out.setdefault("mappers_resolved", {})[attr] = mv
        if "packed_init" not in f:
            owner, pi = rel.inherited(key, "packed_init")
            if owner is not None:
                out["packed_init_inherited"] = {"from": owner, "entries": pi}
        has_loader = rel.inherited(key, "load_weights")[0] is not None
        if has_loader or is_draft:
            out["tree"] = rel.tree(key)
            owner, _ = rel.inherited(key, "load_weights")
            if owner is not None and owner != key:
                out["load_weights_from"] = owner
                guard = rel.facts[owner].get("unexpected_other")
                if guard is not None:
                    out["unexpected_other"] = guard  # (the loader that runs is the base class's)
        if is_draft:
            served = by_target.get(cname)
            d: dict[str, Any] = {}
            if served:
                d["serves"] = served
                d["serves_from"] = "draft override"
            else:
                base = _DRAFT_SUFFIX.sub("", cname)
                if base and base != cname:
                    d["serves_name_stem"] = base
                    d["serves_from"] = "class name"
            naming = _layer_naming(out.get("tree", {}))
            if naming:
                d["layer_naming"] = naming
            out["draft"] = d
        module, _, cname = key.partition(":")
        if cname in rel.modules[module].entry:
            out["entry_class"] = True  # SGLang registers a module's EntryClass classes under their own names
        if out:
            out["bases"] = f["bases"]
            classes[key] = out
    # A package's re-exports (`from .model import XForCausalLM` in its __init__), which a registry may name.
    aliases: dict[str, str] = {}
    for mname, m in rel.modules.items():
        if not (root / mname.replace(".", "/") / "__init__.py").is_file():
            continue
        for local in m.imports:
            real = rel.resolve(mname, local)
            if real is not None and real in classes and real != f"{mname}:{local}":
                aliases[f"{mname}:{local}"] = real
    return {"classes": classes, "aliases": dict(sorted(aliases.items())), "draft_overrides": overrides}


# --- the generated file -------------------------------------------------------------------------

def render(doc: dict[str, Any]) -> str:
    """The JSON text of a stamped document: the stamp first, then one class per line (reviewable diffs;
    the dict order of each class is the source's, which the shard order of a mapping follows)."""
    import json

    head = {k: v for k, v in doc.items() if k != "classes"}
    lines = ["{"]
    for k in sorted(head):
        lines.append(f"{json.dumps(k)}: {json.dumps(head[k], sort_keys=True, separators=(',', ':'))},")
    lines.append('"classes": {')
    items = sorted(doc["classes"].items())
    for i, (k, v) in enumerate(items):
        sep = "," if i < len(items) - 1 else ""
        lines.append(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}{sep}")
    lines.append("}}")
    return "\n".join(lines) + "\n"


def write(framework: str, version: str, name: str, doc: dict[str, Any], wheel: Path, extractor: str) -> str:
    """``conformance.knowledge.common.write`` with this file's rendering (``run`` calls it)."""
    from conformance.knowledge.common import EXTRACTED_DIR, REPO, stamp

    dest = EXTRACTED_DIR / framework / version / f"{name}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(render(stamp(framework, version, doc, wheel, extractor)), encoding="utf-8")
    return str(dest.relative_to(REPO))
