"""Load named functions and classes from a release's sources by AST, without importing the package.

``Extractor(root, "sglang").get("sglang.srt.layers.quantization.utils", "is_layer_skipped")`` parses
that file, executes only the top-level statements the name needs (its definition and, recursively,
the module-level names it references), and returns the live object. Every import is rewritten into
a call of the extractor's resolver:

* standard-library modules are imported for real (``regex`` is served by ``re``);
* layer classes and platform probes come from ``conformance.stubs`` (``STANDINS``, ``PLATFORM``);
* names from the framework's own package are followed into their file: functions, module
  constants, quant-config classes (``*Config``) and re-exports; any other class of the framework
  (quant methods, schemes, layers) becomes a ``stub_class`` of the same name;
* everything else (torch, triton, kernels, transformers, ...) is a ``Stub``.

Annotations become strings, and decorators other than the harmless ones (classmethod, property,
dataclass, ...) are dropped. A statement that still fails binds its names to stubs; the failure is
kept in ``Extractor.errors``.

Every upstream function executed this way (top-level functions, and each method of an executed
class) gets a source fingerprint, ``Extractor.fingerprints["module:Qual.name"]`` = sha256 of its
normalised source (``ast.unparse``: comments and formatting do not count). ``fingerprint_source``
fingerprints code that is only tracked, never executed (``load_weights`` renaming).
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import importlib
import re
import sys
from pathlib import Path
from typing import Any

from conformance.stubs import PLATFORM, STANDINS, VALUES, Stub, platform_function, stub_class

STDLIB = frozenset(sys.stdlib_module_names) - {"__future__"}
KEEP_DECORATORS = frozenset({
    "classmethod", "staticmethod", "property", "dataclass", "dataclasses.dataclass", "cached_property",
    "functools.cached_property", "lru_cache", "functools.lru_cache", "cache", "functools.cache",
    "unique", "enum.unique", "wraps",
})
_BUILTINS = frozenset(dir(builtins))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _keep_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    text = ast.unparse(target)
    return text in KEEP_DECORATORS or text.endswith(".setter") or text.endswith(".getter")


def _bound_names(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds (compound statements: every binding inside, not in defs)."""
    out: set[str] = set()
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for a in stmt.names:
            if a.name != "*":
                out.add(a.asname or a.name.split(".")[0])
        return out
    for node in ast.walk(stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"}
    return out


class _Rewrite(ast.NodeTransformer):
    """Imports -> resolver calls, annotations -> strings, unknown decorators dropped."""

    def _imp(self, target: str, module: str, attr: str | None, level: int, top: bool) -> ast.stmt:
        call = ast.Call(ast.Name("__ckl_import__", ast.Load()),
                        [ast.Constant(module), ast.Constant(attr), ast.Constant(level), ast.Constant(top)], [])
        return ast.Assign([ast.Name(target, ast.Store())], call)

    def visit_Import(self, node: ast.Import) -> Any:
        out = []
        for a in node.names:
            if a.asname:
                out.append(self._imp(a.asname, a.name, None, 0, False))
            else:
                out.append(self._imp(a.name.split(".")[0], a.name, None, 0, True))
        return [ast.copy_location(s, node) for s in out]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        if node.module == "__future__":
            return ast.copy_location(ast.Pass(), node)
        out = [self._imp(a.asname or a.name, node.module or "", a.name, node.level, False)
               for a in node.names if a.name != "*"]
        return [ast.copy_location(s, node) for s in out] or ast.copy_location(ast.Pass(), node)

    def _args(self, args: ast.arguments) -> None:
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                a.annotation = ast.Constant(ast.unparse(a.annotation))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        self._args(node.args)
        if node.returns is not None:
            node.returns = ast.Constant(ast.unparse(node.returns))
        node.decorator_list = [d for d in node.decorator_list if _keep_decorator(d)]
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        node.decorator_list = [d for d in node.decorator_list if _keep_decorator(d)]
        node.keywords = []  # metaclass=..., framework registration keywords
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        node.annotation = ast.Constant(ast.unparse(node.annotation))
        self.generic_visit(node)
        return node


class Module:
    """One upstream source file, executed statement by statement on demand."""

    def __init__(self, ex: "Extractor", name: str, path: Path) -> None:
        self.ex, self.name, self.path = ex, name, path
        self.source = path.read_text(encoding="utf-8")
        self.tree = ast.parse(self.source, str(path))
        self.is_pkg = path.name == "__init__.py"
        self.bindings: dict[str, list[ast.stmt]] = {}
        for stmt in self.tree.body:
            for n in _bound_names(stmt):
                self.bindings.setdefault(n, []).append(stmt)
        self.ns: dict[str, Any] = {"__name__": name, "__file__": str(path), "__builtins__": builtins,
                                   "__ckl_import__": functools.partial(ex.import_, self)}
        self._done: set[int] = set()

    def defines(self, name: str) -> ast.stmt | None:
        """The statement that defines ``name`` (the last plain definition), if any."""
        stmts = self.bindings.get(name)
        return stmts[-1] if stmts else None

    def get(self, name: str, *, follow_methods: bool = False) -> Any:
        if name not in self.ns:
            for stmt in self.bindings.get(name, ()):
                self._exec(stmt, follow_methods)
        if name not in self.ns:
            self.ns[name] = Stub(name)
        return self.ns[name]

    def _exec(self, stmt: ast.stmt, follow_methods: bool = False) -> None:
        key = id(stmt)
        if key in self._done:
            return
        self._done.add(key)
        if isinstance(stmt, ast.ClassDef) and not follow_methods and self.ex.stub_class_name(stmt.name):
            self.ns[stmt.name] = stub_class(stmt.name)
            return
        own = _bound_names(stmt)
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                n = node.id
                if n in self.ns or n in own:
                    continue
                if n in self.bindings:
                    self.get(n)
                elif n not in _BUILTINS:
                    self.ns[n] = Stub(n)
        new = _Rewrite().visit(_copy(stmt))
        code = compile(ast.fix_missing_locations(ast.Module(new if isinstance(new, list) else [new], [])),
                       str(self.path), "exec")
        try:
            exec(code, self.ns)
        except Exception as e:  # noqa: BLE001 - recorded; the names become stubs
            self.ex.errors.append((self.name, getattr(stmt, "lineno", 0), f"{type(e).__name__}: {e}"))
            for n in own:
                self.ns.setdefault(n, Stub(n))
        self.ex.record(self.name, stmt)


def _copy(node: ast.AST) -> ast.AST:
    import copy

    return copy.deepcopy(node)


class _Logging:
    """``logging`` with stub loggers (frameworks patch ``warning_once`` and the like onto theirs)."""

    def __getattr__(self, attr: str) -> Any:
        import logging

        return getattr(logging, attr)

    @staticmethod
    def getLogger(name: str | None = None) -> Stub:  # noqa: N802 - logging's name
        return Stub(f"logger {name}")


_LOGGING = _Logging()


class ModuleProxy:
    """A framework module bound by ``import pkg.mod``: attributes resolve lazily."""

    def __init__(self, ex: "Extractor", name: str) -> None:
        self._ex, self._name = ex, name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._ex.resolve(self._name, attr)


class Extractor:
    """The upstream sources of one release: ``root`` holds ``<package>/...``."""

    def __init__(self, root: Path, package: str, *, values: dict[str, Any] | None = None,
                 follow: tuple[str, ...] | None = None) -> None:
        self.root, self.package = Path(root), package
        if follow is not None:
            self.follow_prefixes = follow
        self.modules: dict[str, Module | None] = {}
        self.fingerprints: dict[str, str] = {}
        self.errors: list[tuple[str, int, str]] = []
        self.values = dict(values or {})  # name -> object, before anything else (adapters' overrides)

    # -- files
    def path_of(self, modname: str) -> Path | None:
        base = self.root.joinpath(*modname.split("."))
        for p in (base.with_suffix(".py"), base / "__init__.py"):
            if p.is_file():
                return p
        return None

    def module(self, modname: str) -> Module | None:
        if modname not in self.modules:
            p = self.path_of(modname)
            self.modules[modname] = Module(self, modname, p) if p is not None else None
        return self.modules[modname]

    def get(self, modname: str, name: str) -> Any:
        """The live upstream object ``modname.name`` (classes executed with their methods)."""
        m = self.module(modname)
        if m is None:
            raise FileNotFoundError(f"{modname}: no such module in {self.package}")
        if m.defines(name) is None:
            raise KeyError(f"{modname} defines no {name}")
        return m.get(name, follow_methods=True)

    # -- policy
    def stub_class_name(self, name: str) -> bool:
        """Framework classes that are only constructed, never run (quant methods, schemes, layers)."""
        return not (name.endswith("Config") or name.endswith("Error") or name in self.follow_classes)

    follow_classes: frozenset[str] = frozenset()
    # framework modules followed into; names from any other module of the package are stubs
    follow_prefixes: tuple[str, ...] = ("",)

    # -- imports
    def import_(self, importer: Module, module: str, attr: str | None, level: int, top: bool) -> Any:
        if level:
            parts = importer.name.split(".")
            if not importer.is_pkg:
                parts = parts[:-1]
            if level > 1:
                parts = parts[: len(parts) - (level - 1)]
            module = ".".join(parts + ([module] if module else []))
        if attr is None:
            return self.module_object(module.split(".")[0] if top else module)
        return self.resolve(module, attr)

    def module_object(self, module: str) -> Any:
        top = module.split(".")[0]
        if top == "regex":
            return re
        if module == "logging":
            return _LOGGING
        if top in STDLIB:
            try:
                return importlib.import_module(module)
            except ImportError:
                return Stub(module)
        if top == self.package and module.startswith(self.follow_prefixes) and self.path_of(module) is not None:
            return ModuleProxy(self, module)
        return Stub(module)

    def resolve(self, module: str, attr: str) -> Any:
        if attr in self.values:
            return self.values[attr]
        top = module.split(".")[0]
        if top in STDLIB or top == "regex":
            mod = self.module_object(module)
            return getattr(mod, attr, Stub(f"{module}.{attr}"))
        if attr in STANDINS:
            return STANDINS[attr]
        if attr in PLATFORM:
            return platform_function(attr)
        if attr in VALUES:
            return VALUES[attr]
        if top != self.package or not module.startswith(self.follow_prefixes):
            return Stub(f"{module}.{attr}")
        m = self.module(module)
        if m is None:
            return Stub(f"{module}.{attr}")
        stmt = m.defines(attr)
        if stmt is None:
            if self.path_of(f"{module}.{attr}") is not None:
                return ModuleProxy(self, f"{module}.{attr}")
            return Stub(f"{module}.{attr}")
        if isinstance(stmt, ast.ClassDef) and self.stub_class_name(attr):
            return stub_class(attr)
        return m.get(attr)

    # -- fingerprints
    def record(self, modname: str, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.fingerprints[f"{modname}:{stmt.name}"] = digest(ast.unparse(stmt))
        elif isinstance(stmt, ast.ClassDef):
            rest = []
            for item in stmt.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.fingerprints[f"{modname}:{stmt.name}.{item.name}"] = digest(ast.unparse(item))
                else:
                    rest.append(ast.unparse(item))
            bases = ", ".join(ast.unparse(b) for b in stmt.bases)
            self.fingerprints[f"{modname}:{stmt.name}"] = digest(f"class {stmt.name}({bases}):\n" + "\n".join(rest))

    def fingerprint_source(self, modname: str, qualname: str) -> str | None:
        """Fingerprint ``Class.method`` or ``function`` of a module without executing it (tracked only)."""
        node = find_def(self.module(modname), qualname)
        if node is None:
            return None
        fp = self.fingerprints[f"{modname}:{qualname}"] = digest(ast.unparse(node))
        return fp


def find_def(m: Module | None, qualname: str) -> ast.AST | None:
    if m is None:
        return None
    return find_in(m.tree.body, qualname)


def find_in(body: list[ast.stmt], qualname: str) -> ast.AST | None:
    """The function or class ``qualname`` ("Class.method") among the statements ``body``, or None."""
    node = None
    for part in qualname.split("."):
        node = next((s for s in body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and s.name == part), None)
        if node is None:
            return None
        body = node.body
    return node


def class_literal(m: Module, cls: str, attr: str) -> Any:
    """A class attribute written as a Python literal (``packed_modules_mapping = {...}``), or None."""
    node = find_def(m, cls)
    if not isinstance(node, ast.ClassDef):
        return None
    for s in node.body:
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in s.targets):
            try:
                return ast.literal_eval(s.value)
            except ValueError:
                return None
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id == attr and s.value:
            try:
                return ast.literal_eval(s.value)
            except ValueError:
                return None
    return None
