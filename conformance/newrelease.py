"""What a new framework release changes in the code that loads checkpoints: an AST inventory of two
unpacked releases, compared unit by unit (``scripts/conformance.py new``; docs/conformance.md).

Nothing is imported or executed: every file is parsed with ``ast`` and each unit is cut out of its
file by its node's line range (``lineno`` / ``end_lineno``), so a method followed by more code is
never lost. The units of one release (``inventory``):

* ``load_weights`` of every class of the model packages (main models, inner models, and every
  draft: MTP / NextN / Eagle / DFlash / Medusa classes and whatever the speculative-decoding
  registry names), and what it delegates to in its own file or package: each ``self.<method>(...)``
  of the same class and each module-level function it calls (``maybe_fuse_shared_experts``,
  ``make_expert_params_mapping``, ...), followed transitively;
* the class-level tables that rename: ``packed_modules_mapping``, ``hf_to_*_mapper`` /
  ``WeightsMapper`` objects, ``*_mapping``, skip and ignore prefix/suffix lists, and the statements
  of ``__init__`` that edit ``packed_modules_mapping``;
* the shared loader code (``AutoWeightsLoader``, ``WeightsMapper``, the default loader's
  ``load_weights`` and completeness check);
* both registries: every registered architecture -> ``module:Class`` (drafts separately), and the
  quantization methods (with their config class, and the deprecated ones).

``compare`` sorts each changed unit into one of

* ``formatting`` -- the same AST (``ast.dump`` ignores line numbers, layout and comments);
* ``cosmetic`` -- the same AST once docstrings, type annotations and log/warning messages are blanked and formatted
  strings (f-strings, ``str.format``, ``%``) are written in one style; the reasons say which;
* ``behaviour`` -- anything else; the report prints a unified diff of it.

(Formatted strings are compared as one template plus arguments whatever their style, so turning a
``.format`` into an f-string is cosmetic, while a changed text -- a weight name built with an
f-string, an error message -- is a behaviour change.)

A unit whose qualified name left one module and appeared in another is paired as ``moved``. Each
unit of a class names the registered architectures it ``serves``: those whose class is it, inherits
from it or builds it in ``__init__`` (the children ``AutoWeightsLoader`` hands their own
``load_weights``), transitively, through per-platform re-exports.
"""

from __future__ import annotations

import ast
import copy
import difflib
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

# class attributes that rename, fuse or skip checkpoint names
LOADING_ATTR = re.compile(r"(packed_modules_mapping|_mapper|_mapping|skip_prefixes|skip_substrs|"
                          r"ignore_unexpected_prefixes|ignore_unexpected_suffixes|_keys_to_ignore\w*)$")
DRAFT_NAME = re.compile(r"(MTP|NextN|Nextn|Eagle|EAGLE|Medusa|DFlash|DSpark|Draft|Speculator|MLPSpeculator)")
LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log",
                         "warning_once", "info_once", "debug_once", "print_warning_once"})
LOG_FUNCS = frozenset({"print", "warn", "print_warning_once", "warning_once", "info_once"})


@dataclass(frozen=True)
class Layout:
    """Where one framework keeps its loading code (paths relative to the unpacked release)."""
    package: str
    model_dirs: tuple[str, ...]
    # (file, class or function names; empty: every function and method) of shared loader code
    loader_units: tuple[tuple[str, tuple[str, ...]], ...]
    model_registry: str | None  # vLLM's registry.py; None: SGLang's EntryClass per model file
    models_pkg: str  # the package the registry's relative module names are in
    draft_tables: tuple[str, ...]
    quant_registry: str


LAYOUTS = {
    "vllm": Layout(
        package="vllm",
        model_dirs=("vllm/model_executor/models", "vllm/models"),
        loader_units=(("vllm/model_executor/models/utils.py", ("AutoWeightsLoader", "WeightsMapper")),
                      ("vllm/model_executor/model_loader/default_loader.py",
                       ("DefaultModelLoader.load_weights", "DefaultModelLoader.track_weights_loading")),
                      ("vllm/model_executor/layers/fused_moe/layer.py", ("FusedMoE.make_expert_params_mapping",))),
        model_registry="vllm/model_executor/models/registry.py", models_pkg="vllm.model_executor.models",
        draft_tables=("_SPECULATIVE_DECODING_MODELS",),
        quant_registry="vllm/model_executor/layers/quantization/__init__.py"),
    "sglang": Layout(
        package="sglang",
        model_dirs=("sglang/srt/models",),
        loader_units=(("sglang/srt/model_loader/loader.py", ("DefaultModelLoader.load_weights_and_postprocess",
                                                             "DefaultModelLoader.load_model")),
                      ("sglang/srt/layers/moe/fused_moe_triton/layer.py", ("FusedMoE.make_expert_params_mapping",))),
        model_registry=None, models_pkg="sglang.srt.models",
        draft_tables=(),
        quant_registry="sglang/srt/layers/quantization/__init__.py"),
}


@dataclass
class Unit:
    key: str  # "module:Qual.name", "registry:model:<arch>", ...
    kind: str  # load_weights | helper | table | init-mapping | loader | registry
    source: str  # the text compared (a definition, or a registry value)
    module: str = ""
    cls: str | None = None
    draft: bool = False

    @property
    def qual(self) -> str:
        return self.key.partition(":")[2]


@dataclass
class Inventory:
    units: dict[str, Unit] = field(default_factory=dict)
    archs: dict[str, str] = field(default_factory=dict)  # architecture -> "module:Class"
    drafts: dict[str, str] = field(default_factory=dict)
    methods: dict[str, str] = field(default_factory=dict)  # quant method -> config class ("" unknown)
    deprecated: set[str] = field(default_factory=set)
    files: int = 0
    # "module:Class" -> the classes it inherits from or builds in __init__ (``self.model = XModel(...)``):
    # where AutoWeightsLoader's delegation goes
    links: dict[str, set[str]] = field(default_factory=dict)
    _served: dict[str, list[str]] | None = None

    def served(self, models_pkg: str) -> dict[str, list[str]]:
        """"module:Class" -> the registered architectures and drafts whose class is it, inherits
        from it or builds it (transitively)."""
        if self._served is None:
            out: dict[str, set[str]] = {}
            for table in (self.archs, self.drafts):
                for arch, target in table.items():
                    start = self.resolve(_full(target, models_pkg + ".x"))
                    seen, todo = set(), [start]
                    while todo:
                        k = todo.pop()
                        if k in seen:
                            continue
                        seen.add(k)
                        todo += [self.resolve(c) for c in self.links.get(k, ())]
                    for k in seen:
                        out.setdefault(k, set()).add(arch)
            self._served = {k: sorted(v) for k, v in out.items()}
        return self._served

    def resolve(self, key: str) -> str:
        """A re-exported ``module:Class`` -> the module that defines it (when scanned)."""
        for _ in range(4):
            nxt = self.reexports.get(key)
            if nxt is None or nxt == key:
                break
            key = nxt
        return key

    reexports: dict[str, str] = field(default_factory=dict)

    def add(self, u: Unit) -> None:
        self.units.setdefault(u.key, u)


# --- cutting units out of a file ----------------------------------------------------------------

def first_line(node: ast.AST) -> int:
    decos = getattr(node, "decorator_list", None) or []
    return min([node.lineno] + [d.lineno for d in decos])


def segment(lines: list[str], node: ast.AST) -> str:
    """The node's own text, from its first decorator to its ``end_lineno``, dedented."""
    return textwrap.dedent("".join(lines[first_line(node) - 1: node.end_lineno]))


def module_name(root: Path, path: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _calls(fn: ast.AST) -> tuple[set[str], set[str]]:
    """(self.<method> names, bare function names) a function calls."""
    meths, funcs = set(), set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls"):
                meths.add(f.attr)
            elif isinstance(f, ast.Name):
                funcs.add(f.id)
    return meths, funcs


class _File:
    def __init__(self, root: Path, path: Path) -> None:
        self.path, self.module = path, module_name(root, path)
        self.text = path.read_text(encoding="utf-8", errors="replace")
        self.lines = self.text.splitlines(keepends=True)
        self.tree = ast.parse(self.text)
        self.classes = {n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}
        self.funcs = {n.name: n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        # local name -> "module.name", from every `from ... import` of the file (the first wins: a
        # package that re-exports per platform binds its CUDA branch first)
        self.imports: dict[str, str] = {}
        for n in ast.walk(self.tree):
            if isinstance(n, ast.ImportFrom):
                base = _resolve_from(self.module, n, path.name == "__init__.py")
                for a in n.names:
                    self.imports.setdefault(a.asname or a.name, f"{base}.{a.name}")

    def methods(self, cls: ast.ClassDef) -> dict[str, ast.AST]:
        return {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _resolve_from(module: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_pkg:
        parts = parts[:-1]
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


class _Scanner:
    def __init__(self, root: Path, layout: Layout) -> None:
        self.root, self.layout = Path(root), layout
        self.inv = Inventory()
        self._files: dict[Path, _File | None] = {}
        self._loader_paths = {self.root / rel for rel, _ in layout.loader_units}

    def file(self, path: Path) -> _File | None:
        if path not in self._files:
            try:
                self._files[path] = _File(self.root, path)
            except (SyntaxError, ValueError, OSError):
                self._files[path] = None
        return self._files[path]

    def file_of_module(self, module: str) -> _File | None:
        base = self.root.joinpath(*module.split("."))
        for p in (base.with_suffix(".py"), base / "__init__.py"):
            if p.is_file():
                return self.file(p)
        return None

    # -- model files
    def scan_models(self, drafts: set[str]) -> None:
        for d in self.layout.model_dirs:
            base = self.root / d
            if not base.is_dir():
                continue
            for p in sorted(base.rglob("*.py")):
                text = p.read_text(encoding="utf-8", errors="replace")
                if not any(k in text for k in ("load_weights", "packed_modules_mapping", "_mapper")):
                    if p.name == "__init__.py" and (f := self.file(p)) is not None:
                        self._reexports(f)  # a package that re-exports its classes (per platform)
                    continue
                f = self.file(p)
                if f is None:
                    continue
                self.inv.files += 1
                self._reexports(f)
                for cname, cls in f.classes.items():
                    self._scan_class(f, cls, draft=cname in drafts or bool(DRAFT_NAME.search(cname)))

    def _ref(self, f: _File, name: str) -> str | None:
        """``module:Class`` for a class name used in file ``f`` (its own, or imported from the package)."""
        if name in f.classes:
            return None if f.path in self._loader_paths else f"{f.module}:{name}"
        full = f.imports.get(name)
        if full is None or full.split(".")[0] != self.layout.package:
            return None
        mod, _, attr = full.rpartition(".")
        if self.root.joinpath(*mod.split(".")).with_suffix(".py") in self._loader_paths:
            return None  # the shared loader's classes (WeightsMapper, ...) serve everyone
        return f"{mod}:{attr}"

    def _links(self, f: _File, cls: ast.ClassDef) -> None:
        out = set()
        for b in cls.bases:
            if isinstance(b, ast.Name) and (r := self._ref(f, b.id)):
                out.add(r)
        init = f.methods(cls).get("__init__")
        for n in ast.walk(init) if init is not None else ():
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name) \
                    and any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                            for t in n.targets):
                if r := self._ref(f, n.value.func.id):
                    out.add(r)
        for st in cls.body:  # model_cls = XModel
            if isinstance(st, ast.Assign) and isinstance(st.value, ast.Name) and (r := self._ref(f, st.value.id)):
                out.add(r)
        out.discard(f"{f.module}:{cls.name}")
        if out:
            self.inv.links[f"{f.module}:{cls.name}"] = out

    def _reexports(self, f: _File) -> None:
        for local, full in f.imports.items():
            if local in f.classes or full.split(".")[0] != self.layout.package:
                continue
            mod, _, attr = full.rpartition(".")
            self.inv.reexports.setdefault(f"{f.module}:{local}", f"{mod}:{attr}")

    def _scan_class(self, f: _File, cls: ast.ClassDef, draft: bool) -> None:
        self._links(f, cls)
        meths = f.methods(cls)
        for st in cls.body:
            targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Name) and LOADING_ATTR.search(t.id):
                    self.inv.add(Unit(f"{f.module}:{cls.name}.{t.id}", "table", segment(f.lines, st),
                                      f.module, cls.name, draft))
        init = meths.get("__init__")
        if init is not None:
            edits = [st for st in init.body if "packed_modules_mapping" in segment(f.lines, st)]
            if edits:
                self.inv.add(Unit(f"{f.module}:{cls.name}.__init__[packed_modules_mapping]", "init-mapping",
                                  "".join(segment(f.lines, st) for st in edits), f.module, cls.name, draft))
        lw = meths.get("load_weights")
        if lw is None:
            return
        self.inv.add(Unit(f"{f.module}:{cls.name}.load_weights", "load_weights", segment(f.lines, lw),
                          f.module, cls.name, draft))
        self._follow(f, cls, lw, draft, depth=0)

    def _follow(self, f: _File, cls: ast.ClassDef | None, fn: ast.AST, draft: bool, depth: int) -> None:
        """The methods of the same class and the package functions ``fn`` calls, transitively."""
        if depth > 4:
            return
        meths, funcs = _calls(fn)
        own = f.methods(cls) if cls is not None else {}
        for m in sorted(meths):
            node = own.get(m)
            if node is None or m in ("load_weights", "__init__"):
                continue
            key = f"{f.module}:{cls.name}.{m}"
            if key not in self.inv.units:
                self.inv.add(Unit(key, "helper", segment(f.lines, node), f.module, cls.name, draft))
                self._follow(f, cls, node, draft, depth + 1)
        for name in sorted(funcs):
            tf, node = f, f.funcs.get(name)
            if node is None and name in f.imports:
                mod, _, attr = f.imports[name].rpartition(".")
                if mod.split(".")[0] == self.layout.package:
                    tf = self.file_of_module(mod)
                    node = tf.funcs.get(attr) if tf is not None else None
                    name = attr
            if node is None or tf is None:
                continue
            key = f"{tf.module}:{name}"
            if key not in self.inv.units:
                self.inv.add(Unit(key, "helper", segment(tf.lines, node), tf.module, None, False))
                self._follow(tf, None, node, False, depth + 1)

    # -- shared loader code
    def scan_loader(self) -> None:
        for rel, names in self.layout.loader_units:
            p = self.root / rel
            f = self.file(p) if p.is_file() else None
            if f is None:
                continue
            for name in names:
                cname, _, meth = name.partition(".")
                node = f.classes.get(cname) or f.funcs.get(cname)
                if node is None:
                    continue
                if meth:
                    node = f.methods(node).get(meth) if isinstance(node, ast.ClassDef) else None
                    if node is None:
                        continue
                    self.inv.add(Unit(f"{f.module}:{name}", "loader", segment(f.lines, node), f.module, cname))
                elif isinstance(node, ast.ClassDef):
                    for m, mn in f.methods(node).items():
                        self.inv.add(Unit(f"{f.module}:{cname}.{m}", "loader", segment(f.lines, mn), f.module, cname))
                    fields = [st for st in node.body if isinstance(st, (ast.Assign, ast.AnnAssign))]
                    if fields:
                        self.inv.add(Unit(f"{f.module}:{cname}[fields]", "loader",
                                          "".join(segment(f.lines, st) for st in fields), f.module, cname))
                else:
                    self.inv.add(Unit(f"{f.module}:{name}", "loader", segment(f.lines, node), f.module))

    # -- registries
    def scan_model_registry(self) -> None:
        lay = self.layout
        if lay.model_registry is not None:
            p = self.root / lay.model_registry
            f = self.file(p) if p.is_file() else None
            if f is None:
                return
            tables: dict[str, dict[str, str]] = {}
            merge: list[str] = []  # `_VLLM_MODELS = {**_A, **_B, ...}`: the order later tables win in
            for st in f.tree.body:
                t = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else \
                    st.target if isinstance(st, ast.AnnAssign) else None
                if not (isinstance(t, ast.Name) and isinstance(st.value, ast.Dict)):
                    continue
                if st.value.keys and all(k is None for k in st.value.keys):
                    merge = [v.id for v in st.value.values if isinstance(v, ast.Name)]
                    continue
                table = tables.setdefault(t.id, {})
                for k, v in zip(st.value.keys, st.value.values):
                    if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                        continue
                    if isinstance(v, ast.Tuple) and len(v.elts) == 2 and all(
                            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in v.elts):
                        table[k.value] = f"{v.elts[0].value}:{v.elts[1].value}"
            for name in merge or list(tables):
                dest = self.inv.drafts if name in lay.draft_tables else self.inv.archs
                dest.update(tables.get(name, {}))
            return
        for d in lay.model_dirs:
            for p in sorted((self.root / d).rglob("*.py")):
                text = p.read_text(encoding="utf-8", errors="replace")
                if "EntryClass" not in text:
                    continue
                f = self.file(p)
                if f is None:
                    continue
                for st in f.tree.body:
                    if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass"
                                                          for t in st.targets):
                        elts = st.value.elts if isinstance(st.value, (ast.List, ast.Tuple)) else [st.value]
                        for e in elts:
                            if isinstance(e, ast.Name):
                                table = self.inv.drafts if DRAFT_NAME.search(e.id) else self.inv.archs
                                table[e.id] = f"{f.module}:{e.id}"

    def scan_quant_registry(self) -> None:
        p = self.root / self.layout.quant_registry
        f = self.file(p) if p.is_file() else None
        if f is None:
            return
        for n in ast.walk(f.tree):
            if isinstance(n, ast.Dict):
                pairs = [(k.value, v.id) for k, v in zip(n.keys, n.values)
                         if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Name)]
                if pairs and all(v.endswith("Config") for _, v in pairs):
                    for k, v in pairs:
                        self.inv.methods[k] = v
        for st in f.tree.body:
            t = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else \
                st.target if isinstance(st, ast.AnnAssign) else None
            if not isinstance(t, ast.Name) or st.value is None:
                continue
            strings = [c.value for c in ast.walk(st.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            if "DEPRECATED" in t.id.upper():
                self.inv.deprecated |= set(strings)
            elif t.id == "QuantizationMethods" or (t.id.isupper() and "METHOD" in t.id and isinstance(
                    st.value, (ast.List, ast.Tuple, ast.Subscript, ast.Set))):
                for s in strings:
                    self.inv.methods.setdefault(s, "")

    def registry_units(self) -> None:
        for table, kind in ((self.inv.archs, "model"), (self.inv.drafts, "draft")):
            for arch, target in table.items():
                self.inv.add(Unit(f"registry:{kind}:{arch}", "registry", target))
        for m, c in self.inv.methods.items():
            dep = " (deprecated)" if m in self.inv.deprecated else ""
            self.inv.add(Unit(f"registry:quantization:{m}", "registry", f"{c}{dep}"))


def inventory(root: Path, framework: str) -> Inventory:
    """The loading-relevant units of the release unpacked at ``root`` (``<package>/...`` below it)."""
    sc = _Scanner(Path(root), LAYOUTS[framework])
    sc.scan_model_registry()
    sc.scan_quant_registry()
    drafts = {v.partition(":")[2] for v in sc.inv.drafts.values()}
    sc.scan_models(drafts)
    sc.scan_loader()
    sc.registry_units()
    return sc.inv


# --- normalising and classifying ------------------------------------------------------------------

def _parse(src: str) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(src))
    except SyntaxError:
        return None


def dump(src: str) -> str | None:
    """The AST without positions (``ast.dump`` leaves line/column attributes out by default)."""
    tree = _parse(src)
    return ast.dump(tree) if tree is not None else None


class _Blank(ast.NodeTransformer):
    """Blanks docstrings and log/warning messages, and writes every formatted string (f-string,
    ``str.format``, ``%``) as one canonical template with its arguments, noting which it touched.
    A formatted string's text is kept (weight names are built with f-strings): only a change of
    style is cosmetic."""

    def __init__(self) -> None:
        self.hits: set[str] = set()

    def _docstring(self, node):
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
                isinstance(body[0].value.value, str):
            del body[0]  # dropped, so adding or removing one is cosmetic too
            if not body:
                body.append(ast.Pass())
            self.hits.add("docstring")
        self.generic_visit(node)
        return node

    visit_ClassDef = visit_Module = _docstring

    def visit_FunctionDef(self, node):
        args = node.args
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                a.annotation = None
                self.hits.add("annotations")
        if node.returns is not None:
            node.returns = None
            self.hits.add("annotations")
        return self._docstring(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node: ast.AnnAssign):
        node.annotation = ast.Constant("<annotation>")
        self.hits.add("annotations")
        self.generic_visit(node)
        return node

    @staticmethod
    def _template(template: str, args: list[ast.expr]) -> ast.Call:
        return ast.Call(ast.Name("<formatted>", ast.Load()), [ast.Constant(template), *args], [])

    def visit_Call(self, node: ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        is_log = (isinstance(f, ast.Attribute) and name in LOG_METHODS) or (
            isinstance(f, ast.Name) and name in LOG_FUNCS)
        if is_log:
            self.hits.add("log message")
            return ast.Call(ast.Name("<log>", ast.Load()), [], [])
        self.generic_visit(node)
        if isinstance(f, ast.Attribute) and name == "format" and isinstance(f.value, ast.Constant) and \
                isinstance(f.value.value, str) and not node.keywords:
            import string

            try:
                parts = list(string.Formatter().parse(f.value.value))
            except ValueError:
                return node
            if any(fld not in (None, "") or spec or conv for _, fld, spec, conv in parts):
                return node  # numbered/named fields, specs: left as written
            text = "".join(lit.replace("{", "{{").replace("}", "}}") + ("{}" if fld is not None else "")
                           for lit, fld, _, _ in parts)
            self.hits.add("formatted-string style")
            return self._template(text, list(node.args))
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr):
        text, args = "", []
        for v in node.values:
            if isinstance(v, ast.Constant):
                text += str(v.value).replace("{", "{{").replace("}", "}}")
            elif isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None:
                text += "{}"
                args.append(self.visit(v.value))
            else:
                self.generic_visit(node)
                return node
        self.hits.add("formatted-string style")
        return self._template(text, args)

    def visit_BinOp(self, node: ast.BinOp):
        self.generic_visit(node)
        if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            fmt = node.left.value
            if re.search(r"%(?![sdri%])", fmt):
                return node
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            text = re.sub(r"%[sdri]", "{}", fmt.replace("{", "{{").replace("}", "}}")).replace("%%", "%")
            self.hits.add("formatted-string style")
            return self._template(text, list(args))
        return node


def normalized(src: str) -> tuple[str | None, set[str]]:
    """``ast.dump`` of the source with docstrings and log calls blanked and formatted strings in one
    style, and which of those it held."""
    tree = _parse(src)
    if tree is None:
        return None, set()
    b = _Blank()
    tree = b.visit(copy.deepcopy(tree))
    return ast.dump(tree), b.hits


def classify(old: str, new: str) -> tuple[str, list[str]]:
    """``("same" | "formatting" | "cosmetic" | "behaviour", reasons)`` for two versions of a unit."""
    if old == new:
        return "same", []
    a, b = dump(old), dump(new)
    if a is not None and a == b:
        return "formatting", ["layout or comments only"]
    (na, ha), (nb, hb) = normalized(old), normalized(new)
    if na is not None and na == nb:
        return "cosmetic", sorted(ha | hb)
    return "behaviour", []


def unified(old: str, new: str, a: str = "old", b: str = "new", limit: int = 40, context: int = 2) -> list[str]:
    """A unified diff of two unit sources, at most ``limit`` lines (then a count of the rest)."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), a, b, n=context, lineterm=""))
    if len(lines) > limit:
        lines = lines[:limit] + [f"... {len(lines) - limit} more diff lines"]
    return lines


# --- comparing two releases ----------------------------------------------------------------------

@dataclass
class Change:
    key: str
    kind: str
    verdict: str  # formatting | cosmetic | behaviour | added | removed | moved
    reasons: list[str]
    old: Unit | None
    new: Unit | None


@dataclass
class Comparison:
    old: Inventory
    new: Inventory
    changes: list[Change]

    def of(self, verdict: str, *, units: bool = True) -> list[Change]:
        return [c for c in self.changes if c.verdict == verdict and (c.kind != "registry") == units]


def compare(old: Inventory, new: Inventory) -> Comparison:
    changes: list[Change] = []
    gone = {k: u for k, u in old.units.items() if k not in new.units}
    came = {k: u for k, u in new.units.items() if k not in old.units}
    # a unit whose qualified name moved to another module: compared with its old self
    by_qual: dict[str, list[str]] = {}
    for k, u in came.items():
        if u.kind != "registry":
            by_qual.setdefault(u.qual, []).append(k)
    gone_quals: dict[str, int] = {}
    for u in gone.values():
        gone_quals[u.qual] = gone_quals.get(u.qual, 0) + 1
    for k, u in list(gone.items()):  # only a one-to-one move is paired
        if u.kind == "registry" or len(by_qual.get(u.qual, [])) != 1 or gone_quals[u.qual] != 1:
            continue
        nk = by_qual[u.qual][0]
        nu = came.pop(nk)
        del gone[k]
        verdict, reasons = classify(u.source, nu.source)
        changes.append(Change(nk, u.kind, "moved", [f"from {u.module}", *([verdict] if verdict != "same" else [])]
                              + reasons, u, nu))
    for k in sorted(old.units.keys() & new.units.keys()):
        a, b = old.units[k], new.units[k]
        verdict, reasons = classify(a.source, b.source) if a.kind != "registry" else (
            ("same", []) if a.source == b.source else ("behaviour", []))
        if verdict != "same":
            changes.append(Change(k, a.kind, verdict, reasons, a, b))
    changes += [Change(k, u.kind, "removed", [], u, None) for k, u in sorted(gone.items())]
    changes += [Change(k, u.kind, "added", [], None, u) for k, u in sorted(came.items())]
    return Comparison(old, new, changes)


def serves(inv: Inventory, unit: Unit, models_pkg: str = "") -> list[str]:
    """The registered architectures / drafts that reach the unit's class: their registered class
    is it, inherits from it or builds it in ``__init__`` (``self.model = XModel(...)``), transitively
    -- AutoWeightsLoader hands each child module its own ``load_weights``."""
    if unit.cls is None:
        return []
    return inv.served(models_pkg or _models_pkg_of(unit.module)).get(f"{unit.module}:{unit.cls}", [])


def _models_pkg_of(module: str) -> str:
    return next((LAYOUTS[fw].models_pkg for fw in LAYOUTS if module.startswith(LAYOUTS[fw].package + ".")),
                module.rpartition(".")[0])


def _full(target: str, near: str) -> str:
    """A registry value ``module:Class`` with the module made absolute (vLLM names its own model
    modules relative to the models package)."""
    mod, _, cls = target.partition(":")
    if "." not in mod:
        mod = f"{near.rpartition('.')[0] if near.count('.') >= 3 else near}.{mod}"
    return f"{mod}:{cls}"


def tracked_modules(inv: Inventory, tracked: set[str], models_pkg: str) -> set[str]:
    """The modules that define a class the target data models (an architecture or draft it names,
    found through the registry), and the package they re-export from."""
    out = set()
    for table in (inv.archs, inv.drafts):
        for arch, target in table.items():
            mod, _, cls = target.partition(":")
            if arch in tracked or cls in tracked:
                mod = mod if "." in mod else f"{models_pkg}.{mod}"
                out.add(mod)
    return out


def raises(src: str) -> list[str]:
    """The exceptions a unit raises, each as ``Type: message`` (the first argument's text)."""
    tree = _parse(src)
    out = []
    for n in ast.walk(tree) if tree is not None else ():
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call):
            args = n.exc.args
            msg = ast.unparse(args[0]) if args else ""
            out.append(f"{ast.unparse(n.exc.func)}: {msg}"[:140])
    return out


def _stat(old: str, new: str) -> str:
    d = list(difflib.unified_diff(old.splitlines(), new.splitlines(), n=0, lineterm=""))
    plus = sum(1 for ln in d if ln.startswith("+") and not ln.startswith("+++"))
    minus = sum(1 for ln in d if ln.startswith("-") and not ln.startswith("---"))
    return f"+{plus} -{minus} lines"


def report(cmp: Comparison, *, old_name: str, new_name: str, diff_lines: int = 60, tracked: set[str] | None = None,
           verbose: bool = False, all_diffs: bool = False, models_pkg: str = "") -> list[str]:
    """The text report: registries, then the behaviour changes -- with a unified diff for the units
    of classes the target data models (``tracked``: its architectures and draft classes, marked
    ``*``; ``all_diffs``: every unit) and for the shared loader code, one line with the raises it
    lost or gained for the others --, units added and removed, one line per cosmetic change and a
    count of the formatting-only ones."""
    tracked = tracked or set()
    out: list[str] = []
    o, n = cmp.old, cmp.new
    mods = tracked_modules(o, tracked, models_pkg) | tracked_modules(n, tracked, models_pkg)

    def marked(u: Unit) -> bool:
        if any(u.module == m or u.module.startswith(m + ".") for m in mods):
            return True
        return bool(tracked & {*serves(o, u, models_pkg), *serves(n, u, models_pkg)})

    out.append(f"== loading code {old_name} -> {new_name}: {len(o.units)} / {len(n.units)} units "
               f"({o.files} / {n.files} model files)")
    out += _registry_lines(cmp, tracked)

    def label(c: Change) -> str:
        u = c.new or c.old
        archs = serves(n if c.new else o, u, models_pkg)
        s = f"{c.key} [{c.kind}]" + (" [draft]" if u.draft else "") + (" *" if marked(u) else "")
        if archs:
            s += " serves " + ", ".join(archs[:6]) + (f" +{len(archs) - 6}" if len(archs) > 6 else "")
        return s

    def order(c: Change):
        u = c.new or c.old
        return (0 if marked(u) else 1 if u.kind == "loader" else 2, c.key)

    def raise_lines(a: str, b: str) -> list[str]:
        ra, rb = raises(a), raises(b)
        lost = [r for r in ra if r not in rb]
        got = [r for r in rb if r not in ra]
        return [f"    raise removed: {r}" for r in lost] + [f"    raise added:   {r}" for r in got]

    beh = sorted([c for c in cmp.changes if c.kind != "registry" and (
        c.verdict == "behaviour" or (c.verdict == "moved" and "behaviour" in c.reasons))], key=order)
    shown = [c for c in beh if all_diffs or marked(c.new) or c.new.kind == "loader"]
    # the likeliest verdict changes first: a modelled class (or the shared loader) that stopped or
    # started refusing something
    hot = [(c, raise_lines(c.old.source, c.new.source)) for c in beh if marked(c.new) or c.new.kind == "loader"]
    hot = [(c, r) for c, r in hot if r]
    loader_mods = {u.module for u in (*o.units.values(), *n.units.values()) if u.kind == "loader"}
    for verdict, word in (("removed", "removed with its unit"), ("added", "added with its unit")):
        for c in cmp.of(verdict):
            u = c.old or c.new
            if marked(u) or u.module in loader_mods:
                r = [f"    raise {word}: {x}" for x in raises(u.source)]
                if r:
                    hot.append((c, r))
    out.append(f"-- raises lost or gained in modelled classes and the shared loader: {len(hot)} unit(s)")
    for c, r in hot:
        out.append("  " + c.key)
        out += r
    out.append(f"-- behaviour changes: {len(beh)} (* = serves, or is in the module of, a class the target data models; "
               f"diffs for those and the shared loader code{'' if all_diffs else ', the rest: --all-diffs'})")
    for c in beh:
        moved = f" (moved {c.reasons[0]})" if c.verdict == "moved" else ""
        if c in shown:
            out.append("  " + label(c) + moved)
            out += raise_lines(c.old.source, c.new.source)
            out += ["    " + ln for ln in unified(c.old.source, c.new.source, f"{old_name}/{c.old.key}",
                                                   f"{new_name}/{c.key}", limit=diff_lines)]
        else:
            out.append("  " + label(c) + moved + f": {_stat(c.old.source, c.new.source)}")
            out += raise_lines(c.old.source, c.new.source)
    moved = [c for c in cmp.changes if c.verdict == "moved" and "behaviour" not in c.reasons]
    if moved:
        out.append(f"-- moved, no behaviour change: {len(moved)}")
        out += [f"  {label(c)} ({', '.join(c.reasons)})" for c in sorted(moved, key=order)]
    by_qual: dict[str, list[Unit]] = {}
    for u in o.units.values():
        by_qual.setdefault(u.qual, []).append(u)
    for verdict in ("removed", "added"):
        cs = sorted(cmp.of(verdict), key=order)
        if not cs:
            continue
        lw = [c for c in cs if c.kind == "load_weights" or marked(c.new or c.old)]
        out.append(f"-- {verdict} units: {len(cs)} ({sum(c.kind == 'load_weights' for c in cs)} load_weights)")
        for c in cs if verbose else lw[:60]:
            line = "  " + label(c)
            twin = by_qual.get(c.new.qual, []) if verdict == "added" else []
            if twin:  # a new implementation of an existing class (e.g. a per-platform package)
                t = twin[0]
                v, _ = classify(t.source, c.new.source)
                line += f" (as {t.key}: {'identical' if v == 'same' else v})"
                out.append(line)
                if v == "behaviour" and marked(c.new):
                    out += raise_lines(t.source, c.new.source)
                    out += ["    " + ln for ln in unified(t.source, c.new.source, f"{old_name}/{t.key}",
                                                           f"{new_name}/{c.key}", limit=diff_lines)]
                continue
            out.append(line)
        rest = len(cs) - (len(cs) if verbose else len(lw[:60]))
        if rest:
            out.append(f"  ... {rest} more (--verbose)")
    cos = sorted(cmp.of("cosmetic"), key=order)
    out.append(f"-- cosmetic only: {len(cos)} (docstrings, log messages, formatted-string style)")
    out += [f"  {label(c)}: {', '.join(c.reasons)}" for c in cos]
    fmt = sorted(cmp.of("formatting"), key=order)
    out.append(f"-- formatting only (same AST): {len(fmt)}")
    if verbose:
        out += ["  " + label(c) for c in fmt]
    return out


def classify_keys(old_root: Path, new_root: Path, keys: list[str]) -> list[tuple[str, str, list[str], str, str]]:
    """``(key, verdict, reasons, old source, new source)`` for fingerprint keys ``module:Qual.name``
    (the decision functions the sandboxed run records), cut from both releases' files; verdict
    ``attributes`` for a key that names no definition (e.g. ``Class.hf_to_vllm_mapper``, fingerprinted
    as the live object's attributes: a field added to ``WeightsMapper`` changes it)."""
    out = []
    for key in keys:
        srcs = []
        for root in (old_root, new_root):
            mod, _, qual = key.partition(":")
            srcs.append(_def_source(Path(root), mod, qual) or "")
        if not any(srcs):  # a live object's fingerprint (a mapper's attributes), not a definition
            out.append((key, "attributes", ["the object's attributes changed, not a definition of it"], "", ""))
            continue
        v, reasons = classify(*srcs)
        out.append((key, v, reasons, *srcs))
    return out


def _def_source(root: Path, module: str, qual: str) -> str | None:
    base = root.joinpath(*module.split("."))
    path = next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)
    if path is None:
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        body = ast.parse(text).body
    except SyntaxError:
        return None
    from conformance.extract import find_in

    node = find_in(body, qual)
    if node is None:
        return None
    return segment(text.splitlines(keepends=True), node)


def _registry_lines(cmp: Comparison, tracked: set[str]) -> list[str]:
    o, n = cmp.old, cmp.new
    out = []
    for title, a, b in (("model registry", o.archs, n.archs), ("draft registry", o.drafts, n.drafts)):
        added = sorted(b.keys() - a.keys())
        removed = sorted(a.keys() - b.keys())
        moved = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
        out.append(f"-- {title}: {len(a)} -> {len(b)} ({len(added)} added, {len(removed)} removed, "
                   f"{len(moved)} moved)")
        mark = lambda k: " *" if k in tracked else ""  # noqa: E731
        out += [f"  + {k} -> {b[k]}{mark(k)}" for k in added]
        out += [f"  - {k} (was {a[k]}){mark(k)}" for k in removed]
        out += [f"  ~ {k}: {a[k]} -> {b[k]}{mark(k)}" for k in moved]
    am, bm = set(o.methods), set(n.methods)
    out.append(f"-- quantization methods: {len(am)} -> {len(bm)}")
    out += [f"  + {m}" + (f" ({n.methods[m]})" if n.methods[m] else "") for m in sorted(bm - am)]
    out += [f"  - {m}" + (" (was deprecated)" if m in o.deprecated else "") for m in sorted(am - bm)]
    out += [f"  ~ {m}: config {o.methods[m]} -> {n.methods[m]}" for m in sorted(am & bm)
            if o.methods[m] and n.methods[m] and o.methods[m] != n.methods[m]]
    for m in sorted((n.deprecated - o.deprecated) & bm):
        out.append(f"  ! {m} deprecated")
    for m in sorted((o.deprecated - n.deprecated) & bm):
        out.append(f"  ! {m} no longer deprecated")
    return out
