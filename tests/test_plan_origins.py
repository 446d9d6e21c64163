"""`ckptlint plan` says where every entry of the lists a target tests modules against comes from: the
config as written, a rewrite the framework makes (name mappers, `model.` variants, a draft class's
copy of checkpoint-named entries), or inference from the checkpoint's tensors (vLLM AWQ/GPTQ)."""

from __future__ import annotations

import json

from ckptlint.testing.models import (DenseDims, Layout, all_linears, awq_config, dense_spec, glm5_quark_mxfp4,
                                     gptq_config)
from helpers import build, cli_run, run


def entries(plan, applies_to=None):
    return [e for e in plan.skip_entries if applies_to is None or e.applies_to == applies_to]


def test_draft_copy_and_config_entries(tmp_path, capsys):
    path = build(tmp_path, glm5_quark_mxfp4())
    plan = run(path, "sglang==0.5.16").plans["sglang==0.5.16"]
    main = entries(plan, "main")
    assert main and {e.origin for e in main} == {"config"}
    assert {e.source for e in main} == {"config.json quantization_config.exclude"}
    copied = [e for e in entries(plan, "draft") if e.origin == "framework"]
    assert ("model.decoder.self_attn.o_proj", "model.layers.78.self_attn.o_proj") in {(e.text, e.original) for e in copied}
    assert all("GlmMoeDsaForCausalLMNextN copies" in e.source for e in copied)
    # the same in `plan` output: text and (backward compatible) JSON
    code, out, _ = cli_run(capsys, "plan", str(path), "--target", "sglang==0.5.16")
    assert "framework: GlmMoeDsaForCausalLMNextN copies `model.layers.78.` entries" in out
    assert "model.decoder.self_attn.o_proj  <- `model.layers.78.self_attn.o_proj`" in out
    code, out, _ = cli_run(capsys, "plan", str(path), "--target", "sglang==0.5.16", "--format", "json")
    doc = json.loads(out)
    assert "draft_skip_list" in doc and "skip_list_key" in doc  # existing fields kept
    assert {"text", "origin", "source", "original", "applies_to"} <= set(doc["skip_entries"][0])


def test_draft_mapper_rewrite(tmp_path):
    # SGLang 0.5.12+ DeepseekV3ForCausalLMNextN maps `model.layers.61` -> `model.decoder` in the skip list
    from ckptlint.testing.upstream import deepseek_mtp_regex_exclude

    plan = run(build(tmp_path, deepseek_mtp_regex_exclude()), "sglang==0.5.12").plans["sglang==0.5.12"]
    mapped = [e for e in entries(plan, "draft") if e.origin == "framework"]
    assert [(e.original, e.text) for e in mapped] == [("re:model.layers.61.*", "re:model.decoder.*")]


def test_inferred_awq_skip_list_and_gptq_include_list(tmp_path):
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or m.path.endswith("self_attn.o_proj")
                    else "awq")
    plan = run(build(tmp_path / "awq", dense_spec(DenseDims(), layout, awq_config())), "vllm==0.33.0").plans["vllm==0.33.0"]
    inferred = entries(plan, "main")
    assert inferred and {e.origin for e in inferred} == {"inferred"}
    assert "model.layers.0.self_attn.o_proj" in {e.text for e in inferred}
    assert "inferred from the safetensors dtypes" in inferred[0].source
    plan = run(build(tmp_path / "gptq", dense_spec(DenseDims(), all_linears("gptq"), gptq_config())),
               "vllm==0.33.0").plans["vllm==0.33.0"]
    inc = entries(plan, "include")
    assert inc and {e.origin for e in inc} == {"inferred"} and "model.layers.0.mlp.down_proj" in {e.text for e in inc}


def test_model_prefix_variants(tmp_path):
    # SGLang 0.5.12+ fp8 is_layer_skipped also tests each entry with `model.` added or removed
    from ckptlint.testing.models import store_fp8_block  # noqa: F401  (the fp8_block store)
    cfg = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
           "ignored_layers": ["lm_head"]}
    plan = run(build(tmp_path, dense_spec(DenseDims(), all_linears("fp8_block"), cfg)), "sglang==0.5.12").plans["sglang==0.5.12"]
    assert {(e.text, e.origin) for e in entries(plan, "main")} == {("lm_head", "config"), ("model.lm_head", "framework")}


def test_include_list_is_name_mapped(tmp_path):
    # vLLM AutoGPTQConfig.apply_vllm_mapper rewrites modules_in_block_to_quantize with the model's
    # mapper (gpt-oss: `.self_attn.` -> `.attn.`), so full checkpoint names still match runtime names.
    d = DenseDims(arch="GptOssForCausalLM", model_type="gpt_oss", num_hidden_layers=1)
    listed = [f"model.layers.0.self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj", "o_proj")] + \
        [f"model.layers.0.mlp.{p}" for p in ("gate_proj", "up_proj", "down_proj")]
    rep = run(build(tmp_path, dense_spec(d, all_linears("gptq"), gptq_config(modules_in_block_to_quantize=listed))),
              "vllm==0.33.0")
    # Only the attention modules are the point here: vLLM's gpt-oss has no dense MLP, and its packed
    # mapping has no gate_up_proj (models/gpt_oss.py, 0.11-0.33), so this synthetic dense MLP's fused
    # gate_up_proj is not expanded into the listed shards and is rightly reported.
    errors = [f for f in rep.findings if f.severity.value == "error"]
    assert [f for f in errors if ".mlp." not in f.message.split("`")[1]] == []
    assert errors, "the dense gate_up_proj (not in gpt-oss's packed mapping) should still be reported"
    inc = {e.text for e in entries(rep.plans["vllm==0.33.0"], "include")}
    assert "model.layers.0.attn.q_proj" in inc
