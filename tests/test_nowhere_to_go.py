"""A checkpoint tensor with nowhere to go: an unquantized `.weight` where the target built a packed
module (GPTQ/AWQ `qweight`, compressed-tensors `weight_packed`), a packed tensor or scale where it
built an unquantized one, or a module the model class does not build. What happens is the model
loader's: per architecture, per release and per class of name (stacked shard, expert, other), as
the target data transcribes from the released loaders (SGLang has no completeness check in any
release; vLLM checks completeness only for models without a quantization config)."""

from __future__ import annotations

from ckptlint.testing.models import (DenseDims, Layout, dense_spec, gptq_config, mixtral_dims,
                                     qwen3_moe_dims)
from ckptlint.testing.published import qwen_vl_chat_int4
from helpers import build, run


def found(report, target, code="QD401"):
    return {(f.module, f.consequence.value, f.error_text) for f in report.findings
            if f.target == target and f.code == code}


def _float_o_proj_gptq(listed: bool, d: DenseDims | None = None):
    d = d or DenseDims(num_hidden_layers=1)
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or m.path.endswith("self_attn.o_proj")
                    else "gptq")
    extra = {"modules_in_block_to_quantize": [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
                                              ["self_attn.o_proj"], ["mlp.gate_proj", "mlp.up_proj"],
                                              ["mlp.down_proj"]]} if listed else {}
    return dense_spec(d, layout, gptq_config(**extra))


def test_float_weight_in_a_gptq_module_per_loader(tmp_path):
    # o_proj stored F16 but listed in modules_in_block_to_quantize: built GPTQ everywhere. Its
    # `.weight` has no parameter (the module holds qweight/qzeros/scales/g_idx).
    rep = run(build(tmp_path, _float_o_proj_gptq(listed=True)), "sglang==0.5.18", "vllm==0.11.0", "vllm==0.24.0",
              "vllm==0.26.0", "vllm==0.33.0")
    o = "model.layers.0.self_attn.o_proj"
    # SGLang's Llama loader warns and skips the name: the packed weights keep uninitialised memory.
    assert found(rep, "sglang==0.5.18") == {
        (o, "silent-corruption", "WARNING: Parameter model.layers.0.self_attn.o_proj.weight not found in params_dict")}
    # vLLM 0.11/0.24: LlamaModel's hand-written loader indexes the name (relative to the inner model).
    for t in ("vllm==0.11.0", "vllm==0.24.0"):
        assert found(rep, t) == {(o, "load-error", "KeyError: 'layers.0.self_attn.o_proj.weight'")}, t
    # 0.26+: AutoWeightsLoader raises on the unknown name.
    for t in ("vllm==0.26.0", "vllm==0.33.0"):
        ((mod, cons, text),) = found(rep, t)
        assert mod == o and cons == "load-error"
        assert text.startswith("ValueError: There is no module or parameter named 'layers.0.self_attn.o_proj.weight' "
                               "in LlamaModel.")
    # Without the list vLLM infers it from the dtypes (o_proj all-float: not listed) and loads;
    # SGLang has no inference.
    rep = run(build(tmp_path / "inferred", _float_o_proj_gptq(listed=False)), "sglang==0.5.18", "vllm==0.11.0",
              "vllm==0.33.0")
    assert {m for m, _, _ in found(rep, "sglang==0.5.18")} == {o}
    assert found(rep, "vllm==0.11.0") == found(rep, "vllm==0.33.0") == set()


def test_qwen3_dense_stacked_shard_raises_on_sglang(tmp_path):
    # Qwen3ForCausalLM.load_weights indexes the renamed fused parameter unguarded: a F16 q_proj in a
    # GPTQ qkv_proj is a KeyError (Llama's loader only warns).
    d = DenseDims(arch="Qwen3ForCausalLM", model_type="qwen3", num_hidden_layers=1, qk_norm=True)
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or m.path.endswith(("q_proj", "k_proj", "v_proj"))
                    else "gptq")
    rep = run(build(tmp_path, dense_spec(d, layout, gptq_config(
        modules_in_block_to_quantize=["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                      "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]))),
        "sglang==0.5.18", "vllm==0.24.0", "vllm==0.33.0")
    qkv = "model.layers.0.self_attn.qkv_proj"
    assert found(rep, "sglang==0.5.18") == {(qkv, "load-error", "KeyError: 'model.layers.0.self_attn.qkv_proj.weight'")}
    assert found(rep, "vllm==0.24.0") == {(qkv, "load-error", "KeyError: 'layers.0.self_attn.qkv_proj.weight'")}
    assert found(rep, "vllm==0.33.0") == {(qkv, "load-error", "AttributeError: 'QKVParallelLinear' object has no attribute 'data'")}


def test_float_experts_in_a_gptq_moe(tmp_path):
    # Qwen3-MoE, GPTQ everywhere but layer 0's experts stored F16. SGLang's gptq_marlin builds every
    # FusedMoE quantized (it never consults `dynamic` for a FusedMoE) and the Qwen3-MoE loader skips
    # names without a parameter silently; vLLM's expert branch raises, with a text that changed in
    # 0.26 and 0.28. No skip-list entry can exclude the FusedMoE on SGLang: the hint must not offer one.
    d = qwen3_moe_dims(num_hidden_layers=1, hidden=256, moe_intermediate=256)
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed", "router", "expert") else "gptq")
    cfg = gptq_config(dynamic={"-:.*mlp\\.gate$": {}})
    rep = run(build(tmp_path, dense_spec(d, layout, cfg)), "sglang==0.5.18", "vllm==0.24.0", "vllm==0.26.0",
              "vllm==0.28.0")
    moe = "model.layers.0.mlp.experts"
    ((m, cons, _),) = found(rep, "sglang==0.5.18")
    assert (m, cons) == (moe, "silent-corruption")
    (f,) = [f for f in rep.findings if f.target == "sglang==0.5.18" and f.code == "QD401"]
    assert "-:" not in f.hint and "never excludes a FusedMoE" in f.hint and f.data["suggested_entries"] == []
    assert found(rep, "vllm==0.24.0") == {(moe, "load-error", "KeyError: 'layers.0.mlp.experts.w13_weight'")}
    assert found(rep, "vllm==0.26.0") == {(moe, "load-error", "AttributeError: 'RoutedExperts' object has no attribute 'w13_weight'")}
    assert found(rep, "vllm==0.28.0") == {(moe, "load-error", "AttributeError: Layer model.layers.0.mlp.experts has no "
                                           "parameter 'w13_weight' for checkpoint weight "
                                           "'model.layers.0.mlp.experts.0.gate_proj.weight'")}


def test_mixtral_experts_raise_on_sglang(tmp_path):
    d = mixtral_dims(num_hidden_layers=1, hidden=256, moe_intermediate=256)
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed", "router", "expert") else "gptq")
    rep = run(build(tmp_path, dense_spec(d, layout, gptq_config())), "sglang==0.5.18")
    assert found(rep, "sglang==0.5.18") == {("model.layers.0.block_sparse_moe.experts", "load-error",
                                             "KeyError: 'model.layers.0.block_sparse_moe.experts.w13_weight'")}


def test_qwen_vl_vision_tower_has_no_module(tmp_path):
    # QWenLMHeadModel is the text model: SGLang's loader indexed every name (KeyError on the vision
    # tower) until 0.5.17 and skips them from 0.5.18; vLLM 0.11 serves it (the GPTQ module list is
    # inferred from the dtypes, so the F16 vision Linears stay unquantized) and dropped the class
    # after 0.23. The 4-D patch convolution, the embedding under `wte`, norms and biases are never
    # "built quantized".
    path = build(tmp_path, qwen_vl_chat_int4())
    rep = run(path, "sglang==0.5.5", "sglang==0.5.17", "sglang==0.5.18", "sglang==0.5.23", "vllm==0.11.0",
              "vllm==0.24.0", "vllm==0.33.0")
    for t in ("sglang==0.5.5", "sglang==0.5.17"):
        (f,) = [f for f in rep.findings if f.target == t and f.severity.value == "error"]
        assert f.code == "LD901" and f.error_text.startswith("KeyError: 'transformer.visual.")
    for t in ("sglang==0.5.18", "sglang==0.5.23", "vllm==0.11.0"):
        assert [f.code for f in rep.findings if f.target == t and f.severity.value == "error"] == [], t
    for t in ("vllm==0.24.0", "vllm==0.33.0"):
        (f,) = [f for f in rep.findings if f.target == t and f.severity.value == "error"]
        assert f.code == "TG601" and "was supported in vLLM until v0.23.0" in f.error_text
    plan = rep.plans["vllm==0.11.0"]
    kinds = {n: rm.kind for n, rm in plan.modules.items()}
    assert kinds["transformer.visual.conv1"] == "other" and kinds["transformer.wte"] == "embedding"
    assert not plan.modules["transformer.visual.transformer.resblocks.0.mlp.c_fc"].decision.quantized


def test_moe_wna16_fallback_ignores_dynamic_exclusion(tmp_path):
    # vLLM GPTQ: a FusedMoE the Marlin MoE kernel cannot take (here hidden 192, not a multiple of 128)
    # goes to MoeWNA16 before `dynamic` is consulted, so the `-:` rule that keeps layer 0's experts
    # BF16 does not apply: they are built quantized and their `.weight` has nowhere to go. With a
    # hidden size Marlin takes, the rule is honoured and the checkpoint loads.
    def spec(hidden):
        d = qwen3_moe_dims(num_hidden_layers=1, hidden=hidden, moe_intermediate=256, heads=3, kv_heads=1)
        layout = Layout(lambda m: None if m.category in ("lm_head", "embed", "router", "expert") else "gptq")
        return dense_spec(d, layout, gptq_config(group_size=64, dynamic={"-:.*mlp\\.experts$": {}, "-:.*mlp\\.gate$": {}}))
    rep = run(build(tmp_path / "192", spec(192)), "vllm==0.11.0", "vllm==0.33.0")
    for t in ("vllm==0.11.0", "vllm==0.33.0"):
        ((mod, cons, _),) = found(rep, t)
        assert (mod, cons) == ("model.layers.0.mlp.experts", "load-error"), t
        plan = rep.plans[t]
        assert "MoeWNA16" in plan.modules["model.layers.0.mlp.experts"].decision.reason
    rep = run(build(tmp_path / "256", spec(256)), "vllm==0.11.0", "vllm==0.33.0")
    assert found(rep, "vllm==0.11.0") == found(rep, "vllm==0.33.0") == set()
