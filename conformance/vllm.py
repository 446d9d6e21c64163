"""vLLM adapters: run a vLLM release's own quantization code on ckptlint's inputs.

Two levels, for every supported release (the source comes from the release's wheel, unpacked
under ``$CKPTLINT_CONFORMANCE_CACHE/vllm-<version>``; nothing is vendored):

(a) leaf matchers -- the skip-list primitives, called with the list and packed mapping ckptlint
    computed (``leaf_decision``):
    ``vllm/model_executor/layers/quantization/utils/quant_utils.py::is_layer_skipped`` (fp8),
    ``modelopt.py::ModelOpt*Config.is_layer_excluded``,
    ``compressed_tensors/utils.py::should_ignore_layer``, ``quark/utils.py::should_ignore_layer``,
    ``utils/gptq_utils.py::get_dynamic_override`` and the AWQ skip test.
(b) whole configs -- the quant config class vLLM picks for the checkpoint (``override_quantization_method``
    as vLLM's config does), its ``from_config`` on the checkpoint's quantization config, the model
    class's ``hf_to_vllm_mapper`` and ``packed_modules_mapping`` (``configure_quant_config`` /
    ``SupportsQuant``, plus the mapping edits its ``__init__`` makes before building the model), then
    ``get_quant_method`` on a stand-in layer per runtime module (``Release.decisions``).

A decision is ``"quantized"``, ``"unquantized"`` or ``"error: <message>"`` (the framework refuses,
e.g. fused shards that disagree).

The runner (conformance/runner.py, ``scripts/conformance.py run`` / ``new``) uses ``Release(version)``:
``leaf_verdicts(side)`` / ``config_verdicts(side)`` (levels a and b as ``core.Verdict``s),
``source_checks(target)`` (each tracked architecture of the target data: registered, and its packed
mapping as vLLM hands it to the quant config), ``extra_probes()`` (``probes`` below, on top of the
core's matrix) and ``ex.fingerprints`` (``Tracked``: the decision code's source fingerprints, plus
``load_weights`` and the name mapper of each tracked model class -- tracked, never executed).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import os
import types
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from conformance import stubs_vllm as S

VERSIONS = ("0.11.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")

Q = "vllm.model_executor.layers.quantization"
MODELS = "vllm.model_executor.models"

# ckptlint method key -> the vLLM quantization names that can serve it, in the order vLLM's config
# tries their override_quantization_method (the first that claims the checkpoint wins; the last
# is the plain name).
METHOD_NAMES = {
    "fp8": ["fp8"],
    "modelopt_fp8": ["modelopt"],
    "modelopt_fp4": ["modelopt_fp4"],
    "modelopt_mixed": ["modelopt_mixed"],
    "compressed-tensors": ["compressed-tensors"],
    "gptq": ["gptq_marlin", "gptq"],
    "awq": ["awq_marlin", "awq"],
    "quark": ["quark"],
    "mxfp4": ["mxfp4"],
}

# ckptlint runtime-module kinds whose class the model builds with the quant config
_LAYER_FOR_KIND = {"linear": S.ColumnParallelLinear, "moe": S.FusedMoE, "lm_head": S.ParallelLMHead,
                   "embedding": S.VocabParallelEmbedding}
_LAYER_FOR_LOADER = {
    "QKVParallelLinear": S.QKVParallelLinear, "MergedColumnParallelLinear": S.MergedColumnParallelLinear,
    "RowParallelLinear": S.RowParallelLinear, "ReplicatedLinear": S.ReplicatedLinear,
    "ColumnParallelLinear": S.ColumnParallelLinear, "GateLinear": S.ReplicatedLinear, "FusedMoE": S.FusedMoE,
    "ParallelLMHead": S.ParallelLMHead,
}
# kinds the model builds without the quant config (or not as a quantizable layer): vLLM's
# get_quant_method is never asked about them, so the harness has nothing to compare.
UNASKED_KINDS = frozenset({"router", "other", "plain", "unquantized_linear"})

SHARDS_DISAGREE = ("some but not all shards", "different quantization schemes", "All MoE projections need",
                   "same quantization scheme")


def source_root(version: str, download: bool = True) -> Path:
    """The unpacked release (``vllm/...`` below it), from the wheel cache (conformance.wheels)."""
    from conformance import wheels

    return Path(wheels.source_dir("vllm", version, download=download))


def _real(name: str) -> bool:
    """vLLM modules executed from source; every other one is a stub."""
    if name.startswith(Q):
        return ".kernels" not in name
    if name.startswith("vllm.models."):  # per-model packages (0.30+), not their kernels
        return not any(p in name.split(".") for p in ("ops", "kernels"))
    return name in (f"{MODELS}.utils", f"{MODELS}.interfaces", f"{MODELS}.registry",
                    "vllm.model_executor.model_loader.utils") or (
        name.startswith(MODELS + ".") and name.count(".") == 3)


@dataclass
class Layer:
    """One runtime module as ckptlint names it."""
    name: str
    kind: str
    loader: str | None = None
    role: str = "main"
    projs: tuple[str, ...] = ()  # expert projection names as stored (FusedMoE ckpt_*_proj_name)
    # FusedMoE sizes as the model class builds the layer from config.json (hidden size, expert
    # intermediate size per TP partition); None: not in the config (Marlin-compatible stand-ins)
    hidden: int | None = None
    inter_part: int | None = None


@dataclass
class Outcome:
    decisions: dict[str, str]
    method: str | None = None  # the vLLM quantization name chosen
    config_class: str | None = None
    packed: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Release:
    """One vLLM release's code, loaded once into a sandbox."""

    def __init__(self, version: str, root: Path | None = None, capability: int = 90, *,
                 download: bool = True) -> None:
        self.version = version
        self.root = Path(root) if root is not None else source_root(version, download=download)
        self.ex = Tracked(self.root)
        self.sb = S.Sandbox(self.root, _real, capability=capability)
        torch = self.sb.module("torch")
        # safetensors dtype names -> the stub torch dtypes (GPTQ infers its quantized list from them)
        self.sb.overrides["_SAFETENSORS_TO_TORCH_DTYPE"] = {
            "F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
            "I8": torch.int8, "U8": torch.uint8, "I16": torch.int16, "I32": torch.int32, "I64": torch.int64,
            "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "BOOL": torch.bool}
        self.qpkg = self.sb.module(Q)
        # the routed-experts layer class, by the name this release gives it
        self.moe_cls = S.RoutedExperts if (self.root / "vllm/model_executor/layers/fused_moe/routed_experts.py"
                                           ).is_file() else S.FusedMoE

    # --- module loading -------------------------------------------------------------------------
    def module(self, name: str) -> types.ModuleType:
        mod = self.sb.module(name)
        self._neutralize()
        return mod

    def _neutralize(self) -> None:
        """Neutralise the quantize-method classes of every quantization module loaded so far (model
        classes keep their own __init__: it is read for the packed-mapping edits)."""
        for name, mod in list(self.sb.modules.items()):
            if name.startswith(Q) and not isinstance(mod, S.StubModule):
                S.neutralize_methods(mod)

    def config_class(self, vllm_name: str) -> type:
        cls = self.qpkg.get_quantization_config(vllm_name)
        self._neutralize()
        return cls

    def model_class(self, arch: str) -> type | None:
        reg = self.module(f"{MODELS}.registry")
        table = getattr(reg, "_VLLM_MODELS", None) or {}
        hit = table.get(arch) or next((v for v in table.values() if v[1] == arch), None)
        if hit is None:
            return None
        modname, clsname = hit[0], hit[1]
        mod = self.module(modname if modname.startswith("vllm.") else f"{MODELS}.{modname}")
        return getattr(mod, clsname, None)

    # --- (b) whole configs ----------------------------------------------------------------------
    def choose(self, method_key: str, qcfg: dict[str, Any]) -> str:
        names = METHOD_NAMES.get(method_key, [method_key])
        for name in names[:-1]:
            try:
                cls = self.config_class(name)
            except (ValueError, KeyError):
                continue
            over = getattr(cls, "override_quantization_method", None)
            if over is not None and over(dict(qcfg), None):
                return name
        return names[-1]

    def quant_config(self, method_key: str, qcfg: dict[str, Any], tensor_dtypes: dict[str, str] | None = None):
        name = self.choose(method_key, qcfg)
        cls = self.config_class(name)
        _seams(cls)
        if method_key in ("modelopt_fp8", "modelopt_fp4", "modelopt_mixed"):
            # vLLM's config picks the ModelOpt class by quant_algo (override_quantization_method)
            for cand in ("modelopt", "modelopt_fp4", "modelopt_mixed"):
                try:
                    c = self.config_class(cand)
                except (ValueError, KeyError):
                    continue
                over = getattr(c, "override_quantization_method", None)
                if over is not None and over(dict(qcfg), None) == cand:
                    name, cls = cand, c
                    break
        cfg = cls.from_config(copy.deepcopy(qcfg))
        if tensor_dtypes is not None and hasattr(cfg, "maybe_update_config"):
            meta = {n: {"dtype": d} for n, d in tensor_dtypes.items()}
            mod = self.sb.modules[cls.__module__]
            mod.get_safetensors_params_metadata = lambda *a, **k: meta
            try:
                cfg.maybe_update_config("checkpoint", hf_config=None, revision=None)
            except TypeError:
                cfg.maybe_update_config("checkpoint")
        return name, cfg

    def configure(self, cfg: Any, model_cls: type | None, hf_config: dict[str, Any]) -> dict[str, list[str]]:
        """Hand the model class's mapper and packed mapping to the quant config, as the loader and
        the class's __new__/__init__ do; returns the mapping the config ends up with."""
        if model_cls is None:
            return dict(getattr(cfg, "packed_modules_mapping", {}) or {})
        saved = _fresh_class_mappings(model_cls)
        try:
            loader = self.module("vllm.model_executor.model_loader.utils")
            configure = getattr(loader, "configure_quant_config", None)
            if configure is not None:
                configure(cfg, model_cls)
            vcfg = _vllm_config(self.sb, hf_config, cfg)
            inst = model_cls.__new__(model_cls, vllm_config=vcfg, prefix="")
            _run_init_prefix(model_cls, inst, vcfg, hf_config)
            return {k: list(v) for k, v in (cfg.packed_modules_mapping or {}).items()}
        finally:
            for owner, value in saved:
                type.__setattr__(owner, "packed_modules_mapping", value)

    def decisions(self, *, arch: str | None, hf_config: dict[str, Any], method_key: str, qcfg: dict[str, Any],
                  layers: Iterable[Layer], draft_arch: str | None = None,
                  tensor_dtypes: dict[str, str] | None = None) -> Outcome:
        out = Outcome({})
        layers = list(layers)
        # one quant config object for the target model and its draft: the proposer's VllmConfig is a
        # dataclasses.replace of the target's (v1/spec_decode), so the draft class is configured on
        # top of the target's mapper and packed mapping (a class without them changes nothing)
        name, cfg = self.quant_config(method_key, qcfg, tensor_dtypes)
        out.method, out.config_class = name, type(cfg).__name__
        for role, cls_name in (("main", arch), ("draft", draft_arch)):
            mine = [ly for ly in layers if (ly.role or "main") == role]
            if not mine:
                continue
            model_cls = self.model_class(cls_name) if cls_name else None
            if cls_name and model_cls is None:
                out.notes.append(f"{role}: no model class {cls_name} in the registry")
            packed = self.configure(cfg, model_cls, hf_config)
            if role == "main":
                out.packed = packed
            for ly in mine:
                out.decisions[ly.name] = self.decide(cfg, ly)
        return out

    def decide(self, cfg: Any, ly: Layer) -> str:
        if ly.kind in UNASKED_KINDS:
            return "unasked"
        layer_cls = _LAYER_FOR_LOADER.get(ly.loader or "") or _LAYER_FOR_KIND.get(ly.kind)
        if layer_cls is None:
            return "unasked"
        attrs: dict[str, Any] = {}
        if layer_cls is S.FusedMoE:
            layer_cls = self.moe_cls
            # FusedMoE's checkpoint projection names (Mixtral passes w1/w3/w2, the default is
            # gate_proj/up_proj/down_proj); compressed-tensors tests expert 0's projections
            gate, up, down = ("w1", "w3", "w2") if "w1" in ly.projs else ("gate_proj", "up_proj", "down_proj")
            # the sizes a method reads to pick its MoE kernel (GPTQ: Marlin, which consults `dynamic`,
            # or the MoE WNA16 fallback, which does not): the checkpoint's own, as the model class
            # passes them from config.json (Marlin-compatible stand-ins when the config has none);
            # the activation every tracked MoE model leaves at FusedMoE's default (0.11's
            # check_moe_marlin_supports_layer requires "silu"; gpt-oss passes "swigluoai", but its
            # load_weights reads only MXFP4 or BF16 experts, so no GPTQ gpt-oss loads)
            hidden, inter = ly.hidden or 4096, ly.inter_part or 1536
            attrs = dict(ckpt_gate_proj_name=gate, ckpt_up_proj_name=up, ckpt_down_proj_name=down,
                         hidden_size=hidden, intermediate_size_per_partition=inter, apply_router_weight_on_input=False,
                         activation="silu",
                         moe_config=types.SimpleNamespace(hidden_dim=hidden, intermediate_size_per_partition_unpadded=inter,
                                                          intermediate_size_per_partition=inter, activation="silu"))
        layer = layer_cls(ly.name, **attrs)
        try:
            method = cfg.get_quant_method(layer, prefix=ly.name)
        except ValueError as exc:
            if any(s in str(exc) for s in SHARDS_DISAGREE):
                return f"error: {exc}"
            raise
        except RuntimeError as exc:
            # compressed-tensors 0.11: the MoE kernel is chosen from the pydantic QuantizationArgs the
            # sandbox stubs; reaching the choice means the layer was not left unquantized
            if "Unsupported FusedMoe scheme" in str(exc):
                return "quantized"
            raise
        except (AttributeError, TypeError) as exc:
            import traceback

            frames = [f.name for f in traceback.extract_tb(exc.__traceback__)]
            if "get_moe_method" in frames and frames[-1].startswith("_is_"):
                # compressed-tensors: the MoE scheme predicates run on the pydantic QuantizationArgs
                # the sandbox stubs, after the `ignore` test; reaching them means the layer was not
                # left unquantized (as with "Unsupported FusedMoe scheme" above)
                return "quantized"
            # a stand-in where the method reads something the sandbox does not model (e.g. the
            # compressed-tensors MoE scheme predicates on pydantic QuantizationArgs): this module is
            # reported as a harness error (conformance/allow.toml lists the known ones), the others
            # are still compared
            return f"error: harness: {type(exc).__name__}: {str(exc)[:100]}"
        return classify(method)

    # --- (a) leaf matchers ----------------------------------------------------------------------
    def leaf(self, method_key: str, prefix: str, entries: list[str], packed: dict[str, list[str]],
             kind: str = "linear") -> str:
        """The release's matcher for ``method_key`` on one prefix with ckptlint's skip list:
        ``excluded``, ``kept`` or ``error: ...``."""
        try:
            hit = self._leaf(method_key, prefix, entries, packed, kind)
        except ValueError as exc:
            if any(s in str(exc) for s in SHARDS_DISAGREE):
                return f"error: {exc}"
            raise
        return "excluded" if hit else "kept"

    def _leaf(self, method_key: str, prefix: str, entries: list[str], packed: dict[str, list[str]],
              kind: str) -> bool:
        if method_key == "awq":
            # 0.11: awq.py::is_layer_skipped_awq (substring, no shards); 0.24+: auto_awq.py calls
            # quant_utils.is_layer_skipped(..., match_mode="substring") with the packed mapping
            awq = self.sb.source_path(f"{Q}.awq")
            if awq is not None and awq.is_file():
                return bool(self.module(f"{Q}.awq").is_layer_skipped_awq(prefix, list(entries)))
            qu = self.module(f"{Q}.utils.quant_utils")
            return bool(qu.is_layer_skipped(prefix, list(entries), packed, **self._awq_skip_keywords()))
        if method_key == "fp8":
            qu = self.module(f"{Q}.utils.quant_utils")
            return bool(qu.is_layer_skipped(prefix, list(entries), packed))
        if method_key.startswith("modelopt"):
            cls = self.config_class({"modelopt_fp8": "modelopt", "modelopt_fp4": "modelopt_fp4"}.get(
                method_key, "modelopt_mixed"))
            inst = cls.__new__(cls)
            inst.exclude_modules = list(entries)
            inst.packed_modules_mapping = packed
            return bool(inst.is_layer_excluded(prefix))
        if method_key == "compressed-tensors":
            ct = self.module(f"{Q}.compressed_tensors.utils")
            return bool(ct.should_ignore_layer(prefix, ignore=list(entries), fused_mapping=packed))
        if method_key == "quark":
            qu = self.module(f"{Q}.quark.utils")
            return bool(qu.should_ignore_layer(prefix, ignore=list(entries), fused_mapping=packed))
        raise KeyError(method_key)


    # --- the runner's interface (conformance/runner.py) ------------------------------------------
    def leaf_verdicts(self, side: Any) -> dict[str, Any]:
        """Level (a): the release's skip-list matcher on each linear module ckptlint decided by its
        skip list, with ckptlint's rewritten list and packed mapping."""
        out: dict[str, Any] = {}
        method_key = side.method_key or ""
        if method_key not in LEAF_METHODS:
            return out
        plan = side.plan
        for md in side.modules.values():
            if md.kind != "linear" or md.forced or not (md.quantized or md.conflict or
                                                      md.reason.startswith("excluded")):
                continue
            entries = side.exclude_draft if md.role == "draft" else side.exclude_main
            packed = side.packed if md.role == "main" or plan.draft is None or plan.draft.packed_mapping else {}
            if method_key == "gptq":
                d = self._gptq_leaf(md.name, side, packed)
            else:
                d = self.leaf(method_key, md.name, list(entries), packed)
            out[md.name] = to_verdict("quantized" if d == "kept" else "unquantized" if d == "excluded" else d)
        return out

    def _awq_skip_keywords(self) -> dict[str, Any]:
        """The literal keyword arguments auto_awq.py's get_quant_method passes to is_layer_skipped
        (``skip_with_substr=True`` in 0.24, ``match_mode="substring"`` later), read from the release."""
        path = self.sb.source_path(f"{Q}.auto_awq")
        if path is None:
            return {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "is_layer_skipped":
                return {k.arg: k.value.value for k in node.keywords
                        if k.arg and isinstance(k.value, ast.Constant)}
        return {}

    def _gptq_leaf(self, prefix: str, side: Any, packed: dict[str, list[str]]) -> str:
        """get_linear_quant_method's test (utils/gptq_utils.py): a `-:` rule that matches first, or a
        module outside modules_in_block_to_quantize, is left unquantized."""
        gu = self.module(f"{Q}.utils.gptq_utils")
        dynamic = (side.quant or {}).get("dynamic") or {}
        if not isinstance(dynamic, dict):
            return "kept"
        cfg = types.SimpleNamespace(dynamic=dynamic)
        if gu.get_dynamic_override(cfg, layer_name=prefix) is False:
            return "excluded"
        include = side.plan.include
        check = getattr(gu, "is_layer_gptq_quantized", None)
        if include is not None and check is not None:
            try:
                if not check(prefix=prefix, quantized_layers=list(include), fused_mapping=packed):
                    return "excluded"
            except ValueError as exc:
                if any(t in str(exc) for t in SHARDS_DISAGREE):
                    return f"error: {exc}"
                raise
        return "kept"

    def config_verdicts(self, side: Any) -> dict[str, Any]:
        """Level (b): the quant config vLLM builds for the checkpoint, asked about every module."""
        if side.quant is None:
            return {}
        ckpt = getattr(side, "ckpt", None)
        plan = side.plan
        hidden, inter_part = _moe_sizes(_config_of(ckpt, plan), plan.deployment)
        layers = [Layer(md.name, md.kind, plan.modules[key].loader, md.role,
                        tuple(sorted({sh.proj for sh in plan.modules[key].shards if sh.proj})),
                        hidden, inter_part)
                  for key, md in side.modules.items() if not md.forced]
        dtypes = {n: t.dtype for n, t in ckpt.tensors.items()} if ckpt is not None else None
        if plan.arch_name and self.model_class(plan.arch_name) is None:
            # the release registers no such class: it refuses the architecture before any quant
            # decision (ckptlint: unknown architecture, generic rules); nothing of vLLM's to compare.
            # A tracked class missing from the registry is a source-level disagreement (source_checks).
            return {}
        try:
            res = self.decisions(arch=plan.arch_name, hf_config=_config_of(ckpt, plan), method_key=side.method_key,
                                 qcfg=side.quant, layers=layers,
                                 draft_arch=plan.draft.cls if plan.draft is not None else None,
                                 tensor_dtypes=dtypes)
        except Exception as exc:  # noqa: BLE001 - reported as a disagreement, not a crash of the run
            return {"<from_config>": to_verdict(f"error: harness: {type(exc).__name__}: {str(exc)[:120]}")}
        return {n: to_verdict(d) for n, d in res.decisions.items() if d != "unasked"}

    def extra_probes(self) -> list[tuple[str, Any]]:
        """vLLM's own probe matrix (MLA / DeepSeek fused_qkv_a_proj, Qwen3-MoE, Llama; ``probes``), on
        top of the core's (conformance/probes.py)."""
        return _probe_list()

    def source_checks(self, target: str) -> list:
        """Each tracked model class of ``target``'s data: the packed mapping vLLM hands its quant config
        (class attribute, SupportsQuant / configure_quant_config, the __init__ edits for a config that
        triggers them) against ckptlint's; ``load_weights`` (and the class's name mapper) is
        fingerprinted into ``ex.fingerprints`` -- renaming code that is tracked, not executed."""
        from conformance.core import Disagreement
        from conformance.runner import tracked_arch_classes
        from ckptlint.targets import resolve

        t = resolve(target)[0]
        out = []
        classes = tracked_arch_classes(target)
        for arch in classes:
            cls = self.model_class(arch)
            data = t.architecture(arch)
            if cls is None:
                if data is not None and getattr(data, "supported", True) is not False:
                    out.append(Disagreement("vllm", self.version, "source", "*", "model registry", arch, (),
                                            "no such model class registered", "supported"))
                continue
            self.ex.track_load_weights(cls)
            if data is None or getattr(data, "supported", True) is False:
                continue
            _, cfg = self.quant_config("fp8", {"quant_method": "fp8", "activation_scheme": "dynamic"})
            try:
                got = self.configure(cfg, cls, dict(PACKED_HF_CONFIG.get(arch, {})))
            except Exception as exc:  # noqa: BLE001
                got = {"<harness>": [f"{type(exc).__name__}: {exc}"[:120]]}
            want = {k: list(v) for k, v in dict(data.packed_modules_mapping or {}).items()}
            if got != want:
                out.append(Disagreement("vllm", self.version, "source", "*", "packed_modules_mapping", arch, (),
                                        f"packed_modules_mapping {got}", f"{want}"))
        return out


# the Hugging Face config keys that make a model class's __init__ edit its packed mapping (the
# source check runs every class with the edits that the supported checkpoints trigger)
_MLA = {"q_lora_rank": 8, "kv_lora_rank": 8, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8}
PACKED_HF_CONFIG = {"Qwen3MoeForCausalLM": {"mlp_only_layers": []}, "DeepseekV3ForCausalLM": _MLA,
                    "DeepseekV32ForCausalLM": _MLA, "DeepseekV2ForCausalLM": _MLA, "GlmMoeDsaForCausalLM": _MLA,
                    "DeepSeekMTP": _MLA, "KimiK25ForConditionalGeneration": _MLA}

# --- tracked source: the decision code whose change a new release must be checked for ----------------

# quantization modules whose every function is decision code (the skip-list matchers)
TRACKED_MODULES = ("utils.quant_utils", "compressed_tensors.utils", "quark.utils", "utils.gptq_utils", "awq")
# quant config classes (every method) and single methods, found in the quantization package by name
TRACKED_CLASSES_Q = ("QuantizationConfig", "Fp8Config", "ModelOptQuantConfigBase", "ModelOptFp8Config",
                     "ModelOptNvFp4Config", "ModelOptMixedPrecisionConfig", "CompressedTensorsConfig",
                     "GPTQMarlinConfig", "GPTQConfig", "AutoGPTQConfig", "AWQMarlinConfig", "AWQConfig",
                     "AutoAWQConfig", "QuarkConfig", "Mxfp4Config")
TRACKED_METHODS_Q = ("CompressedTensorsMoEMethod.get_moe_method",)


class Tracked:
    """Source fingerprints of the decision code of one release (``fingerprints["module:Qual.name"]`` =
    sha256 of ``ast.unparse`` of the definition, as conformance.extract records them): what
    ``scripts/conformance.py new`` compares between releases and the lock digests."""

    def __init__(self, root: Path) -> None:
        from conformance.extract import digest

        self.root = root
        self._digest = digest
        self.fingerprints: dict[str, str] = {}
        base = root.joinpath(*Q.split("."))
        for rel in TRACKED_MODULES:
            p = base.joinpath(*rel.split(".")).with_suffix(".py")
            if p.is_file():
                tree = ast.parse(p.read_text(encoding="utf-8"))
                for node in tree.body:
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.fingerprints[f"{Q}.{rel}:{node.name}"] = digest(ast.unparse(node))
        wanted = set(TRACKED_CLASSES_Q) | {m.partition(".")[0] for m in TRACKED_METHODS_Q}
        for p in sorted(base.rglob("*.py")):
            text = p.read_text(encoding="utf-8", errors="replace")
            if not any(f"class {c}" in text for c in wanted):
                continue
            mod = ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
            for node in ast.parse(text).body:
                if not (isinstance(node, ast.ClassDef) and node.name in wanted):
                    continue
                for item in node.body:
                    if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        continue
                    q = f"{node.name}.{item.name}"
                    if node.name in TRACKED_CLASSES_Q or q in TRACKED_METHODS_Q:
                        self.fingerprints[f"{mod}:{q}"] = digest(ast.unparse(item))

    def track_load_weights(self, cls: type) -> None:
        """``load_weights`` along the class's MRO (the first model-package owner), the inner model's
        where it delegates, and the class's ``hf_to_vllm_mapper``."""
        for owner in cls.__mro__:
            if "load_weights" in owner.__dict__ and owner.__module__.startswith(("vllm.model_executor.models",
                                                                                 "vllm.models")):
                src = _source_of(owner.__dict__["load_weights"])
                if src:
                    self.fingerprints[f"{owner.__module__}:{owner.__name__}.load_weights"] = self._digest(
                        ast.unparse(ast.parse(src)))
                break
        inner = getattr(cls, "model_cls", None)
        if isinstance(inner, type) and "load_weights" in inner.__dict__:
            src = _source_of(inner.__dict__["load_weights"])
            if src:
                self.fingerprints[f"{inner.__module__}:{inner.__name__}.load_weights"] = self._digest(
                    ast.unparse(ast.parse(src)))
        mapper = cls.__dict__.get("hf_to_vllm_mapper")
        if mapper is not None and not isinstance(mapper, S.StubBase):
            self.fingerprints[f"{cls.__module__}:{cls.__name__}.hf_to_vllm_mapper"] = self._digest(
                json.dumps({k: repr(v) for k, v in sorted(vars(mapper).items())}, sort_keys=True))


class _Scheme:
    """What a compressed-tensors scheme class is asked for after it is chosen."""

    def get_min_capability(self) -> int:
        return 0


def _seams(cls: type) -> None:
    """Harness limit (conformance/allow.toml has none for it: it decides nothing ckptlint checks):
    compressed-tensors' choice of a kernel scheme (``_get_scheme_from_parts``) needs the
    ``compressed_tensors`` package's pydantic QuantizationArgs, which the sandbox stubs. Whether a
    layer is quantized is decided before it (``ignore`` / ``find_matched_target`` /
    ``weight_quant is None``), so the scheme is a placeholder."""
    if cls.__name__ == "CompressedTensorsConfig" and "_get_scheme_from_parts" in vars(cls):
        cls._get_scheme_from_parts = lambda self, *a, **k: _Scheme()


def classify(method: Any) -> str:
    if method is None or getattr(method, "unquantized", False) or type(method).__name__.startswith("Unquantized"):
        return "unquantized"
    return "quantized"


def _fresh_class_mappings(model_cls: type) -> list[tuple[type, Any]]:
    """Give every class in the MRO a copy of its packed_modules_mapping (an __init__ edits it in
    place); returns what to restore."""
    saved = []
    for owner in model_cls.__mro__:
        if "packed_modules_mapping" in owner.__dict__:
            value = owner.__dict__["packed_modules_mapping"]
            saved.append((owner, value))
            type.__setattr__(owner, "packed_modules_mapping", copy.deepcopy(value))
    return saved


def _vllm_config(sb: S.Sandbox, hf_config: dict[str, Any], quant_config: Any) -> Any:
    hf = _Namespace(hf_config)
    cfg_mod = sb.module("vllm.config")
    vcfg = cfg_mod.VllmConfig()  # a stub instance: _find_quant_config's isinstance test holds
    model_config = types.SimpleNamespace(hf_config=hf, hf_text_config=hf, quantization=None)
    vcfg.model_config, vcfg.quant_config = model_config, quant_config
    vcfg.speculative_config = None
    return vcfg


class _Namespace(types.SimpleNamespace):
    """A Hugging Face config as attributes (missing ones raise AttributeError, as there)."""

    def __init__(self, d: dict[str, Any]) -> None:
        super().__init__(**{k: (_Namespace(v) if isinstance(v, dict) else v) for k, v in d.items()
                            if isinstance(k, str) and k.isidentifier()})

    def get_text_config(self) -> "_Namespace":
        return self


def _run_init_prefix(model_cls: type, inst: Any, vcfg: Any, hf_config: dict[str, Any]) -> None:
    """Run the statements of the class's ``__init__`` that touch ``packed_modules_mapping`` (and
    the assignments before them that they read), each on its own: the mapping edits a model makes
    before it builds its layers (DeepSeek's fused_qkv_a_proj when q_lora_rank is set, Qwen3-MoE's
    gate_up_proj when mlp_only_layers is set)."""
    init = None
    for owner in model_cls.__mro__:
        if "__init__" in owner.__dict__ and owner.__module__.startswith(MODELS):
            init = owner.__dict__["__init__"]
            break
    if os.environ.get("CONFORMANCE_DEBUG"):
        print("init of", model_cls, "->", getattr(init, "__qualname__", None))
    if init is None or not hasattr(init, "__code__"):
        return
    import inspect
    import textwrap
    try:
        src = textwrap.dedent(inspect.getsource(init))
    except (OSError, TypeError):
        src = _source_of(init)
        if src is None:
            return
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    body = fn.body
    last = max((i for i, st in enumerate(body) if "packed_modules_mapping" in ast.unparse(st)), default=-1)
    if last < 0:
        return
    g = init.__globals__
    local: dict[str, Any] = {"self": inst, "vllm_config": vcfg, "prefix": "", "config": _Namespace(hf_config)}
    for st in body[: last + 1]:
        text = ast.unparse(st)
        if "super()" in text or "self.model =" in text:
            continue
        try:
            exec(compile(ast.Module([st], type_ignores=[]), "<init>", "exec"), g, local)
        except Exception as exc:
            if os.environ.get("CONFORMANCE_DEBUG"):
                print("init statement skipped:", text[:80], repr(exc))
            continue


def _source_of(fn: Any) -> str | None:
    """The source of the function ``fn`` (dedented), cut at its own end: the ``def`` node of its
    file that starts at ``co_firstlineno`` (its first decorator, or the ``def`` line), from its
    first line to its ``end_lineno``. None when the file cannot be read or parsed."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    node = def_at_line(code.co_filename, code.co_firstlineno)
    if node is None:
        return None
    lines = _file_lines(code.co_filename)
    import textwrap

    return textwrap.dedent("".join(lines[node_first_line(node) - 1: node.end_lineno]))


@lru_cache(maxsize=256)
def _file_lines(path: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    except OSError:
        return []


@lru_cache(maxsize=256)
def _file_defs(path: str) -> dict[int, ast.AST]:
    """First line (first decorator, else ``def``) -> function node, for every function of a file."""
    try:
        tree = ast.parse("".join(_file_lines(path)))
    except (SyntaxError, ValueError):
        return {}
    out: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.setdefault(node_first_line(node), node)
            out.setdefault(node.lineno, node)
    return out


def node_first_line(node: ast.AST) -> int:
    decos = getattr(node, "decorator_list", None) or []
    return min([node.lineno] + [d.lineno for d in decos])


def def_at_line(path: str, line: int) -> ast.AST | None:
    return _file_defs(path).get(line)


@lru_cache(maxsize=None)
def release(version: str) -> Release:
    return Release(version)


# --- source fingerprints ------------------------------------------------------------------------

def fingerprint(source: str) -> str:
    """sha256 of the normalised AST of a source fragment (comments and layout ignored)."""
    return hashlib.sha256(ast.dump(ast.parse(source)).encode()).hexdigest()[:16]


def load_weights_fingerprints(version: str, classes: Iterable[str]) -> dict[str, str]:
    """``<class>.load_weights`` source fingerprint per tracked model class (through the registry;
    the method found along the MRO, then the inner model's own load_weights where it delegates)."""
    rel = release(version)
    out: dict[str, str] = {}
    for arch in classes:
        cls = rel.model_class(arch)
        if cls is None:
            out[arch] = "absent"
            continue
        parts = []
        for owner in cls.__mro__:
            if "load_weights" in owner.__dict__ and owner.__module__.startswith(MODELS):
                parts.append(_method_source(owner, "load_weights"))
                break
        inner = getattr(cls, "model_cls", None)
        if isinstance(inner, type) and "load_weights" in inner.__dict__:
            parts.append(_method_source(inner, "load_weights"))
        mapper = cls.__dict__.get("hf_to_vllm_mapper")
        if mapper is not None and not isinstance(mapper, S.StubBase):
            parts.append(json.dumps({k: repr(v) for k, v in sorted(vars(mapper).items())}, sort_keys=True))
        out[arch] = hashlib.sha256("\n".join(fingerprint(p) if not p.startswith("{") else p
                                             for p in parts if p).encode()).hexdigest()[:16]
    return out


def _method_source(owner: type, name: str) -> str:
    fn = owner.__dict__[name]
    src = _source_of(fn) or ""
    return src


# --- lining the verdicts up with ckptlint (conformance.core) -------------------------------------

LEAF_METHODS = ("fp8", "modelopt_fp8", "modelopt_fp4", "compressed-tensors", "quark", "gptq", "awq")


def to_verdict(decision: str):
    from conformance.core import Verdict

    if decision.startswith("error"):
        return Verdict(None, decision[len("error: "):])
    return Verdict(decision == "quantized")


def check(side: Any, ckpt: Any = None, *, source: str = "", levels: tuple[str, ...] = ("config", "leaf")) -> list:
    """Every disagreement between this release's own code and ckptlint's decisions (``side`` from
    conformance.ckptside.side on a ``vllm==X`` target)."""
    from conformance.core import compare

    rel = release(side.target.partition("==")[2])
    if ckpt is not None and getattr(side, "ckpt", None) is None:
        side = side._replace(ckpt=ckpt)
    out: list = []
    if "config" in levels:
        out += compare(side, rel.config_verdicts(side), level="config", source=source)
    if "leaf" in levels:
        out += compare(side, rel.leaf_verdicts(side), level="leaf", source=source)
    return out


def _config_of(ckpt: Any, plan: Any) -> dict[str, Any]:
    cfg = getattr(ckpt, "config", None)
    return cfg if isinstance(cfg, dict) else {}


def _moe_sizes(cfg: dict[str, Any], deployment: Any) -> tuple[int | None, int | None]:
    """(hidden size, expert intermediate size per TP partition) of the FusedMoE layers, as the model
    classes pass them from config.json (the text config of a multimodal model):
    ``moe_intermediate_size`` (Qwen3-MoE, DeepSeek, GLM-4-MoE), else ``intermediate_size`` (Mixtral);
    split over TP / EP as FusedMoE does."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    hidden = text.get("hidden_size")
    inter = text.get("moe_intermediate_size", text.get("intermediate_size"))
    tp = max(1, getattr(deployment, "tp", 1) // max(1, getattr(deployment, "ep", 1)))
    ok = isinstance(hidden, int) and isinstance(inter, int) and inter % tp == 0
    return (hidden, inter // tp) if ok else (None, None)


# --- probes: single-entry skip lists on small models ----------------------------------------------

TRACKED_CLASSES = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepSeekMTP", "Qwen3MoeForCausalLM",
                   "GlmMoeDsaForCausalLM", "LlamaForCausalLM", "MixtralForCausalLM", "GptOssForCausalLM")


def _dense_tensors(layers: int, moe: bool, mla: bool) -> list[tuple[str, str, tuple[int, ...]]]:
    h = 64
    out = [("model.embed_tokens.weight", "BF16", (256, h)), ("lm_head.weight", "BF16", (256, h)),
           ("model.norm.weight", "BF16", (h,))]
    for i in range(layers):
        p = f"model.layers.{i}"
        attn = ["q_a_proj", "kv_a_proj_with_mqa", "q_b_proj", "kv_b_proj", "o_proj"] if mla else \
            ["q_proj", "k_proj", "v_proj", "o_proj"]
        mods = [f"{p}.self_attn.{a}" for a in attn]
        if moe:
            mods += [f"{p}.mlp.experts.{e}.{x}" for e in range(2) for x in ("gate_proj", "up_proj", "down_proj")]
            mods += [f"{p}.mlp.gate"]
        else:
            mods += [f"{p}.mlp.{x}" for x in ("gate_proj", "up_proj", "down_proj")]
        out += [(m + ".weight", "BF16", (h, h)) for m in mods]
        out += [(f"{p}.input_layernorm.weight", "BF16", (h,))]
    return out


PROBE_MODELS = {
    "llama": ("LlamaForCausalLM", {"model_type": "llama"}, False, False),
    "qwen3moe": ("Qwen3MoeForCausalLM", {"model_type": "qwen3_moe", "num_experts": 2, "moe_intermediate_size": 64},
                 True, False),
    "deepseek": ("DeepseekV3ForCausalLM", {"model_type": "deepseek_v3", "q_lora_rank": 32, "kv_lora_rank": 16,
                                           "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
                                           "n_routed_experts": 2, "first_k_dense_replace": 0}, True, True),
}

PROBE_METHODS = {
    "fp8": {"quant_method": "fp8", "activation_scheme": "dynamic"},
    "compressed-tensors": {"quant_method": "compressed-tensors", "format": "float-quantized",
                           "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                               "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True,
                               "dynamic": False}, "input_activations": {"num_bits": 8, "type": "float",
                                                                        "strategy": "token", "dynamic": True}}}},
    "modelopt_fp8": {"quant_method": "modelopt", "quant_algo": "FP8"},
    "quark": {"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor",
                                                                          "is_dynamic": False},
                                                               "input_tensors": {"dtype": "fp8_e4m3",
                                                                                 "qscheme": "per_tensor",
                                                                                 "is_dynamic": False},
                                                               "output_tensors": None, "bias": None},
              "layer_quant_config": {}, "layer_type_quant_config": {},
              "export": {"kv_cache_group": [], "pack_method": "reorder"}},
}
_SKIP_KEY = {"fp8": "ignored_layers", "compressed-tensors": "ignore", "modelopt_fp8": "ignore", "quark": "exclude"}


def probe_entries(model: str) -> list[str]:
    """Single-entry skip lists: parent module, dotted suffix, fused name, shard name, glob, `re:`,
    bare leaf name."""
    if model == "deepseek":
        shard, fused, leaf = "q_a_proj", "fused_qkv_a_proj", "q_a_proj"
    else:
        shard, fused, leaf = "q_proj", "qkv_proj", "q_proj"
    p = "model.layers.0.self_attn"
    out = [p, f"self_attn.{shard}", f"{p}.{fused}", f"{p}.{shard}", f"{p}.*", f"re:.*{fused}$",
           f"re:.*self_attn\\.{shard}$", "re:.*self_attn.*", leaf, fused, "model.layers.0.mlp.gate_up_proj",
           "model.layers.0.mlp.experts", "re:.*mlp.experts.*", "lm_head", "model.layers.0"]
    if model == "deepseek":
        out += [f"{p}.q_a_proj", f"{p}.kv_a_proj_with_mqa"]
    return out


@lru_cache(maxsize=1)
def _probe_list() -> list[tuple[str, Any]]:
    return list(probes())


def probes():
    """(probe id, in-memory checkpoint) for every model x method x single-entry skip list."""
    from conformance.ckptside import in_memory

    for model, (arch, extra, moe, mla) in PROBE_MODELS.items():
        tensors = _dense_tensors(2, moe, mla)
        for method, qc in PROBE_METHODS.items():
            for entry in probe_entries(model):
                q = copy.deepcopy(qc)
                q[_SKIP_KEY[method]] = [entry]
                config = {"architectures": [arch], "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 256,
                          "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
                          "torch_dtype": "bfloat16", **extra}
                if method == "modelopt_fp8":
                    q = {"producer": {"name": "modelopt"}, "quantization": {
                        "quant_algo": "FP8", "exclude_modules": [entry]}}
                    yield f"probe/{model}/{method}/{entry}", in_memory(config, tensors, hf_quant_config=q)
                    # the config.json form under the hf_quant_config key (`exclude_modules`): read by
                    # 0.11 and from 0.33 on (ModelOptQuantConfigBase.from_config), not by 0.24-0.32
                    config = {**config, "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8",
                                                                "exclude_modules": [entry]}}
                    yield f"probe/{model}/{method}/config.json:exclude_modules/{entry}", in_memory(config, tensors)
                    continue
                config["quantization_config"] = q
                yield f"probe/{model}/{method}/{entry}", in_memory(config, tensors)
