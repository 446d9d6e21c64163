"""SGLang adapters: the release's own decision code, run on ckptlint's inputs.

Two levels, per release (``Release("0.5.23")``):

* ``leaf_verdicts(side)``: the skip-list matcher each method's Linear path calls, with the skip
  list and packed-modules mapping ckptlint fed its own matcher (``Side.exclude_main`` /
  ``exclude_draft``, ``Side.packed``): ``is_layer_skipped`` (fp8, python/sglang/srt/layers/quantization/utils.py),
  compressed-tensors and Quark ``should_ignore_layer`` (their ``utils.py``), GPTQ ``get_dynamic_override``.
* ``config_verdicts(side)``: the method's quant config class (``from_config`` on the checkpoint's
  quantization config, with the packed mapping the loader adds) and its ``get_quant_method`` on a
  stand-in layer of the class SGLang builds for the module (``stubs.layer_for``). The returned
  method's class name says quantized or not (``Unquantized*`` / None: not); a ``ValueError`` or
  ``NotImplementedError`` is the construction error ckptlint reports as fused shards disagreeing.
  Where ckptlint rewrote the skip list the way the framework does (a model's name mapper, a draft's
  copy), the config's list attribute is replaced by ckptlint's rewritten list.

Also per release: ``packed_mappings()`` (each tracked model class's literal
``packed_modules_mapping``, following base classes) and ``load_weights_fingerprints()`` (the
renaming code in ``load_weights`` that cannot be executed: tracked by source fingerprint).
"""

from __future__ import annotations

import copy
import re
from functools import cached_property
from types import SimpleNamespace
from typing import Any

from conformance.ckptside import ModuleDecision, Side
from conformance.core import Verdict
from conformance.extract import Extractor, class_literal
from conformance.stubs import layer_for
from conformance.wheels import source_dir

QUANT_PKG = "sglang.srt.layers.quantization"
MODELS_PKG = "sglang.srt.models"
FOLLOW = (QUANT_PKG, "sglang.srt.layers.modelopt_utils", "sglang.srt.utils")

# ckptlint method key -> the config class SGLang builds for it on CUDA (GPTQ and AWQ checkpoints
# are overridden to their Marlin configs when the format allows, which the simulated ones do).
CONFIG_CLASSES = {
    "quark": "QuarkConfig", "compressed-tensors": "CompressedTensorsConfig", "fp8": "Fp8Config",
    "modelopt_fp8": "ModelOptFp8Config", "modelopt_fp4": "ModelOptFp4Config", "gptq": "GPTQMarlinConfig",
    "awq": "AWQMarlinConfig", "mxfp4": "Mxfp4Config",
}
# ckptlint method key -> (leaf function, module suffix under the quantization package)
LEAVES = {
    "fp8": ("is_layer_skipped", "utils"),
    "compressed-tensors": ("should_ignore_layer", "compressed_tensors.utils"),
    "quark": ("should_ignore_layer", "quark.utils"),
    "gptq": ("get_dynamic_override", "utils"),
}
# module kinds whose layers SGLang builds with the quant config (plain nn.Linear and routers are not)
CONFIG_KINDS = ("linear", "moe", "lm_head", "embedding")
_DEF_RE = re.compile(r"^(class|def) (\w+)", re.M)
# exceptions the framework's own decision code raises while a layer is built (a start-up error):
# "some but not all shards" ValueErrors, unsupported-scheme errors, and bare asserts such as
# 0.5.5 ModelOpt NVFP4's `assert len(prefix_split) == 5` on a fused-name exclude entry
_FRAMEWORK_ERRORS = (ValueError, NotImplementedError, AssertionError)


class Release:
    def __init__(self, version: str, *, download: bool = True) -> None:
        self.version = version
        self.root = source_dir("sglang", version, download=download)
        self.ex = Extractor(self.root, "sglang", follow=FOLLOW)

    # -- where things are defined in this release
    def _index(self, pkg: str) -> dict[str, str]:
        out: dict[str, str] = {}
        base = self.root.joinpath(*pkg.split("."))
        for p in sorted(base.rglob("*.py")):
            mod = ".".join(p.relative_to(self.root).with_suffix("").parts)
            if mod.endswith(".__init__"):
                mod = mod[: -len(".__init__")]
            for _, name in _DEF_RE.findall(p.read_text(encoding="utf-8", errors="replace")):
                out.setdefault(name, mod)
        return out

    @cached_property
    def quant_index(self) -> dict[str, str]:
        return self._index(QUANT_PKG)

    @cached_property
    def model_index(self) -> dict[str, str]:
        return self._index(MODELS_PKG)

    def config_class(self, method: str) -> Any | None:
        name = CONFIG_CLASSES.get(method)
        mod = self.quant_index.get(name) if name else None
        return self.ex.get(mod, name) if mod else None

    def leaf(self, method: str) -> Any | None:
        spec = LEAVES.get(method)
        if spec is None:
            return None
        return self.ex.get(f"{QUANT_PKG}.{spec[1]}", spec[0])

    # -- level 1: the leaf matchers
    def leaf_verdicts(self, side: Side) -> dict[str, Verdict]:
        fn = self.leaf(side.method_key or "")
        if fn is None:
            return {}
        out: dict[str, Verdict] = {}
        gptq_cfg = SimpleNamespace(dynamic=(side.quant or {}).get("dynamic") or {})
        for md in side.modules.values():
            if md.forced or md.kind != "linear":
                continue
            entries = list(side.exclude_draft if md.role == "draft" else side.exclude_main)
            packed = _packed_for(side, md)
            try:
                if side.method_key == "gptq":
                    if not isinstance(gptq_cfg.dynamic, dict):
                        continue
                    r = fn(gptq_cfg, layer_name=md.name)
                    out[md.name] = Verdict(r is not False, "dynamic `-:` rule" if r is False else "")
                else:
                    r = fn(md.name, entries, packed)
                    out[md.name] = Verdict(not r, "skipped" if r else "")
            except _FRAMEWORK_ERRORS as e:
                out[md.name] = Verdict(None, _short(e))
            except Exception as e:  # noqa: BLE001 - a harness limit, reported as such
                out[md.name] = Verdict(None, f"harness: {_short(e)}")
        return out

    # -- level 2: from_config + get_quant_method on stand-in layers
    def config_verdicts(self, side: Side) -> dict[str, Verdict]:
        cls = self.config_class(side.method_key or "")
        if cls is None or side.quant is None:
            return {}
        qc = copy.deepcopy(side.quant)
        # The loader hands every method the model class's packed_modules_mapping dict itself
        # (model_loader/loader.py, weight_utils.py). A class that fills its mapping in __init__
        # (DeepseekV2ForCausalLM: fused_qkv_a_proj_with_mqa) still has it empty here; __init__ then
        # mutates that same dict (seen by a config that kept the reference, not by one that
        # replaced an empty one by a new `{}`), and in some releases also calls
        # quant_config.update_packed_modules_mapping. Both are replayed, in that order.
        arch = side.plan.arch_name or ""
        runtime = copy.deepcopy(side.loader_packed or side.packed)
        per_instance = self.packed_mapping(arch) is None if arch in self.model_index else False
        mapping = {k: v for k, v in runtime.items() if k in side.plan.method.packed_extra} if per_instance \
            else runtime
        qc["packed_modules_mapping"] = mapping
        try:
            cfg = cls.from_config(qc)
        except Exception as e:  # noqa: BLE001
            return {"<from_config>": Verdict(None, f"harness: from_config: {_short(e)}")}
        if per_instance:
            mapping.update(runtime)
            if self.calls_update_packed(arch) and hasattr(cfg, "update_packed_modules_mapping"):
                cfg.update_packed_modules_mapping(mapping)
        _hook_schemes(cfg, side.method_key or "")
        cfgs = {"main": _with_list(cfg, side.exclude_entries, side.exclude_main)}
        if side.exclude_draft:
            cfgs["draft"] = _with_list(copy.copy(cfg), side.exclude_entries, side.exclude_draft)
        out: dict[str, Verdict] = {}
        for md in side.modules.values():
            if md.forced or md.kind not in CONFIG_KINDS:
                continue
            c = cfgs.get(md.role, cfgs["main"])
            out[md.name] = _quant_method_verdict(c, md)
        return out

    # -- source level: packed mappings and load_weights
    def model_class_node(self, cls: str):
        mod = self.model_index.get(cls)
        return (self.ex.module(mod), mod) if mod else (None, None)

    def packed_mapping(self, cls: str, seen: tuple[str, ...] = ()) -> dict | None:
        """The model class's ``packed_modules_mapping`` class attribute, following its bases in the
        models package ({}: none anywhere; None: not a literal)."""
        import ast

        m, _ = self.model_class_node(cls)
        if m is None or cls in seen:
            return {}
        from conformance.extract import find_def

        node = find_def(m, cls)
        if node is None:
            return {}
        if "self.packed_modules_mapping" in ast.unparse(node):
            return None  # changed per instance (e.g. only with some quant configs): not a literal
        if any(isinstance(s, (ast.Assign, ast.AnnAssign)) and "packed_modules_mapping" in ast.unparse(
                s.targets[0] if isinstance(s, ast.Assign) else s.target) for s in node.body):
            return class_literal(m, cls, "packed_modules_mapping")
        for b in node.bases:
            name = ast.unparse(b).rpartition(".")[2]
            if name in self.model_index:
                got = self.packed_mapping(name, seen + (cls,))
                if got is None or got:
                    return got
        return {}

    def calls_update_packed(self, cls: str, seen: tuple[str, ...] = ()) -> bool:
        """Does the model class (or a base in the models package) call
        ``quant_config.update_packed_modules_mapping`` while it is built?"""
        import ast

        from conformance.extract import find_def

        m, _ = self.model_class_node(cls)
        node = find_def(m, cls) if m is not None and cls not in seen else None
        if node is None:
            return False
        if "update_packed_modules_mapping(" in ast.unparse(node):
            return True
        return any(self.calls_update_packed(ast.unparse(b).rpartition(".")[2], seen + (cls,))
                   for b in node.bases if ast.unparse(b).rpartition(".")[2] in self.model_index)

    def source_checks(self, target: str) -> list:
        """Each architecture of ``target``'s data: its ``packed_modules_mapping`` (the fused names
        ckptlint tests through their shards) against the model class's own, and the class's
        ``load_weights`` fingerprinted (renaming code that is tracked, not executed)."""
        from conformance.core import Disagreement
        from conformance.runner import tracked_arch_classes
        from ckptlint.targets import resolve

        t = resolve(target)[0]
        out = []
        classes = tracked_arch_classes(target)
        self.load_weights_fingerprints(classes)
        for cls in classes:
            if cls not in self.model_index:
                continue
            upstream = self.packed_mapping(cls)
            if upstream is None:
                continue
            arch = t.architecture(cls)
            mine = arch["packed_modules_mapping"] if isinstance(arch, dict) else arch.packed_modules_mapping
            up = {k: list(v) for k, v in upstream.items() if isinstance(v, (list, tuple))}
            if {k: list(v) for k, v in dict(mine or {}).items()} != up:
                out.append(Disagreement("sglang", self.version, "source", "*", "packed_modules_mapping", cls, (),
                                        f"packed_modules_mapping {up}", f"{dict(mine or {})}"))
        return out

    def load_weights_fingerprints(self, classes: list[str]) -> dict[str, str]:
        out = {}
        for cls in classes:
            m, mod = self.model_class_node(cls)
            if m is None:
                continue
            fp = self.ex.fingerprint_source(mod, f"{cls}.load_weights")
            if fp is not None:
                out[f"{mod}:{cls}.load_weights"] = fp
        return out


# Harness limit (conformance/allow.toml need not list it: it never decides quantized vs not): the
# scheme a quantized module gets depends on the compressed-tensors package's QuantizationArgs and on
# kernels, which are stand-ins here. Where a method picks its scheme after its skip check, the
# scheme builders are replaced by a marker, so that only "does this module get a scheme" is tested.
_SCHEME = "ConformanceScheme"


def _hook_schemes(cfg: Any, method: str) -> None:
    from conformance.stubs import stub_class

    def marker(*a: Any, **k: Any) -> Any:
        return stub_class(_SCHEME)()

    def const(v: bool):
        return lambda *a, **k: v

    if method == "compressed-tensors":
        for name in dir(type(cfg)):
            if name.startswith("_is_") and name not in ("_is_mxfp4_moe",):
                setattr(cfg, name, const(name == "_is_fp8_w8a8"))
        for name in ("_get_scheme_from_parts",):
            setattr(cfg, name, marker)
        setattr(cfg, "_check_scheme_supported", const(True))
    elif method == "quark":
        for name in ("get_linear_scheme", "get_moe_scheme", "_get_scheme_from_config", "get_scheme"):
            if hasattr(type(cfg), name):
                setattr(cfg, name, marker)
        setattr(cfg, "_check_scheme_supported", const(True))


def _packed_for(side: Side, md: ModuleDecision) -> dict:
    plan = side.plan
    if md.role == "draft" and plan.draft is not None and not plan.draft.packed_mapping:
        return {}
    return side.packed


def _with_list(cfg: Any, written: tuple[str, ...], rewritten: tuple[str, ...]) -> Any:
    """Replace the config's skip list (the attribute from_config filled with the entries as written)
    by ckptlint's rewritten list, when ckptlint rewrote it."""
    if list(written) == list(rewritten) or not written:
        return cfg
    for attr, val in list(vars(cfg).items()):
        # the list as written, or as from_config stored it with variants added (fp8 0.5.12+ adds the
        # un-prefixed `layers.N...` form of each entry; ckptlint's rewritten list carries them too)
        if isinstance(val, (list, tuple)) and val and all(isinstance(x, str) for x in val) \
                and set(written) <= set(val):
            setattr(cfg, attr, list(rewritten))
    return cfg


def _quant_method_verdict(cfg: Any, md: ModuleDecision) -> Verdict:
    layer = layer_for(md.kind, md.name)
    try:
        qm = cfg.get_quant_method(layer, prefix=md.name)
    except _FRAMEWORK_ERRORS as e:
        return Verdict(None, _short(e))
    except Exception as e:  # noqa: BLE001
        return Verdict(None, f"harness: {_short(e)}")
    name = type(qm).__name__ if qm is not None else "None"
    if qm is None or name.startswith("Unquantized") or name == "Stub":
        return Verdict(False, name)
    return Verdict(True, name)


def _short(e: BaseException) -> str:
    import traceback

    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {tb[-1].filename.rpartition('/')[2]}:{tb[-1].lineno}" if tb else ""
    text = f"{type(e).__name__}: {e}{where}"
    return text if len(text) <= 160 else text[:157] + "..."
