"""Each simulation rule on at least one failing and one passing synthetic checkpoint.

RULE_CASES maps every target-scoped / config rule to the tests below; test_meta checks that every
registered rule (other than the reader's container rules, covered by the malformed-input corpus)
appears here.
"""

from __future__ import annotations


import pytest

from ckptlint.testing.models import (DenseDims, MoeDims, all_linears, awq_config, deepseek_dims, dense_spec,
                                    glm5_quark_mxfp4, modelopt_nvfp4)
from helpers import build, run

RULE_CASES = {"QD401", "QD402", "MT701", "MT702", "MT703", "TG601", "TG602", "TG603", "TG604", "CF311",
              "SC501", "SC502", "SC503", "SC504", "SC505", "QD403", "DP801", "DP802", "DP803", "DP804", "DP805",
              "DP806"}


def got_modules(report, target):
    return sorted((f.code, f.consequence.value, f.module) for f in report.findings
                  if f.target == target and not f.code.startswith("TG"))


def codes(report, target=None):
    return [(f.code, f.consequence.value, f.module) for f in report.findings
            if target is None or f.target == target]


# --- MT701 mtp-weights-missing ----------------------------------------------------------------
def test_mt701_glm5_without_mtp_layer(tmp_path):
    path = build(tmp_path, glm5_quark_mxfp4(with_mtp=False))
    rep = run(path, "sglang==0.5.23", "vllm==0.33.0", "vllm==0.24.0")
    by = {f.target: f for f in rep.findings if f.code == "MT701"}
    # SGLang: nothing checks completeness; the draft runs on uninitialised weights (sglang-loading.md §1.8).
    assert by["sglang==0.5.23"].consequence.value == "degraded" and by["sglang==0.5.23"].severity.value == "warning"
    # vLLM >= 0.30 GLM-5 (deepseek_v32 MTP): the short ValueError (docs/upstream-checks.md C12).
    assert by["vllm==0.33.0"].consequence.value == "load-error"
    assert by["vllm==0.33.0"].error_text == "ValueError: MTP speculative decoding layer 78 weights missing from checkpoint."
    # vLLM 0.24-0.28 route GLM-5 through DeepSeekMTP: the long message (docs/upstream-checks-2.md A5).
    assert by["vllm==0.24.0"].error_text.endswith("or disable speculative decoding.")
    assert all(f.module == "model.layers.78" for f in by.values())


def test_mt701_silent_before_the_check(tmp_path):
    # vLLM 0.11 had no missing-MTP check (PR #35548 added it): degraded, not an error.
    path = build(tmp_path, glm5_quark_mxfp4(deepseek_dims(num_hidden_layers=8), with_mtp=False))
    rep = run(path, "vllm==0.11.0")
    (f,) = [f for f in rep.findings if f.code == "MT701"]
    assert f.consequence.value == "degraded" and f.module == "model.layers.8"


def test_mt701_deepseek_long_message_and_other_index(tmp_path):
    path = build(tmp_path, glm5_quark_mxfp4(deepseek_dims(num_hidden_layers=30), with_mtp=False))
    rep = run(path, "vllm==0.33.0")
    (f,) = [f for f in rep.findings if f.code == "MT701"]
    assert f.error_text.startswith("ValueError: MTP speculative decoding layer 30 weights missing from checkpoint. "
                                   "The checkpoint may have been quantized without including the MTP layers.")


def test_mt701_passes_with_mtp_or_without_speculation(tmp_path):
    rep = run(build(tmp_path, glm5_quark_mxfp4()), "sglang==0.5.23", "vllm==0.33.0")
    assert not [f for f in rep.findings if f.code == "MT701"]
    rep = run(build(tmp_path, glm5_quark_mxfp4(with_mtp=False), name="nomtp"), "vllm==0.33.0", speculative=False)
    assert not [f for f in rep.findings if f.code == "MT701"]


# --- MT703 mtp-layer-count-unsupported ---------------------------------------------------------
def test_mt703_two_nextn_layers_on_sglang(tmp_path):
    # GLM-5 with both MTP layers stored: vLLM builds one draft layer per MTP layer; SGLang's NextN
    # draft (GlmMoeDsaForCausalLMNextN subclasses the DeepSeek one) asserts num_nextn_predict_layers
    # == 1 when it loads its weights (deepseek_weight_loader._initialize_nextn_conf).
    dims = MoeDims(num_hidden_layers=6, num_nextn_predict_layers=2)
    rep = run(build(tmp_path, glm5_quark_mxfp4(dims)), "sglang==0.5.23", "vllm==0.33.0")
    got = {f.target: f for f in rep.findings if f.code == "MT703"}
    assert set(got) == {"sglang==0.5.23"}
    f = got["sglang==0.5.23"]
    assert f.consequence.value == "load-error" and f.error_text == "AssertionError: Only 1 nextn layer is supported"
    assert f.data == {"declared": 2, "supported": 1} and f.file == "config.json"
    assert "num_nextn_predict_layers to 1" in f.hint
    # the loader stops before loading anything: no "layer missing" finding next to it
    assert not [x for x in rep.findings if x.code == "MT701" and x.target == "sglang==0.5.23"]


def test_mt703_deepseek_v3_since_sglang_0_5_5(tmp_path):
    dims = deepseek_dims(num_hidden_layers=4, num_nextn_predict_layers=3)
    rep = run(build(tmp_path, glm5_quark_mxfp4(dims)), "sglang==0.5.5", "sglang==0.5.23")
    got = {f.target: f for f in rep.findings if f.code == "MT703"}
    assert set(got) == {"sglang==0.5.5", "sglang==0.5.23"}
    assert all(f.error_text == "AssertionError: Only 1 nextn layer is supported" and f.data["declared"] == 3
               for f in got.values())


def test_mt703_passes_with_one_layer_or_without_speculation(tmp_path):
    rep = run(build(tmp_path, glm5_quark_mxfp4(deepseek_dims(num_hidden_layers=6))), "sglang==0.5.23")
    assert not [f for f in rep.findings if f.code == "MT703"]
    two = build(tmp_path, glm5_quark_mxfp4(deepseek_dims(num_hidden_layers=6, num_nextn_predict_layers=2)), name="two")
    assert not [f for f in run(two, "sglang==0.5.23", speculative=False).findings if f.code == "MT703"]


def test_absurd_mtp_layer_count_is_a_finding_not_a_crash(tmp_path):
    spec = glm5_quark_mxfp4(deepseek_dims(num_hidden_layers=6))
    spec.config["num_nextn_predict_layers"] = 10**30
    rep = run(build(tmp_path, spec), "sglang==0.5.23", "vllm==0.33.0")
    assert [f.code for f in rep.findings if f.target == "sglang==0.5.23" and f.code.startswith("MT")] == ["MT703"]
    # vLLM would build every declared layer: all but the stored one are missing (listed up to a bound)
    mt701 = [f for f in rep.findings if f.target == "vllm==0.33.0" and f.code == "MT701"]
    assert mt701 and all(f.consequence.value == "load-error" for f in mt701)


# --- MT702 mtp-quantized-draft-unquantized -----------------------------------------------------
def test_mt702_nvfp4_mtp_layer_on_sglang(tmp_path):
    dims = deepseek_dims()
    path = build(tmp_path, modelopt_nvfp4(dims, mtp_quantized=True))
    rep = run(path, "sglang==0.5.23")
    got = {f.module: f for f in rep.findings if f.code == "MT702"}
    # SGLang forces the ModelOpt NVFP4 draft unquantized (PR #7376): packed experts into BF16 slots.
    assert got["model.decoder.mlp.experts"].consequence.value == "load-error"
    assert got["model.decoder.mlp.experts"].error_text == (
        f"RuntimeError: The size of tensor a ({dims.hidden}) must match the size of tensor b ({dims.hidden // 2}) "
        "at non-singleton dimension 1")
    assert "model.decoder.mlp.shared_experts.gate_up_proj" in got
    assert not [f for f in rep.findings if f.code == "QD401" and f.module in got]


def test_mt702_passes_with_bf16_mtp_layer(tmp_path):
    path = build(tmp_path, modelopt_nvfp4(deepseek_dims()))
    rep = run(path, "sglang==0.5.23", "vllm==0.33.0")
    assert [f for f in rep.findings if f.severity.value == "error"] == []


# --- QD402 fused-shards-disagree ---------------------------------------------------------------
def _half_excluded_spec():
    spec = glm5_quark_mxfp4()
    excl = spec.config["quantization_config"]["exclude"]
    excl.remove("model.layers.5.self_attn.kv_a_proj_with_mqa")
    return spec


def test_qd402_q_a_listed_kv_a_not(tmp_path):
    path = build(tmp_path, _half_excluded_spec())
    rep = run(path, "sglang==0.5.15", "sglang==0.5.23", "vllm==0.33.0")
    got = {f.target: f for f in rep.findings if f.code == "QD402"}
    assert got["sglang==0.5.15"].module == "model.layers.5.self_attn.fused_qkv_a_proj_with_mqa"
    assert got["sglang==0.5.15"].error_text == (
        "ValueError: Found a different quantization schemes for ['q_a_proj', 'kv_a_proj_with_mqa'] in "
        "model.layers.5.self_attn.fused_qkv_a_proj_with_mqa. vLLM requires all to use the same scheme.")
    assert got["sglang==0.5.23"].error_text.endswith("SGLang requires all to use the same scheme.")
    assert got["vllm==0.33.0"].error_text == (
        "ValueError: Found different quantization schemes for the shards of "
        "model.layers.5.self_attn.fused_qkv_a_proj. vLLM requires all to use the same scheme.")
    assert all(f.consequence.value == "load-error" for f in got.values())


def test_qd402_passes_when_both_shards_listed(tmp_path):
    rep = run(build(tmp_path, glm5_quark_mxfp4()), "sglang==0.5.15", "vllm==0.33.0", speculative=False)
    assert not [f for f in rep.findings if f.code == "QD402"]


# --- QD401 main-model cases (the MTP cases are in test_mtp_exclude_prefix.py) --------------------
def test_qd401_shared_expert_not_excluded(tmp_path):
    spec = glm5_quark_mxfp4()
    excl = spec.config["quantization_config"]["exclude"]
    for p in ("gate_proj", "up_proj", "down_proj"):
        excl.remove(f"model.layers.10.mlp.shared_experts.{p}")
    rep = run(build(tmp_path, spec), "sglang==0.5.23", "vllm==0.33.0")
    assert ("QD401", "load-error", "model.layers.10.mlp.shared_experts.gate_up_proj") in codes(rep, "sglang==0.5.23")
    assert ("QD401", "load-error", "model.layers.10.mlp.shared_experts.down_proj") in codes(rep, "vllm==0.33.0")


def test_qd401_quantized_expert_excluded_reverse_direction(tmp_path):
    spec = glm5_quark_mxfp4()
    spec.config["quantization_config"]["exclude"].append("re:model\\.layers\\.20\\.mlp\\.experts.*")
    rep = run(build(tmp_path, spec), "sglang==0.5.23")
    (f,) = [f for f in rep.findings if f.code == "QD401"]
    assert f.module == "model.layers.20.mlp.experts" and f.data["direction"] == "quantized-into-unquantized"
    dims = MoeDims()
    # packed U8 [I, H/2] into an unquantized BF16 [I, H] slot
    assert f.error_text == (f"RuntimeError: The size of tensor a ({dims.hidden}) must match the size of tensor b "
                            f"({dims.hidden // 2}) at non-singleton dimension 1")
    assert "remove `re:model\\.layers\\.20\\.mlp\\.experts.*`" in f.hint


# --- TG601 / TG603 / TG602 -----------------------------------------------------------------------
def test_tg601_method_removed_from_registry(tmp_path):
    spec = glm5_quark_mxfp4(deepseek_dims(num_hidden_layers=6))
    spec.config["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    rep = run(build(tmp_path, spec), "vllm==0.33.0", "vllm==0.11.0")
    assert codes(rep, "vllm==0.33.0") == [("TG601", "load-error", None)]
    assert codes(rep, "vllm==0.11.0") == [("TG603", "hygiene", None)]  # supported there, not simulated


def test_tg603_unknown_quant_method_is_no_verdict_not_an_error(tmp_path):
    spec = glm5_quark_mxfp4()
    spec.config["quantization_config"] = {"quant_method": "hqq", "nbits": 4}
    rep = run(build(tmp_path, spec), "sglang==0.5.23", "vllm==0.33.0")
    assert codes(rep) == [("TG603", "hygiene", None)] * 2
    assert all(f.severity.value == "info" for f in rep.findings)


def test_tg604_unknown_architecture_gets_the_generic_simulation(tmp_path):
    spec = glm5_quark_mxfp4(mtp_exclude="fixed")
    spec.config["architectures"] = ["SomeNewForCausalLM"]
    rep = run(build(tmp_path, spec), "sglang==0.5.23")
    assert codes(rep) == [("TG604", "hygiene", None)]
    # ...and the generic rules still catch a fused q/k/v whose shards disagree.
    d = DenseDims(arch="SomeOtherForCausalLM")
    spec = dense_spec(d, all_linears("awq"), awq_config(modules_to_not_convert=["model.layers.0.self_attn.q_proj"]))
    rep = run(build(tmp_path, spec, name="dense"), "vllm==0.33.0")
    assert ("TG604", "hygiene", None) in codes(rep)
    assert ("QD402", "load-error", "model.layers.0.self_attn.qkv_proj") in codes(rep)


def test_tg601_tg603_pass_on_supported_checkpoint(tmp_path):
    rep = run(build(tmp_path, glm5_quark_mxfp4(mtp_exclude="fixed")), "sglang==0.5.23", "vllm==0.33.0")
    assert not [f for f in rep.findings if f.code.startswith("TG")]


def test_tg602_unverified_version(tmp_path):
    path = build(tmp_path, glm5_quark_mxfp4(mtp_exclude="fixed"))
    rep = run(path, "sglang==0.5.19", "vllm==0.40.0", "sglang==0.5.23")
    got = {f.target: f for f in rep.findings if f.code == "TG602"}
    assert got["sglang==0.5.19"].severity.value == "info" and got["sglang==0.5.19"].data["resolved"] == "sglang==0.5.18"
    assert got["vllm==0.40.0"].severity.value == "warning"
    assert "sglang==0.5.23" not in got


# --- CF311 quantization-config-invalid ---------------------------------------------------------
@pytest.mark.parametrize("qc,fragment", [
    (["quark"], "not an object"),
    ({"exclude": []}, "quant_method"),
    ({"quant_method": "quark", "exclude": "lm_head"}, "quantization_config.exclude"),
])
def test_cf311_invalid_quant_config(tmp_path, qc, fragment):
    spec = glm5_quark_mxfp4()
    spec.config["quantization_config"] = qc
    rep = run(build(tmp_path, spec), "sglang==0.5.23")
    cf = [f for f in rep.findings if f.code == "CF311"]
    assert len(cf) == 1 and fragment in cf[0].message and cf[0].file == "config.json"


def test_cf311_passes_on_valid_config(tmp_path):
    rep = run(build(tmp_path, glm5_quark_mxfp4()), "sglang==0.5.23")
    assert not [f for f in rep.findings if f.code == "CF311"]


# --- IX204 per target: what a missing shard does depends on the release -------------------------
def test_ix204_missing_shard_consequence_per_release(tmp_path):
    path = build(tmp_path, glm5_quark_mxfp4(mtp_exclude="fixed"), shards=3)
    (path / "model-00003-of-00003.safetensors").unlink()
    rep = run(path, "sglang==0.5.16", "sglang==0.5.17", "vllm==0.33.0")
    got = {f.target: f for f in rep.findings if f.code == "IX204"}
    # docs/upstream-checks.md A6: 0.5.15/0.5.16 silently load the present shards; 0.5.17 raises.
    assert got["sglang==0.5.16"].consequence.value == "silent-corruption"
    assert got["sglang==0.5.17"].consequence.value == "load-error"
    assert got["sglang==0.5.17"].error_text.startswith(
        "RuntimeError: model.safetensors.index.json references 1 shard file(s) missing from ")
    assert got["sglang==0.5.17"].error_text.endswith("(incomplete download?): ['model-00003-of-00003.safetensors']")
    assert got["vllm==0.33.0"].consequence.value == "silent-corruption"


def test_mt701_quiet_when_shards_are_lfs_pointers(tmp_path):
    # A CI checkout with Git LFS pointers: SF116 says the weights were not fetched; MT701 must not
    # claim the MTP layer is missing from a checkpoint whose tensors it could not see.
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    for shard in path.glob("*.safetensors"):
        shard.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 123\n")
    rep = run(path, "vllm==0.33.0")
    assert any(f.code == "SF116" for f in rep.findings)
    assert not [f for f in rep.findings if f.code == "MT701"]


# --- Qwen-style `mtp.` MTP modules --------------------------------------------------------------
def test_qwen3_next_mtp_prefix_excludes(tmp_path):
    # ModelOpt NVFP4 with `mtp.*` excluded and a BF16 MTP module. SGLang's Qwen3-Next draft renames
    # mtp.* to model.* for its quant lookups, so `mtp.*` never matches and the draft experts are built
    # NVFP4 (sglang-loading.md §1.6); vLLM keeps mtp.* prefixes and forces mtp.fc unquantized (#38832).
    from ckptlint.testing.models import qwen_mtp_spec
    rep = run(build(tmp_path, qwen_mtp_spec()), "sglang==0.5.23", "vllm==0.33.0")
    sg = [f for f in rep.findings if f.target == "sglang==0.5.23" and f.code == "QD401"]
    assert any(f.module == "model.layers.0.mlp.experts" and all(t.startswith("mtp.") for t in f.tensors) for f in sg)
    assert [f for f in rep.findings if f.target == "vllm==0.33.0" and f.severity.value == "error"] == []
    # without the MTP module: silent on both (no missing-weights check for these drafts)
    rep = run(build(tmp_path, qwen_mtp_spec(with_mtp=False), name="nomtp"), "sglang==0.5.23", "vllm==0.33.0")
    assert {(f.target, f.code, f.consequence.value) for f in rep.findings if f.code == "MT701"} == {
        ("sglang==0.5.23", "MT701", "degraded"), ("vllm==0.33.0", "MT701", "degraded")}


def test_qwen3_next_mtp_draft_described_from_sglang_0_5_9(tmp_path):
    # The renaming in Qwen3NextForCausalLM.load_weights(is_mtp=True) is the same code from 0.5.5 to
    # 0.5.23 (read release by release); 0.5.5's hybrid attention passes no quant prefix, so the data
    # starts at 0.5.9.
    from ckptlint.testing.models import qwen_mtp_spec
    rep = run(build(tmp_path, qwen_mtp_spec()), "sglang==0.5.9", "sglang==0.5.17", "sglang==0.5.23", "sglang==0.5.5")
    for t in ("sglang==0.5.9", "sglang==0.5.17"):
        assert got_modules(rep, t) == got_modules(rep, "sglang==0.5.23")
    assert "QD401" in {f.code for f in rep.findings if f.target == "sglang==0.5.9"}
    assert rep.plans["sglang==0.5.5"].generic and not rep.plans["sglang==0.5.9"].generic


def test_qwen3_5_mtp_draft_rules_by_sglang_release(tmp_path):
    # _mtp_quant_config, read release by release: 0.5.17-0.5.20 build the Quark draft unquantized
    # for any `mtp.*` exclude entry, so MXFP4 MTP experts land in BF16 slots; from 0.5.21 only an
    # `mtp.*` entry naming mlp.experts does, and the MXFP4 draft loads. Before 0.5.17 the
    # Qwen3_5MoeForCausalLM class is not registered (generic rules).
    from ckptlint.testing.models import qwen_mtp_spec
    rep = run(build(tmp_path, qwen_mtp_spec("Qwen3_5MoeForCausalLM", method="quark", mtp_quantized=True)),
              "sglang==0.5.21", "sglang==0.5.20", "sglang==0.5.17", "sglang==0.5.16")
    assert rep.plans["sglang==0.5.21"].modules["mtp.layers.0.mlp.experts"].decision.quantized
    for t in ("sglang==0.5.20", "sglang==0.5.17"):
        d = rep.plans[t].modules["mtp.layers.0.mlp.experts"].decision
        assert not d.quantized and d.forced_draft
        assert any(f.target == t and f.consequence.value == "load-error" and f.module == "mtp.layers.0.mlp.experts"
                   for f in rep.findings)
    assert not [f for f in rep.findings if f.target == "sglang==0.5.21" and f.severity.value == "error"]
    assert rep.plans["sglang==0.5.16"].generic


def test_qwen3_5_draft_without_packed_mapping_before_sglang_0_5_21(tmp_path):
    # Before 0.5.21 the Qwen3.5 draft has no packed_modules_mapping: an fp8 skip list naming the MTP
    # layer's q/k/v projections does not exclude its qkv_proj, which is built FP8 over BF16 weights.
    from ckptlint.testing.models import Layout, Module, Spec, qwen3_moe_dims, dense_modules, DenseDims
    d = qwen3_moe_dims(arch="Qwen3_5MoeForCausalLM", model_type="qwen3_5_moe", num_hidden_layers=2, hidden=128,
                       moe_intermediate=128)
    mods = dense_modules(d)
    mtp = [Module("mtp.fc", (d.hidden, 2 * d.hidden), "mtp_proj", 99)]
    for m in dense_modules(DenseDims(**{**d.__dict__, "num_hidden_layers": 1})):
        if m.path.startswith("model.layers.0."):
            mtp.append(Module("mtp." + m.path[len("model."):], m.shape, m.category, 99))
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed", "router", "norm", "mtp_proj")
                    or (m.layer == 99 and m.category == "attn") else "fp8_block")
    cfg = d.config()
    cfg["mtp_num_hidden_layers"] = 1
    excluded = [m.path for m in mods + mtp if m.category in ("router", "mtp_proj", "lm_head")
                or (m.layer == 99 and m.category == "attn")]
    cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                  "weight_block_size": [128, 128], "ignored_layers": excluded}
    rep = run(build(tmp_path, Spec(cfg, layout.tensors(mods + mtp))), "sglang==0.5.20", "sglang==0.5.21")
    assert rep.plans["sglang==0.5.20"].modules["mtp.layers.0.self_attn.qkv_proj"].decision.quantized
    assert not rep.plans["sglang==0.5.21"].modules["mtp.layers.0.self_attn.qkv_proj"].decision.quantized
    assert any(f.code == "QD401" and f.module == "mtp.layers.0.self_attn.qkv_proj" and f.target == "sglang==0.5.20"
               for f in rep.findings)


def test_qwen3_5_quark_mtp_quant_config(tmp_path):
    # SGLang Qwen3.5: the Quark draft is built unquantized only when an `mtp.*` exclude entry names
    # mlp.experts (_mtp_quant_config, #23146): all-BF16 MTP with per-module excludes loads; an MXFP4 MTP
    # MoE with its attention excluded is built MXFP4 and loads too.
    from ckptlint.testing.models import qwen_mtp_spec
    rep = run(build(tmp_path, qwen_mtp_spec("Qwen3_5MoeForCausalLM", method="quark")), "sglang==0.5.23", "vllm==0.33.0")
    assert [f for f in rep.findings if f.severity.value == "error"] == []
    plan = rep.plans["sglang==0.5.23"]
    assert plan.modules["mtp.layers.0.mlp.experts"].decision.forced_draft
    rep = run(build(tmp_path, qwen_mtp_spec("Qwen3_5MoeForCausalLM", method="quark", mtp_quantized=True), name="q"),
              "sglang==0.5.23", "vllm==0.33.0")
    assert [f for f in rep.findings if f.severity.value == "error"] == []
    assert rep.plans["sglang==0.5.23"].modules["mtp.layers.0.mlp.experts"].decision.quantized
