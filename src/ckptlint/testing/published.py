"""Sparse copies of famous published checkpoints, written from their public ``config.json`` and the
shape of their safetensors index (names, dtypes, shapes; never their data).

Each layout keeps the real hidden sizes, head counts, expert sizes, vocabulary and quantization
config (what TP/EP divisibility and skip-list matching depend on) and fewer layers (``layers``) so
that tests stay fast; layer indices that matter (first dense layers, the MTP layer) stay where
the original puts them relative to ``num_hidden_layers``. Where the original's tensor list is not
public knowledge beyond its model card, the docstring says what was assumed.
"""

from __future__ import annotations

from typing import Any

from ckptlint.testing.models import (DenseDims, Layout, MoeDims, Spec, ct_config, dense_modules, gpt_oss_spec,
                                     moe_modules, store_fp8_tensor)


def _fp8_block_cfg(**extra: Any) -> dict[str, Any]:
    return {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128],
            **extra}


def qwen3_235b_a22b_fp8(*, layers: int = 2, experts: int = 128) -> Spec:
    """Qwen/Qwen3-235B-A22B-FP8: Qwen3MoeForCausalLM, hidden 4096, 64 query / 4 key-value heads of
    128, 128 experts (top 8) of intermediate size 1536, vocabulary 151936, untied LM head; block FP8
    (128 x 128, `weight_scale_inv`) on every attention and expert projection. Router (`mlp.gate`),
    norms, embeddings and LM head BF16; as Qwen's FP8 exports do, `modules_to_not_convert` lists the
    LM head and, per layer, the router and the layer norms."""
    d = DenseDims(arch="Qwen3MoeForCausalLM", model_type="qwen3_moe", num_hidden_layers=layers, hidden=4096,
                  intermediate=12288, heads=64, kv_heads=4, head_dim=128, vocab=151936, n_experts=experts,
                  moe_intermediate=1536, qk_norm=True)
    mods = dense_modules(d)
    layout = Layout(lambda m: "fp8_block" if m.category in ("attn", "expert") else None)
    cfg = d.config()
    cfg.update({"num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
                "max_position_embeddings": 40960, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06})
    skip = ["lm_head"] + [f"model.layers.{L}.{n}" for L in range(layers)
                          for n in ("input_layernorm", "mlp.gate", "post_attention_layernorm")]
    cfg["quantization_config"] = _fp8_block_cfg(modules_to_not_convert=skip)
    return Spec(cfg, layout.tensors(mods))





def qwen_vl_chat_int4(*, layers: int = 2, visual_layers: int = 2) -> Spec:
    """Qwen/Qwen-VL-Chat-Int4: QWenLMHeadModel (Qwen-1 text tower, hidden 4096, 32 heads, MLP w1/w2
    of 11008 each, vocabulary 151936, F16) with a ViT vision tower (`transformer.visual.*`, width
    1664, 14 x 14 patch convolution, attention-pool resampler) kept F16; AutoGPTQ 4-bit group 128
    on the text tower's Linear layers (`qweight`/`qzeros`/`scales`/`g_idx` and an F16 bias), with
    `quantization_config` as published (no module list)."""
    H, I, V, W = 4096, 11008, 151936, 1664
    t: list[tuple[str, str, tuple[int, ...]]] = [("transformer.wte.weight", "F16", (V, H))]

    def gptq(name: str, n: int, k: int, bias: bool = True) -> None:
        g = k // 128
        t.extend([(f"{name}.qweight", "I32", (k // 8, n)), (f"{name}.qzeros", "I32", (g, n // 8)),
                  (f"{name}.scales", "F16", (g, n)), (f"{name}.g_idx", "I32", (k,))])
        if bias:
            t.append((f"{name}.bias", "F16", (n,)))

    for L in range(layers):
        p = f"transformer.h.{L}"
        t += [(f"{p}.ln_1.weight", "F16", (H,)), (f"{p}.ln_2.weight", "F16", (H,))]
        gptq(f"{p}.attn.c_attn", 3 * H, H)
        gptq(f"{p}.attn.c_proj", H, H, bias=False)
        gptq(f"{p}.mlp.w1", I, H, bias=False)
        gptq(f"{p}.mlp.w2", I, H, bias=False)
        gptq(f"{p}.mlp.c_proj", H, I, bias=False)
    t += [("transformer.ln_f.weight", "F16", (H,)), ("lm_head.weight", "F16", (V, H))]
    v = "transformer.visual"
    t += [(f"{v}.conv1.weight", "F16", (W, 3, 14, 14)), (f"{v}.positional_embedding", "F16", (1024, W)),
          (f"{v}.ln_pre.weight", "F16", (W,)), (f"{v}.ln_pre.bias", "F16", (W,)),
          (f"{v}.ln_post.weight", "F16", (H,)), (f"{v}.ln_post.bias", "F16", (H,)), (f"{v}.proj", "F16", (H, H)),
          (f"{v}.attn_pool.query", "F16", (256, H)), (f"{v}.attn_pool.pos_embed", "F16", (256, H)),
          (f"{v}.attn_pool.kv_proj.weight", "F16", (H, W)),
          (f"{v}.attn_pool.attn.in_proj_weight", "F16", (3 * H, H)), (f"{v}.attn_pool.attn.in_proj_bias", "F16", (3 * H,)),
          (f"{v}.attn_pool.attn.out_proj.weight", "F16", (H, H)), (f"{v}.attn_pool.attn.out_proj.bias", "F16", (H,)),
          (f"{v}.attn_pool.ln_q.weight", "F16", (H,)), (f"{v}.attn_pool.ln_q.bias", "F16", (H,)),
          (f"{v}.attn_pool.ln_kv.weight", "F16", (H,)), (f"{v}.attn_pool.ln_kv.bias", "F16", (H,))]
    for L in range(visual_layers):
        b = f"{v}.transformer.resblocks.{L}"
        t += [(f"{b}.ln_1.weight", "F16", (W,)), (f"{b}.ln_1.bias", "F16", (W,)),
              (f"{b}.ln_2.weight", "F16", (W,)), (f"{b}.ln_2.bias", "F16", (W,)),
              (f"{b}.attn.in_proj.weight", "F16", (3 * W, W)), (f"{b}.attn.in_proj.bias", "F16", (3 * W,)),
              (f"{b}.attn.out_proj.weight", "F16", (W, W)), (f"{b}.attn.out_proj.bias", "F16", (W,)),
              (f"{b}.mlp.c_fc.weight", "F16", (8192, W)), (f"{b}.mlp.c_fc.bias", "F16", (8192,)),
              (f"{b}.mlp.c_proj.weight", "F16", (W, 8192)), (f"{b}.mlp.c_proj.bias", "F16", (W,))]
    cfg = {"architectures": ["QWenLMHeadModel"], "model_type": "qwen", "hidden_size": H, "intermediate_size": 2 * I,
           "num_attention_heads": 32, "num_hidden_layers": layers, "kv_channels": 128, "vocab_size": V,
           "no_bias": True, "torch_dtype": "float16", "fp16": True, "tie_word_embeddings": False,
           "visual": {"heads": 16, "image_size": 448, "layers": visual_layers, "mlp_ratio": 4.9231,
                      "output_dim": H, "patch_size": 14, "width": W},
           "quantization_config": {"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False,
                                   "static_groups": False, "sym": True, "true_sequential": True,
                                   "model_name_or_path": None, "model_file_base_name": "model",
                                   "quant_method": "gptq"}}
    return Spec(cfg, t)


def gpt_oss(size: str = "20b", *, layers: int = 2) -> Spec:
    """openai/gpt-oss-20b / gpt-oss-120b: GptOssForCausalLM, hidden 2880, 64 query / 8 key-value
    heads of 64 with biases and sinks, vocabulary 201088, untied; 32 (20b) or 128 (120b) experts of
    intermediate size 2880, stored fused per layer as MXFP4 `*_blocks` (U8 [E, 2I, H/32, 16]) and
    `*_scales` (U8 E8M0 [E, 2I, H/32]) with BF16 `*_bias`; attention, routers, embeddings BF16;
    `quantization_config` {"quant_method": "mxfp4", "modules_to_not_convert": [...]} as published."""
    experts = {"20b": 32, "120b": 128}[size]
    spec = gpt_oss_spec(layers=layers, hidden=2880, intermediate=2880, experts=experts)
    H = 2880
    fix = {"model.embed_tokens.weight": (201088, H), "lm_head.weight": (201088, H)}
    tensors = []
    for n, dt, s in spec.tensors:
        if n in fix:
            s = fix[n]
        elif n.endswith(("q_proj.weight",)):
            s = (64 * 64, H)
        elif n.endswith(("q_proj.bias",)):
            s = (64 * 64,)
        elif n.endswith(("k_proj.weight", "v_proj.weight")):
            s = (8 * 64, H)
        elif n.endswith(("k_proj.bias", "v_proj.bias")):
            s = (8 * 64,)
        elif n.endswith("o_proj.weight"):
            s = (H, 64 * 64)
        elif n.endswith("o_proj.bias"):
            s = (H,)
        elif n.endswith("self_attn.sinks"):
            s = (64,)
        tensors.append((n, dt, s))
    cfg = dict(spec.config)
    cfg.update({"num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088,
                "tie_word_embeddings": False, "num_experts_per_tok": 4, "experts_per_token": 4,
                "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * (layers // 2)
                + ["sliding_attention"] * (layers % 2), "swiglu_limit": 7.0})
    return Spec(cfg, tensors)


# --- DeepSeek-R1 / Kimi-K2 family ---------------------------------------------------------------
def _deepseek_r1_dims(layers: int, **kw: Any):
    base = dict(arch="DeepseekV3ForCausalLM", model_type="deepseek_v3", num_hidden_layers=layers,
                num_nextn_predict_layers=1, hidden=7168, n_routed_experts=256, n_shared_experts=1,
                moe_intermediate=2048, intermediate=18432, first_k_dense_replace=3, q_lora_rank=1536,
                kv_lora_rank=512, heads=128, qk_nope=128, qk_rope=64, v_head=128, vocab=129280, indexer=False)
    base.update(kw)
    return MoeDims(**base)


def _r1_config(d, quantization_config: dict[str, Any] | None) -> dict[str, Any]:
    cfg = d.config()
    cfg.update({"num_key_value_heads": d.heads, "n_group": 8, "topk_group": 4, "num_experts_per_tok": 8,
                "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
                "norm_topk_prob": True, "moe_layer_freq": 1, "rope_theta": 10000,
                "max_position_embeddings": 163840})
    if quantization_config is not None:
        cfg["quantization_config"] = quantization_config
    return cfg


def deepseek_r1_fp8(*, layers: int = 4) -> Spec:
    """deepseek-ai/DeepSeek-R1: DeepseekV3ForCausalLM (MLA: q_lora 1536, kv_lora 512, 128 heads of
    128 + 64 rope), 3 dense layers then MoE (256 routed experts of 2048 + 1 shared), vocabulary
    129280, one MTP layer after the last (`num_nextn_predict_layers` 1). Block FP8 (128 x 128,
    `weight_scale_inv`) on every decoder Linear, the MTP layer's included; BF16 embeddings, LM head,
    norms, routers (`e_score_correction_bias` F32) and the MTP `eh_proj` / `shared_head`."""
    d = _deepseek_r1_dims(layers)
    layout = Layout(lambda m: "fp8_block" if m.category in ("attn", "dense_mlp", "expert", "shared_expert") else None)
    return Spec(_r1_config(d, _fp8_block_cfg()), layout.tensors(moe_modules(d)),
                notes={"mtp_layers": [layers]})


def nvidia_deepseek_r1_fp4_exclude(layers: int, moe_from: int = 3) -> list[str]:
    """The `exclude_modules` of nvidia/DeepSeek-R1-FP4's hf_quant_config.json (ModelOpt 0.23.0) for a
    model of ``layers`` decoder layers: per layer both layer norms, `self_attn.kv_a_proj_with_mqa`,
    `q_proj`, `q_b_proj`, `kv_a_layernorm`, `kv_b_proj`, the MoE layers' `mlp.gate`; `lm_head`,
    `model.embed_tokens`, `model.norm`, and the MTP layer as `model.layers.{layers}*`. Not listed:
    `q_a_proj`, `o_proj`, the MLPs and experts."""
    out = ["lm_head", "model.embed_tokens"]
    for L in sorted(range(layers), key=str):
        p = f"model.layers.{L}"
        out += [f"{p}.input_layernorm"] + ([f"{p}.mlp.gate"] if L >= moe_from else []) + [
            f"{p}.post_attention_layernorm", f"{p}.self_attn.kv_a_proj_with_mqa", f"{p}.self_attn.q_proj",
            f"{p}.self_attn.q_b_proj", f"{p}.self_attn.kv_a_layernorm", f"{p}.self_attn.kv_b_proj"]
    return out + ["model.norm", f"model.layers.{layers}*"]


def nvidia_deepseek_r1_fp4(*, layers: int = 4, q_a_proj_bf16: bool = False) -> Spec:
    """nvidia/DeepSeek-R1-FP4 (ModelOpt 0.23.0 NVFP4, group 16, `hf_quant_config.json` only): every
    decoder Linear that `exclude_modules` does not list is NVFP4 (`weight` U8 [N, K/2], `weight_scale`
    F8_E4M3 [N, K/16], `weight_scale_2` and `input_scale` F32 scalars): q_a_proj, o_proj, the dense
    MLPs, routed and shared experts; the listed attention projections BF16; the MTP layer BF16.
    ``q_a_proj_bf16`` stores q_a_proj BF16 as well (the list's per-layer `q_proj`, which the model
    does not have, reads like the reference implementation's `wq_a` mis-translated; the safetensors
    index would tell, and was not available)."""
    d = _deepseek_r1_dims(layers)
    exclude = nvidia_deepseek_r1_fp4_exclude(layers)
    listed = {e for e in exclude if "*" not in e}

    def pick(m) -> str | None:
        if m.layer == layers or m.path in listed or m.category not in ("attn", "dense_mlp", "expert", "shared_expert"):
            return None
        if q_a_proj_bf16 and m.path.endswith("q_a_proj"):
            return None
        return "nvfp4"
    hq = {"producer": {"name": "modelopt", "version": "0.23.0"},
          "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                           "exclude_modules": exclude}}
    return Spec(_r1_config(d, None), Layout(pick).tensors(moe_modules(d)), hf_quant_config=hq,
                notes={"mtp_layers": [layers]})


def kimi_k2_thinking_int4(*, layers: int = 3) -> Spec:
    """moonshotai/Kimi-K2-Thinking: DeepseekV3ForCausalLM (model_type kimi_k2), hidden 7168, 64 MLA
    heads, layer 0 dense (intermediate 18432), then MoE with 384 routed experts of 2048 + 1 shared,
    vocabulary 163840, no MTP layer. compressed-tensors W4A16 (int4 symmetric, group 32,
    pack-quantized: `weight_packed` I32 [N, K/8], `weight_scale` BF16 [N, K/32], `weight_shape` I32
    [2]) on the routed experts only; `ignore` lists `lm_head` and regexes for attention, shared
    experts and the dense MLP, as published."""
    d = _deepseek_r1_dims(layers, model_type="kimi_k2", num_nextn_predict_layers=0, heads=64,
                          n_routed_experts=384, first_k_dense_replace=1, vocab=163840)

    def packed(m):
        n, k = m.shape
        return [(f"{m.path}.weight_packed", "I32", (n, k // 8)), (f"{m.path}.weight_scale", "BF16", (n, k // 32)),
                (f"{m.path}.weight_shape", "I32", (2,))]
    layout = Layout(lambda m: packed if m.category == "expert" else None)
    qc = {"config_groups": {"group_0": {"input_activations": None, "output_activations": None, "targets": ["Linear"],
                                        "weights": {"actorder": None, "block_structure": None, "dynamic": False,
                                                    "group_size": 32, "num_bits": 4, "observer": "minmax",
                                                    "observer_kwargs": {}, "strategy": "group", "symmetric": True,
                                                    "type": "int"}}},
          "format": "pack-quantized",
          "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
          "kv_cache_scheme": None, "quant_method": "compressed-tensors", "quantization_status": "compressed"}
    cfg = _r1_config(d, qc)
    cfg["num_nextn_predict_layers"] = 0
    return Spec(cfg, layout.tensors(moe_modules(d, with_mtp=False)))


# --- Llama 2 / Llama 3.1 --------------------------------------------------------------------------
def _llama2_13b(layers: int) -> DenseDims:
    return DenseDims(num_hidden_layers=layers, hidden=5120, intermediate=13824, heads=40, kv_heads=40, head_dim=128,
                     vocab=32000)


def thebloke_llama2_13b_chat_gptq(*, layers: int = 2) -> Spec:
    """TheBloke/Llama-2-13B-chat-GPTQ: LlamaForCausalLM (hidden 5120, 40 heads, intermediate 13824,
    vocabulary 32000, F16), AutoGPTQ 4-bit group 128, desc_act false, symmetric: every decoder Linear
    as `qweight`/`qzeros`/`scales`/`g_idx`; embeddings, norms and LM head F16."""
    d = _llama2_13b(layers)
    cfg = {"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False, "sym": True,
           "true_sequential": True, "model_name_or_path": None, "model_file_base_name": "model", "quant_method": "gptq"}
    return _dense_f16(d, "gptq", cfg)


def thebloke_llama2_7b_chat_awq(*, layers: int = 2) -> Spec:
    """TheBloke/Llama-2-7B-Chat-AWQ: LlamaForCausalLM (hidden 4096, 32 heads, intermediate 11008,
    vocabulary 32000, F16), AutoAWQ GEMM 4-bit group 128 with zero points: every decoder Linear as
    `qweight` [K, N/8] / `qzeros` / `scales`; embeddings, norms and LM head F16."""
    d = DenseDims(num_hidden_layers=layers, hidden=4096, intermediate=11008, heads=32, kv_heads=32, head_dim=128,
                  vocab=32000)
    return _dense_f16(d, "awq", {"quant_method": "awq", "zero_point": True, "group_size": 128, "bits": 4,
                                 "version": "gemm"})


def _dense_f16(d: DenseDims, fmt: str, qc: dict[str, Any]) -> Spec:
    layout = Layout(lambda m: fmt if m.category in ("attn", "dense_mlp") else None)
    cfg = d.config()
    cfg.update({"torch_dtype": "float16", "rms_norm_eps": 1e-05, "quantization_config": qc})
    tensors = [(n, "F16" if dt == "BF16" else dt, s) for n, dt, s in layout.tensors(dense_modules(d))]
    return Spec(cfg, tensors)


def _llama31_8b(layers: int) -> DenseDims:
    return DenseDims(num_hidden_layers=layers, hidden=4096, intermediate=14336, heads=32, kv_heads=8, head_dim=128,
                     vocab=128256)


def redhat_llama31_8b_fp8(*, layers: int = 2) -> Spec:
    """RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8: compressed-tensors float-quantized, one group targeting
    `Linear` (FP8 E4M3 weights with a per-tensor static scale, static per-tensor input scale),
    `ignore` ["lm_head"]; hidden 4096, 32 query / 8 key-value heads of 128, intermediate 14336."""
    d = _llama31_8b(layers)

    def fp8(m):
        n, k = m.shape
        return [(f"{m.path}.weight", "F8_E4M3", (n, k)), (f"{m.path}.weight_scale", "F32", (1,)),
                (f"{m.path}.input_scale", "F32", (1,))]
    tensor = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor", "dynamic": False,
              "group_size": None, "block_structure": None, "actorder": None, "observer": "minmax"}
    qc = ct_config("float-quantized", ignore=["lm_head"], weights=tensor, input_activations=dict(tensor))
    layout = Layout(lambda m: fp8 if m.category in ("attn", "dense_mlp") else None)
    cfg = d.config()
    cfg["quantization_config"] = qc
    return Spec(cfg, layout.tensors(dense_modules(d)))


def nvidia_llama31_8b_fp8(*, layers: int = 2) -> Spec:
    """nvidia/Llama-3.1-8B-Instruct-FP8 (ModelOpt FP8, `hf_quant_config.json`: quant_algo FP8,
    kv_cache_quant_algo FP8, exclude_modules ["lm_head"]): per-tensor FP8 weights with F32 scalar
    `weight_scale` and `input_scale`, and the KV-cache scales `k_proj.k_scale` / `v_proj.v_scale`."""
    d = _llama31_8b(layers)

    def fp8(m):
        out = store_fp8_tensor(m)
        if m.path.endswith(("k_proj", "v_proj")):
            out.append((f"{m.path}.{m.path[-6]}_scale", "F32", ()))
        return out
    layout = Layout(lambda m: fp8 if m.category in ("attn", "dense_mlp") else None)
    hq = {"producer": {"name": "modelopt", "version": "0.15.0"},
          "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
    return Spec(d.config(), layout.tensors(dense_modules(d)), hf_quant_config=hq)
