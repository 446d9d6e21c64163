"""KV-cache declarations in a quant config (ckptlint.simulate.kvcache.declared): the frameworks test the
value's truth, so an empty `kv_cache_quant_algo` declares nothing, and strings compare case-insensitively."""

from __future__ import annotations

from ckptlint.simulate.kvcache import declared
from ckptlint.targets import resolve


def _fp8_when(target: str, method: str):
    return resolve(target)[0].data.methods[method].kv_cache.fp8_when


def test_modelopt_fp8_kv_declarations():
    decls = _fp8_when("sglang==0.5.23", "modelopt_fp8")
    assert declared(decls, {"kv_cache_quant_algo": "FP8"}) is not None
    assert declared(decls, {"kv_cache_quant_algo": "fp8"}) is not None
    assert declared(decls, {"kv_cache_quant_algo": ""}) is None
    assert declared(decls, {"kv_cache_quant_algo": None}) is None
    assert declared(decls, {"kv_cache_quant_algo": "NVFP4"}) is None
    assert declared(decls, {}) is None
    # config.json's ModelOpt form: an 8-bit float kv_cache_scheme counts as FP8
    assert declared(decls, {"kv_cache_scheme": {"type": "float", "num_bits": 8}}) is not None
    assert declared(decls, {"kv_cache_scheme": {"type": "float", "num_bits": 4}}) is None


def test_vllm_0_11_never_picks_an_fp8_cache_by_default():
    for method in ("modelopt_fp8", "modelopt_fp4", "compressed-tensors", "fp8", "quark"):
        assert declared(_fp8_when("vllm==0.11.0", method), {"kv_cache_quant_algo": "FP8",
                                                           "kv_cache_scheme": {"type": "float", "num_bits": 8}}) is None
