"""Quantization configs: lenient models of what quantizers write, and the schemes they imply.

Parsing never raises on user input: problems become findings (CF31x) and the config is
treated as unknown. ``QuantConfig.method_key`` selects the method rules in the target data
(``quark``, ``modelopt_fp8``, ``modelopt_fp4``, ``fp8``, ...).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ckptlint.findings import Consequence, Finding
from ckptlint.quant.schemes import Scheme, scheme_fp8, scheme_from_quark_layer, SCHEMES

__all__ = ["QuantConfig", "parse_quant_config", "Scheme", "SCHEMES"]


class Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class QuarkConfig(Lenient):
    quant_method: str
    exclude: list[str] | None = None
    global_quant_config: dict[str, Any] | None = None
    layer_quant_config: dict[str, Any] | None = None
    layer_type_quant_config: dict[str, Any] | None = None
    export: dict[str, Any] | None = None


class ModelOptFlat(Lenient):
    quant_method: str
    quant_algo: str | None = None
    ignore: list[str] | None = None
    exclude_modules: list[str] | None = None
    modules_to_not_convert: list[str] | None = None
    group_size: int | None = None


class ModelOptNested(Lenient):
    quant_algo: str | None = None
    exclude_modules: list[str] | None = None
    group_size: int | None = None
    kv_cache_quant_algo: str | None = None


class Fp8Config(Lenient):
    quant_method: str
    activation_scheme: str | None = None
    weight_block_size: list[int] | None = None
    ignored_layers: list[str] | None = None
    modules_to_not_convert: list[str] | None = None


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
            val = self.raw.get(key)
            if isinstance(val, list):
                return key, [v for v in val if isinstance(v, str)]
        return None, []

    def scheme_for(self, module: str, runtime_class: str | None = None) -> Scheme | None:
        for pattern, scheme in self.layer_schemes:
            if fnmatch.fnmatchcase(module, pattern):
                return scheme
        if runtime_class and runtime_class in self.type_schemes:
            return self.type_schemes[runtime_class]
        return self.default_scheme


_NORMALISE = {"compressed_tensors": "compressed-tensors"}


def _method_name(cfg: dict[str, Any]) -> str | None:
    m = cfg.get("quant_method")
    if not isinstance(m, str):
        return None
    m = m.strip().lower()
    return _NORMALISE.get(m, m)


def _bad(code: str, message: str, file: str, **kw: Any) -> Finding:
    return Finding(code=code, consequence=Consequence.LOAD_ERROR, message=message, file=file, **kw)


def parse_quant_config(config: dict[str, Any] | None, hf_quant_config: dict[str, Any] | None
                       ) -> tuple[QuantConfig | None, list[Finding]]:
    """Which quantization config applies, and its parsed form.

    ``config.json``'s ``quantization_config`` wins when present (SGLang reads
    ``hf_quant_config.json`` only when config.json has none: `modelopt_quant.py`; vLLM's
    precedence is the same for ModelOpt exports, which write both).
    """
    findings: list[Finding] = []
    qc = config.get("quantization_config") if isinstance(config, dict) else None
    if qc is not None and not isinstance(qc, dict):
        findings.append(_bad("CF311", f"`quantization_config` in config.json is a {type(qc).__name__}, "
                             "not an object; frameworks cannot read it", "config.json",
                             error_text="AttributeError / TypeError while reading quantization_config"))
        qc = None
    if qc is None and isinstance(hf_quant_config, dict):
        return _parse_hf_quant_config(hf_quant_config, findings)
    if qc is None:
        return None, findings
    method = _method_name(qc)
    if method is None:
        findings.append(_bad("CF311", "`quantization_config.quant_method` is missing or not a string",
                             "config.json"))
        return None, findings
    try:
        if method == "quark":
            return _parse_quark(qc), findings
        if method in ("modelopt", "modelopt_fp4", "modelopt_fp8"):
            return _parse_modelopt_flat(qc, method), findings
        if method == "fp8":
            return _parse_fp8(qc), findings
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        findings.append(_bad("CF311", f"`quantization_config.{loc}` is invalid for quant_method "
                             f"{method!r}: {err.get('msg')}", "config.json"))
        return None, findings
    return QuantConfig(method=method, method_key=method, source_file="config.json", raw=qc,
                       default_scheme=None, known=False), findings


def _parse_quark(qc: dict[str, Any]) -> QuantConfig:
    model = QuarkConfig.model_validate(qc)
    layer = [(k, scheme_from_quark_layer(v)) for k, v in (model.layer_quant_config or {}).items()]
    types = {k: scheme_from_quark_layer(v) for k, v in (model.layer_type_quant_config or {}).items()}
    return QuantConfig("quark", "quark", "config.json", qc,
                       scheme_from_quark_layer(model.global_quant_config), layer, types)


def _modelopt_key(algo: str | None) -> tuple[str, Scheme | None]:
    a = (algo or "").upper()
    if a in ("NVFP4", "NVFP4_AWQ", "W4A16_NVFP4"):
        return "modelopt_fp4", SCHEMES["nvfp4"]
    if a == "FP8":
        return "modelopt_fp8", SCHEMES["fp8"]
    return f"modelopt:{a or 'none'}", None


def _parse_modelopt_flat(qc: dict[str, Any], method: str) -> QuantConfig:
    model = ModelOptFlat.model_validate(qc)
    key, scheme = _modelopt_key(model.quant_algo)
    if method == "modelopt_fp4" and model.quant_algo is None:
        key, scheme = "modelopt_fp4", SCHEMES["nvfp4"]
    return QuantConfig("modelopt", key, "config.json", qc, scheme, known=scheme is not None)


def _parse_hf_quant_config(hq: dict[str, Any], findings: list[Finding]) -> tuple[QuantConfig | None, list[Finding]]:
    q = hq.get("quantization")
    if not isinstance(q, dict):
        findings.append(_bad("CF311", "hf_quant_config.json has no `quantization` object", "hf_quant_config.json"))
        return None, findings
    try:
        model = ModelOptNested.model_validate(q)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        findings.append(_bad("CF311", f"`quantization.{loc}` in hf_quant_config.json is invalid: {err.get('msg')}",
                             "hf_quant_config.json"))
        return None, findings
    key, scheme = _modelopt_key(model.quant_algo)
    return QuantConfig("modelopt", key, "hf_quant_config.json", q, scheme, known=scheme is not None), findings


def _parse_fp8(qc: dict[str, Any]) -> QuantConfig:
    model = Fp8Config.model_validate(qc)
    block = model.weight_block_size
    scheme = scheme_fp8(block, static=(model.activation_scheme == "static"))
    return QuantConfig("fp8", "fp8", "config.json", qc, scheme)


def quark_layer_key_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))
