"""Upstream bug reports reproduced as synthetic checkpoints (``fixtures/upstream/<name>/``).

Each case names what goes wrong, cites the upstream issue/PR, and states what ckptlint must predict
on the release it was reported against (``reported``) and, where one exists, the release that fixed
it (``fixed``: no load-error / silent-corruption finding there). Shapes are tiny; the structure
(names, dtypes, packing, skip lists) is what the reports describe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ckptlint.testing.models import (DenseDims, Layout, Module, MoeDims, Spec, all_linears, ct_config, dense_modules,
                                     dense_spec, experts_only, glm5_quark_mxfp4, gptq_config, modelopt_nvfp4,
                                     moe_modules, quark_mxfp4_config, qwen3_moe_dims, unquantized_linear_names)

Expect = tuple[str, str, str | None]  # (code, consequence, module) — module None: any


@dataclass
class Case:
    name: str
    refs: list[str]
    description: str
    make: Callable[[], Spec]
    reported: dict[str, list[Expect]]
    fixed: list[str] = field(default_factory=list)
    deployment: dict = field(default_factory=dict)  # Deployment options the report implies (e.g. the GPU)


def _tiny_moe(arch: str = "DeepseekV3ForCausalLM", layers: int = 61, **kw) -> MoeDims:
    base = dict(arch=arch, model_type="deepseek_v3" if arch.startswith("Deepseek") else "glm_moe_dsa",
                num_hidden_layers=layers, hidden=32, n_routed_experts=2, moe_intermediate=32, intermediate=32,
                first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=16, heads=1, qk_nope=16, qk_rope=16,
                v_head=16, vocab=32, indexer=arch != "DeepseekV3ForCausalLM", index_heads=1, index_head_dim=32)
    base.update(kw)
    return MoeDims(**base)


def _quark(d: MoeDims, layout: Layout, exclude: list[str] | None = None, with_mtp: bool = True) -> Spec:
    mods = moe_modules(d, with_mtp=with_mtp)
    cfg = d.config()
    cfg["quantization_config"] = quark_mxfp4_config(exclude if exclude is not None else unquantized_linear_names(mods, layout))
    return Spec(cfg, layout.tensors(mods))


def deepseek_mtp_regex_exclude() -> Spec:
    d = _tiny_moe()
    layout = experts_only("mxfp4", mtp_layers={61})
    names = [n for n in unquantized_linear_names(moe_modules(d), layout) if not n.startswith("model.layers.61.")]
    return _quark(d, layout, names + ["re:model.layers.61.*"])


def glm5_eh_proj_fp4() -> Spec:
    d = _tiny_moe("GlmMoeDsaForCausalLM", layers=78)
    layout = Layout(lambda m: "mxfp4" if m.category == "expert" or (m.category == "mtp_proj") else None)
    return _quark(d, layout)


def glm53_fused_qkv_and_per_expert_exclude() -> Spec:
    q = qwen3_moe_dims(num_hidden_layers=2, hidden=128, moe_intermediate=64)

    def pick(m: Module) -> str | None:
        if m.category == "attn" or m.category in ("lm_head", "embed", "router"):
            return None
        if m.layer == 1:  # a MoE layer kept in BF16
            return None
        return "mxfp4"

    layout = Layout(pick)
    mods = dense_modules(q)
    exclude = ["lm_head"]
    for L in range(q.num_hidden_layers):
        exclude += [f"model.layers.{L}.self_attn.qkv_proj", f"model.layers.{L}.self_attn.o_proj",
                    f"model.layers.{L}.mlp.gate"]
    exclude += [m.path for m in mods if m.layer == 1 and m.category == "expert"]
    cfg = q.config()
    cfg["quantization_config"] = quark_mxfp4_config(exclude)
    return Spec(cfg, layout.tensors(mods))


def glm5_nvfp4_without_mtp() -> Spec:
    d = _tiny_moe("GlmMoeDsaForCausalLM", layers=78)
    spec = modelopt_nvfp4(d, with_mtp=False)
    return spec


def glm5_nvfp4_bf16_mtp_not_excluded() -> Spec:
    d = _tiny_moe("GlmMoeDsaForCausalLM", layers=78)
    spec = modelopt_nvfp4(d)
    ex = spec.hf_quant_config["quantization"]["exclude_modules"]
    spec.hf_quant_config["quantization"]["exclude_modules"] = [e for e in ex if not e.startswith("model.layers.78")]
    return spec


def deepseek_nvfp4_quantized_mtp() -> Spec:
    return modelopt_nvfp4(_tiny_moe(), mtp_quantized=True)


def _fp8_block_deepseek(over: dict | None = None, layers: int = 4, bf16: Callable[[Module], bool] = lambda m: False) -> Spec:
    d = _tiny_moe(layers=layers, hidden=256, moe_intermediate=128, intermediate=256, q_lora_rank=128,
                  kv_lora_rank=128, qk_nope=64, qk_rope=64, v_head=64)
    cfg = d.config()
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                                  "weight_block_size": [128, 128], **(over or {})}
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed", "router", "mtp_proj", "plain") or bf16(m)
                    else "fp8_block")
    return Spec(cfg, layout.tensors(moe_modules(d)))


def fp8_block_scale_named_weight_scale() -> Spec:
    spec = _fp8_block_deepseek()
    spec.tensors = [(n.replace("weight_scale_inv", "weight_scale"), dt, s) for n, dt, s in spec.tensors]
    return spec


def fp8_bf16_experts_listed_per_expert() -> Spec:
    last = 3
    spec = _fp8_block_deepseek(bf16=lambda m: m.layer == last and m.category == "expert")
    spec.config["quantization_config"]["modules_to_not_convert"] = [
        f"model.layers.{last}.mlp.experts.{e}.{p}" for e in range(2) for p in ("gate_proj", "up_proj", "down_proj")]
    return spec


def fp8_router_entry_substring() -> Spec:
    spec = _fp8_block_deepseek(bf16=lambda m: m.category == "router")
    spec.config["quantization_config"]["modules_to_not_convert"] = ["mlp.gate"]
    return spec


def ct_nvfp4_bf16_moe_layer_ignored() -> Spec:
    q = qwen3_moe_dims(num_hidden_layers=2, hidden=128, moe_intermediate=64)
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed", "router") or (m.layer == 1 and m.category == "expert")
                    else "ct_nvfp4")
    ignore = ["lm_head", "re:.*mlp.gate$"] + [m.path for m in dense_modules(q) if m.layer == 1 and m.category == "expert"]
    w = {"num_bits": 4, "type": "float", "symmetric": True, "group_size": 16, "strategy": "tensor_group",
         "dynamic": False, "actorder": None, "block_structure": None}
    a = {"num_bits": 4, "type": "float", "symmetric": True, "group_size": 16, "strategy": "tensor_group",
         "dynamic": "local", "actorder": None, "block_structure": None}
    return dense_spec(q, layout, ct_config("nvfp4-pack-quantized", ignore=ignore, weights=w, input_activations=a))


def ct_fp8_router_ignore_substring() -> Spec:
    d = DenseDims(num_hidden_layers=2)
    w = {"num_bits": 8, "type": "float", "symmetric": True, "group_size": None, "strategy": "channel",
         "dynamic": False, "actorder": None, "block_structure": None}
    a = {"num_bits": 8, "type": "float", "symmetric": True, "group_size": None, "strategy": "token",
         "dynamic": True, "actorder": None, "block_structure": None}
    return dense_spec(d, all_linears("ct_fp8_channel"),
                      ct_config("float-quantized", ignore=["lm_head", "mlp.gate"], weights=w, input_activations=a))


def ct_fp8_channel_scale_1d() -> Spec:
    spec = ct_fp8_router_ignore_substring()
    spec.config["quantization_config"]["ignore"] = ["lm_head"]
    spec.tensors = [(n, dt, (s[0],) if n.endswith("weight_scale") else s) for n, dt, s in spec.tensors]
    return spec


def ct_fp8_module_ignored_but_stored_fp8() -> Spec:
    spec = ct_fp8_router_ignore_substring()
    spec.config["quantization_config"]["ignore"] = ["lm_head", "re:.*mlp.down_proj"]
    return spec


def fp8_short_skip_entry() -> Spec:
    d = DenseDims(num_hidden_layers=2)
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or m.path.endswith("mlp.down_proj") else "fp8_tensor")
    cfg = {"quant_method": "fp8", "activation_scheme": "static", "ignored_layers": ["lm_head", "mlp.down_proj"]}
    return dense_spec(d, layout, cfg)


def fp8_fused_name_in_skip_list() -> Spec:
    d = DenseDims(num_hidden_layers=2, hidden=256, heads=2, kv_heads=2, head_dim=128, intermediate=512)
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or (m.layer == 0 and m.category == "attn"
                                                                              and not m.path.endswith("o_proj"))
                    else "fp8_block")
    cfg = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
           "modules_to_not_convert": ["lm_head", "model.layers.0.self_attn.qkv_proj"]}
    return dense_spec(d, layout, cfg)


def quark_router_not_excluded() -> Spec:
    q = qwen3_moe_dims(num_hidden_layers=2, hidden=128, moe_intermediate=64)
    layout = Layout(lambda m: "mxfp4" if m.category == "expert" else None)
    mods = dense_modules(q)
    # Quark lists the nn.Linear modules it left alone but not the routers (vLLM PR #48606)
    exclude = [m.path for m in mods if m.category in ("attn", "lm_head")]
    cfg = q.config()
    cfg["quantization_config"] = quark_mxfp4_config(exclude)
    return Spec(cfg, layout.tensors(mods))


def gptq_dynamic_negative_module_stored_quantized() -> Spec:
    return dense_spec(DenseDims(), all_linears("gptq"), gptq_config(dynamic={"-:.*mlp\\.down_proj": {}}))


def _moe256(**kw) -> MoeDims:
    # Real expert counts matter here: SGLang fuses the shared expert only for 256 or 384 routed experts.
    base = dict(layers=4, n_routed_experts=256, hidden=32, moe_intermediate=32)
    base.update(kw)
    return _tiny_moe("GlmMoeDsaForCausalLM", **base)


def quark_bf16_shared_experts() -> Spec:
    d = _moe256()
    return glm5_quark_mxfp4(d, mtp_exclude="fixed")


def nvfp4_bf16_shared_experts() -> Spec:
    d = _moe256()
    spec = modelopt_nvfp4(d)
    mods = moe_modules(d)
    shared = {m.path for m in mods if m.category == "shared_expert"}
    tensors = [t for t in spec.tensors if t[0].rsplit(".", 1)[0] not in shared]
    tensors += [(f"{m.path}.weight", "BF16", m.shape) for m in mods if m.path in shared]
    spec.hf_quant_config["quantization"]["exclude_modules"].append("*shared_experts*")
    return Spec(spec.config, tensors, spec.hf_quant_config)


CASES: list[Case] = [
    Case("glm5-quark-mtp-exclude-checkpoint-names", ["sgl-project/sglang#30265", "sgl-project/sglang#30379"],
         "GLM-5.2 Quark MXFP4: BF16 MTP layer excluded only as model.layers.78.*; SGLang's NextN draft builds "
         "model.eh_proj and model.decoder.mlp.experts MXFP4.",
         lambda: glm5_quark_mxfp4(_tiny_moe("GlmMoeDsaForCausalLM", layers=78)),
         {"sglang==0.5.15": [("QD401", "load-error", "model.eh_proj"), ("QD401", "load-error", "model.decoder.mlp.experts")]},
         fixed=["sglang==0.5.16"]),
    Case("glm5-quark-mtp-per-expert-exclude-vllm", ["vllm-project/vllm#46757", "vllm-project/vllm#48226"],
         "Same checkpoint on vLLM: per-expert exclude entries never matched the fused MTP MoE before check_children.",
         lambda: glm5_quark_mxfp4(_tiny_moe("GlmMoeDsaForCausalLM", layers=78)),
         {"vllm==0.24.0": [("QD401", "load-error", "model.layers.78.mlp.experts")]}, fixed=["vllm==0.26.0"]),
    Case("deepseek-quark-mtp-eh-proj-mapped-to-decoder", ["sgl-project/sglang#23424"],
         "DeepSeek Quark MXFP4 with a BF16 MTP layer excluded per module: the hard-coded 61-mapper turns "
         "model.layers.61.eh_proj into model.decoder.eh_proj, which is not the runtime module model.eh_proj.",
         lambda: glm5_quark_mxfp4(_tiny_moe()),
         {"sglang==0.5.12": [("QD401", "load-error", "model.eh_proj")],
          "sglang==0.5.23": [("QD401", "load-error", "model.eh_proj")]}),
    Case("deepseek-quark-mtp-regex-exclude-before-mapper", ["sgl-project/sglang#19425"],
         "amd/DeepSeek-R1-0528-MXFP4: `re:model.layers.61.*` vs the draft's model.decoder.* modules; fixed by the "
         "model.layers.61 -> model.decoder mapper and the whole-draft check.",
         deepseek_mtp_regex_exclude,
         {"sglang==0.5.9": [("QD401", "load-error", "model.decoder.mlp.experts")]}, fixed=["sglang==0.5.12"]),
    Case("glm5-quark-fp4-eh-proj-plain-linear", ["sgl-project/sglang#23219", "sgl-project/sglang#23142"],
         "GLM-5-MXFP4 with an FP4-packed eh_proj: the NextN eh_proj was a plain BF16 nn.Linear.",
         glm5_eh_proj_fp4,
         {"sglang==0.5.9": [("QD401", "load-error", "model.eh_proj")]}, fixed=["sglang==0.5.12"]),
    Case("quark-fused-qkv-exclude-and-per-expert-entries", ["sgl-project/sglang#39317", "sgl-project/sglang#37673"],
         "Quark exclude names the fused qkv_proj directly and lists a BF16 MoE layer expert by expert.",
         glm53_fused_qkv_and_per_expert_exclude,
         {"sglang==0.5.20": [("QD401", "load-error", "model.layers.0.self_attn.qkv_proj"),
                             ("QD401", "load-error", "model.layers.1.mlp.experts")]}, fixed=["sglang==0.5.21"]),
    Case("glm5-nvfp4-without-mtp-weights", ["vllm-project/vllm#35548"],
         "lukealonso/GLM-5-NVFP4 style: num_nextn_predict_layers 1 but no layer-78 tensors; silent 0% acceptance "
         "until vLLM raised on it.",
         glm5_nvfp4_without_mtp,
         {"sglang==0.5.23": [("MT701", "degraded", "model.layers.78")],
          "vllm==0.33.0": [("MT701", "load-error", "model.layers.78")]}),
    Case("glm5-nvfp4-bf16-mtp-not-excluded", ["vllm-project/vllm#49187"],
         "GLM-5 NVFP4 with the MTP layer stored BF16 and no exclude entry: vLLM's draft inherits NVFP4; SGLang "
         "builds ModelOpt NVFP4 drafts unquantized.",
         glm5_nvfp4_bf16_mtp_not_excluded,
         {"vllm==0.33.0": [("QD401", "load-error", "model.layers.78.mlp.experts")], "sglang==0.5.23": []}),
    Case("deepseek-nvfp4-quantized-mtp-forced-bf16-draft", ["sgl-project/sglang#10175", "sgl-project/sglang#7376"],
         "An NVFP4-quantized MTP layer loaded into SGLang's always-BF16 ModelOpt FP4 draft.",
         deepseek_nvfp4_quantized_mtp,
         {"sglang==0.5.23": [("MT702", "load-error", "model.decoder.mlp.experts")]}),
    Case("fp8-block-scale-named-weight-scale", ["vllm-project/vllm#43564"],
         "llm-compressor model_free_ptq block FP8 saved `weight_scale`; the fp8 method registers weight_scale_inv.",
         fp8_block_scale_named_weight_scale,
         {"vllm==0.33.0": [("SC502", "load-error", None)], "sglang==0.5.23": [("SC502", "silent-corruption", None)]}),
    Case("ct-nvfp4-bf16-moe-layer-ignored", ["vllm-project/vllm#27607", "vllm-project/vllm#28878"],
         "Mixed NVFP4/BF16 MoE: compressed-tensors FusedMoE ignored `ignore` and used the Linear scheme.",
         ct_nvfp4_bf16_moe_layer_ignored,
         {"vllm==0.11.0": [("QD401", "load-error", "model.layers.1.mlp.experts")]}, fixed=["vllm==0.24.0"]),
    Case("ct-router-ignore-substring-unquantizes-gate-up", ["sgl-project/sglang#32736"],
         "compressed-tensors `ignore` entry `mlp.gate` matched `mlp.gate_up_proj` by raw substring: FP8 gate_up "
         "weights loaded into BF16 layers without their scales.",
         ct_fp8_router_ignore_substring,
         {"sglang==0.5.16": [("QD401", "silent-corruption", "model.layers.0.mlp.gate_up_proj")]}, fixed=["sglang==0.5.17"]),
    Case("ct-fp8-channel-scale-1d", ["vllm-project/vllm#53105"],
         "compressed-tensors channel weight_scale written [out] instead of [out, 1]: bare shape AssertionError.",
         ct_fp8_channel_scale_1d,
         {"vllm==0.33.0": [("SC503", "load-error", None)]}),
    Case("ct-fp8-module-ignored-but-stored-fp8", ["vllm-project/vllm#53950"],
         "A module the config leaves unquantized while the checkpoint carries its FP8 weight and scale: "
         "\"There is no module or parameter named …weight_scale\".",
         ct_fp8_module_ignored_but_stored_fp8,
         {"vllm==0.33.0": [("QD401", "load-error", "model.layers.0.mlp.down_proj")],
          # SGLang 0.5.9-0.5.16 try a `re:` entry as a regex (not as a substring) too
          "sglang==0.5.9": [("QD401", "silent-corruption", "model.layers.0.mlp.down_proj")],
          "sglang==0.5.16": [("QD401", "silent-corruption", "model.layers.0.mlp.down_proj")]}),
    Case("fp8-short-skip-entry-exact-match", ["vllm-project/vllm#21669", "vllm-project/vllm#44628"],
         "FP8 `ignored_layers` written as a short name (`mlp.down_proj`): vLLM's exact match misses it and builds "
         "the BF16 layer FP8 (gibberish); SGLang's module-path match honours it.",
         fp8_short_skip_entry,
         {"vllm==0.33.0": [("QD401", "silent-corruption", "model.layers.0.mlp.down_proj")], "sglang==0.5.23": []}),
    Case("fp8-fused-name-in-skip-list", ["sgl-project/sglang#26213"],
         "modules_to_not_convert names the fused qkv_proj: SGLang's fp8 tests only the shards and builds it FP8.",
         fp8_fused_name_in_skip_list,
         {"sglang==0.5.23": [("QD401", "silent-corruption", "model.layers.0.self_attn.qkv_proj")], "vllm==0.33.0": []}),
    Case("fp8-bf16-experts-listed-per-expert", ["sgl-project/sglang#18742"],
         "FP8 checkpoint with BF16 tail experts listed per expert: SGLang's fp8 method never skipped a FusedMoE "
         "before 0.5.12.",
         fp8_bf16_experts_listed_per_expert,
         {"sglang==0.5.9": [("QD401", "silent-corruption", "model.layers.3.mlp.experts")]}, fixed=["sglang==0.5.12"]),
    Case("fp8-router-entry-matches-gate-up-proj", ["sgl-project/sglang#23467", "sgl-project/sglang#23973"],
         "`mlp.gate` in the fp8 skip list (the routers) also matched `mlp.gate_up_proj` under raw substring "
         "matching: FP8 dense MLPs built BF16; the DeepSeek loader then indexes the stacked "
         "`gate_up_proj.weight_scale_inv` without a guard (KeyError).",
         fp8_router_entry_substring,
         {"sglang==0.5.9": [("QD401", "load-error", "model.layers.0.mlp.gate_up_proj")]}, fixed=["sglang==0.5.12"]),
    Case("quark-router-not-in-exclude", ["vllm-project/vllm#48606"],
         "Quark writes only nn.Linear modules to `exclude`: a BF16 Qwen3-MoE router (quantizable in vLLM) is "
         "built MXFP4; SGLang builds routers unquantized.",
         quark_router_not_excluded,
         {"vllm==0.33.0": [("QD401", "load-error", "model.layers.0.mlp.gate")], "sglang==0.5.23": []}),
    Case("quark-bf16-shared-expert-fused-into-mxfp4-experts", ["sgl-project/sglang#21529", "sgl-project/sglang#25740"],
         "Quark MXFP4 routed experts with BF16 shared experts (excluded): before the Quark fusion gate (0.5.18) "
         "SGLang fuses the shared expert into the MXFP4 FusedMoE on AMD GPUs (`3584 vs 7168` for Kimi-K2.5).",
         quark_bf16_shared_experts,
         {"sglang==0.5.15": [("QD403", "load-error", None)]}, fixed=["sglang==0.5.18"]),
    Case("nvfp4-bf16-shared-expert-fused-on-rtx-pro-6000", ["sgl-project/sglang#40628", "sgl-project/sglang#29562"],
         "GLM-5.2 NVFP4 with BF16 shared experts on an SM120 GPU (RTX PRO 6000), whose MoE runner fuses the "
         "shared expert: `size of tensor a (3072) must match … (6144)`; ModelOpt's fusion gate fixed it.",
         nvfp4_bf16_shared_experts,
         {"sglang==0.5.20": [("QD403", "load-error", None)]}, fixed=["sglang==0.5.21"],
         deployment={"gpu": "rtx-pro-6000"}),
    Case("gptq-dynamic-negative-rule-on-quantized-module", ["vllm-project/vllm#53992"],
         "GPTQModel `dynamic` `-:` rule matching modules the checkpoint stores quantized: built unquantized, "
         "the packed qweight has nowhere to go.",
         gptq_dynamic_negative_module_stored_quantized,
         {"vllm==0.33.0": [("QD401", "load-error", "model.layers.0.mlp.down_proj")],
          "sglang==0.5.23": [("QD401", "silent-corruption", "model.layers.0.mlp.down_proj")]}),
]
