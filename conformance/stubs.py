"""Stand-ins for torch and every other heavy import of the extracted upstream code.

* ``Stub(name)``: any unknown object. Attributes and calls give more stubs; it is false, empty,
  compares unequal to everything but itself, and can be a base class (``__mro_entries__`` gives a
  real class of that name).
* ``stub_class(name)``: one real class per name, whose instances accept any constructor arguments.
  Classes the extracted code only constructs (``Fp8LinearMethod(self)``, ``UnquantizedLinearMethod()``)
  are bound to these, so the object a ``get_quant_method`` returns says by its class name what the
  framework would build.
* ``STANDINS``: the layer classes quant configs test with ``isinstance`` (``LinearBase``,
  ``FusedMoE``, ``ParallelLMHead``, ...), with the upstream subclass relations that matter.
* ``PLATFORM``: the platform probes, fixed to an NVIDIA CUDA machine (the default deployment of most
  simulated formats); ``platform(...)`` switches them.
"""

from __future__ import annotations

from typing import Any


class Stub:
    __slots__ = ("_name",)

    def __init__(self, name: str = "stub") -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str) -> "Stub":
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Stub(f"{self._name}.{attr}")

    def __setattr__(self, attr: str, value: Any) -> None:
        pass

    def __call__(self, *args: Any, **kw: Any) -> "Stub":
        return Stub(f"{self._name}()")

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (stub_class(self._name.rpartition(".")[2] or "Stub"),)

    def __getitem__(self, key: Any) -> "Stub":
        return Stub(f"{self._name}[]")

    def __iter__(self):
        return iter(())

    # the same name is the same framework object (``scalar_types.uint4`` read twice compares equal)
    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Stub) and other._name == self._name

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("Stub", self._name))

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __contains__(self, item: Any) -> bool:
        return False

    def __enter__(self) -> "Stub":
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False

    def __or__(self, other: Any) -> "Stub":
        return self

    __ror__ = __or__

    def __lt__(self, other: Any) -> bool:
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __repr__(self) -> str:
        return f"<stub {self._name}>"


class _StubMeta(type):
    """Class-level attributes of a stub class that it does not define are factories of its
    instances (``QuarkMoEMethod.get_moe_method(...)`` builds a QuarkMoEMethod)."""

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return lambda *a, **k: cls()


class StubObject(metaclass=_StubMeta):
    """Base of ``stub_class`` classes: any constructor arguments, unknown attributes are stubs."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self._args = args
        self._kw = kw

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Stub(f"{type(self).__name__}.{attr}")

    def __init_subclass__(cls, **kw: Any) -> None:  # class Foo(Base, metaclass=..., x=1)
        pass

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


_CLASSES: dict[str, type] = {}


def stub_class(name: str, base: type = StubObject) -> type:
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = type(name, (base,), {"__module__": "conformance.stubs"})
    return cls


# Layer classes that quant configs dispatch on (isinstance). A runtime module of ckptlint's plan is
# represented by an instance of the matching class (see ``layer_for``).
def _tree() -> dict[str, type]:
    s = stub_class
    module = s("Module")  # torch.nn.Module
    out = {"Module": module}
    out["LinearBase"] = s("LinearBase", module)
    for n in ("ColumnParallelLinear", "RowParallelLinear", "ReplicatedLinear"):
        out[n] = s(n, out["LinearBase"])
    for n in ("MergedColumnParallelLinear", "QKVParallelLinear"):
        out[n] = s(n, out["ColumnParallelLinear"])
    out["VocabParallelEmbedding"] = s("VocabParallelEmbedding", module)
    out["ParallelLMHead"] = s("ParallelLMHead", out["VocabParallelEmbedding"])
    out["FusedMoE"] = s("FusedMoE", module)
    for n in ("EPMoE", "DeepEPMoE", "FlashInferFusedMoE", "FlashInferFP4MoE"):
        out[n] = s(n, out["FusedMoE"])
    out["RadixAttention"] = s("RadixAttention", module)
    out["Attention"] = s("Attention", module)
    out["Linear"] = s("Linear", module)  # torch.nn.Linear
    return out


STANDINS: dict[str, type] = _tree()

PLATFORM: dict[str, bool] = {
    "is_cuda": True, "is_cuda_alike": True, "is_hip": False, "is_npu": False, "is_cpu": False,
    "is_xpu": False, "is_musa": False, "is_hpu": False, "is_mps": False, "is_rocm": False,
    "is_tpu": False, "use_intel_amx_backend": False, "is_flashinfer_available": False,
}


# Device queries, answered for the default GPU of the simulated formats (H100, sm90).
VALUES: dict[str, Any] = {
    "get_device_capability": lambda *a, **k: (9, 0),
    "get_device_sm": lambda *a, **k: 90,
}


def platform_function(name: str):
    def probe(*args: Any, **kw: Any) -> bool:
        return PLATFORM[name]

    probe.__name__ = name
    return probe


def layer_for(kind: str, name: str) -> Any:
    """A stand-in layer object of the class a framework builds for a module of ckptlint ``kind``
    (linear, moe, lm_head, embedding, plain, router, other) whose runtime name ends in ``name``."""
    last = name.rpartition(".")[2]
    if kind == "moe":
        cls = STANDINS["FusedMoE"]
    elif kind == "lm_head":
        cls = STANDINS["ParallelLMHead"]
    elif kind == "embedding":
        cls = STANDINS["VocabParallelEmbedding"]
    elif kind == "plain":
        cls = STANDINS["Linear"]
    elif last in ("qkv_proj",):
        cls = STANDINS["QKVParallelLinear"]
    elif last in ("gate_up_proj", "fused_qkv_a_proj_with_mqa"):
        cls = STANDINS["MergedColumnParallelLinear"]
    elif last in ("o_proj", "down_proj", "out_proj", "w2"):
        cls = STANDINS["RowParallelLinear"]
    elif kind == "router":
        cls = STANDINS["ReplicatedLinear"]
    else:
        cls = STANDINS["ColumnParallelLinear"]
    layer = cls()
    layer.prefix = name
    return layer
