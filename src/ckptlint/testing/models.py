"""Synthetic model layouts for tests, fixtures and benchmarks.

Produces a ``config.json`` dict and the tensor listing (name, dtype, shape) of DeepSeek-V3-,
GLM-5- and GLM-4.5-style MoE checkpoints in a chosen quantization format, with the MTP/NextN
layer stored separately. Dimensions are parameters: tiny for shipped fixtures, realistic (with
sparse files) for scale tests. The tensor names and layouts follow docs/frameworks/formats.md#quantized-tensor-layouts and #mtp-layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ckptlint.testing.stores import (STORES, Module, Tensor, cdiv, store_awq, store_bf16, store_ct_fp8_channel,
                                     store_ct_nvfp4, store_ct_w4a16, store_fp8_block, store_fp8_tensor, store_gptq,
                                     store_mxfp4, store_nvfp4)


@dataclass
class MoeDims:
    arch: str = "GlmMoeDsaForCausalLM"
    model_type: str = "glm_moe_dsa"
    num_hidden_layers: int = 78
    num_nextn_predict_layers: int = 1
    hidden: int = 64
    n_routed_experts: int = 4
    n_shared_experts: int = 1
    moe_intermediate: int = 32
    intermediate: int = 64
    first_k_dense_replace: int = 3
    q_lora_rank: int | None = 32
    kv_lora_rank: int = 16
    heads: int = 1
    qk_nope: int = 16
    qk_rope: int = 16
    v_head: int = 16
    vocab: int = 64
    indexer: bool = True  # DSA indexer (GLM-5 / DeepSeek-V3.2)
    index_heads: int = 1
    index_head_dim: int = 32

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "architectures": [self.arch], "model_type": self.model_type,
            "hidden_size": self.hidden, "intermediate_size": self.intermediate,
            "moe_intermediate_size": self.moe_intermediate, "num_hidden_layers": self.num_hidden_layers,
            "num_nextn_predict_layers": self.num_nextn_predict_layers,
            "n_routed_experts": self.n_routed_experts, "n_shared_experts": self.n_shared_experts,
            "first_k_dense_replace": self.first_k_dense_replace, "num_attention_heads": self.heads,
            "q_lora_rank": self.q_lora_rank, "kv_lora_rank": self.kv_lora_rank,
            "qk_nope_head_dim": self.qk_nope, "qk_rope_head_dim": self.qk_rope, "v_head_dim": self.v_head,
            "vocab_size": self.vocab, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
        }
        if self.indexer:
            cfg.update({"index_n_heads": self.index_heads, "index_head_dim": self.index_head_dim})
        return cfg


def moe_modules(d: MoeDims, *, with_mtp: bool = True) -> list[Module]:
    H = d.hidden
    out: list[Module] = [Module("model.embed_tokens", (d.vocab, H), "embed")]
    layers = list(range(d.num_hidden_layers))
    mtp_layers = [d.num_hidden_layers + i for i in range(d.num_nextn_predict_layers)] if with_mtp else []
    for L in layers + mtp_layers:
        p = f"model.layers.{L}"
        qk = d.qk_nope + d.qk_rope
        attn = []
        if d.q_lora_rank:
            attn += [(f"{p}.self_attn.q_a_proj", (d.q_lora_rank, H)),
                     (f"{p}.self_attn.q_b_proj", (d.heads * qk, d.q_lora_rank))]
        else:
            attn += [(f"{p}.self_attn.q_proj", (d.heads * qk, H))]
        attn += [(f"{p}.self_attn.kv_a_proj_with_mqa", (d.kv_lora_rank + d.qk_rope, H)),
                 (f"{p}.self_attn.kv_b_proj", (d.heads * (d.qk_nope + d.v_head), d.kv_lora_rank)),
                 (f"{p}.self_attn.o_proj", (H, d.heads * d.v_head))]
        if d.indexer:
            attn += [(f"{p}.self_attn.indexer.wq_b", (d.index_heads * d.index_head_dim, d.q_lora_rank or H)),
                     (f"{p}.self_attn.indexer.wk", (d.index_head_dim, H))]
        out += [Module(n, s, "attn", L) for n, s in attn]
        if d.indexer:
            out.append(Module(f"{p}.self_attn.indexer.weights_proj", (d.index_heads, H), "plain", L))
            out.append(Module(f"{p}.self_attn.indexer.k_norm", (d.index_head_dim,), "norm", L))
        for n in ("input_layernorm", "post_attention_layernorm"):
            out.append(Module(f"{p}.{n}", (H,), "norm", L))
        if d.q_lora_rank:
            out.append(Module(f"{p}.self_attn.q_a_layernorm", (d.q_lora_rank,), "norm", L))
        out.append(Module(f"{p}.self_attn.kv_a_layernorm", (d.kv_lora_rank,), "norm", L))
        if L < d.first_k_dense_replace:
            I = d.intermediate
            out += [Module(f"{p}.mlp.gate_proj", (I, H), "dense_mlp", L),
                    Module(f"{p}.mlp.up_proj", (I, H), "dense_mlp", L),
                    Module(f"{p}.mlp.down_proj", (H, I), "dense_mlp", L)]
        else:
            I = d.moe_intermediate
            out.append(Module(f"{p}.mlp.gate", (d.n_routed_experts, H), "router", L))
            out.append(Module(f"{p}.mlp.gate.e_score_correction_bias", (d.n_routed_experts,), "bias", L))
            for e in range(d.n_routed_experts):
                out += [Module(f"{p}.mlp.experts.{e}.gate_proj", (I, H), "expert", L),
                        Module(f"{p}.mlp.experts.{e}.up_proj", (I, H), "expert", L),
                        Module(f"{p}.mlp.experts.{e}.down_proj", (H, I), "expert", L)]
            Is = I * d.n_shared_experts
            out += [Module(f"{p}.mlp.shared_experts.gate_proj", (Is, H), "shared_expert", L),
                    Module(f"{p}.mlp.shared_experts.up_proj", (Is, H), "shared_expert", L),
                    Module(f"{p}.mlp.shared_experts.down_proj", (H, Is), "shared_expert", L)]
        if L in mtp_layers:
            out += [Module(f"{p}.eh_proj", (H, 2 * H), "mtp_proj", L),
                    Module(f"{p}.enorm", (H,), "norm", L), Module(f"{p}.hnorm", (H,), "norm", L),
                    Module(f"{p}.shared_head.norm", (H,), "norm", L),
                    Module(f"{p}.shared_head.head", (d.vocab, H), "lm_head", L),
                    Module(f"{p}.embed_tokens", (d.vocab, H), "embed", L)]
    out += [Module("model.norm", (H,), "norm"), Module("lm_head", (d.vocab, H), "lm_head")]
    return out


# --- storage formats: module -> tensors ------------------------------------------------------


LINEAR_CATEGORIES = frozenset({"attn", "dense_mlp", "expert", "shared_expert", "mtp_proj", "lm_head", "plain"})


@dataclass
class Layout:
    """Which modules are stored in which format; everything else is BF16."""

    quantized: Callable[[Module], "str | Callable[[Module], list[Tensor]] | None"]  # -> store (name), or None for BF16

    def tensors(self, modules: Iterable[Module]) -> list[Tensor]:
        out: list[Tensor] = []
        for m in modules:
            fmt = self.quantized(m) if m.category in LINEAR_CATEGORIES and len(m.shape) == 2 else None
            out += (fmt if callable(fmt) else STORES[fmt or "bf16"])(m)
        return out


def experts_only(fmt: str, *, mtp_layers: set[int] = frozenset(), mtp_fmt: str | None = None) -> Layout:
    """Routed experts in ``fmt`` (AMD/NVIDIA MoE-only exports); the MTP layer in ``mtp_fmt``
    (None: BF16, as Quark keeps it when excluded)."""

    def pick(m: Module) -> str | None:
        if m.layer in mtp_layers:
            return mtp_fmt if m.category == "expert" else None
        return fmt if m.category == "expert" else None

    return Layout(pick)


def quark_mxfp4_config(exclude: list[str]) -> dict[str, Any]:
    fp4 = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "ch_axis": -1, "scale_format": "e8m0",
           "scale_calculation_mode": "even", "round_method": "half_even", "observer_cls": "PerBlockMXObserver",
           "symmetric": None, "is_dynamic": False, "mx_element_dtype": None, "scale_type": "float",
           "is_scale_quant": False}
    return {
        "quant_method": "quark",
        "export": {"kv_cache_group": [], "min_kv_scale": 0.0, "pack_method": "reorder",
                   "weight_format": "real_quantized", "weight_merge_groups": None},
        "global_quant_config": {"weight": fp4, "input_tensors": {**fp4, "is_dynamic": True},
                                "output_tensors": None, "bias": None, "target_device": None},
        "layer_quant_config": {}, "layer_type_quant_config": {}, "exclude": exclude,
        "algo_config": None, "softmax_quant_spec": None, "quant_mode": "eager_mode", "version": "0.11.1",
    }


def unquantized_linear_names(modules: Iterable[Module], layout: Layout) -> list[str]:
    """What Quark writes to ``exclude``: every nn.Linear left unquantized, by checkpoint name
    (routers are not nn.Linear in these models and are not listed)."""
    out = []
    for m in modules:
        if m.category in LINEAR_CATEGORIES and len(m.shape) == 2 and layout.quantized(m) is None \
                and m.category != "embed":
            out.append(m.path)
    return out


def mtp_runtime_exclude_names(modules: Iterable[Module], mtp_layer: int) -> list[str]:
    """The entries an operator adds by hand for SGLang's NextN draft: MTP-layer module names
    rewritten to the draft's runtime names, plus the FusedMoE prefixes."""
    prefix = f"model.layers.{mtp_layer}."
    out: list[str] = []
    for m in modules:
        if not m.path.startswith(prefix) or m.category not in LINEAR_CATEGORIES or len(m.shape) != 2:
            continue
        rest = m.path[len(prefix):]
        if rest.startswith("mlp.experts."):
            continue
        if rest in ("eh_proj",):
            out.append("model.eh_proj")
        elif rest.startswith("shared_head.") or rest == "embed_tokens":
            continue
        else:
            out.append("model.decoder." + rest)
    out += ["model.decoder.mlp.experts", f"model.layers.{mtp_layer}.mlp.experts"]
    return out


@dataclass
class Spec:
    config: dict[str, Any]
    tensors: list[Tensor]
    hf_quant_config: dict[str, Any] | None = None
    notes: dict[str, Any] = field(default_factory=dict)


def glm5_quark_mxfp4(dims: MoeDims | None = None, *, mtp_exclude: str = "per-module",
                     with_mtp: bool = True) -> Spec:
    """GLM-5-style Quark MXFP4 export: routed experts MXFP4, everything else BF16, the MTP
    layer BF16. ``mtp_exclude``: "per-module" (as Quark exports: checkpoint names only),
    "fixed" (plus runtime names), "glob" (`model.layers.N.*`), "none" (MTP not excluded)."""
    d = dims or MoeDims()
    modules = moe_modules(d, with_mtp=with_mtp)
    mtp = {d.num_hidden_layers + i for i in range(d.num_nextn_predict_layers)}
    layout = experts_only("mxfp4", mtp_layers=mtp, mtp_fmt=None)
    names = unquantized_linear_names(modules, layout)
    if mtp_exclude in ("glob", "none"):
        names = [n for n in names if not any(n.startswith(f"model.layers.{L}.") for L in mtp)]
        if mtp_exclude == "glob":
            names += [f"model.layers.{L}.*" for L in sorted(mtp)]
    elif mtp_exclude == "fixed":
        for L in sorted(mtp):
            names += mtp_runtime_exclude_names(modules, L)
    cfg = d.config()
    cfg["quantization_config"] = quark_mxfp4_config(names)
    return Spec(cfg, layout.tensors(modules), notes={"mtp_layers": sorted(mtp)})


def deepseek_dims(**kw: Any) -> MoeDims:
    base = dict(arch="DeepseekV3ForCausalLM", model_type="deepseek_v3", num_hidden_layers=61, indexer=False)
    base.update(kw)
    return MoeDims(**base)


def modelopt_nvfp4(dims: MoeDims | None = None, *, mtp_quantized: bool = False, with_mtp: bool = True,
                   config_json: bool = False) -> Spec:
    """NVIDIA ModelOpt NVFP4 (routed experts and dense MLP NVFP4, attention BF16), MTP layer BF16
    (or NVFP4 with ``mtp_quantized``), exclusions as globs in hf_quant_config.json."""
    d = dims or deepseek_dims()
    modules = moe_modules(d, with_mtp=with_mtp)
    mtp = {d.num_hidden_layers + i for i in range(d.num_nextn_predict_layers)}

    def pick(m: Module) -> str | None:
        if m.layer in mtp and not mtp_quantized:
            return None
        return "nvfp4" if m.category in ("expert", "shared_expert", "dense_mlp") else None

    layout = Layout(pick)
    exclude = ["lm_head", "model.embed_tokens", "*self_attn*", "*mlp.gate"]
    if not mtp_quantized:
        exclude += [f"model.layers.{L}*" for L in sorted(mtp)]
    hq = {"producer": {"name": "modelopt", "version": "0.23.0"},
          "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                           "exclude_modules": exclude}}
    cfg = d.config()
    if config_json:
        cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                                      "ignore": exclude, "producer": hq["producer"]}
    return Spec(cfg, layout.tensors(modules), hf_quant_config=hq, notes={"mtp_layers": sorted(mtp)})


# --- dense and generic MoE models (Llama / Qwen2 / Qwen3 / Qwen3-MoE / Mixtral / gpt-oss) -----
@dataclass
class DenseDims:
    arch: str = "LlamaForCausalLM"
    model_type: str = "llama"
    num_hidden_layers: int = 2
    hidden: int = 256
    intermediate: int = 512
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    vocab: int = 128
    n_experts: int = 0  # > 0: MoE MLP
    moe_intermediate: int = 128
    moe_block: str = "mlp"  # Mixtral: "block_sparse_moe"
    expert_projs: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")  # Mixtral: w1, w3, w2
    router: str = "gate"
    qk_norm: bool = False
    tie_word_embeddings: bool = False
    routing_bias: bool = False  # a per-expert router bias `<moe_block>.e_score_correction_bias` (F32 [E])
    qk_norm_per_layer: bool = False  # q_norm/k_norm over all heads ([heads*head_dim]), MiniMax-M2
    fused_on_disk: bool = False  # Phi-3: `self_attn.qkv_proj` and `mlp.gate_up_proj` stored fused
    mlp_gate: bool = True  # False: no gate_proj (Nemotron's squared-ReLU MLP: up_proj, down_proj)
    sandwich_norms: bool = False  # Gemma-2/3: pre/post-feedforward norms besides the usual two

    def config(self) -> dict[str, Any]:
        cfg = {"architectures": [self.arch], "model_type": self.model_type, "hidden_size": self.hidden,
               "intermediate_size": self.intermediate, "num_hidden_layers": self.num_hidden_layers,
               "num_attention_heads": self.heads, "num_key_value_heads": self.kv_heads, "head_dim": self.head_dim,
               "vocab_size": self.vocab, "torch_dtype": "bfloat16", "tie_word_embeddings": self.tie_word_embeddings}
        if self.n_experts:
            cfg.update({"num_experts": self.n_experts, "num_local_experts": self.n_experts,
                        "moe_intermediate_size": self.moe_intermediate, "num_experts_per_tok": 2})
        return cfg


def dense_modules(d: DenseDims) -> list[Module]:
    H = d.hidden
    out: list[Module] = [Module("model.embed_tokens", (d.vocab, H), "embed")]
    for L in range(d.num_hidden_layers):
        p = f"model.layers.{L}"
        if d.fused_on_disk:
            out.append(Module(f"{p}.self_attn.qkv_proj", ((d.heads + 2 * d.kv_heads) * d.head_dim, H), "attn", L))
        else:
            out += [Module(f"{p}.self_attn.q_proj", (d.heads * d.head_dim, H), "attn", L),
                    Module(f"{p}.self_attn.k_proj", (d.kv_heads * d.head_dim, H), "attn", L),
                    Module(f"{p}.self_attn.v_proj", (d.kv_heads * d.head_dim, H), "attn", L)]
        out += [Module(f"{p}.self_attn.o_proj", (H, d.heads * d.head_dim), "attn", L),
                Module(f"{p}.input_layernorm", (H,), "norm", L),
                Module(f"{p}.post_attention_layernorm", (H,), "norm", L)]
        if d.sandwich_norms:
            out += [Module(f"{p}.pre_feedforward_layernorm", (H,), "norm", L),
                    Module(f"{p}.post_feedforward_layernorm", (H,), "norm", L)]
        if d.qk_norm:
            qn, kn = ((d.heads * d.head_dim, d.kv_heads * d.head_dim) if d.qk_norm_per_layer
                      else (d.head_dim, d.head_dim))
            out += [Module(f"{p}.self_attn.q_norm", (qn,), "norm", L),
                    Module(f"{p}.self_attn.k_norm", (kn,), "norm", L)]
        if d.n_experts:
            g, u, dn = d.expert_projs
            I = d.moe_intermediate
            out.append(Module(f"{p}.{d.moe_block}.{d.router}", (d.n_experts, H), "router", L))
            if d.routing_bias:
                out.append(Module(f"{p}.{d.moe_block}.e_score_correction_bias", (d.n_experts,), "bias", L))
            for e in range(d.n_experts):
                out += [Module(f"{p}.{d.moe_block}.experts.{e}.{g}", (I, H), "expert", L),
                        Module(f"{p}.{d.moe_block}.experts.{e}.{u}", (I, H), "expert", L),
                        Module(f"{p}.{d.moe_block}.experts.{e}.{dn}", (H, I), "expert", L)]
        else:
            I = d.intermediate
            if d.fused_on_disk:
                out.append(Module(f"{p}.mlp.gate_up_proj", (2 * I, H), "dense_mlp", L))
            else:
                out += ([Module(f"{p}.mlp.gate_proj", (I, H), "dense_mlp", L)] if d.mlp_gate else []) + [
                    Module(f"{p}.mlp.up_proj", (I, H), "dense_mlp", L)]
            out.append(Module(f"{p}.mlp.down_proj", (H, I), "dense_mlp", L))
    out.append(Module("model.norm", (H,), "norm"))
    if not d.tie_word_embeddings:
        out.append(Module("lm_head", (d.vocab, H), "lm_head"))
    return out


def mixtral_dims(**kw: Any) -> DenseDims:
    base = dict(arch="MixtralForCausalLM", model_type="mixtral", n_experts=4, moe_block="block_sparse_moe",
                expert_projs=("w1", "w3", "w2"), kv_heads=2)
    base.update(kw)
    return DenseDims(**base)


def minimax_m2_dims(**kw: Any) -> DenseDims:
    """MiniMax-M2 (MiniMaxM2ForCausalLM): every layer MoE under `block_sparse_moe` with experts
    `w1`/`w3`/`w2`, router `block_sparse_moe.gate` and its F32 `e_score_correction_bias`, per-layer
    q/k norms; its published config.json names the experts `num_local_experts`."""
    base = dict(arch="MiniMaxM2ForCausalLM", model_type="minimax_m2", n_experts=4, moe_block="block_sparse_moe",
                expert_projs=("w1", "w3", "w2"), qk_norm=True, qk_norm_per_layer=True, routing_bias=True)
    base.update(kw)
    return DenseDims(**base)


def gemma3_dims(**kw: Any) -> DenseDims:
    """Gemma-3 text (Gemma3ForCausalLM, the 1B checkpoints): q/k norms, sandwich norms, tied embeddings."""
    base = dict(arch="Gemma3ForCausalLM", model_type="gemma3_text", qk_norm=True, sandwich_norms=True,
                tie_word_embeddings=True)
    base.update(kw)
    return DenseDims(**base)


def gemma2_dims(**kw: Any) -> DenseDims:
    """Gemma-2 (Gemma2ForCausalLM): sandwich norms, tied embeddings (no lm_head stored), no q/k norms."""
    base = dict(arch="Gemma2ForCausalLM", model_type="gemma2", sandwich_norms=True, tie_word_embeddings=True)
    base.update(kw)
    return DenseDims(**base)


def mistral_dims(**kw: Any) -> DenseDims:
    base = dict(arch="MistralForCausalLM", model_type="mistral")
    base.update(kw)
    return DenseDims(**base)


def phi3_dims(**kw: Any) -> DenseDims:
    """Phi-3 / Phi-4 (Phi3ForCausalLM): attention and MLP projections stored fused (qkv_proj, gate_up_proj)."""
    base = dict(arch="Phi3ForCausalLM", model_type="phi3", fused_on_disk=True)
    base.update(kw)
    return DenseDims(**base)


def nemotron_dims(**kw: Any) -> DenseDims:
    """Nemotron / Minitron (NemotronForCausalLM): squared-ReLU MLP without gate_proj."""
    base = dict(arch="NemotronForCausalLM", model_type="nemotron", mlp_gate=False)
    base.update(kw)
    return DenseDims(**base)


def phimoe_dims(**kw: Any) -> DenseDims:
    """Phi-3.5-MoE (PhiMoEForCausalLM): every layer MoE under `block_sparse_moe` with experts `w1`/`w3`/`w2`
    and router `block_sparse_moe.gate`; the experts' width is config.json's `intermediate_size`. Its q/k/v/o,
    LayerNorm and lm_head biases are not modelled here (a case adds them as tensors)."""
    base = dict(arch="PhiMoEForCausalLM", model_type="phimoe", n_experts=4, moe_block="block_sparse_moe",
                expert_projs=("w1", "w3", "w2"), intermediate=128, moe_intermediate=128)
    base.update(kw)
    return DenseDims(**base)


def qwen3_moe_dims(**kw: Any) -> DenseDims:
    base = dict(arch="Qwen3MoeForCausalLM", model_type="qwen3_moe", n_experts=4, qk_norm=True)
    base.update(kw)
    return DenseDims(**base)


def all_linears(fmt: str, *, skip: Callable[[Module], bool] = lambda m: m.category in ("lm_head", "embed", "router")) -> Layout:
    return Layout(lambda m: None if skip(m) else fmt)


def ct_config(fmt: str = "pack-quantized", *, ignore: list[str] | None = None, targets: list[str] | None = None,
              weights: dict[str, Any] | None = None, input_activations: dict[str, Any] | None = None,
              version: str = "0.12.2") -> dict[str, Any]:
    w = weights or {"num_bits": 4, "type": "int", "symmetric": True, "group_size": 128, "strategy": "group",
                    "dynamic": False, "actorder": None, "block_structure": None, "observer": "minmax"}
    return {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": targets or ["Linear"], "weights": w,
                                          "input_activations": input_activations, "output_activations": None,
                                          "format": fmt}},
            "ignore": ["lm_head"] if ignore is None else ignore, "kv_cache_scheme": None,
            "sparsity_config": {}, "transform_config": {}, "version": version,
            "global_compression_ratio": None}


def gptq_config(**kw: Any) -> dict[str, Any]:
    cfg = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True,
           "damp_percent": 0.01, "true_sequential": True, "checkpoint_format": "gptq", "lm_head": False}
    cfg.update(kw)
    return cfg


def awq_config(**kw: Any) -> dict[str, Any]:
    cfg = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm",
           "modules_to_not_convert": None}
    cfg.update(kw)
    return cfg


def dense_spec(d: DenseDims, layout: Layout, quantization_config: dict[str, Any] | None,
               hf_quant_config: dict[str, Any] | None = None) -> Spec:
    cfg = d.config()
    if quantization_config is not None:
        cfg["quantization_config"] = quantization_config
    return Spec(cfg, layout.tensors(dense_modules(d)), hf_quant_config=hf_quant_config)


def gpt_oss_spec(*, layers: int = 2, hidden: int = 128, intermediate: int = 128, experts: int = 4,
                 experts_fmt: str = "mxfp4", attn_fmt: str | None = None,
                 modules_to_not_convert: list[str] | None = None) -> Spec:
    """gpt-oss layout: experts fused per layer on disk (`gate_up_proj_blocks` [E, 2I, H/32, 16] …),
    attention, router and embeddings BF16 (docs/frameworks/formats.md#gpt-oss-mxfp4)."""
    H, I, E = hidden, intermediate, experts
    t: list[Tensor] = [("model.embed_tokens.weight", "BF16", (128, H))]
    for L in range(layers):
        p = f"model.layers.{L}"
        for proj, shape in (("q_proj", (H, H)), ("k_proj", (H // 2, H)), ("v_proj", (H // 2, H)), ("o_proj", (H, H))):
            m = Module(f"{p}.self_attn.{proj}", shape, "attn", L)
            t += STORES[attn_fmt or "bf16"](m)
            t.append((f"{p}.self_attn.{proj}.bias", "BF16", (shape[0],)))
        t += [(f"{p}.self_attn.sinks", "BF16", (4,)), (f"{p}.input_layernorm.weight", "BF16", (H,)),
              (f"{p}.post_attention_layernorm.weight", "BF16", (H,)),
              (f"{p}.mlp.router.weight", "BF16", (E, H)), (f"{p}.mlp.router.bias", "BF16", (E,))]
        if experts_fmt == "mxfp4":
            t += [(f"{p}.mlp.experts.gate_up_proj_blocks", "U8", (E, 2 * I, H // 32, 16)),
                  (f"{p}.mlp.experts.gate_up_proj_scales", "U8", (E, 2 * I, H // 32)),
                  (f"{p}.mlp.experts.gate_up_proj_bias", "BF16", (E, 2 * I)),
                  (f"{p}.mlp.experts.down_proj_blocks", "U8", (E, H, I // 32, 16)),
                  (f"{p}.mlp.experts.down_proj_scales", "U8", (E, H, I // 32)),
                  (f"{p}.mlp.experts.down_proj_bias", "BF16", (E, H))]
        else:
            t += [(f"{p}.mlp.experts.gate_up_proj", "BF16", (E, H, 2 * I)),
                  (f"{p}.mlp.experts.gate_up_proj_bias", "BF16", (E, 2 * I)),
                  (f"{p}.mlp.experts.down_proj", "BF16", (E, I, H)),
                  (f"{p}.mlp.experts.down_proj_bias", "BF16", (E, H))]
    t += [("model.norm.weight", "BF16", (H,)), ("lm_head.weight", "BF16", (128, H))]
    cfg = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": H,
           "intermediate_size": I, "num_hidden_layers": layers, "num_local_experts": E,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": H // 4, "vocab_size": 128,
           "torch_dtype": "bfloat16",
           "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": modules_to_not_convert if
                                   modules_to_not_convert is not None else
                                   ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                                    "lm_head"]}}
    return Spec(cfg, t)


def qwen_mtp_spec(arch: str = "Qwen3NextForCausalLM", *, method: str = "modelopt_fp4",
                  mtp_quantized: bool = False, with_mtp: bool = True, exclude_mtp: str = "mtp.*") -> Spec:
    """A Qwen3-Next / Qwen3.5-style MoE with its MTP module under the top-level `mtp.` prefix
    (`mtp.fc`, `mtp.pre_fc_norm_*`, `mtp.layers.0.*`; docs/frameworks/formats.md#mtp-layers). Routed experts in
    NVFP4 (ModelOpt) or MXFP4 (Quark); attention, routers and the MTP module BF16 unless
    ``mtp_quantized``."""
    d = qwen3_moe_dims(arch=arch, model_type="qwen3_next" if "Next" in arch else "qwen3_5_moe",
                       num_hidden_layers=2, hidden=128, moe_intermediate=64)
    mods = dense_modules(d)
    H = d.hidden
    mtp: list[Module] = [Module("mtp.fc", (H, 2 * H), "mtp_proj", 99),
                         Module("mtp.pre_fc_norm_embedding", (H,), "norm", 99),
                         Module("mtp.pre_fc_norm_hidden", (H,), "norm", 99), Module("mtp.norm", (H,), "norm", 99)]
    for m in dense_modules(DenseDims(**{**d.__dict__, "num_hidden_layers": 1})):
        if m.path.startswith("model.layers.0."):
            mtp.append(Module("mtp." + m.path[len("model."):], m.shape, m.category, 99))
    fmt = "nvfp4" if method == "modelopt_fp4" else "mxfp4"

    def pick(m: Module) -> str | None:
        if m.layer == 99:
            return fmt if mtp_quantized and m.category == "expert" else None
        return fmt if m.category == "expert" else None

    layout = Layout(pick)
    all_mods = mods + (mtp if with_mtp else [])
    cfg = d.config()
    cfg["mtp_num_hidden_layers"] = 1
    hq = None
    if method == "modelopt_fp4":
        hq = {"producer": {"name": "modelopt", "version": "0.39.0"},
              "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                               "exclude_modules": ["lm_head", "*self_attn*", "*mlp.gate"] + ([exclude_mtp] if exclude_mtp else [])}}
    else:
        excl = [m.path for m in all_mods if m.category in ("attn", "lm_head", "router", "mtp_proj")]
        if mtp_quantized:
            pass
        else:
            excl += [m.path for m in all_mods if m.layer == 99 and m.category == "expert"]
        cfg["quantization_config"] = quark_mxfp4_config(excl)
    return Spec(cfg, layout.tensors(all_mods), hf_quant_config=hq)

__all__ = [
    "DenseDims", "LINEAR_CATEGORIES", "Layout", "Module", "MoeDims", "STORES", "Spec", "Tensor",
    "all_linears", "awq_config", "cdiv", "ct_config", "deepseek_dims", "dense_modules", "dense_spec",
    "experts_only", "glm5_quark_mxfp4", "gpt_oss_spec", "gptq_config", "mixtral_dims", "modelopt_nvfp4",
    "moe_modules", "mtp_runtime_exclude_names", "quark_mxfp4_config", "qwen3_moe_dims", "qwen_mtp_spec",
    "store_awq", "store_bf16", "store_ct_fp8_channel", "store_ct_nvfp4", "store_ct_w4a16", "store_fp8_block",
    "store_fp8_tensor", "store_gptq", "store_mxfp4", "store_nvfp4", "unquantized_linear_names",
]
