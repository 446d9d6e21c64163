"""The motivating bug, end to end through files on disk: a GLM-5-style Quark MXFP4 checkpoint whose
BF16 MTP (NextN) layer is excluded only under its checkpoint names `model.layers.{N}.*`.

Facts these tests encode (docs/frameworks/sglang.md#deepseek-nextn-quant-config, #glm-5-nextn;
docs/frameworks/vllm.md#deepseek-and-glm-5-mtp; docs/upstream-checks.md):
* SGLang <= 0.5.15 routes the GLM-5 draft through DeepseekV3ForCausalLMNextN, whose only skip-list
  mapper is the hard-coded substring `model.layers.61` -> `model.decoder`; the draft's modules are
  `model.decoder.*` and `model.eh_proj` (a Quark-aware ReplicatedLinear), so `model.layers.78.*`
  excludes miss and BF16 weights meet MXFP4 slots: `eh_proj` fails in ReplicatedLinear.weight_loader,
  the experts in FusedMoE._load_w13 (`The size of tensor a (H/2) must match the size of tensor b (H)`).
* SGLang >= 0.5.16 (PR #30265) copies literal `model.layers.{N}.` entries to the runtime names and adds
  `model.decoder.mlp.experts`: loads.
* vLLM builds MTP modules under their checkpoint prefixes: 0.33 matches, and excludes the FusedMoE
  from per-expert entries (check_children, PR #46757); 0.11 does not (FusedMoE built MXFP4).
"""

from __future__ import annotations

import pytest

from ckptlint.targets import known_versions
from ckptlint.testing.models import MoeDims, deepseek_dims, glm5_quark_mxfp4
from helpers import build, by_target, errors, run

H = MoeDims().hidden
# Releases that give Quark the gate_up_proj packed mapping (0.5.12+, see the fixed-twin test) and vLLM.
SINCE_0_5_12 = tuple(f"sglang=={v}" for v in known_versions("sglang") if tuple(map(int, v.split("."))) >= (0, 5, 12)) \
    + tuple(f"vllm=={v}" for v in known_versions("vllm") if v != "0.11.0")  # 0.11: no GLM-5 class


@pytest.fixture(scope="module")
def buggy(tmp_path_factory):
    return build(tmp_path_factory.mktemp("glm5"), glm5_quark_mxfp4(mtp_exclude="per-module"))


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    return build(tmp_path_factory.mktemp("glm5fixed"), glm5_quark_mxfp4(mtp_exclude="fixed"))


def test_sglang_0_5_15_crashes_on_draft_eh_proj_and_experts(buggy):
    rep = run(buggy, "sglang==0.5.15")
    errs = {f.module: f for f in errors(rep, "sglang==0.5.15")}
    assert set(errs) == {"model.eh_proj", "model.decoder.mlp.experts"}
    for f in errs.values():
        assert f.code == "QD401" and f.consequence.value == "load-error"
    eh = errs["model.eh_proj"]
    # ReplicatedLinear assert: MXFP4 param [H, 2H/2] uint8 vs the BF16 [H, 2H] checkpoint weight.
    assert eh.error_text == (f"AssertionError: param.shape=torch.Size([{H}, {H}]) param.dtype=torch.uint8 "
                             f"loaded_weight.shape=torch.Size([{H}, {2 * H}]) loaded_weight.dtype=torch.bfloat16")
    assert "model.layers.78.eh_proj" in eh.message and "model.layers.78.eh_proj" in eh.tensors[0]
    moe = errs["model.decoder.mlp.experts"]
    assert moe.error_text == (f"RuntimeError: The size of tensor a ({H // 2}) must match the size of tensor b "
                              f"({H}) at non-singleton dimension 1")
    assert all(t.startswith("model.layers.78.mlp.experts.") for t in moe.tensors)
    assert "`model.decoder.mlp.experts`" in moe.hint
    assert any("speculative" in a for a in moe.assumptions)


@pytest.mark.parametrize("version", [v for v in known_versions("sglang") if tuple(map(int, v.split("."))) >= (0, 5, 16)])
def test_sglang_0_5_16_and_later_remap_literal_prefix_entries(buggy, version):
    rep = run(buggy, f"sglang=={version}")
    assert errors(rep, f"sglang=={version}") == []
    plan = rep.plans[f"sglang=={version}"]
    assert "model.eh_proj" in plan.exclude_draft and "model.decoder.mlp.experts" in plan.exclude_draft


def test_vllm_0_33_loads_because_mtp_modules_keep_checkpoint_prefixes(buggy):
    rep = run(buggy, "vllm==0.33.0")
    assert errors(rep, "vllm==0.33.0") == []
    plan = rep.plans["vllm==0.33.0"]
    moe = plan.modules["model.layers.78.mlp.experts"]
    assert moe.role == "draft" and not moe.decision.quantized
    assert "per-expert" in moe.decision.reason  # excluded through a child entry (check_children)


@pytest.mark.parametrize("version", ["0.24.0"])
def test_vllm_before_check_children_builds_mtp_fused_moe_quantized(buggy, version):
    # Per-expert entries never exclude the fused MoE before vLLM 0.26 (PR #46757, checked absent in
    # 0.24/0.25): BF16 experts meet MXFP4 slots (`The size of tensor a (256) must match … (512)` upstream).
    rep = run(buggy, f"vllm=={version}", "vllm==0.26.0")
    errs = errors(rep, f"vllm=={version}")
    assert [(f.code, f.module) for f in errs] == [("QD401", "model.layers.78.mlp.experts")]
    assert f"tensor a ({H // 2})" in errs[0].error_text
    assert errors(rep, "vllm==0.26.0") == []


def test_vllm_0_11_has_no_glm5_class(buggy):
    rep = run(buggy, "vllm==0.11.0")
    assert [(f.code, f.consequence.value) for f in rep.findings] == [("TG601", "load-error")]


def test_fixed_twin_is_clean_on_every_target_that_supports_it(fixed):
    rep = run(fixed)
    assert len(rep.targets) >= 8
    supported = [t for t in rep.targets if t.resolved not in ("sglang==0.5.5", "sglang==0.5.9", "vllm==0.11.0")]
    for t in supported:
        assert [f for f in rep.findings if f.target == t.id and f.severity.value != "info"] == [], t.id
    # SGLang 0.5.5 and vLLM 0.11 have no GLM-5 model class at all (one load-error finding saying so).
    for old in ("sglang==0.5.5", "vllm==0.11.0"):
        assert [(f.code, f.consequence.value) for f in rep.findings if f.target == old] == [("TG601", "load-error")]
    # SGLang 0.5.9 does not give Quark the gate_up_proj packed mapping (injected from 0.5.12,
    # docs/frameworks/sglang.md#packed-modules-mapping), so BF16 dense/shared-expert gate_up_proj
    # modules are built MXFP4.
    e9 = {f.module for f in rep.findings if f.target == "sglang==0.5.9" and f.code == "QD401"}
    assert "model.layers.0.mlp.gate_up_proj" in e9


def test_no_speculative_means_no_draft_findings(buggy):
    rep = run(buggy, "sglang==0.5.15", speculative=False)
    assert errors(rep, "sglang==0.5.15") == []
    assert rep.plans["sglang==0.5.15"].dropped  # MTP tensors are skipped by the main model


def test_glob_exclude_is_inert_everywhere(tmp_path):
    # Quark `exclude` has no glob matching in either framework (exact or `re:` only).
    path = build(tmp_path, glm5_quark_mxfp4(mtp_exclude="glob"))
    rep = run(path, "sglang==0.5.23", "vllm==0.33.0")
    got = by_target(rep, "QD401")
    assert ("QD401", "load-error", "model.eh_proj") in got["sglang==0.5.23"]
    assert ("QD401", "load-error", "model.decoder.self_attn.fused_qkv_a_proj_with_mqa") in got["sglang==0.5.23"]
    assert ("QD401", "load-error", "model.layers.78.self_attn.fused_qkv_a_proj") in got["vllm==0.33.0"]
    assert ("QD401", "load-error", "model.layers.78.mlp.experts") in got["vllm==0.33.0"]


def test_nothing_hard_codes_layer_78(tmp_path):
    # Same model family, MTP layer at 40: the layer index comes from num_hidden_layers.
    dims = MoeDims(num_hidden_layers=40)
    path = build(tmp_path, glm5_quark_mxfp4(dims, mtp_exclude="per-module"))
    rep = run(path, "sglang==0.5.15", "sglang==0.5.16", "vllm==0.33.0", "vllm==0.24.0")
    e15 = {f.module for f in errors(rep, "sglang==0.5.15")}
    assert {"model.eh_proj", "model.decoder.mlp.experts"} <= e15
    # No layer 61 exists here, so the DeepSeek mapper no longer leaks layer-61 attention excludes onto
    # the draft: its attention is built MXFP4 too.
    assert "model.decoder.self_attn.o_proj" in e15
    assert errors(rep, "sglang==0.5.16") == [] and errors(rep, "vllm==0.33.0") == []
    assert [f.module for f in errors(rep, "vllm==0.24.0")] == ["model.layers.40.mlp.experts"]
    fixed = build(tmp_path, glm5_quark_mxfp4(dims, mtp_exclude="fixed"), name="fixed")
    assert [f for f in run(fixed, *SINCE_0_5_12).findings if f.severity.value == "error"] == []


def test_deepseek_v3_mtp_at_61(tmp_path):
    # DeepSeek-V3 Quark MXFP4 with a BF16 MTP layer 61 excluded per module (amd/DeepSeek-R1-0528-MXFP4 style).
    dims = deepseek_dims()
    spec = glm5_quark_mxfp4(dims, mtp_exclude="per-module")
    assert spec.config["architectures"] == ["DeepseekV3ForCausalLM"] and spec.notes["mtp_layers"] == [61]
    path = build(tmp_path, spec)
    rep = run(path, "sglang==0.5.15", "sglang==0.5.23", "vllm==0.33.0")
    # The 61-mapper turns `model.layers.61.` entries into `model.decoder.` ones: attention and shared
    # experts match, but `model.layers.61.eh_proj` becomes `model.decoder.eh_proj` != `model.eh_proj`
    # (PR #23424, still unfixed in 0.5.23), and per-expert entries never exclude the FusedMoE before 0.5.21.
    assert {f.module for f in errors(rep, "sglang==0.5.15")} == {"model.eh_proj", "model.decoder.mlp.experts"}
    assert {f.module for f in errors(rep, "sglang==0.5.23")} == {"model.eh_proj"}
    assert errors(rep, "vllm==0.33.0") == []
    fixed = build(tmp_path, glm5_quark_mxfp4(dims, mtp_exclude="fixed"), name="fixed")
    assert [f for f in run(fixed, *SINCE_0_5_12).findings if f.severity.value == "error"] == []
