"""Every quant method: a correct synthetic checkpoint that is clean on every target that simulates the
method, and at least three broken variants (naming, layout, skip-list semantics) with the consequence
the frameworks' code predicts, per release. Facts cited: docs/frameworks/sglang.md (sglang.md#…),
docs/frameworks/vllm.md (vllm.md#…), docs/frameworks/formats.md, docs/upstream-checks*.md."""

from __future__ import annotations


import pytest

from ckptlint.targets import list_targets
from ckptlint.testing.models import (DenseDims, Layout, Spec, all_linears, awq_config, ct_config, deepseek_dims,
                                     dense_spec, gpt_oss_spec, gptq_config, mixtral_dims, modelopt_nvfp4,
                                     moe_modules, qwen3_moe_dims)
from helpers import build, run

ALL = [t.id for t in list_targets()]


def got(report, target, code=None):
    return {(f.code, f.consequence.value, f.module) for f in report.findings
            if f.target == target and (code is None or f.code == code) and f.severity.value != "info"}


def clean_where_simulated(report):
    """No warning/error on any target that simulates the method (TG603/TG601 say where it is not)."""
    for t in report.targets:
        fs = [f for f in report.findings if f.target == t.id]
        if any(f.code in ("TG601", "TG603") for f in fs):
            continue
        assert [f for f in fs if f.severity.value != "info"] == [], (t.id, [(f.code, f.module) for f in fs])


# ---------------------------------------------------------------------------------------------
# compressed-tensors (Llama W4A16 pack-quantized; Qwen3-MoE; Mixtral)
# ---------------------------------------------------------------------------------------------
def test_ct_correct_is_clean(tmp_path):
    rep = run(build(tmp_path, dense_spec(DenseDims(), all_linears("ct_w4a16"), ct_config())), *ALL)
    clean_where_simulated(rep)


def test_ct_parent_module_ignore_semantics_change_at_0_5_18(tmp_path):
    # Layer 1's MLP kept BF16 and ignored by its parent name. SGLang 0.5.9-0.5.16 match `ignore` by
    # raw substring, so children are ignored too: loads. 0.5.18 (PR #32736) and vLLM match exact or
    # dotted suffix / exact: the BF16 gate_up_proj/down_proj are built W4A16, whose parameters are
    # `weight_packed`/...: the `.weight` has nowhere to go. SGLang's Llama loader warns and skips it
    # (the packed weights stay uninitialised: silent); vLLM's fused layer fails on it (load error)
    # (sglang.md#compressed-tensors-ignore-matching; upstream already 0.5.17, the data switches at 0.5.18).
    d = DenseDims(num_hidden_layers=3)
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or (m.layer == 1 and m.category == "dense_mlp")
                    else "ct_w4a16")
    rep = run(build(tmp_path, dense_spec(d, layout, ct_config(ignore=["lm_head", "model.layers.1.mlp"]))),
              "sglang==0.5.16", "sglang==0.5.18", "vllm==0.33.0")
    assert got(rep, "sglang==0.5.16") == set()
    assert ("QD401", "silent-corruption", "model.layers.1.mlp.gate_up_proj") in got(rep, "sglang==0.5.18")
    assert ("QD401", "load-error", "model.layers.1.mlp.gate_up_proj") in got(rep, "vllm==0.33.0")


def test_ct_moe_expert0_rule(tmp_path):
    # Only expert 0's down_proj ignored (BF16): since PR #28878 the FusedMoE is decided from expert 0's
    # three projections, which disagree -> "All MoE projections need to have same quantization scheme"
    # (vllm.md#compressed-tensors-fusedmoe, sglang.md#compressed-tensors-ignore-matching). vLLM 0.11
    # ignored `ignore` for MoE: the BF16 shard meets a packed slot.
    q = qwen3_moe_dims()
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed", "router")
                    or m.path == "model.layers.0.mlp.experts.0.down_proj" else "ct_w4a16")
    cfg = ct_config(ignore=["lm_head", "re:.*mlp.gate$", "model.layers.0.mlp.experts.0.down_proj"])
    rep = run(build(tmp_path, dense_spec(q, layout, cfg)), "sglang==0.5.23", "vllm==0.11.0", "vllm==0.33.0")
    for t in ("sglang==0.5.23", "vllm==0.33.0"):
        (f,) = [f for f in rep.findings if f.target == t and f.code == "QD402"]
        assert f.module == "model.layers.0.mlp.experts"
        assert f.error_text == "ValueError: All MoE projections need to have same quantization scheme but found multiple"
    assert ("QD401", "load-error", "model.layers.0.mlp.experts") in got(rep, "vllm==0.11.0")


def test_ct_mixtral_expert_names_before_0_32(tmp_path):
    # Mixtral experts are w1/w3/w2. vLLM <= 0.31 probes expert 0 as gate_proj/up_proj/down_proj, so
    # ignore entries naming w1/w2/w3 never match and a BF16 MoE is built quantized; 0.32 probes the
    # model's own names (docs/upstream-checks-2.md A6).
    m = mixtral_dims(num_hidden_layers=1)
    layout = Layout(lambda mod: None if mod.category in ("lm_head", "embed", "router", "expert") else "ct_w4a16")
    ignore = ["lm_head", "re:.*block_sparse_moe.gate$"] + [f"model.layers.0.block_sparse_moe.experts.{e}.{p}"
                                                          for e in range(4) for p in ("w1", "w2", "w3")]
    rep = run(build(tmp_path, dense_spec(m, layout, ct_config(ignore=ignore))), "vllm==0.31.0", "vllm==0.32.0")
    assert ("QD401", "load-error", "model.layers.0.block_sparse_moe.experts") in got(rep, "vllm==0.31.0")
    assert got(rep, "vllm==0.32.0") == set()


def test_ct_layout_scale_grid(tmp_path):
    spec = dense_spec(DenseDims(), all_linears("ct_w4a16"), ct_config())
    spec.tensors = [(n, dt, (s[0], s[1] * 2) if n == "model.layers.0.mlp.down_proj.weight_scale" else s)
                    for n, dt, s in spec.tensors]
    rep = run(build(tmp_path, spec), "sglang==0.5.23", "vllm==0.33.0")
    for t in ("sglang==0.5.23", "vllm==0.33.0"):
        assert ("SC503", "load-error", "model.layers.0.mlp.down_proj") in got(rep, t)


# ---------------------------------------------------------------------------------------------
# GPTQ and AWQ (Llama)
# ---------------------------------------------------------------------------------------------
def test_gptq_correct_is_clean(tmp_path):
    rep = run(build(tmp_path, dense_spec(DenseDims(), all_linears("gptq"), gptq_config())), *ALL)
    clean_where_simulated(rep)


def test_gptq_dynamic_negative_rule(tmp_path):
    # `-:` keys of GPTQModel `dynamic` are re.match'ed against runtime prefixes: the quantized layer-0
    # MLP is built unquantized. SGLang's Llama loader warns and skips `qweight` (weights stay
    # uninitialised, silent); vLLM's AutoWeightsLoader routes the gate/up shard names to the fused
    # layer's load_weights (orig_to_new_stacked), which has no `qweight` and passes the module itself
    # to its weight_loader (linear.py MergedColumnParallelLinear.load_weights/weight_loader;
    # sglang.md#awq-and-gptq, vllm.md#gptq).
    spec = dense_spec(DenseDims(), all_linears("gptq"), gptq_config(dynamic={"-:model.layers.0.mlp.*": {}}))
    rep = run(build(tmp_path, spec), "sglang==0.5.23", "vllm==0.33.0")
    assert ("QD401", "silent-corruption", "model.layers.0.mlp.gate_up_proj") in got(rep, "sglang==0.5.23")
    f = [f for f in rep.findings if f.target == "vllm==0.33.0" and f.module == "model.layers.0.mlp.gate_up_proj"][0]
    assert f.consequence.value == "load-error"
    assert f.error_text == "AttributeError: 'MergedColumnParallelLinear' object has no attribute 'data'"
    down = [f for f in rep.findings if f.target == "vllm==0.33.0" and f.module == "model.layers.0.mlp.down_proj"][0]
    assert down.error_text.startswith(
        "ValueError: There is no module or parameter named 'layers.0.mlp.down_proj.qweight' in LlamaModel.")


def test_gptq_layout_and_group_size(tmp_path):
    spec = dense_spec(DenseDims(), all_linears("gptq"), gptq_config())
    spec.tensors = [(n, dt, (s[0] * 2, s[1]) if n == "model.layers.1.self_attn.o_proj.scales" else s)
                    for n, dt, s in spec.tensors]
    rep = run(build(tmp_path, spec), "vllm==0.33.0")
    assert ("SC503", "load-error", "model.layers.1.self_attn.o_proj") in got(rep, "vllm==0.33.0")
    # in-features 320 is not a multiple of group 128
    rep = run(build(tmp_path, dense_spec(DenseDims(intermediate=320), all_linears("gptq"), gptq_config()), name="g"),
              "sglang==0.5.23")
    assert ("SC505", "load-error", "model.layers.0.mlp.down_proj") in got(rep, "sglang==0.5.23")


def test_awq_correct_is_clean(tmp_path):
    rep = run(build(tmp_path, dense_spec(DenseDims(), all_linears("awq"), awq_config())), *ALL)
    clean_where_simulated(rep)


def test_awq_substring_skip_list(tmp_path):
    # AWQ modules_to_not_convert is a raw substring: "gate" also matches gate_up_proj (sglang.md#awq-and-gptq, vllm.md#awq).
    spec = dense_spec(DenseDims(), all_linears("awq"), awq_config(modules_to_not_convert=["gate"]))
    rep = run(build(tmp_path, spec), "sglang==0.5.23", "vllm==0.33.0")
    assert ("QD401", "silent-corruption", "model.layers.0.mlp.gate_up_proj") in got(rep, "sglang==0.5.23")
    assert ("QD401", "load-error", "model.layers.0.mlp.gate_up_proj") in got(rep, "vllm==0.33.0")


def test_awq_empty_skip_list_inferred_by_vllm_only(tmp_path):
    # vLLM 0.33 infers an empty modules_to_not_convert from the tensor dtypes; SGLang does not, so the
    # BF16 layer-0 MLP is built AWQ there: its `.weight` has no parameter (AWQ holds `qweight`), the
    # Llama loader warns and skips it and the packed weights stay uninitialised (vllm.md#awq).
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or (m.layer == 0 and m.category == "dense_mlp")
                    else "awq")
    rep = run(build(tmp_path, dense_spec(DenseDims(), layout, awq_config())), "sglang==0.5.23", "vllm==0.33.0")
    assert ("QD401", "silent-corruption", "model.layers.0.mlp.gate_up_proj") in got(rep, "sglang==0.5.23")
    assert got(rep, "vllm==0.33.0") == set()


def test_awq_layout(tmp_path):
    spec = dense_spec(DenseDims(), all_linears("awq"), awq_config())
    spec.tensors = [t for t in spec.tensors if t[0] != "model.layers.0.self_attn.o_proj.qzeros"]
    rep = run(build(tmp_path, spec), "vllm==0.33.0")
    assert ("SC501", "silent-corruption", "model.layers.0.self_attn.o_proj") in got(rep, "vllm==0.33.0")


# ---------------------------------------------------------------------------------------------
# gpt-oss MXFP4
# ---------------------------------------------------------------------------------------------
def test_mxfp4_correct_is_clean(tmp_path):
    rep = run(build(tmp_path, gpt_oss_spec()), *ALL)
    clean_where_simulated(rep)


def test_mxfp4_linears_are_never_quantized(tmp_path):
    # Mxfp4Config ignores modules_to_not_convert; linears always unquantized (sglang.md#mxfp4, vllm.md#mxfp4): an MXFP4
    # attention projection meets a BF16 slot.
    rep = run(build(tmp_path, gpt_oss_spec(attn_fmt="mxfp4")), "sglang==0.5.23", "vllm==0.33.0")
    assert ("QD401", "load-error", "model.layers.0.self_attn.qkv_proj") in got(rep, "sglang==0.5.23")
    assert ("QD401", "load-error", "model.layers.0.attn.qkv_proj") in got(rep, "vllm==0.33.0")  # mapper .self_attn. -> .attn.


@pytest.mark.parametrize("listed", [False, True])
def test_mxfp4_experts_are_always_quantized(tmp_path, listed):
    # BF16 experts under quant_method mxfp4 are built MXFP4 whatever modules_to_not_convert says.
    mtnc = ["model.layers.*.mlp.experts", "model.layers.0.mlp.experts"] if listed else None
    rep = run(build(tmp_path, gpt_oss_spec(experts_fmt="bf16", modules_to_not_convert=mtnc)), "vllm==0.33.0")
    assert ("QD401", "load-error", "model.layers.0.mlp.experts") in got(rep, "vllm==0.33.0")


# ---------------------------------------------------------------------------------------------
# ModelOpt (DeepSeek-style NVFP4; Llama FP8)
# ---------------------------------------------------------------------------------------------
SMALL_DS = dict(num_hidden_layers=4, hidden=256, moe_intermediate=128, intermediate=256, q_lora_rank=128,
                kv_lora_rank=128, qk_nope=64, qk_rope=64, v_head=64, heads=2)


def test_modelopt_correct_is_clean(tmp_path):
    # Clean everywhere except vLLM 0.11, whose ModelOpt NVFP4 config builds every FusedMoE NVFP4 (no
    # exclusion test for FusedMoE): the BF16 experts of the MTP layer, excluded by `model.layers.4*`,
    # fail to load into the draft (with speculative decoding on, the default when config.json declares it).
    rep = run(build(tmp_path, modelopt_nvfp4(deepseek_dims(**SMALL_DS))), *ALL)
    old = [f for f in rep.findings if f.target == "vllm==0.11.0" and f.severity.value == "error"]
    assert [(f.code, f.module) for f in old] == [("QD401", "model.layers.4.mlp.experts")]
    rep.findings = [f for f in rep.findings if f not in old]
    clean_where_simulated(rep)


def test_modelopt_experts_star_glob_misses_the_fused_moe_on_sglang(tmp_path):
    # `…mlp.experts.*` never fullmatches the FusedMoE prefix `…mlp.experts` in SGLang's glob matcher
    # (sglang.md#modelopt-exclude-matching): BF16 experts built NVFP4. vLLM's is_layer_skipped first applies the reversed
    # substring rule for experts (the prefix is a substring of an entry containing "experts", vllm.md#layer-skip-test):
    # the MoE is excluded there and loads.
    d = deepseek_dims(**SMALL_DS)
    spec = modelopt_nvfp4(d)
    spec.hf_quant_config["quantization"]["exclude_modules"].append("model.layers.3.mlp.experts.*")
    bf16 = {f"model.layers.3.mlp.experts.{e}.{p}" for e in range(d.n_routed_experts) for p in ("gate_proj", "up_proj", "down_proj")}
    mods = {m.path: m for m in moe_modules(d)}
    tensors = [t for t in spec.tensors if t[0].rsplit(".", 1)[0] not in bf16]
    tensors += [(f"{p}.weight", "BF16", mods[p].shape) for p in sorted(bf16)]
    rep = run(build(tmp_path, Spec(spec.config, tensors, spec.hf_quant_config)), "sglang==0.5.23", "vllm==0.33.0")
    assert ("QD401", "load-error", "model.layers.3.mlp.experts") in got(rep, "sglang==0.5.23")
    assert got(rep, "vllm==0.33.0") == set()


def test_modelopt_fp8_config_json_exclude_modules_key(tmp_path):
    # config.json form: SGLang's ModelOpt FP8 reads only `ignore` (sglang.md#modelopt-config-keys); vLLM reads
    # `exclude_modules` when `ignore` is absent only from 0.33 (docs/upstream-checks-2.md A3). BF16 into a
    # same-shape FP8 parameter is cast silently.
    d = DenseDims()
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or m.layer == 0 else "fp8_tensor")
    cfg = {"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": ["lm_head", "model.layers.0*"]}
    rep = run(build(tmp_path, dense_spec(d, layout, cfg)), "sglang==0.5.23", "vllm==0.32.0", "vllm==0.33.0")
    assert ("QD401", "silent-corruption", "model.layers.0.self_attn.qkv_proj") in got(rep, "sglang==0.5.23")
    assert ("QD401", "silent-corruption", "model.layers.0.self_attn.qkv_proj") in got(rep, "vllm==0.32.0")
    assert got(rep, "vllm==0.33.0") == set()


def test_modelopt_missing_nvfp4_scale(tmp_path):
    # A missing NVFP4 weight_scale: vLLM 0.33 checks it (NaN placeholder) and raises; SGLang loads garbage.
    spec = modelopt_nvfp4(deepseek_dims(**SMALL_DS))
    spec.tensors = [t for t in spec.tensors if t[0] != "model.layers.0.mlp.down_proj.weight_scale"]
    rep = run(build(tmp_path, spec), "sglang==0.5.23", "vllm==0.33.0")
    assert ("SC501", "silent-corruption", "model.layers.0.mlp.down_proj") in got(rep, "sglang==0.5.23")
    f = [f for f in rep.findings if f.target == "vllm==0.33.0" and f.code == "SC501"][0]
    assert f.consequence.value == "load-error" and "was never loaded (still NaN)" in f.error_text


# ---------------------------------------------------------------------------------------------
# fp8 (DeepSeek block FP8, the deepseek-ai/DeepSeek-R1 config)
# ---------------------------------------------------------------------------------------------
def _fp8_spec(**over):
    d = deepseek_dims(**SMALL_DS)
    cfg = d.config()
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                                  "weight_block_size": [128, 128], **over}
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed", "router", "mtp_proj", "plain") else "fp8_block")
    return Spec(cfg, layout.tensors(moe_modules(d)))


def test_fp8_correct_is_clean(tmp_path):
    rep = run(build(tmp_path, _fp8_spec()), *ALL)
    clean_where_simulated(rep)


def test_fp8_block_scale_named_weight_scale(tmp_path):
    # Block FP8 saved as `weight_scale` while the fp8 method registers `weight_scale_inv` (vLLM #43564):
    # vLLM's DeepSeek loader raises KeyError. SGLang's DeepSeek loader indexes the stacked gate/up names
    # unguarded (KeyError too); other names warn and are skipped (placeholder scales) until 0.5.22,
    # while 0.5.23 renames a `weight_scale` to the registered `weight_scale_inv` for them.
    spec = _fp8_spec()
    spec.tensors = [(n.replace("weight_scale_inv", "weight_scale"), dt, s) for n, dt, s in spec.tensors]
    rep = run(build(tmp_path, spec), "sglang==0.5.22", "sglang==0.5.23", "vllm==0.33.0")
    for t in ("sglang==0.5.22", "sglang==0.5.23"):
        assert ("SC502", "load-error", "model.layers.0.mlp.gate_up_proj") in got(rep, t)
    assert ("SC502", "silent-corruption", "model.layers.0.self_attn.o_proj") in got(rep, "sglang==0.5.22")
    assert "model.layers.0.self_attn.o_proj" not in {m for _, _, m in got(rep, "sglang==0.5.23")}
    f = [f for f in rep.findings if f.target == "vllm==0.33.0" and f.module == "model.layers.0.mlp.gate_up_proj"][0]
    # DeepseekV2Model.load_weights (0.24+) names parameters relative to the inner model
    assert f.code == "SC502" and f.error_text == "KeyError: 'layers.0.mlp.gate_up_proj.weight_scale'"
    assert f.data["module_count"] > 1  # the same defect in every layer is one finding


def test_fp8_half_excluded_fused_module(tmp_path):
    spec = _fp8_spec(modules_to_not_convert=["model.layers.0.mlp.gate_proj"])
    spec.tensors = [(n, "BF16", s) if n == "model.layers.0.mlp.gate_proj.weight" else (n, dt, s)
                    for n, dt, s in spec.tensors if n != "model.layers.0.mlp.gate_proj.weight_scale_inv"]
    rep = run(build(tmp_path, spec), "sglang==0.5.23", "vllm==0.33.0")
    for t in ("sglang==0.5.23", "vllm==0.33.0"):
        (f,) = [f for f in rep.findings if f.target == t and f.code == "QD402"]
        assert f.error_text.startswith("ValueError: Detected some but not all shards of model.layers.0.mlp.gate_up_proj")


def test_fp8_block_scale_grid(tmp_path):
    spec = _fp8_spec()
    spec.tensors = [(n, dt, (s[0] * 2, s[1] * 2) if n == "model.layers.1.self_attn.o_proj.weight_scale_inv" else s)
                    for n, dt, s in spec.tensors]
    rep = run(build(tmp_path, spec), "vllm==0.33.0")
    assert ("SC503", "load-error", "model.layers.1.self_attn.o_proj") in got(rep, "vllm==0.33.0")


# ---------------------------------------------------------------------------------------------
# Quark (beyond the MTP cases of test_mtp_exclude_prefix.py)
# ---------------------------------------------------------------------------------------------
def test_quark_llama_qkv_shards_need_a_packed_mapping(tmp_path):
    # Attention kept BF16 and excluded per shard (q/k/v). SGLang's LlamaForCausalLM declares no
    # packed_modules_mapping and Quark only gets gate_up_proj / fused_qkv_a injected
    # (sglang.md#quark-exclude-matching, sglang.md#packed-modules-mapping):
    # the fused qkv_proj is built MXFP4 -> shape error. vLLM's Llama maps qkv_proj to its shards: loads.
    from ckptlint.testing.models import dense_modules, quark_mxfp4_config, unquantized_linear_names
    d = DenseDims()
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed", "attn") else "mxfp4")
    cfg = d.config()
    cfg["quantization_config"] = quark_mxfp4_config(unquantized_linear_names(dense_modules(d), layout))
    rep = run(build(tmp_path, Spec(cfg, layout.tensors(dense_modules(d)))), "sglang==0.5.23", "vllm==0.33.0")
    assert ("QD401", "load-error", "model.layers.0.self_attn.qkv_proj") in got(rep, "sglang==0.5.23")
    assert got(rep, "vllm==0.33.0") == set()


def test_quark_layout_nvfp4_grid_on_mxfp4_experts(tmp_path):
    from ckptlint.testing.models import glm5_quark_mxfp4
    spec = glm5_quark_mxfp4()
    spec.tensors = [(n, dt, (s[0], s[1] * 2) if ".mlp.experts." in n and n.endswith("weight_scale") else s)
                    for n, dt, s in spec.tensors]
    rep = run(build(tmp_path, spec), "sglang==0.5.23", "vllm==0.33.0")
    for t in ("sglang==0.5.23", "vllm==0.33.0"):
        assert any(c == "SC503" and m.endswith("mlp.experts") for c, _, m in got(rep, t))


# ---------------------------------------------------------------------------------------------
# Older vLLM releases (read in each release's source; docs: the target data's sources)
# ---------------------------------------------------------------------------------------------
def test_gptq_dynamic_simulated_from_vllm_0_30(tmp_path):
    # get_dynamic_override is the same code in 0.24-0.33 (and in 0.11's gptq_marlin); 0.24-0.28 also
    # load g_idx (used with desc_act), so GPTQ is simulated from 0.11.
    spec = dense_spec(DenseDims(), all_linears("gptq"), gptq_config(dynamic={"-:model.layers.0.mlp.*": {}}))
    rep = run(build(tmp_path, spec), "vllm==0.30.0", "vllm==0.28.0", "vllm==0.11.0")
    for t in ("vllm==0.30.0", "vllm==0.28.0", "vllm==0.11.0"):
        assert ("QD401", "load-error", "model.layers.0.mlp.gate_up_proj") in got(rep, t)
    (f,) = [f for f in rep.findings if f.target == "vllm==0.11.0" and f.module == "model.layers.0.mlp.gate_up_proj"]
    assert f.error_text == "KeyError: 'layers.0.mlp.gate_up_proj.qweight'"  # LlamaModel's hand-written loader


def test_awq_simulated_from_vllm_0_24(tmp_path):
    # 0.24 has 0.33's substring match with the shard-agreement error and the dtype inference
    # (skip_with_substr=True); 0.11's awq_marlin tests the fused prefix as a plain substring: `gate`
    # is in `gate_up_proj` there too.
    spec = dense_spec(DenseDims(), all_linears("awq"), awq_config(modules_to_not_convert=["gate"]))
    rep = run(build(tmp_path, spec), "vllm==0.24.0", "vllm==0.11.0")
    for t in ("vllm==0.24.0", "vllm==0.11.0"):
        assert ("QD401", "load-error", "model.layers.0.mlp.gate_up_proj") in got(rep, t)
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or (m.layer == 0 and m.category == "dense_mlp")
                    else "awq")
    rep = run(build(tmp_path, dense_spec(DenseDims(), layout, awq_config()), name="infer"), "vllm==0.24.0")
    assert got(rep, "vllm==0.24.0") == set()


def test_modelopt_mixed_precision_in_hf_quant_config_refused_before_vllm_0_33(tmp_path):
    # _normalize_quantization_config maps only FP8 and NVFP4 in 0.24-0.32: the nested MIXED_PRECISION
    # form fails at start-up; 0.33 maps it to modelopt_mixed; 0.11 has no MIXED_PRECISION at all.
    spec = dense_spec(DenseDims(), all_linears("nvfp4"), None)
    layers = sorted({n.rsplit(".", 1)[0] for n, _, _ in spec.tensors if n.endswith(".weight_scale")})
    spec.hf_quant_config = {"producer": {"name": "modelopt", "version": "0.37.0"},
                            "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None,
                                             "exclude_modules": ["lm_head"],
                                             "quantized_layers": {m: {"quant_algo": "NVFP4", "group_size": 16}
                                                                  for m in layers}}}
    rep = run(build(tmp_path, spec), "vllm==0.30.0", "vllm==0.24.0", "vllm==0.33.0", "vllm==0.11.0")
    for t in ("vllm==0.30.0", "vllm==0.24.0"):
        (f,) = [f for f in rep.findings if f.target == t]
        assert f.code == "TG601" and f.consequence.value == "load-error"
        assert f.error_text == "ValueError: Unknown ModelOpt quant algo: MIXED_PRECISION"
    assert [f.code for f in rep.findings if f.target == "vllm==0.11.0"] == ["TG601"]
    assert not [f for f in rep.findings if f.target == "vllm==0.33.0" and f.code in ("TG601", "TG603")]


def test_gptq_quantized_layers_inferred_from_dtypes_on_vllm(tmp_path):
    # vLLM (AutoGPTQConfig.maybe_update_config): without modules_in_block_to_quantize, the modules
    # holding a non-float tensor are the quantized ones, so a BF16 layer-0 MLP is built BF16 and loads.
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or (m.layer == 0 and m.category == "dense_mlp")
                    else "gptq")
    rep = run(build(tmp_path, dense_spec(DenseDims(), layout, gptq_config())), "vllm==0.33.0", "vllm==0.30.0")
    assert got(rep, "vllm==0.33.0") == set() and got(rep, "vllm==0.30.0") == set()
    plan = rep.plans["vllm==0.33.0"]
    assert plan.modules["model.layers.0.mlp.gate_up_proj"].decision.reason.startswith(
        "not listed in modules_in_block_to_quantize (inferred from the tensor dtypes)")


def test_gptq_modules_in_block_to_quantize(tmp_path):
    # An explicit list (nested, as GPTQ writes it) that leaves out down_proj: vLLM builds down_proj
    # unquantized and the stored qweight has no parameter; listing gate_proj without up_proj splits
    # the fused gate_up_proj (ValueError in is_layer_gptq_quantized).
    attn = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"]
    spec = dense_spec(DenseDims(), all_linears("gptq"),
                      gptq_config(modules_in_block_to_quantize=[attn, ["mlp.gate_proj", "mlp.up_proj"]]))
    rep = run(build(tmp_path, spec), "vllm==0.33.0")
    assert ("QD401", "load-error", "model.layers.0.mlp.down_proj") in got(rep, "vllm==0.33.0")
    assert ("QD401", "load-error", "model.layers.0.mlp.gate_up_proj") not in got(rep, "vllm==0.33.0")
    spec = dense_spec(DenseDims(), all_linears("gptq"),
                      gptq_config(modules_in_block_to_quantize=[attn, ["mlp.gate_proj", "mlp.down_proj"]]))
    rep = run(build(tmp_path, spec, name="split"), "vllm==0.33.0")
    (f,) = [f for f in rep.findings if f.code == "QD402" and f.module == "model.layers.0.mlp.gate_up_proj"]
    assert f.error_text == ("ValueError: Detected some but not all shards of model.layers.0.mlp.gate_up_proj are "
                            "quantized. All shards of fused layers to have the same precision.")


def test_gptq_act_order_refused_by_vllm_from_0_30(tmp_path):
    # AutoGPTQConfig (normalize_and_validate_gptq_desc_act, 0.30+): desc_act=True with groups fails at
    # start-up; with one group per channel (group_size -1) it is a no-op; a `dynamic` `+:` rule that
    # turns it on fails too. 0.24-0.28 still support act-order (not simulated there); SGLang loads it.
    spec = dense_spec(DenseDims(), all_linears("gptq"), gptq_config(desc_act=True))
    rep = run(build(tmp_path, spec), "vllm==0.33.0", "vllm==0.30.0", "vllm==0.28.0", "sglang==0.5.23")
    for t in ("vllm==0.33.0", "vllm==0.30.0"):
        (f,) = [f for f in rep.findings if f.target == t]
        assert f.code == "TG601" and f.consequence.value == "load-error"
        assert f.error_text == ("ValueError: GPTQ group activation ordering (desc_act=True) is no longer supported. "
                                "Use a checkpoint with static activation ordering or desc_act=False.")
    assert not [f for f in rep.findings if f.target in ("vllm==0.28.0", "sglang==0.5.23") and f.code == "TG601"]
    rep = run(build(tmp_path, dense_spec(DenseDims(), all_linears("gptq"), gptq_config(desc_act=True, group_size=-1)),
                    name="perchannel"), "vllm==0.33.0")
    assert not [f for f in rep.findings if f.code == "TG601"]
    spec = dense_spec(DenseDims(), all_linears("gptq"), gptq_config(dynamic={"+:model.layers.1.*": {"desc_act": True}}))
    rep = run(build(tmp_path, spec, name="dyn"), "vllm==0.33.0")
    (f,) = [f for f in rep.findings if f.code == "TG601"]
    assert "enabled by dynamic rule '+:model.layers.1.*'" in f.error_text


def test_gptq_bits_and_symmetry_vllm_supports(tmp_path):
    # AutoGPTQConfig.TYPE_MAP (0.30-0.33): only (4, sym) and (8, sym); 3-bit or asymmetric GPTQ stops
    # vLLM at start-up.
    spec = dense_spec(DenseDims(), all_linears("gptq"), gptq_config(sym=False))
    rep = run(build(tmp_path, spec), "vllm==0.33.0", "vllm==0.30.0")
    for t in ("vllm==0.33.0", "vllm==0.30.0"):
        (f,) = [f for f in rep.findings if f.target == t]
        assert f.code == "TG601" and f.error_text == "ValueError: Unsupported quantization config: bits=4, sym=False"
    cfg = gptq_config(bits=3)
    rep = run(build(tmp_path, dense_spec(DenseDims(), all_linears("gptq"), cfg), name="b3"), "vllm==0.33.0")
    (f,) = [f for f in rep.findings if f.code == "TG601"]
    assert f.error_text == "ValueError: Unsupported quantization config: bits=3, sym=True"


def test_compressed_tensors_group_actorder_refused_by_vllm_from_0_30(tmp_path):
    # compressed_tensors.py (0.30+): a config group whose weights use actorder "group"/"dynamic"
    # stops vLLM at start-up; 0.28 and SGLang load it.
    spec = dense_spec(DenseDims(), all_linears("ct_w4a16"), ct_config(weights={
        "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128, "actorder": "group"}))
    rep = run(build(tmp_path, spec), "vllm==0.33.0", "vllm==0.30.0", "vllm==0.28.0", "sglang==0.5.23")
    for t in ("vllm==0.33.0", "vllm==0.30.0"):
        (f,) = [f for f in rep.findings if f.target == t]
        assert f.code == "TG601" and f.error_text.startswith("ValueError: Compressed-tensors group/dynamic activation ordering")
    assert not [f for f in rep.findings if f.code == "TG601" and f.target in ("vllm==0.28.0", "sglang==0.5.23")]
    static = dense_spec(DenseDims(), all_linears("ct_w4a16"), ct_config(weights={
        "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128, "actorder": "static"}))
    assert not [f for f in run(build(tmp_path, static, name="s"), "vllm==0.33.0").findings if f.code == "TG601"]


def test_fbgemm_fp8_needs_the_deprecation_flag_on_vllm(tmp_path):
    spec = dense_spec(DenseDims(), all_linears("fp8_block"), {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                                                             "modules_to_not_convert": ["lm_head"]})
    rep = run(build(tmp_path, spec), "vllm==0.33.0")
    (f,) = [f for f in rep.findings if f.code == "TG601"]
    assert f.error_text == ("ValueError: ('The quantization method %s is deprecated and will be removed in future "
                            "versions of vLLM. To bypass, set `--allow-deprecated-quantization`.', 'fbgemm_fp8')")


def test_sglang_gptq_only_through_marlin_from_0_5_20(tmp_path):
    # 0.5.20 dropped plain `gptq` from the registry: a config the gptq_marlin override cannot take
    # (asymmetric, 3-bit, group_size 256) fails with "Unknown quantization method: gptq"; 0.5.18 runs
    # it with the plain GPTQ kernel.
    for name, cfg in (("asym", gptq_config(sym=False)), ("b3", gptq_config(bits=3)), ("g256", gptq_config(group_size=256))):
        rep = run(build(tmp_path, dense_spec(DenseDims(), all_linears("gptq"), cfg), name=name),
                  "sglang==0.5.20", "sglang==0.5.23", "sglang==0.5.18")
        for t in ("sglang==0.5.20", "sglang==0.5.23"):
            (f,) = [f for f in rep.findings if f.target == t and f.code == "TG601"]
            assert f.error_text.startswith("ValueError: Unknown quantization method: gptq. Must be one of ["), name
        assert not [f for f in rep.findings if f.target == "sglang==0.5.18" and f.code == "TG601"], name
    rep = run(build(tmp_path, dense_spec(DenseDims(), all_linears("gptq"), gptq_config()), name="ok"), "sglang==0.5.23")
    assert not [f for f in rep.findings if f.code == "TG601"]
