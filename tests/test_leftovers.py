"""Start-up and construction behaviours that ckptlint did not model before issue 15, each read in the
released source (cited in the target data)."""

from __future__ import annotations

from ckptlint.testing.models import MoeDims, glm5_quark_mxfp4
from helpers import build, run


def tg601(report, target):
    return [f.error_text for f in report.findings if f.target == target and f.code == "TG601"]


def test_glm4_two_shared_experts_assert_in_sglang_0_5_9(tmp_path):
    # Glm4MoeForCausalLM.determine_num_fused_shared_experts (0.5.9 only) asserts a single shared expert
    # when nothing else turns fusion off; 0.5.12+ fuse n_shared_experts slots; the server flag avoids it.
    d = MoeDims(arch="Glm4MoeForCausalLM", model_type="glm4_moe", num_hidden_layers=3, num_nextn_predict_layers=0,
                n_shared_experts=2, first_k_dense_replace=1, indexer=False)
    path = build(tmp_path, glm5_quark_mxfp4(d, with_mtp=False))
    rep = run(path, "sglang==0.5.9", "sglang==0.5.12", gpu="h100")
    assert tg601(rep, "sglang==0.5.9") == ["AssertionError: Only 1 fused shared expert is supported for Glm4MoeForCausalLM"]
    assert tg601(rep, "sglang==0.5.12") == []
    rep = run(path, "sglang==0.5.9", gpu="h100", shared_experts_fusion=False)
    assert tg601(rep, "sglang==0.5.9") == []
    d.n_shared_experts = 1
    rep = run(build(tmp_path / "one", glm5_quark_mxfp4(d, with_mtp=False)), "sglang==0.5.9", gpu="h100")
    assert tg601(rep, "sglang==0.5.9") == []


def test_sglang_refuses_dynamic_int8_moe_off_npu(tmp_path):
    # compressed-tensors W8A8 INT8 (per-channel weights, dynamic per-token inputs) on a Qwen3-MoE:
    # SGLang builds its FusedMoE only on NPU (0.5.9+: NotImplementedError; 0.5.5 has no INT8 MoE method
    # at all: RuntimeError); vLLM builds it.
    from ckptlint.testing.models import Layout, ct_config, dense_spec, qwen3_moe_dims

    def int8(m):
        n, k = m.shape
        return [(f"{m.path}.weight", "I8", (n, k)), (f"{m.path}.weight_scale", "BF16", (n, 1))]
    w = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel", "dynamic": False,
         "group_size": None, "block_structure": None, "actorder": None}
    a = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True,
         "group_size": None, "block_structure": None, "actorder": None}
    cfg = ct_config("int-quantized", weights=w, input_activations=a, ignore=["lm_head", "re:.*mlp.gate$"])
    d = qwen3_moe_dims(num_hidden_layers=1)
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed", "router") else int8)
    rep = run(build(tmp_path, dense_spec(d, layout, cfg)), "sglang==0.5.5", "sglang==0.5.9", "sglang==0.5.23",
              "vllm==0.33.0")
    for t in ("sglang==0.5.9", "sglang==0.5.23"):
        assert tg601(rep, t) == ["NotImplementedError: The W8A8Int8 Fused MoE scheme is implemented only for NPU for now."]
    assert tg601(rep, "sglang==0.5.5")[0].startswith("RuntimeError: Unsupported FusedMoe scheme")
    assert tg601(rep, "vllm==0.33.0") == []
    assert [f for f in rep.findings if f.target == "vllm==0.33.0" and f.severity.value == "error"] == []


def _qwen35_condgen(method: str):
    # Qwen3.5-MoE vision-language checkpoint: language model under `model.language_model.`, attention
    # and routers kept BF16 and listed by full name, experts quantized.
    from ckptlint.testing.models import Layout, Spec, ct_config, dense_spec, qwen3_moe_dims

    d = qwen3_moe_dims(arch="Qwen3_5MoeForConditionalGeneration", model_type="qwen3_5_moe", num_hidden_layers=2)
    fmt = "ct_fp8_channel" if method == "ct" else "fp8_block"
    layout = Layout(lambda m: fmt if m.category == "expert" else None)
    keep = [f"model.language_model.layers.{L}.{p}" for L in range(2)
            for p in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate")]
    if method == "ct":
        w = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel", "dynamic": False,
             "group_size": None, "block_structure": None, "actorder": None}
        qc = ct_config("float-quantized", weights=w, input_activations=None, ignore=["lm_head"] + keep)
    else:
        qc = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
              "modules_to_not_convert": ["lm_head"] + keep}
    spec = dense_spec(d, layout, qc)
    tensors = [(("model.language_model." + n[len("model."):]) if n.startswith("model.") else n, dt, s)
               for n, dt, s in spec.tensors]
    return Spec(spec.config, tensors)


def test_qwen35_conditional_generation_skip_list_mapper_in_sglang_0_5_9(tmp_path):
    # 0.5.9: the class inherits Qwen3-VL's hf_to_sglang_mapper, which rewrites compressed-tensors (and
    # ModelOpt) skip lists to `language_model.model.*` while the modules keep their checkpoint names:
    # full-name entries stop matching and the BF16 attention is built FP8 (same shape: cast, silent).
    # fp8 has no apply_weight_name_mapper in 0.5.9, so its list matches; 0.5.12 drops the mapper.
    rep = run(build(tmp_path / "ct", _qwen35_condgen("ct")), "sglang==0.5.9", "sglang==0.5.12")
    bad = {(f.code, f.consequence.value, f.module) for f in rep.findings if f.target == "sglang==0.5.9"
           and f.severity.value == "error"}
    assert ("QD401", "silent-corruption", "model.language_model.layers.0.self_attn.o_proj") in bad
    assert [f for f in rep.findings if f.target == "sglang==0.5.12" and f.severity.value == "error"] == []
    plan = rep.plans["sglang==0.5.9"]
    assert any(e.origin == "framework" and e.text.startswith("language_model.model.") for e in plan.skip_entries)
    rep = run(build(tmp_path / "fp8", _qwen35_condgen("fp8")), "sglang==0.5.9")
    # (fp8 in 0.5.9 never passes the fused mapping: the q/k/v entries cannot exclude qkv_proj, a separate matter)
    assert "model.language_model.layers.0.self_attn.o_proj" not in {f.module for f in rep.findings}


def test_qwen3_next_routes_any_name_containing_mtp_to_the_draft(tmp_path):
    # SGLang Qwen3NextForCausalLM.load_weights: the main model drops every name containing `mtp`, the
    # MTP draft keeps them and replaces every `mtp` by `model` (str.replace), not only a leading `mtp.`.
    from ckptlint.testing.models import Spec, qwen_mtp_spec

    spec = qwen_mtp_spec("Qwen3NextForCausalLM", method="quark")
    extra = [("model.layers.1.mlp.mtp_bias_proj.weight", "BF16", (128, 128)),
             ("mtp.layers.0.mlp.mtp_bias_proj.weight", "BF16", (128, 128))]
    path = build(tmp_path, Spec(spec.config, spec.tensors + extra, spec.hf_quant_config))
    off = run(path, "sglang==0.5.23", speculative=False).plans["sglang==0.5.23"]
    assert "model.layers.1.mlp.mtp_bias_proj.weight" in off.dropped
    on = run(path, "sglang==0.5.23").plans["sglang==0.5.23"]
    drafts = {rm.name for rm in on.modules.values() if rm.role == "draft"}
    assert "model.layers.0.mlp.model_bias_proj" in drafts  # both `mtp` replaced
    assert "model.layers.1.mlp.model_bias_proj" in drafts  # a main-model name routed to the draft
    vllm = run(path, "vllm==0.33.0", speculative=False).plans["vllm==0.33.0"]
    assert "model.layers.1.mlp.mtp_bias_proj.weight" not in vllm.dropped  # vLLM: prefix only
