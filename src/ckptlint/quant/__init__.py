"""Quantization configs: lenient models of what quantizers write, and the schemes they imply.

Parsing never raises on user input: problems become CF311 findings and the config is treated as
unknown. ``QuantConfig.method_key`` selects the method rules in the target data (``quark``,
``modelopt_fp8``, ``modelopt_fp4``, ``modelopt_mixed``, ``fp8``, ``compressed-tensors``, ``gptq``,
``awq``, ``mxfp4``, ...). ``scheme_for`` answers, for a runtime module the target did not exclude,
which scheme the config assigns it (None: the config leaves it unquantized).
"""

from __future__ import annotations

import fnmatch
import re
import dataclasses
from dataclasses import dataclass, field
from typing import Any


from ckptlint.findings import Consequence, Finding
from ckptlint.quant.lenient import REQUIRED, Invalid, Lenient
from ckptlint.quant.schemes import SCHEMES, Scheme, scheme_fp8, scheme_from_quark_layer
from ckptlint.userregex import RegexScope, UserRegex

__all__ = ["QuantConfig", "parse_quant_config", "Scheme", "SCHEMES"]


OptStrList = ("list", str)


class QuarkConfig(Lenient):
    FIELDS = {"quant_method": (str, REQUIRED), "exclude": (OptStrList, None), "global_quant_config": (dict, None),
              "layer_quant_config": (dict, None), "layer_type_quant_config": (dict, None), "export": (dict, None)}


class ModelOptFlat(Lenient):
    FIELDS = {"quant_method": (str, REQUIRED), "quant_algo": (str, None), "ignore": (OptStrList, None),
              "exclude_modules": (OptStrList, None), "modules_to_not_convert": (OptStrList, None),
              "group_size": (int, None), "quantized_layers": (dict, None)}


class ModelOptNested(Lenient):
    FIELDS = {"quant_algo": (str, None), "exclude_modules": (OptStrList, None), "group_size": (int, None),
              "kv_cache_quant_algo": (str, None), "quantized_layers": (dict, None)}


class Fp8Config(Lenient):
    FIELDS = {"quant_method": (str, REQUIRED), "activation_scheme": (str, None),
              "weight_block_size": (("list", int), None), "ignored_layers": (OptStrList, None),
              "modules_to_not_convert": (OptStrList, None)}


class CTArgs(Lenient):
    FIELDS = {"num_bits": (int, 8), "type": (str, "int"), "symmetric": (bool, True), "group_size": (int, None),
              "strategy": (str, None), "block_structure": (("list", int), None), "dynamic": ((bool, str), False),
              "actorder": ((str, bool), None)}


class CTGroup(Lenient):
    FIELDS = {"targets": (("list", str), REQUIRED), "weights": (CTArgs, None),
              "input_activations": (CTArgs, None), "format": (str, None)}


class CTConfig(Lenient):
    FIELDS = {"quant_method": (str, REQUIRED), "config_groups": (("dict", CTGroup), dict),
              "ignore": (OptStrList, None), "format": (str, None), "version": (str, None)}


class GptqConfig(Lenient):
    FIELDS = {"quant_method": (str, REQUIRED), "bits": (int, 4), "group_size": (int, 128), "desc_act": (bool, False),
              "sym": (bool, True), "lm_head": (bool, False), "dynamic": (("dict", dict), None),
              "checkpoint_format": (str, None), "modules_in_block_to_quantize": (list, None)}


class AwqConfig(Lenient):
    FIELDS = {"quant_method": (str, REQUIRED), "bits": (int, None), "w_bit": (int, None), "group_size": (int, None),
              "q_group_size": (int, None), "zero_point": (bool, True), "version": (str, None),
              "modules_to_not_convert": (OptStrList, None)}


@dataclass
class QuantConfig:
    method: str  # quant_method as written (normalised)
    method_key: str  # key into target data `methods`
    source_file: str  # "config.json" or "hf_quant_config.json"
    raw: dict[str, Any]
    default_scheme: Scheme | None
    layer_schemes: list[tuple[str, Scheme | None]] = field(default_factory=list)  # quark globs
    type_schemes: dict[str, Scheme | None] = field(default_factory=dict)
    known: bool = True

    def exclude_list(self, keys: list[str]) -> tuple[str | None, list[str]]:
        """The skip list the framework reads: first of ``keys`` present in the config."""
        for key in keys:
            if key == "dynamic":  # GPTQModel `dynamic` rules, every key in the order written (match gptq_dynamic)
                dyn = self.raw.get("dynamic")
                if isinstance(dyn, dict):
                    return "dynamic", [k for k in dyn if isinstance(k, str)]
                continue
            val = self.raw.get(key)
            if isinstance(val, list):
                return key, [v for v in val if isinstance(v, str)]
        return None, []

    def base_config(self) -> QuantConfig:
        """The config without per-module overrides (GPTQModel `dynamic` `+:` rules)."""
        return self

    def scheme_for(self, module: str, kind: str, loader: str | None = None,
                   shards: list[str] | None = None) -> Scheme | None:
        for pattern, scheme in self.layer_schemes:
            if fnmatch.fnmatchcase(module, pattern):
                return scheme
        if loader and loader in self.type_schemes:
            return self.type_schemes[loader]
        return self.default_scheme


@dataclass
class CompressedTensorsConfig(QuantConfig):
    groups: list[tuple[list[str], Scheme | None]] = field(default_factory=list)
    # each `re:` target's bounded matcher, compiled with the config (None: re rejects it, the target never matches)
    target_rx: dict[str, UserRegex | None] = field(default_factory=dict, repr=False, compare=False)

    def _match_name(self, name: str) -> Scheme | None | bool:
        for targets, scheme in self.groups:
            for t in targets:
                if t.startswith("re:"):
                    rx = self.target_rx.get(t)
                    if rx is not None and rx.match(name):
                        return scheme
                elif t == name:
                    return scheme
        return False

    def scheme_for(self, module: str, kind: str, loader: str | None = None,
                   shards: list[str] | None = None) -> Scheme | None:
        # vLLM/SGLang find_matched_target: a layer-name match (exact or re:), then every shard of a
        # fused module, then a case-insensitive substring of the module class name ("Linear"
        # matches every *Linear class and FusedMoE's alias, never ParallelLMHead).
        hit = self._match_name(module)
        if hit is not False:
            return hit  # type: ignore[return-value]
        if shards:
            hits = [self._match_name(s) for s in shards]
            if all(h is not False for h in hits):
                return hits[0]  # type: ignore[return-value]
        cls = "linear" if kind in ("linear", "moe") else (loader or kind).lower()
        for targets, scheme in self.groups:
            if any(not t.startswith("re:") and t.lower() in cls for t in targets):
                return scheme
        return None


@dataclass
class GptqLikeConfig(QuantConfig):
    positive: list[tuple[UserRegex, dict[str, Any]]] = field(default_factory=list)  # `+:` rules, bounded
    lm_head: bool = False

    def base_config(self) -> QuantConfig:
        return dataclasses.replace(self, positive=[]) if self.positive else self

    def scheme_for(self, module: str, kind: str, loader: str | None = None,
                   shards: list[str] | None = None) -> Scheme | None:
        if kind == "lm_head" and not self.lm_head:
            return None
        s = self.default_scheme
        for rx, override in self.positive:
            if rx.match(module) and s is not None:
                bits = override.get("bits", s.bits)
                group = override.get("group_size", s.group)
                if (bits, group) != (s.bits, s.group):
                    s = s.with_(bits=bits, group=group, pack=32 // bits if isinstance(bits, int) and bits else s.pack,
                                name=f"{s.layout}_w{bits}", description=f"{s.description} (a `dynamic` override: "
                                f"{bits}-bit, group {group})")
                break
        return s


@dataclass
class Mxfp4Config(QuantConfig):
    def scheme_for(self, module: str, kind: str, loader: str | None = None,
                   shards: list[str] | None = None) -> Scheme | None:
        return self.default_scheme if kind == "moe" else None


@dataclass
class ModelOptMixedConfig(QuantConfig):
    layers: dict[str, Scheme | None] = field(default_factory=dict)

    def scheme_for(self, module: str, kind: str, loader: str | None = None,
                   shards: list[str] | None = None) -> Scheme | None:
        # vLLM _resolve_quant_algo: exact name, then fused shards, then any key under the prefix.
        if module in self.layers:
            return self.layers[module]
        for s in shards or []:
            if s in self.layers:
                return self.layers[s]
        start = module + "."
        for k, v in self.layers.items():
            if k.startswith(start):
                return v
        return None


_NORMALISE = {"compressed_tensors": "compressed-tensors", "gptq_marlin": "gptq", "awq_marlin": "awq"}


def _method_name(cfg: dict[str, Any]) -> str | None:
    m = cfg.get("quant_method")
    if not isinstance(m, str):
        return None
    m = m.strip().lower()
    return _NORMALISE.get(m, m)


def _bad(message: str, file: str, **kw: Any) -> Finding:
    return Finding(code="CF311", consequence=Consequence.LOAD_ERROR, message=message, file=file, **kw)


def _validation_finding(exc: Invalid, where: str, method: str, file: str) -> Finding:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    return _bad(f"`{where}.{loc}` is invalid for quant_method {method!r}: {err.get('msg')}", file)


def parse_quant_config(config: dict[str, Any] | None, hf_quant_config: dict[str, Any] | None,
                       regexes: RegexScope | None = None) -> tuple[QuantConfig | None, list[Finding]]:
    """Which quantization config applies, and its parsed form. The config's regular expressions are
    compiled in ``regexes`` (the check's scope; None: one of this config's own).

    ``config.json``'s ``quantization_config`` wins when present (SGLang reads
    ``hf_quant_config.json`` only when config.json has none: `modelopt_quant.py`; vLLM's
    precedence is the same for ModelOpt exports, which write both).
    """
    findings: list[Finding] = []
    qc = config.get("quantization_config") if isinstance(config, dict) else None
    if qc is not None and not isinstance(qc, dict):
        findings.append(_bad(f"`quantization_config` in config.json is a {type(qc).__name__}, not an object; "
                             "frameworks cannot read it", "config.json"))
        qc = None
    if qc is None and isinstance(hf_quant_config, dict):
        return _parse_hf_quant_config(hf_quant_config, findings)
    if qc is None:
        return None, findings
    method = _method_name(qc)
    if method is None:
        findings.append(_bad("`quantization_config.quant_method` is missing or not a string", "config.json"))
        return None, findings
    parser = _PARSERS.get(method)
    if parser is None:
        return QuantConfig(method=method, method_key=method, source_file="config.json", raw=qc,
                           default_scheme=None, known=False), findings
    try:
        return parser(qc, method, regexes if regexes is not None else RegexScope()), findings
    except Invalid as exc:
        findings.append(_validation_finding(exc, "quantization_config", method, "config.json"))
        return None, findings


def _parse_quark(qc: dict[str, Any], method: str, regexes: RegexScope) -> QuantConfig:
    model = QuarkConfig.model_validate(qc)
    layer = [(k, scheme_from_quark_layer(v)) for k, v in (model.layer_quant_config or {}).items()]
    types = {k: scheme_from_quark_layer(v) for k, v in (model.layer_type_quant_config or {}).items()}
    return QuantConfig("quark", "quark", "config.json", qc, scheme_from_quark_layer(model.global_quant_config),
                       layer, types)


def _modelopt_scheme(algo: str | None, group: int | None = None) -> tuple[str, Scheme | None]:
    a = (algo or "").upper()
    if a in ("NVFP4", "NVFP4_AWQ", "W4A16_NVFP4"):
        return "modelopt_fp4", SCHEMES["nvfp4"].with_(group=group or 16, static_input=a != "W4A16_NVFP4")
    if a == "FP8":
        return "modelopt_fp8", SCHEMES["fp8"].with_(static_input=True)
    if a == "FP8_PER_CHANNEL_PER_TOKEN":
        return "modelopt_fp8", SCHEMES["fp8_channel"]
    if a == "MIXED_PRECISION":
        return "modelopt_mixed", None
    return f"modelopt:{a or 'none'}", None


def _mixed(cfg: dict[str, Any], method: str, source: str, layers: dict[str, Any] | None) -> QuantConfig:
    schemes = {}
    for name, spec in (layers or {}).items():
        algo = spec.get("quant_algo") if isinstance(spec, dict) else None
        schemes[name] = _modelopt_scheme(algo, spec.get("group_size") if isinstance(spec, dict) else None)[1]
    return ModelOptMixedConfig("modelopt", "modelopt_mixed", source, cfg, None, layers=schemes)


def _parse_modelopt_flat(qc: dict[str, Any], method: str, regexes: RegexScope) -> QuantConfig:
    model = ModelOptFlat.model_validate(qc)
    algo = model.quant_algo or {"modelopt_fp4": "NVFP4", "modelopt_fp8": "FP8", "modelopt_mixed": "MIXED_PRECISION"}.get(method)
    key, scheme = _modelopt_scheme(algo, model.group_size)
    if key == "modelopt_mixed":
        return _mixed(qc, method, "config.json", model.quantized_layers)
    return QuantConfig("modelopt", key, "config.json", qc, scheme, known=scheme is not None)


def _parse_hf_quant_config(hq: dict[str, Any], findings: list[Finding]) -> tuple[QuantConfig | None, list[Finding]]:
    q = hq.get("quantization")
    if not isinstance(q, dict):
        findings.append(_bad("hf_quant_config.json has no `quantization` object", "hf_quant_config.json"))
        return None, findings
    try:
        model = ModelOptNested.model_validate(q)
    except Invalid as exc:
        findings.append(_validation_finding(exc, "quantization", "modelopt", "hf_quant_config.json"))
        return None, findings
    key, scheme = _modelopt_scheme(model.quant_algo, model.group_size)
    if key == "modelopt_mixed":
        return _mixed(q, "modelopt", "hf_quant_config.json", model.quantized_layers), findings
    return QuantConfig("modelopt", key, "hf_quant_config.json", q, scheme, known=scheme is not None), findings


def _parse_fp8(qc: dict[str, Any], method: str, regexes: RegexScope) -> QuantConfig:
    model = Fp8Config.model_validate(qc)
    scheme = scheme_fp8(model.weight_block_size, static=(model.activation_scheme == "static"))
    return QuantConfig("fp8", "fp8", "config.json", qc, scheme)


def _ct_version(v: str | None) -> tuple[int, ...]:
    nums = re.findall(r"\d+", v or "")
    return tuple(int(x) for x in nums[:3]) if nums else (0,)


def _ct_scheme(group: CTGroup, top_format: str | None, version: tuple[int, ...]) -> Scheme | None:
    w = group.weights
    if w is None:
        return None
    fmt = (group.format or top_format or "").lower()
    static = group.input_activations is not None and group.input_activations.dynamic is False
    strategy = (w.strategy or ("group" if (w.group_size or 0) > 0 else "channel" if w.group_size == -1 else "tensor")).lower()
    gs = w.group_size if (w.group_size or 0) > 0 else None
    if w.type == "float" and w.num_bits == 4:
        if fmt == "mxfp4-pack-quantized" or gs == 32:
            return Scheme("mxfp4", "ct_mxfp4", "U8", pack=2, bits=4, group=32, description="compressed-tensors MXFP4")
        return Scheme("nvfp4", "ct_nvfp4", "U8", pack=2, bits=4, group=16,
                      static_input=group.input_activations is not None,
                      description="compressed-tensors NVFP4" + ("" if group.input_activations else "A16"))
    if w.type == "float" and w.num_bits == 8:
        block = tuple(w.block_structure) if w.block_structure and len(w.block_structure) == 2 else None
        name = "fp8_block" if block else "fp8_channel" if strategy == "channel" else "fp8_group" if gs else "fp8"
        return Scheme(name, "ct_float", "F8_E4M3", bits=8, group=gs, block=block, static_input=static,  # type: ignore[arg-type]
                      description=f"compressed-tensors FP8 ({strategy})")
    if w.type == "int" and w.num_bits == 8 and fmt in ("int-quantized", "naive-quantized", ""):
        return Scheme("int8" + ("_channel" if strategy == "channel" else ""), "ct_float", "I8", bits=8, group=gs,
                      static_input=static, description="compressed-tensors INT8")
    if w.type == "int":
        bits = w.num_bits
        dense = version >= (0, 18, 0)
        per = 32 // bits if bits in (1, 2, 4, 8) or not dense else None
        actorder = w.actorder in ("group", True)
        return Scheme(f"w{bits}a16", "ct_pack", "I32", pack=per or 1, bits=bits, group=gs, symmetric=w.symmetric,
                      actorder=actorder, extra=(("dense", bool(dense and per is None)),),
                      description=f"compressed-tensors W{bits}A16 ({strategy}, pack-quantized)")
    return None


def _parse_ct(qc: dict[str, Any], method: str, regexes: RegexScope) -> QuantConfig:
    model = CTConfig.model_validate(qc)
    version = _ct_version(model.version)
    groups = [(g.targets, _ct_scheme(g, model.format, version)) for g in model.config_groups.values()]
    first = next((s for _, s in groups if s is not None), None)
    target_rx = {t: regexes.compile(t[3:]) for targets, _ in groups for t in targets
                 if isinstance(t, str) and t.startswith("re:")}
    return CompressedTensorsConfig("compressed-tensors", "compressed-tensors", "config.json", qc, first,
                                   groups=groups, target_rx=target_rx)


def _parse_gptq(qc: dict[str, Any], method: str, regexes: RegexScope) -> QuantConfig:
    model = GptqConfig.model_validate(qc)
    bits = model.bits
    scheme = Scheme(f"gptq_w{bits}", "gptq", "I32", pack=32 // bits if bits in (2, 4, 8) else 1, bits=bits,
                    group=model.group_size if model.group_size > 0 else None, symmetric=model.sym,
                    actorder=model.desc_act and model.group_size > 0,  # desc_act without groups is a no-op
                    description=f"GPTQ {bits}-bit, group {model.group_size}")
    positive = []
    for k, v in (model.dynamic or {}).items():
        if isinstance(k, str) and not k.startswith("-:") and isinstance(v, dict):
            rx = regexes.compile(k[2:] if k.startswith("+:") else k)
            if rx is not None:
                positive.append((rx, v))
    return GptqLikeConfig("gptq", "gptq", "config.json", qc, scheme, positive=positive, lm_head=model.lm_head)


def _parse_awq(qc: dict[str, Any], method: str, regexes: RegexScope) -> QuantConfig:
    model = AwqConfig.model_validate(qc)
    bits = model.bits or model.w_bit or 4
    group = model.group_size or model.q_group_size or 128
    scheme = Scheme(f"awq_w{bits}", "awq", "I32", pack=32 // bits if bits in (2, 4, 8) else 1, bits=bits,
                    group=group if group > 0 else None, symmetric=not model.zero_point,
                    description=f"AWQ {bits}-bit, group {group}")
    return GptqLikeConfig("awq", "awq", "config.json", qc, scheme)


def _parse_mxfp4(qc: dict[str, Any], method: str, regexes: RegexScope) -> QuantConfig:
    scheme = Scheme("mxfp4", "gptoss_mxfp4", "U8", pack=2, bits=4, group=32,
                    description="MXFP4 experts (gpt-oss _blocks/_scales)")
    return Mxfp4Config("mxfp4", "mxfp4", "config.json", qc, scheme)


_PARSERS = {
    "quark": _parse_quark, "modelopt": _parse_modelopt_flat, "modelopt_fp4": _parse_modelopt_flat,
    "modelopt_fp8": _parse_modelopt_flat, "modelopt_mixed": _parse_modelopt_flat, "fp8": _parse_fp8,
    "compressed-tensors": _parse_ct, "gptq": _parse_gptq, "awq": _parse_awq, "mxfp4": _parse_mxfp4,
}
