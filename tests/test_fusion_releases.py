"""SGLang's shared-experts fusion decision, release by release, as read in each release's source
(deepseek_v2.py determine_num_fused_shared_experts / shared_experts_fusion_disable_reason,
glm4_moe.py, the SM100 MoE-runner choice in server_args.py / arg_groups/overrides.py)."""

from __future__ import annotations

from ckptlint.testing.models import MoeDims, deepseek_dims, glm5_quark_mxfp4, modelopt_nvfp4
from helpers import build, run


def fusion(rep, target):
    plan = rep.plans[target]
    return plan.fusion, plan.fusion_reason


def test_deepseek_384_experts_fuse_only_from_0_5_15(tmp_path):
    # 0.5.5-0.5.12: `n_routed_experts != 256` turns fusion off; 0.5.15 adds 384 with a Quark config.
    dims = deepseek_dims(num_hidden_layers=4, n_routed_experts=384)
    rep = run(build(tmp_path, glm5_quark_mxfp4(dims)), "sglang==0.5.12", "sglang==0.5.15")
    on, why = fusion(rep, "sglang==0.5.12")
    assert not on and why == "n_routed_experts=384 is not one of [256]"
    assert fusion(rep, "sglang==0.5.15")[0]


def test_deepseek_fusion_on_amd_only_from_0_5_9(tmp_path):
    # 0.5.5 requires CUDA sm80+; 0.5.9 also fuses on HIP gfx942+ (Quark MXFP4: MI355X by default).
    rep = run(build(tmp_path, glm5_quark_mxfp4(deepseek_dims(num_hidden_layers=4, n_routed_experts=256))),
              "sglang==0.5.5", "sglang==0.5.9")
    assert fusion(rep, "sglang==0.5.5") == (False, "not on rocm in this release")
    assert fusion(rep, "sglang==0.5.9")[0]


def test_hopper_nvfp4_keeps_fusion_with_the_default_runner_flag(tmp_path):
    # 0.5.20+ turn fusion off for modelopt_fp4 on Hopper only when --moe-runner-backend is marlin;
    # with the default `auto` the NVFP4 MoE method picks Marlin after the fusion decision.
    rep = run(build(tmp_path, modelopt_nvfp4(deepseek_dims(num_hidden_layers=4, n_routed_experts=256))),
              "sglang==0.5.20", "sglang==0.5.23", gpu="h100")
    assert fusion(rep, "sglang==0.5.20")[0] and fusion(rep, "sglang==0.5.23")[0]


def test_glm4_moe_fusion_by_release_and_gpu(tmp_path):
    # No Glm4Moe fusion in 0.5.5; from 0.5.12 the SM100 flashinfer_trtllm runner (NVFP4) turns it off.
    dims = MoeDims(arch="Glm4MoeForCausalLM", model_type="glm4_moe", num_hidden_layers=4, indexer=False)
    path = build(tmp_path, modelopt_nvfp4(dims))
    rep = run(path, "sglang==0.5.5", "sglang==0.5.9", "sglang==0.5.23")
    assert fusion(rep, "sglang==0.5.5") == (False, None)
    assert fusion(rep, "sglang==0.5.9")[0]
    on, why = fusion(rep, "sglang==0.5.23")
    assert not on and "flashinfer_trtllm" in why
    assert fusion(run(path, "sglang==0.5.23", gpu="h100"), "sglang==0.5.23")[0]


def _quark_main_shared_experts_mxfp4(dims, shared_entry=None):
    """Quark MXFP4 with the main layers' shared experts MXFP4 like the routed experts; the BF16 MTP
    layer excluded per module (its shared-expert entries included), as Quark exports it."""
    from ckptlint.testing.models import Layout, Spec, moe_modules, quark_mxfp4_config, unquantized_linear_names
    mods = moe_modules(dims)
    mtp = {dims.num_hidden_layers + i for i in range(dims.num_nextn_predict_layers)}
    layout = Layout(lambda m: "mxfp4" if m.category in ("expert", "shared_expert") and m.layer not in mtp
                    and (shared_entry is None or m.category == "expert") else None)
    names = unquantized_linear_names(mods, layout)
    if shared_entry is not None:  # the shared experts BF16, excluded by one entry instead of by name
        names = [n for n in names if ".shared_experts." not in n or any(f"layers.{L}." in n for L in mtp)]
        names.append(shared_entry)
    cfg = dims.config()
    cfg["quantization_config"] = quark_mxfp4_config(names)
    return Spec(cfg, layout.tensors(mods))


def test_quark_gate_counts_nextn_entries_until_0_5_20(tmp_path):
    # Quark's can_fuse_shared_expert tests exclude-entry text; 0.5.18 exempts only `mtp.*` entries,
    # so the NextN layer's `model.layers.N.mlp.shared_experts.*` entries veto fusion for the main
    # model; 0.5.20 exempts the NextN layers too (_is_draft_layer).
    dims = deepseek_dims(num_hidden_layers=4, n_routed_experts=256)
    rep = run(build(tmp_path, _quark_main_shared_experts_mxfp4(dims)), "sglang==0.5.18", "sglang==0.5.20")
    on, why = fusion(rep, "sglang==0.5.18")
    assert not on and why.startswith("Quark can_fuse_shared_expert: exclude entry `model.layers.4.mlp.shared_experts.")
    assert fusion(rep, "sglang==0.5.20")[0]
    assert not [f for f in rep.findings if f.code == "QD403"]


def test_quark_gate_misses_an_entry_that_does_not_spell_shared_expert(tmp_path):
    # `re:` entry excluding the shared experts without the text `shared_expert`: the gate does not
    # veto, SGLang fuses the BF16 shared experts into the MXFP4 FusedMoE (QD403).
    dims = deepseek_dims(num_hidden_layers=4, n_routed_experts=256)
    spec = _quark_main_shared_experts_mxfp4(dims, shared_entry=r"re:model\.layers\.[0-3]\.mlp\.shared_.*")
    rep = run(build(tmp_path, spec), "sglang==0.5.20")
    assert fusion(rep, "sglang==0.5.20")[0]
    qd403 = [f for f in rep.findings if f.code == "QD403"]
    assert qd403 and {f.consequence.value for f in qd403} == {"load-error"}


def test_expert_parallelism_turns_fusion_off_per_release_and_platform(tmp_path):
    # 0.5.5: EP > 1 turns DeepSeek fusion off on every platform; from 0.5.9 it still fuses on AMD.
    path = build(tmp_path, modelopt_nvfp4(deepseek_dims(num_hidden_layers=4, n_routed_experts=256)))
    rep = run(path, "sglang==0.5.9", "sglang==0.5.23", gpu="h100", ep=2, tp=2)
    assert fusion(rep, "sglang==0.5.9") == (False, "expert parallelism (EP 2) on cuda")
    quark = build(tmp_path, glm5_quark_mxfp4(deepseek_dims(num_hidden_layers=4, n_routed_experts=256)), name="q")
    rep = run(quark, "sglang==0.5.15", ep=2, tp=2)  # Quark MXFP4: MI355X (rocm) by default
    assert fusion(rep, "sglang==0.5.15")[0]


def _qwen3_next_nvfp4_bf16_shared_expert(shared_size=None):
    """Qwen3-Next-style ModelOpt NVFP4 (routed experts NVFP4) with a BF16 shared expert per layer,
    excluded as `*shared_expert*` in hf_quant_config.json."""
    from ckptlint.testing.models import qwen_mtp_spec
    spec = qwen_mtp_spec("Qwen3NextForCausalLM", with_mtp=False)
    cfg = spec.config
    H, I = cfg["hidden_size"], cfg["moe_intermediate_size"]
    cfg["shared_expert_intermediate_size"] = I if shared_size is None else shared_size
    S = cfg["shared_expert_intermediate_size"]
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}.mlp"
        spec.tensors += [(f"{p}.shared_expert.gate_proj.weight", "BF16", (S, H)),
                         (f"{p}.shared_expert.up_proj.weight", "BF16", (S, H)),
                         (f"{p}.shared_expert.down_proj.weight", "BF16", (H, S)),
                         (f"{p}.shared_expert_gate.weight", "BF16", (1, H))]
    spec.hf_quant_config["quantization"]["exclude_modules"] += ["*shared_expert*"]
    return spec


def test_qwen3_next_shared_expert_fusion_from_0_5_15(tmp_path):
    # Fused on Hopper with the default runner from 0.5.15 (not found in 0.5.12): the BF16 shared
    # expert lands in the NVFP4 FusedMoE (QD403) until ModelOpt's can_fuse_shared_expert (0.5.21)
    # refuses because an exclude entry names the shared expert; on B200 the flashinfer_trtllm runner
    # turns fusion off.
    path = build(tmp_path, _qwen3_next_nvfp4_bf16_shared_expert())
    rep = run(path, "sglang==0.5.12", "sglang==0.5.20", "sglang==0.5.21", gpu="h100")
    assert fusion(rep, "sglang==0.5.12")[0] is False
    assert fusion(rep, "sglang==0.5.20")[0]
    assert {f.consequence.value for f in rep.findings if f.code == "QD403" and f.target == "sglang==0.5.20"} == {"load-error"}
    assert fusion(rep, "sglang==0.5.21") == (
        False, "ModelOpt can_fuse_shared_expert: exclude entry `*shared_expert*` names a shared expert")
    assert not [f for f in rep.findings if f.code == "QD403" and f.target != "sglang==0.5.20"]
    b200 = run(path, "sglang==0.5.20")
    assert "flashinfer_trtllm" in fusion(b200, "sglang==0.5.20")[1]


def test_qwen3_next_fusion_needs_equal_intermediate_sizes(tmp_path):
    rep = run(build(tmp_path, _qwen3_next_nvfp4_bf16_shared_expert(shared_size=96)), "sglang==0.5.20", gpu="h100")
    on, why = fusion(rep, "sglang==0.5.20")
    assert not on and why == "shared_expert_intermediate_size=96 != moe_intermediate_size=64"


def test_compressed_tensors_int4_turns_deepseek_fusion_off_from_0_5_16(tmp_path):
    # is_wint4afp8_or_wint4a16_config (0.5.16+): a compressed-tensors W4A16 (symmetric INT4) Linear
    # scheme turns fusion off on every GPU.
    from ckptlint.testing.models import Layout, Spec, ct_config, moe_modules
    dims = deepseek_dims(num_hidden_layers=4, n_routed_experts=256)
    mods = moe_modules(dims)
    layout = Layout(lambda m: "ct_w4a16" if m.category in ("expert", "shared_expert", "dense_mlp") else None)
    cfg = dims.config()
    cfg["quantization_config"] = ct_config(ignore=["lm_head", "re:.*self_attn.*", "re:.*mlp.gate$"])
    rep = run(build(tmp_path, Spec(cfg, layout.tensors(mods))), "sglang==0.5.15", "sglang==0.5.16")
    assert fusion(rep, "sglang==0.5.15")[0]
    assert fusion(rep, "sglang==0.5.16") == (False, "not for w4a16 Linear layers (compressed-tensors)")
