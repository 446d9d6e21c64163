"""Synthetic model layouts for tests, fixtures and benchmarks.

Produces a ``config.json`` dict and the tensor listing (name, dtype, shape) of DeepSeek-V3-,
GLM-5- and GLM-4.5-style MoE checkpoints in a chosen quantization format, with the MTP/NextN
layer stored separately. Dimensions are parameters: tiny for shipped fixtures, realistic (with
sparse files) for scale tests. The tensor names and layouts follow checkpoint-formats.md §2-3.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

Tensor = tuple[str, str, tuple[int, ...]]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


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


@dataclass(frozen=True)
class Module:
    path: str  # checkpoint module path
    shape: tuple[int, ...]  # logical [N, K] for linears, [H] for norms
    category: str  # attn | dense_mlp | router | expert | shared_expert | norm | embed | lm_head | mtp_proj | plain | bias
    layer: int | None = None


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
def store_bf16(m: Module) -> list[Tensor]:
    if m.category == "bias":
        return [(m.path, "F32", m.shape)]
    return [(f"{m.path}.weight", "BF16", m.shape)]


def store_mxfp4(m: Module) -> list[Tensor]:
    n, k = m.shape
    return [(f"{m.path}.weight", "U8", (n, k // 2)), (f"{m.path}.weight_scale", "U8", (n, cdiv(k, 32)))]


def store_nvfp4(m: Module) -> list[Tensor]:
    n, k = m.shape
    return [(f"{m.path}.weight", "U8", (n, k // 2)), (f"{m.path}.weight_scale", "F8_E4M3", (n, cdiv(k, 16))),
            (f"{m.path}.weight_scale_2", "F32", ()), (f"{m.path}.input_scale", "F32", ())]


def store_fp8_block(m: Module) -> list[Tensor]:
    n, k = m.shape
    return [(f"{m.path}.weight", "F8_E4M3", (n, k)), (f"{m.path}.weight_scale_inv", "F32", (cdiv(n, 128), cdiv(k, 128)))]


STORES: dict[str, Callable[[Module], list[Tensor]]] = {
    "bf16": store_bf16, "mxfp4": store_mxfp4, "nvfp4": store_nvfp4, "fp8_block": store_fp8_block,
}

LINEAR_CATEGORIES = frozenset({"attn", "dense_mlp", "expert", "shared_expert", "mtp_proj", "lm_head", "plain"})


@dataclass
class Layout:
    """Which modules are stored in which format; everything else is BF16."""

    quantized: Callable[[Module], str | None]  # -> store name, or None for BF16

    def tensors(self, modules: Iterable[Module]) -> list[Tensor]:
        out: list[Tensor] = []
        for m in modules:
            fmt = self.quantized(m) if m.category in LINEAR_CATEGORIES and len(m.shape) == 2 else None
            out += STORES[fmt or "bf16"](m)
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
