"""Benchmark checkpoint layouts, built from ckptlint's own synthetic models and sparse builder.

Each layout is a function ``(scale) -> BenchSpec``; ``scale`` is ``"full"`` (the real model's
dimensions: hundreds of GB apparent size, no disk used because shards are sparse) or ``"tiny"``
(same generator, a few layers and experts, for the smoke test).

* ``deepseek``: DeepSeek-V3 block-FP8 with its MTP layer (61 + 1 layers, 256 routed experts),
  163 shards, ~92,000 tensors, ~690 GB apparent.
* ``kimi``: Kimi-K2-like (DeepseekV3ForCausalLM, 384 routed experts, 61 layers, no MTP) as a
  Quark MXFP4 export: routed experts MXFP4, everything else BF16, the unquantized linears in
  ``exclude``.
* ``million``: a DeepSeek-V3-architecture block-FP8 checkpoint with small shapes and enough
  layers and experts for about 1,000,000 tensors, in 1000 shards.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from ckptlint.testing.models import (
    Layout,
    Module,
    MoeDims,
    deepseek_dims,
    experts_only,
    moe_modules,
    quark_mxfp4_config,
    unquantized_linear_names,
)

Tensor = tuple[str, str, tuple[int, ...]]

# Bump when a generator changes in a way that changes the files (invalidates the cache).
GEN_VERSION = 1

FP8_CONFIG: dict[str, Any] = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                              "weight_block_size": [128, 128]}
FP8_CATEGORIES = frozenset({"attn", "dense_mlp", "expert", "shared_expert"})


@dataclass
class BenchSpec:
    name: str
    description: str
    params: dict[str, Any]  # everything that determines the files (the cache key)
    shards: int
    build: Callable[[], tuple[dict[str, Any], list[Tensor], dict[str, Any] | None]] = field(repr=False)

    def key(self) -> str:
        blob = json.dumps({"gen_version": GEN_VERSION, "name": self.name, "params": self.params,
                           "shards": self.shards}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def fp8_block_layout() -> Layout:
    """DeepSeek-V3's own FP8 export: every linear of attention and MLP (MTP layer included) in
    128x128 block FP8 with ``weight_scale_inv``; embed, lm_head, norms, router, eh_proj and
    shared_head BF16."""

    def pick(m: Module) -> str | None:
        return "fp8_block" if m.category in FP8_CATEGORIES else None

    return Layout(pick)


def _dims_params(d: MoeDims) -> dict[str, Any]:
    return dict(vars(d))


def deepseek(scale: str) -> BenchSpec:
    if scale == "full":
        d = deepseek_dims(hidden=7168, n_routed_experts=256, n_shared_experts=1, moe_intermediate=2048,
                          intermediate=18432, q_lora_rank=1536, kv_lora_rank=512, heads=128, qk_nope=128,
                          qk_rope=64, v_head=128, vocab=129280, first_k_dense_replace=3,
                          num_hidden_layers=61, num_nextn_predict_layers=1)
        shards = 163
    else:
        d = deepseek_dims(hidden=256, n_routed_experts=8, n_shared_experts=1, moe_intermediate=128,
                          intermediate=384, q_lora_rank=128, kv_lora_rank=128, heads=2, qk_nope=64,
                          qk_rope=64, v_head=64, vocab=512, first_k_dense_replace=1,
                          num_hidden_layers=4, num_nextn_predict_layers=1)
        shards = 5

    def build():
        mods = moe_modules(d, with_mtp=True)
        cfg = d.config()
        cfg["quantization_config"] = dict(FP8_CONFIG)
        return cfg, fp8_block_layout().tensors(mods), None

    return BenchSpec("deepseek", "DeepSeek-V3 block-FP8 + MTP layer", {"dims": _dims_params(d)}, shards, build)


def kimi(scale: str) -> BenchSpec:
    if scale == "full":
        d = deepseek_dims(model_type="kimi_k2", hidden=7168, n_routed_experts=384, n_shared_experts=1,
                          moe_intermediate=2048, intermediate=18432, q_lora_rank=1536, kv_lora_rank=512,
                          heads=64, qk_nope=128, qk_rope=64, v_head=128, vocab=163840,
                          first_k_dense_replace=1, num_hidden_layers=61, num_nextn_predict_layers=0)
        shards = 64
    else:
        d = deepseek_dims(model_type="kimi_k2", hidden=256, n_routed_experts=12, n_shared_experts=1,
                          moe_intermediate=128, intermediate=384, q_lora_rank=128, kv_lora_rank=128,
                          heads=2, qk_nope=64, qk_rope=64, v_head=64, vocab=512,
                          first_k_dense_replace=1, num_hidden_layers=4, num_nextn_predict_layers=0)
        shards = 4

    def build():
        mods = moe_modules(d, with_mtp=False)
        layout = experts_only("mxfp4")
        cfg = d.config()
        cfg["quantization_config"] = quark_mxfp4_config(unquantized_linear_names(mods, layout))
        return cfg, layout.tensors(mods), None

    return BenchSpec("kimi", "Kimi-K2-like Quark MXFP4 (experts MXFP4, rest BF16)", {"dims": _dims_params(d)},
                     shards, build)


def million(scale: str) -> BenchSpec:
    # One MoE layer with E block-FP8 experts is 6E + 18 tensors (attention 10, norms 4,
    # router 2, shared expert 6); the dense layer 20, MTP extras 6, embed/norm/lm_head 3.
    if scale == "full":
        layers, experts, shards = 167, 1000, 1000  # 1,003,xxx tensors
    else:
        layers, experts, shards = 6, 64, 10
    d = deepseek_dims(hidden=256, n_routed_experts=experts, n_shared_experts=1, moe_intermediate=128,
                      intermediate=256, q_lora_rank=128, kv_lora_rank=128, heads=2, qk_nope=64, qk_rope=64,
                      v_head=64, vocab=1024, first_k_dense_replace=1, num_hidden_layers=layers,
                      num_nextn_predict_layers=1)

    def build():
        mods = moe_modules(d, with_mtp=True)
        cfg = d.config()
        cfg["quantization_config"] = dict(FP8_CONFIG)
        return cfg, fp8_block_layout().tensors(mods), None

    return BenchSpec("million", "synthetic ~1M-tensor block-FP8 MoE (small shapes)", {"dims": _dims_params(d)},
                     shards, build)


LAYOUTS: dict[str, Callable[[str], BenchSpec]] = {"deepseek": deepseek, "kimi": kimi, "million": million}
