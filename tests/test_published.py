"""Checkpoints laid out like famous published ones (ckptlint.testing.published: their public config
and index shape, sparse) are clean on every release the released source says serves them; where the
source shows a genuine failure, exactly that failure is asserted, with the releases where it is clean."""

from __future__ import annotations

import pytest

import ckptlint.testing.published as P
from ckptlint.targets import list_targets
from helpers import build, run

ALL = [t.id for t in list_targets()]


def errors(report, target):
    return sorted((f.code, f.consequence.value, f.module) for f in report.findings
                  if f.target == target and f.severity.value in ("error", "warning"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    cache: dict = {}

    def get(name: str, **kw):
        key = (name, tuple(sorted(kw.items())))
        if key not in cache:
            spec = getattr(P, name)(**kw)
            cache[key] = run(build(tmp_path_factory.mktemp(name), spec), *ALL)
        return cache[key]
    return get


CLEAN_EVERYWHERE = ["deepseek_r1_fp8", "thebloke_llama2_13b_chat_gptq", "thebloke_llama2_7b_chat_awq",
                    "redhat_llama31_8b_fp8", "nvidia_llama31_8b_fp8", "qwen3_235b_a22b_fp8"]


@pytest.mark.parametrize("name", CLEAN_EVERYWHERE)
def test_clean_on_every_release(reports, name):
    rep = reports(name)
    for t in ALL:
        assert errors(rep, t) == [], (name, t)


@pytest.mark.parametrize("size", ["20b", "120b"])
def test_gpt_oss_clean_on_every_release(tmp_path, size):
    rep = run(build(tmp_path, P.gpt_oss(size)), *ALL)
    for t in ALL:
        assert errors(rep, t) == [], t


@pytest.mark.parametrize("target", ALL)
def test_kimi_k2_thinking_int4_is_clean(reports, target):
    # its ignore list is `re:` entries: SGLang 0.5.9-0.5.16 try them as regexes before (instead of) the
    # case-insensitive substring (compressed_tensors/utils.py _is_equal_or_regex_match)
    assert errors(reports("kimi_k2_thinking_int4"), target) == []


def test_nvidia_deepseek_r1_fp4_with_its_exclude_list(reports):
    # The exclude list names kv_a_proj_with_mqa (and a `q_proj` the model does not have) but not
    # q_a_proj, which vLLM (every release) and SGLang 0.5.15+ fuse with it into fused_qkv_a_proj
    # (DeepseekV2ForCausalLM adds it to the packed mapping): stored as listed (q_a_proj NVFP4), the
    # fused module fails everywhere: "Detected some but not all shards ... are quantized"
    # (vLLM quant_utils.is_layer_skipped; SGLang quantization/utils.py is_layer_skipped, which ModelOpt
    # runs before its glob and fused-name tail test).
    rep = reports("nvidia_deepseek_r1_fp4")
    fused = {"sglang": "model.layers.0.self_attn.fused_qkv_a_proj_with_mqa", "vllm": "model.layers.0.self_attn.fused_qkv_a_proj"}
    for t in ALL:
        mods = {m for _, c, m in errors(rep, t) if c == "load-error"}
        assert fused[t.split("==")[0]] in mods, t
    for t in ALL:
        if t.startswith("vllm"):
            (f,) = [f for f in rep.findings if f.target == t and f.module == fused["vllm"]]
            assert f.code == "QD402" and f.error_text.startswith(
                "ValueError: Detected some but not all shards of model.layers.0.self_attn.fused_qkv_a_proj are quantized.")
    # vLLM 0.11 builds every FusedMoE NVFP4 (ModelOpt there never excludes one): the BF16 MTP experts
    # excluded by `model.layers.4*` fail too, with speculative decoding on (the default).
    assert ("QD401", "load-error", "model.layers.4.mlp.experts") in errors(rep, "vllm==0.11.0")
    assert not [e for e in errors(rep, "vllm==0.24.0") if "layers.4" in e[2]]


@pytest.mark.parametrize("target", ALL)
def test_nvidia_deepseek_r1_fp4_with_q_a_proj_bf16(reports, target):
    # If q_a_proj is stored BF16 (the list's per-layer `q_proj` reads like a mis-translated `wq_a`), every
    # release still refuses it: SGLang ModelOpt runs is_layer_skipped with the model class's packed
    # mapping (DeepseekV2ForCausalLM adds fused_qkv_a_proj_with_mqa to the very dict the quant config
    # holds, in every release) before its glob/fused-tail test, and vLLM tests the shards too: kv_a
    # listed, q_a not -> the mixed-shards ValueError.
    rep = reports("nvidia_deepseek_r1_fp4", q_a_proj_bf16=True)
    found = errors(rep, target)
    fused = "model.layers.0.self_attn.fused_qkv_a_proj" + ("_with_mqa" if target.startswith("sglang") else "")
    assert ("QD402", "load-error", fused) in found
