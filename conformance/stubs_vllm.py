"""Stand-ins for running vLLM's own quantization-config code without torch or a GPU.

A ``Sandbox`` executes chosen vLLM source files (taken from the released wheel, never vendored)
statement by statement, in fresh module objects. Every other import -- torch, triton, the
kernels, vLLM modules we do not execute -- resolves to a permissive stub module: any attribute
is a stub class, calling it gives a stub instance, a stub used as a decorator returns what it
decorates, and a stub is falsy (feature flags and platform probes read "off").

Names that decide quantized-vs-unquantized get concrete stand-ins, by name, whatever module
they are imported from: the layer classes (``LinearBase`` and its subclasses, ``FusedMoE`` /
``RoutedExperts``, ``VocabParallelEmbedding`` / ``ParallelLMHead``), the unquantized methods,
and ``current_platform`` (CUDA, compute capability from the assumed GPU).

A top-level statement that fails (a kernel probe, a torch op at import time) is recorded in
``module.__conformance_errors__`` and skipped; a decision that later needs what it defined
fails loudly with a NameError instead of guessing.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Any

# Modules imported for real (pure Python, standard library or tiny); everything else is stubbed.
_REAL_EXTERNAL = {
    "__future__", "abc", "ast", "collections", "contextlib", "copy", "dataclasses", "enum", "fnmatch",
    "functools", "inspect", "itertools", "json", "math", "operator", "os", "re", "string", "types", "typing",
    "typing_extensions", "warnings", "weakref", "pathlib", "textwrap", "numbers", "logging", "regex",
}


class _StubMeta(type):
    """Class-level permissiveness: ``torch.nn.Module``, ``torch.float8_e4m3fn``, ``A | None``."""

    def __getattr__(cls, name: str) -> Any:
        # only the stubs themselves are permissive; a real class deriving from one is not
        if (name.startswith("__") and name.endswith("__")) or "_is_stub" not in cls.__dict__:
            raise AttributeError(name)
        sub = stub_class(name, cls.__module__)
        type.__setattr__(cls, name, sub)
        return sub

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        # a stub used as a decorator hands back what it decorates
        if len(args) == 1 and not kwargs and (inspect.isfunction(args[0]) or inspect.isclass(args[0])) \
                and "_is_stub" in cls.__dict__:
            return args[0]
        return super().__call__(*args, **kwargs)

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __bool__(cls) -> bool:
        return True

    def __iter__(cls):
        return iter(())


class StubBase(metaclass=_StubMeta):
    """A stub instance: accepts anything, every attribute is another stub, falsy, empty."""
    _is_stub = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if (name.startswith("__") and name.endswith("__")) or "_is_stub" not in type(self).__dict__:
            raise AttributeError(name)
        return StubBase()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and (inspect.isfunction(args[0]) or inspect.isclass(args[0])):
            return args[0]
        return StubBase()

    def __bool__(self) -> bool:
        return False

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0

    def __getitem__(self, item: Any) -> Any:
        return StubBase()

    def __or__(self, other: Any) -> Any:
        return self

    __ror__ = __or__

    def __lt__(self, other: Any) -> bool:
        return False

    __gt__ = __le__ = __ge__ = __lt__

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: Any) -> bool:
        return self is other


def stub_class(name: str, module: str) -> type:
    return _StubMeta(name, (StubBase,), {"__module__": module, "_is_stub": True})


def combined_metaclass(name: str, bases: tuple, ns: dict, **kw: Any) -> type:
    """``metaclass=`` for a class whose bases mix stubs and real metaclasses (Protocols, ABCs)."""
    metas: list[type] = []
    for b in bases:
        m = type(b)
        if not any(issubclass(x, m) for x in metas):
            metas = [x for x in metas if not issubclass(m, x)] + [m]
    meta = metas[0] if len(metas) == 1 else type("_Combined", tuple(metas), {})
    return meta(name, bases, ns, **kw)


class StubModule(types.ModuleType):
    """A module whose every attribute is a stub class (or a named stand-in)."""

    def __init__(self, name: str, overrides: dict[str, Any]) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # a package, so `from stub import submodule` works
        self._overrides = overrides

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name in self._overrides:
            value = self._overrides[name]
        else:
            value = stub_class(name, self.__name__)
        setattr(self, name, value)
        return value


# --- concrete stand-ins for the classes a quant config dispatches on ----------------------------

class _Layer:
    """A stand-in layer: only its class matters; other attributes read as stubs."""

    def __init__(self, prefix: str = "", **attrs: Any) -> None:
        self.prefix = prefix
        self.__dict__.update(attrs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return StubBase()


class LinearBase(_Layer):
    pass


class ReplicatedLinear(LinearBase):
    pass


class ColumnParallelLinear(LinearBase):
    pass


class MergedColumnParallelLinear(ColumnParallelLinear):
    pass


class QKVParallelLinear(ColumnParallelLinear):
    pass


class RowParallelLinear(LinearBase):
    pass


class FusedMoE(_Layer):
    pass


class RoutedExperts(FusedMoE):
    """vLLM 0.33's name for the routed-experts layer (compressed-tensors targets match class names)."""


class VocabParallelEmbedding(_Layer):
    pass


class ParallelLMHead(VocabParallelEmbedding):
    pass


class Attention(_Layer):
    pass


class _Method:
    """Base of the stand-in quantize methods."""
    unquantized = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return StubBase()


class UnquantizedLinearMethod(_Method):
    unquantized = True


class UnquantizedFusedMoEMethod(_Method):
    unquantized = True


class UnquantizedEmbeddingMethod(_Method):
    unquantized = True


class _Platform:
    """``current_platform`` on CUDA with the given compute capability."""

    def __init__(self, capability: int = 90) -> None:
        self.capability = capability
        self.device_type = "cuda"
        self.device_name = "cuda"

    def is_cuda(self) -> bool:
        return True

    def is_cuda_alike(self) -> bool:
        return True

    def has_device_capability(self, cap: Any, device_id: int = 0) -> bool:
        if isinstance(cap, tuple):
            cap = cap[0] * 10 + cap[1]
        return self.capability >= int(cap)

    def is_device_capability(self, cap: Any, device_id: int = 0) -> bool:
        if isinstance(cap, tuple):
            cap = cap[0] * 10 + cap[1]
        return self.capability == int(cap)

    def is_device_capability_family(self, cap: Any, device_id: int = 0) -> bool:
        return self.capability // 10 == int(cap) // 10

    def get_device_capability(self, device_id: int = 0) -> Any:
        return types.SimpleNamespace(major=self.capability // 10, minor=self.capability % 10,
                                     to_int=lambda: self.capability, as_version_str=lambda: f"{self.capability / 10:.1f}")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("is_"):
            return lambda *a, **k: False
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return StubBase()


def _init_logger(name: str) -> Any:
    import logging
    log = logging.getLogger("conformance." + name)
    for extra in ("info_once", "warning_once", "debug_once", "error_once"):
        setattr(log, extra, lambda *a, **k: None)
    return log


def stand_ins(capability: int = 90) -> dict[str, Any]:
    """Name -> stand-in, whatever stubbed module the name is imported from."""
    moe = FusedMoE
    out: dict[str, Any] = {
        "LinearBase": LinearBase, "ReplicatedLinear": ReplicatedLinear,
        "ColumnParallelLinear": ColumnParallelLinear, "MergedColumnParallelLinear": MergedColumnParallelLinear,
        "QKVParallelLinear": QKVParallelLinear, "RowParallelLinear": RowParallelLinear,
        "FusedMoE": moe, "RoutedExperts": RoutedExperts, "SharedFusedMoE": moe, "FusedMoEBase": moe,
        "VocabParallelEmbedding": VocabParallelEmbedding, "ParallelLMHead": ParallelLMHead,
        "Attention": Attention, "MLAAttention": Attention, "AttentionLayerBase": Attention,
        "UnquantizedLinearMethod": UnquantizedLinearMethod, "UnquantizedFusedMoEMethod": UnquantizedFusedMoEMethod,
        "UnquantizedEmbeddingMethod": UnquantizedEmbeddingMethod,
        "current_platform": _Platform(capability), "init_logger": _init_logger,
    }
    return out


# --- the sandbox ----------------------------------------------------------------------------------

class Sandbox:
    """Fresh module objects for one vLLM release's unpacked source tree.

    ``real`` decides which ``vllm.*`` modules run from source (a predicate on the dotted name);
    the rest are stubs.
    """

    def __init__(self, root: Path, real, *, capability: int = 90) -> None:
        self.root = Path(root)
        self.real = real
        self.modules: dict[str, types.ModuleType] = {}
        self.overrides = stand_ins(capability)
        self._builtins = dict(vars(builtins))
        self._builtins["__import__"] = self._import

    # source of a dotted module name, or None
    def source_path(self, name: str) -> Path | None:
        base = self.root.joinpath(*name.split("."))
        for p in (base.with_suffix(".py"), base / "__init__.py"):
            if p.is_file():
                return p
        return None

    def module(self, name: str) -> types.ModuleType:
        if name in self.modules:
            return self.modules[name]
        top = name.split(".")[0]
        if top in _REAL_EXTERNAL:
            try:
                return importlib.import_module(name)
            except ImportError:
                if name == "regex":  # vLLM imports `regex as re`; the standard module serves here
                    return importlib.import_module("re")
                raise
        path = self.source_path(name) if top == "vllm" else None
        if path is None or not self.real(name):
            mod: types.ModuleType = StubModule(name, self.overrides)
            self.modules[name] = mod
            return mod
        return self._exec(name, path)

    def _exec(self, name: str, path: Path) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod.__file__ = str(path)
        is_pkg = path.name == "__init__.py"
        mod.__package__ = name if is_pkg else name.rpartition(".")[0]
        if is_pkg:
            mod.__path__ = [str(path.parent)]
        mod.__dict__["__builtins__"] = self._builtins
        errors: list[tuple[int, str]] = []
        mod.__conformance_errors__ = errors  # type: ignore[attr-defined]
        self.modules[name] = mod
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        saved = sys.modules.get(name)
        sys.modules[name] = mod  # dataclasses look the defining module up there
        try:
            self._run(mod, tree, path, errors)
        finally:
            if saved is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = saved
        for key, value in list(mod.__dict__.items()):
            if key in self.overrides and not isinstance(value, types.ModuleType) and _is_stub(value):
                mod.__dict__[key] = self.overrides[key]
        return mod

    @staticmethod
    def _run(mod: types.ModuleType, tree: ast.Module, path: Path, errors: list[tuple[int, str]]) -> None:
        for stmt in tree.body:
            code = compile(ast.Module([stmt], type_ignores=[]), str(path), "exec")
            try:
                try:
                    exec(code, mod.__dict__)
                except TypeError as exc:
                    if not (isinstance(stmt, ast.ClassDef) and "metaclass conflict" in str(exc)):
                        raise
                    stmt.keywords.append(ast.keyword("metaclass", ast.Name("__conformance_meta__", ast.Load())))
                    mod.__dict__["__conformance_meta__"] = combined_metaclass
                    exec(compile(ast.fix_missing_locations(ast.Module([stmt], type_ignores=[])), str(path), "exec"),
                         mod.__dict__)
            except Exception as exc:  # recorded; the name it defined stays undefined
                errors.append((stmt.lineno, f"{type(exc).__name__}: {exc}"))

    def _import(self, name: str, globals: dict | None = None, locals: Any = None, fromlist: Any = (),
                level: int = 0) -> Any:
        if level:
            pkg = (globals or {}).get("__package__") or ""
            parts = pkg.split(".")
            base = ".".join(parts[: len(parts) - (level - 1)]) if level > 1 else pkg
            name = f"{base}.{name}" if name else base
        top = name.split(".")[0]
        if top != "vllm" and top not in _REAL_EXTERNAL:
            if top in sys.builtin_module_names:
                return importlib.__import__(name, globals, locals, fromlist, 0)
        mod = self.module(name)
        if fromlist:
            for item in fromlist:
                if item == "*":
                    continue
                if not hasattr(mod, item) or (isinstance(mod, StubModule) and item not in mod.__dict__):
                    sub = f"{name}.{item}"
                    if top == "vllm" and self.source_path(sub) is not None:
                        setattr(mod, item, self.module(sub))
                    elif isinstance(mod, StubModule):
                        getattr(mod, item)
                    elif not hasattr(mod, item):
                        # a name the real module failed to define: a stand-in if there is one, else a
                        # stub (the failure is in __conformance_errors__)
                        setattr(mod, item, self.overrides.get(item) or stub_class(item, name))
            return mod
        # `import a.b.c` binds `a`: make sure each level exists and is reachable
        parts = name.split(".")
        for i in range(1, len(parts)):
            parent, child = self.module(".".join(parts[:i])), ".".join(parts[: i + 1])
            if not hasattr(parent, parts[i]) or isinstance(parent, StubModule):
                try:
                    setattr(parent, parts[i], self.module(child))
                except AttributeError:
                    pass
        return self.module(parts[0])


def _is_stub(value: Any) -> bool:
    return (isinstance(value, type) and issubclass(value, StubBase)) or isinstance(value, StubBase)


def neutralize_methods(mod: types.ModuleType) -> None:
    """Quantize-method classes defined in a real module (named ``*Method``, or deriving from a
    stubbed base such as ``FusedMoEMethodBase``): construction records its arguments and nothing
    else (their __init__ probes kernels; only which class is chosen matters)."""
    for value in list(vars(mod).values()):
        if not (inspect.isclass(value) and value.__module__ == mod.__name__) or "__conformance_neutral__" in vars(value):
            continue
        if "Config" in value.__name__ and not value.__name__.endswith("Method"):
            continue
        stub_based = any("_is_stub" in vars(b) for b in value.__mro__[1:])
        if value.__name__.endswith("Method") or stub_based:
            def init(self, *args, **kwargs):
                self.args, self.kwargs = args, kwargs
            value.__init__ = init
            value.__conformance_neutral__ = True
