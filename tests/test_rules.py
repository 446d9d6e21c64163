"""Facts about the load plan and whole reports that a single-rule golden cannot state.

Each rule's failing and passing checkpoints are case files (tests/cases/<CODE>/*.toml, run by
test_cases.py with only that rule selected; test_meta checks every rule has both). What stays here:
the per-module decisions the plan records (quantized, forced unquantized draft, generic simulation),
and correct checkpoints that must give no error under any rule.
"""

from __future__ import annotations

import pytest

from ckptlint.testing.models import (DenseDims, Layout, Module, Spec, deepseek_dims, dense_modules, modelopt_nvfp4,
                                     qwen3_moe_dims, qwen_mtp_spec)
from helpers import build, run


@pytest.mark.parametrize("make,targets", [
    # ModelOpt NVFP4 with its BF16 MTP layer excluded (`model.layers.61*`, here 4): the SGLang draft is built
    # unquantized for NVFP4 anyway, vLLM's from the skip list (the clean twin of MT702's failing case).
    (lambda: modelopt_nvfp4(deepseek_dims(num_hidden_layers=4)), ("sglang==0.5.23", "vllm==0.33.0")),
    # Qwen3-Next NVFP4 with `mtp.*` excluded: vLLM keeps the mtp.* prefixes for its quant lookups and builds
    # mtp.fc unquantized (#38832), so nothing fails there (SGLang does: QD401 case qwen3-next-mtp-prefix-exclude).
    (lambda: qwen_mtp_spec(), ("vllm==0.33.0",)),
    # Qwen3.5 Quark: the draft is built unquantized only when an `mtp.*` entry names mlp.experts (0.5.21+,
    # #23146): an all-BF16 MTP module excluded per module loads, and so does an MXFP4 MTP MoE.
    (lambda: qwen_mtp_spec("Qwen3_5MoeForCausalLM", method="quark"), ("sglang==0.5.23", "vllm==0.33.0")),
    (lambda: qwen_mtp_spec("Qwen3_5MoeForCausalLM", method="quark", mtp_quantized=True),
     ("sglang==0.5.21", "sglang==0.5.23", "vllm==0.33.0")),
], ids=["nvfp4-bf16-mtp", "qwen3-next-vllm", "qwen3.5-quark-bf16-mtp", "qwen3.5-quark-mxfp4-mtp"])
def test_correct_checkpoint_has_no_error_under_any_rule(tmp_path, make, targets):
    rep = run(build(tmp_path, make()), *targets)
    assert [(f.code, f.target, f.module) for f in rep.findings if f.severity.value == "error"] == []


def test_qwen3_next_draft_plan_from_sglang_0_5_9(tmp_path):
    # Qwen3NextForCausalLM.load_weights(is_mtp=True) renames the same way from 0.5.5 to 0.5.23; 0.5.5's
    # hybrid attention passes no quant prefix, so its hand data starts at 0.5.9 and 0.5.5 is simulated from the
    # class's extracted facts (no draft: those describe the main model only).
    rep = run(build(tmp_path, qwen_mtp_spec()), "sglang==0.5.5", "sglang==0.5.9", "sglang==0.5.17", "sglang==0.5.23")
    p5, p9 = rep.plans["sglang==0.5.5"], rep.plans["sglang==0.5.9"]
    assert p5.extracted == "sglang.srt.models.qwen3_next:Qwen3NextForCausalLM" and not p5.generic
    assert p9.extracted is None and not p9.generic

    def errors(t):
        return sorted((f.code, f.consequence.value, f.module) for f in rep.findings
                      if f.target == t and not f.code.startswith("TG"))

    assert errors("sglang==0.5.9") == errors("sglang==0.5.17") == errors("sglang==0.5.23") != []


def test_qwen3_5_quark_draft_decisions_by_sglang_release(tmp_path):
    # _mtp_quant_config, read release by release: 0.5.17-0.5.20 build the Quark draft unquantized for any
    # `mtp.*` exclude entry (the MXFP4 MTP experts then meet BF16 slots: MT702 case
    # qwen3.5-quark-mxfp4-mtp-forced-bf16); from 0.5.21 only an `mtp.*` entry naming mlp.experts does.
    # Before 0.5.17 the Qwen3_5MoeForCausalLM class is not registered (generic rules).
    rep = run(build(tmp_path, qwen_mtp_spec("Qwen3_5MoeForCausalLM", method="quark", mtp_quantized=True)),
              "sglang==0.5.21", "sglang==0.5.20", "sglang==0.5.17", "sglang==0.5.16")
    assert rep.plans["sglang==0.5.21"].modules["mtp.layers.0.mlp.experts"].decision.quantized
    for t in ("sglang==0.5.20", "sglang==0.5.17"):
        d = rep.plans[t].modules["mtp.layers.0.mlp.experts"].decision
        assert not d.quantized and d.forced_draft
    assert rep.plans["sglang==0.5.16"].generic


def test_qwen3_5_quark_bf16_mtp_draft_forced_unquantized(tmp_path):
    rep = run(build(tmp_path, qwen_mtp_spec("Qwen3_5MoeForCausalLM", method="quark")), "sglang==0.5.23")
    assert rep.plans["sglang==0.5.23"].modules["mtp.layers.0.mlp.experts"].decision.forced_draft


def test_qwen3_5_draft_without_packed_mapping_fp8_fallback_shards(tmp_path):
    # Before 0.5.21 the Qwen3.5 draft has no packed_modules_mapping, but fp8's is_layer_skipped
    # (quantization/utils.py, 0.5.12+) falls back to its own qkv_proj / gate_up_proj shard lists when the
    # mapping lacks the fused name: an fp8 skip list naming the MTP layer's q/k/v projections excludes
    # its qkv_proj on both sides of 0.5.21.
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
    for t in ("sglang==0.5.20", "sglang==0.5.21"):
        d = rep.plans[t].modules["mtp.layers.0.self_attn.qkv_proj"].decision
        assert not d.quantized and "every shard" in d.reason, (t, d)
    assert not any(f.code == "QD401" and f.module == "mtp.layers.0.self_attn.qkv_proj" for f in rep.findings)
