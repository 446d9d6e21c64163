"""The model registry and the quantization-method registry of one release, read by AST.

What is read (no import of the package, no torch; every value is a literal of the wheel's source):

* vLLM ``vllm/model_executor/models/registry.py``: the ``_*_MODELS`` tables that ``_VLLM_MODELS``
  merges (architecture -> (module, class); later tables win, as in the merge), the module
  resolution of ``_resolve_module_name`` (a ``vllm.`` path is absolute, anything else lives under
  ``vllm.model_executor.models``), ``_PREVIOUSLY_SUPPORTED_MODELS`` / ``_OOT_SUPPORTED_MODELS``, and
  the texts ``_ModelRegistry._raise_for_unsupported`` raises.
* SGLang ``sglang/srt/models/*.py`` (modules, not sub-packages, as ``import_model_classes`` walks
  them): each module's ``EntryClass`` (one class or a list); the registered name is the class's own
  ``__name__``, so an imported class is named as it was defined. The refusal for an architecture
  nothing registers is ``resolve_transformers_arch``'s (``model_loader/utils.py``: the Transformers
  fallback finds no class of that name and config.json's ``auto_map`` names no ``AutoModel``); the
  registry's own ``_raise_for_unsupported`` text is kept too.
* ``remote_code``: which ``auto_map`` key the Transformers-backend fallback takes as a remote-code
  model class when no listed architecture is registered (vLLM ``_try_resolve_transformers``: any
  key starting with ``AutoModel``; SGLang ``resolve_transformers_arch``: the key ``AutoModel``
  itself, so ``AutoModelForCausalLM`` alone still ends in "Cannot find model module").
* Quantization: vLLM's ``QuantizationMethods`` literal and ``DEPRECATED_QUANTIZATION_METHODS``
  (``layers/quantization/__init__.py``), the refusals of ``ModelConfig._verify_quantization``
  (``config/model.py``) and of ``Platform.verify_quantization`` with ROCm's ``supported_quantization``
  (``platforms/rocm.py``); SGLang's ``BASE_QUANTIZATION_METHODS`` with the entries its platform
  branches add (each branch's condition evaluated for CUDA and for ROCm on gfx950, the default AMD
  GPU: DECISIONS.md), and ``_verify_quantization``'s refusals and ROCm list
  (``configs/model_config.py``).
* The method names that a registered config's ``override_quantization_method`` compares a
  checkpoint's ``quant_method`` with (``override_names``): a name there is rewritten to a registered
  method before the registry is consulted, so it is never refused as unknown (a superset: every
  string those functions compare with).

Architectures whose class or name is a draft (MTP / NextN / Eagle / DFlash / DSpark / draft /
assistant), and vLLM's ``_SPECULATIVE_DECODING_MODELS``, are marked ``draft``.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

DRAFT_RE = re.compile(r"MTP|Mtp|NextN|Eagle|EAGLE|Medusa|DFlash|DSpark|Draft|Assistant")


@lru_cache(maxsize=None)
def _parse(path: str) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8-sig"))


def _functions(tree: ast.AST, name: str) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]


def _template(node: ast.expr) -> tuple[str, list[str]] | None:
    """An f-string or string constant as a template: each replacement field becomes ``{expr}``
    (its source text); literal braces are doubled."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}"), []
    if not isinstance(node, ast.JoinedStr):
        return None
    parts, fields = [], []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(str(v.value).replace("{", "{{").replace("}", "}}"))
        elif isinstance(v, ast.FormattedValue):
            expr = ast.unparse(v.value)
            fields.append(expr)
            parts.append("{" + expr + ("!r" if v.conversion == ord("r") else "") + "}")
    return "".join(parts), fields


def _role(field: str) -> str:
    """What a message's replacement field stands for, for ckptlint to fill it in: ``names`` (the
    list of requested architectures), ``name`` (the one architecture or method), ``choices``
    (everything the release accepts), ``device``, ``version`` / ``url`` (of the arch's table entry)."""
    f = field.lower()
    if "supported" in f or "methods" in f or "keys()" in f:
        return "choices"
    if f == "architectures":
        return "names"
    if "device" in f:
        return "device"
    if "version" in f:
        return "version"
    if "url" in f:
        return "url"
    return "name"


def _remote_code_key(trees: list[ast.AST]) -> dict[str, str] | None:
    """How the release's Transformers-backend fallback finds a remote-code model class in
    config.json's ``auto_map``: ``{"key": "AutoModel", "match": "prefix"}`` when it takes any key
    starting with it (``name.startswith("AutoModel")``), ``"exact"`` when it tests that key alone
    (``"AutoModel" not in auto_map``); None when the fallback tests neither."""
    found = None
    for tree in trees:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith"
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "AutoModel"):
                return {"key": "AutoModel", "match": "prefix"}
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and node.left.value == "AutoModel"
                    and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))):
                found = {"key": "AutoModel", "match": "exact"}
    return found


def _raise_text(trees: list[ast.AST], marker: str) -> dict[str, Any] | None:
    """The first ``raise X(<message>, ...)`` under ``trees`` whose message contains ``marker``:
    ``{"text": template, "fields": [...], "args": number of arguments}`` (with more than one
    argument Python prints the exception as the tuple of its arguments)."""
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
                continue
            t = _template(node.exc.args[0])
            if t is not None and marker in t[0]:
                return {"text": t[0], "fields": {f: _role(f) for f in t[1]}, "args": len(node.exc.args),
                        "exception": ast.unparse(node.exc.func)}
    return None


def _assigned(tree: ast.Module, name: str) -> ast.expr | None:
    """The value of the last top-level (or class-level) assignment of ``name``."""
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            found = node.value
    return found


_SAFE = (ast.Expression, ast.Dict, ast.Constant, ast.Tuple, ast.List, ast.Name, ast.Load, ast.Store, ast.DictComp,
         ast.comprehension, ast.Compare, ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Attribute, ast.Call, ast.BoolOp,
         ast.And, ast.Or, ast.Not, ast.UnaryOp, ast.Starred, ast.Set)


def _literal(node: ast.expr, names: dict[str, Any]) -> Any:
    """Evaluate a literal table that may merge other tables (``**_X``) or filter one with a
    comprehension over ``.items()``: only literals, known names and ``.items()`` calls are allowed."""
    for n in ast.walk(node):
        if not isinstance(n, _SAFE):
            raise ValueError(f"not a literal table: {type(n).__name__} in {ast.unparse(node)[:80]}")
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Attribute) and n.func.attr == "items" and not n.args):
            raise ValueError(f"not a literal table: call {ast.unparse(n)[:80]}")
        if isinstance(n, ast.Attribute) and n.attr != "items":
            raise ValueError(f"not a literal table: attribute {ast.unparse(n)[:80]}")
    code = compile(ast.Expression(node), "<registry>", "eval")
    return eval(code, {"__builtins__": {}}, dict(names))  # noqa: S307 (checked above: literals only)


def _string_list(node: ast.expr | None) -> list[str]:
    if node is None:
        return []
    if isinstance(node, ast.Subscript):  # Literal["a", "b", ...]
        node = node.slice
    if isinstance(node, ast.Call) and node.args:  # list(get_args(X)) and the like: not literal here
        return []
    elts = node.elts if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else []
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _override_names(qdir: Path) -> list[str]:
    """Every string constant that an ``override_quantization_method`` under ``qdir`` compares with."""
    out: set[str] = set()
    for p in sorted(qdir.rglob("*.py")):
        try:
            tree = _parse(str(p))
        except SyntaxError:
            continue
        for fn in _functions(tree, "override_quantization_method"):
            for n in ast.walk(fn):
                if isinstance(n, ast.Compare):
                    for side in [n.left, *n.comparators]:
                        for c in ast.walk(side):
                            if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value:
                                out.add(c.value)
    return sorted(out)


def _is_draft(name: str, cls: str) -> bool:
    return bool(DRAFT_RE.search(name) or DRAFT_RE.search(cls))


# ---------------------------------------------------------------------------------------- vLLM


def _vllm_models(root: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    path = root / "vllm/model_executor/models/registry.py"
    tree = _parse(str(path))
    tables: dict[str, Any] = {}
    order: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and re.fullmatch(r"_[A-Z_]+_MODELS", t.id) and isinstance(node.value, ast.Dict):
                    tables[t.id] = _literal(node.value, tables)
                    order.append(t.id)
    merged_node = _assigned(tree, "_VLLM_MODELS")
    parts = [ast.unparse(k.value if isinstance(k, ast.Starred) else v) for k, v in
             zip(merged_node.keys, merged_node.values) if k is None] if isinstance(merged_node, ast.Dict) else []
    absolute = bool(_functions(tree, "_resolve_module_name"))
    archs: dict[str, Any] = {}
    for table in parts:
        for arch, value in tables[table].items():
            mod, cls = value
            module = mod if absolute and mod.startswith("vllm.") else f"vllm.model_executor.models.{mod}"
            kind = table.strip("_").removesuffix("_MODELS").lower()
            archs[arch] = {"module": module, "class": cls, "table": kind,
                           "draft": kind == "speculative_decoding" or _is_draft(arch, cls)}
    fn = _functions(tree, "_raise_for_unsupported")
    messages = {"unknown": _raise_text(fn, "are not supported for now"),
                "previously_supported": _raise_text(fn, "was supported in vLLM until"),
                "out_of_tree": _raise_text(fn, "not supported in-tree")}
    extra = {"previously_supported": tables.get("_PREVIOUSLY_SUPPORTED_MODELS", {}),
             "out_of_tree": tables.get("_OOT_SUPPORTED_MODELS", {})}
    remote = _remote_code_key(_functions(tree, "_try_resolve_transformers"))
    if remote is not None:
        extra["remote_code"] = remote
    return archs, {"messages": {k: v for k, v in messages.items() if v}, **extra}, \
        [str(path.relative_to(root))]


def _vllm_methods(root: Path) -> dict[str, Any]:
    qinit = root / "vllm/model_executor/layers/quantization/__init__.py"
    tree = _parse(str(qinit))
    names = _string_list(_assigned(tree, "QuantizationMethods"))
    deprecated = _string_list(_assigned(tree, "DEPRECATED_QUANTIZATION_METHODS"))
    model_py = root / "vllm/config/model.py"
    mtree = _parse(str(model_py))
    verify = _functions(mtree, "_verify_quantization")
    rocm_py = root / "vllm/platforms/rocm.py"
    rtree = _parse(str(rocm_py))
    rocm = _string_list(_assigned(rtree, "supported_quantization"))
    device = _assigned(rtree, "device_name")
    iface = root / "vllm/platforms/interface.py"
    platform_msg = _raise_text(_functions(_parse(str(iface)), "verify_quantization"), "not supported in")
    messages = {"unknown": _raise_text(verify, "Unknown quantization method"),
                "deprecated": _raise_text(verify, "is deprecated"),
                "platform": platform_msg,
                "invalid": _raise_text(_functions(tree, "get_quantization_config"), "Invalid quantization method")}
    sources = [str(p.relative_to(root)) for p in (qinit, model_py, rocm_py, iface)]
    return {"names": names, "deprecated": deprecated,
            "platforms": {"rocm": {"supported": rocm or None,
                                   "device_name": device.value if isinstance(device, ast.Constant) else "rocm"}},
            "override_names": _override_names(root / "vllm/model_executor/layers/quantization"),
            "messages": {k: v for k, v in messages.items() if v}, "sources": sources}


# -------------------------------------------------------------------------------------- SGLang


def _class_name(tree: ast.Module, name: str, seen: int = 0) -> str:
    """The ``__name__`` of the class a module-level name refers to: a class defined here keeps its
    name, an imported class the name it was defined with, an alias the name it aliases."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return name
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if (a.asname or a.name) == name:
                    return a.name
    value = _assigned(tree, name)
    if isinstance(value, ast.Name) and seen < 8:
        return _class_name(tree, value.id, seen + 1)
    return name


def _class_module(tree: ast.Module, name: str, here: str) -> str:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return here
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if (a.asname or a.name) == name:
                    if node.level:
                        base = here.rsplit(".", node.level)[0]
                        return f"{base}.{node.module}"
                    return node.module
    return here


def _sglang_models(root: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    mdir = root / "sglang/srt/models"
    archs: dict[str, Any] = {}
    for p in sorted(mdir.glob("*.py")):
        tree = _parse(str(p))
        here = f"sglang.srt.models.{p.stem}"
        entry = None
        for node in tree.body:  # the module-level EntryClass (the last assignment wins)
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets):
                entry = node.value
        if entry is None:
            continue
        elts = entry.elts if isinstance(entry, (ast.List, ast.Tuple)) else [entry]
        for e in elts:
            if not isinstance(e, ast.Name):
                continue
            cls = _class_name(tree, e.id)
            archs[cls] = {"module": _class_module(tree, e.id, here), "class": cls, "table": "entry_class",
                          "entry_module": here, "draft": _is_draft(cls, cls)}
    reg = root / "sglang/srt/models/registry.py"
    utils = root / "sglang/srt/model_loader/utils.py"
    fallback = _functions(_parse(str(utils)), "resolve_transformers_arch") if utils.is_file() else []
    messages = {"unknown": _raise_text(fallback, "Cannot find model module"),
                "registry_unknown": _raise_text(_functions(_parse(str(reg)), "_raise_for_unsupported"),
                                                "are not supported for now")}
    if messages["unknown"] is None:
        messages["unknown"] = messages["registry_unknown"]
    sources = ["sglang/srt/models/*.py (EntryClass)", str(reg.relative_to(root))] + (
        [str(utils.relative_to(root))] if utils.is_file() else [])
    extra: dict[str, Any] = {}
    remote = _remote_code_key(fallback)
    if remote is not None:
        extra["remote_code"] = remote
    return archs, {"messages": {k: v for k, v in messages.items() if v}, **extra}, sources


_PLATFORM_FALSE = ("cpu", "xpu", "npu", "mps", "musa", "hpu", "tpu", "mlx", "out_of_tree", "amx")


def _platform_value(node: ast.expr, platform: str) -> bool | None:
    """Truth of an SGLang platform test (``is_cuda()``, ``_is_hip``, ``is_npu()``, ...) on
    ``platform`` ("cuda", or "rocm" on gfx950); None when the test is not a platform probe."""
    if isinstance(node, ast.BoolOp):
        vals = [_platform_value(v, platform) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in vals else None if None in vals else True
        return True if True in vals else None if None in vals else False
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _platform_value(node.operand, platform)
        return None if v is None else not v
    if isinstance(node, ast.Call) and not node.args:
        node = node.func
    text = ast.unparse(node).lower()
    if "gfx95" in text or "hip" in text or "rocm" in text:
        return platform == "rocm"
    if "cuda" in text:
        return platform == "cuda"
    if any(w in text for w in _PLATFORM_FALSE):
        return False
    return None


def _sglang_methods(root: Path) -> dict[str, Any]:
    qinit = root / "sglang/srt/layers/quantization/__init__.py"
    tree = _parse(str(qinit))
    names: dict[str, set[str] | None] = {}  # name -> platforms it is registered on (None: always)

    def add(keys: list[str], platforms: set[str] | None) -> None:
        for k in keys:
            if k in names and names[k] is None:
                continue
            if platforms is None:
                names[k] = None
            else:
                names[k] = (names.get(k) or set()) | platforms

    def keys_of(d: ast.expr) -> list[str]:
        return [k.value for k in getattr(d, "keys", []) if isinstance(k, ast.Constant) and isinstance(k.value, str)]

    def visit(body: list[ast.stmt], platforms: set[str] | None) -> None:
        for node in body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "BASE_QUANTIZATION_METHODS" for t in targets):
                    add(keys_of(node.value), platforms)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                f = node.value.func
                if isinstance(f, ast.Attribute) and f.attr == "update" and ast.unparse(f.value) in (
                        "BASE_QUANTIZATION_METHODS", "QUANTIZATION_METHODS") and node.value.args:
                    add(keys_of(node.value.args[0]), platforms)
            elif isinstance(node, ast.If):
                on = {p for p in ("cuda", "rocm") if _platform_value(node.test, p) is not False}
                off = {p for p in ("cuda", "rocm") if _platform_value(node.test, p) is not True}
                visit(node.body, on if platforms is None else platforms & on)
                visit(node.orelse, off if platforms is None else platforms & off)
            elif isinstance(node, (ast.Try,)):
                visit(node.body, platforms)
    visit(tree.body, None)
    mc = root / "sglang/srt/configs/model_config.py"
    verify = _functions(_parse(str(mc)), "_verify_quantization")
    rocm = []
    for fn in verify:
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "rocm_supported_quantization"
                                                 for t in n.targets):
                rocm = _string_list(n.value)
    messages = {"unknown": _raise_text(verify, "Unknown quantization method"),
                "platform": _raise_text(verify, "not supported in ROCm"),
                "invalid": _raise_text(_functions(tree, "get_quantization_config"), "Invalid quantization method")}
    registered = {k: (sorted(v) if v is not None else None) for k, v in names.items()}
    return {"names": [k for k, v in registered.items() if v is None or v],
            "registered_on": {k: v for k, v in registered.items() if v is not None},
            "deprecated": [],
            "platforms": {"rocm": {"supported": rocm or None, "device_name": "ROCm"}},
            "override_names": _override_names(root / "sglang/srt/layers/quantization"),
            "messages": {k: v for k, v in messages.items() if v},
            "sources": [str(qinit.relative_to(root)), str(mc.relative_to(root))]}


def extract(framework: str, version: str, root: Path) -> dict[str, Any]:
    root = Path(root)
    if framework == "vllm":
        archs, arch_extra, arch_sources = _vllm_models(root)
        methods = _vllm_methods(root)
    elif framework == "sglang":
        archs, arch_extra, arch_sources = _sglang_models(root)
        methods = _sglang_methods(root)
    else:
        raise ValueError(f"unknown framework {framework!r}")
    return {"architectures": dict(sorted(archs.items())), "architecture_refusals": arch_extra,
            "methods": methods, "sources": arch_sources + methods.pop("sources")}
