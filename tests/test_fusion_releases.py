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
