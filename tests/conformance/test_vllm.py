"""vLLM conformance: every fixture and probe, on every supported vLLM release, against the release's
own quantization code (conformance/vllm.py). Off by default (marker ``conformance``); needs the
release wheels in ``$CKPTLINT_CONFORMANCE_CACHE`` (or network).

    CKPTLINT_CONFORMANCE_CACHE=~/.cache/ckptlint/conformance python -m pytest -m conformance tests/conformance/test_vllm.py
"""

from __future__ import annotations

import pytest

from conformance import ckptside, wheels
from conformance import vllm as V
from conformance.core import Allow

pytestmark = pytest.mark.conformance

TARGETS = ckptside.targets("vllm")
VERSIONS = [t.partition("==")[2] for t in TARGETS]


def _release(version: str) -> V.Release:
    try:
        wheels.source_dir("vllm", version, download=False)
    except wheels.WheelUnavailable as exc:
        pytest.skip(f"vLLM {version} wheel not cached: {exc}")
    return V.release(version)


def _report(found: list) -> None:
    bad, _ = Allow().split(found)
    if bad:
        lines = sorted({d.line()[:400] for d in bad})
        pytest.fail(f"{len(bad)} disagreement(s) with vLLM's own code:\n" + "\n".join(lines[:60]))


def test_targets_are_the_adapted_releases():
    # a release added to the targets needs its adapter checked here (and VERSIONS in conformance/vllm.py)
    assert VERSIONS == list(V.VERSIONS)


# Every fixture, rule case and probe on every release: tests/conformance/test_conformance.py
# (runner.check_target, which adds vLLM's own probes, conformance/vllm.py::probes).


# --- the adapters themselves: they must see what vLLM's code says (fails if a stand-in breaks) -----

def test_packed_mapping_is_read_from_the_model_class() -> None:
    rel = _release("0.11.0")
    _, cfg = rel.quant_config("fp8", {"quant_method": "fp8", "activation_scheme": "dynamic"})
    # vLLM 0.11 qwen3_moe.py: Qwen3MoeForCausalLM.packed_modules_mapping lists gate_up_proj too
    assert rel.configure(cfg, rel.model_class("Qwen3MoeForCausalLM"), {})["gate_up_proj"] == ["gate_proj", "up_proj"]
    rel = _release("0.33.0")
    _, cfg = rel.quant_config("fp8", {"quant_method": "fp8", "activation_scheme": "dynamic"})
    mapping = rel.configure(cfg, rel.model_class("DeepseekV3ForCausalLM"), {"q_lora_rank": 8})
    # the __init__ edit (fused_qkv_a_proj only with q_lora_rank) is replayed
    assert mapping["fused_qkv_a_proj"] == ["q_a_proj", "kv_a_proj_with_mqa"]
    _, cfg = rel.quant_config("fp8", {"quant_method": "fp8", "activation_scheme": "dynamic"})
    assert "fused_qkv_a_proj" not in rel.configure(cfg, rel.model_class("DeepseekV3ForCausalLM"), {"q_lora_rank": None})


def test_fp8_config_decisions_follow_the_release() -> None:
    rel = _release("0.33.0")
    out = rel.decisions(arch="LlamaForCausalLM", hf_config={}, method_key="fp8",
                        qcfg={"quant_method": "fp8", "activation_scheme": "dynamic",
                              "ignored_layers": ["model.layers.0.self_attn.q_proj"]},
                        layers=[V.Layer("model.layers.0.self_attn.qkv_proj", "linear", "QKVParallelLinear"),
                                V.Layer("model.layers.1.self_attn.qkv_proj", "linear", "QKVParallelLinear"),
                                V.Layer("lm_head", "lm_head", "ParallelLMHead")])
    assert out.decisions["model.layers.0.self_attn.qkv_proj"].startswith("error: Detected some but not all shards")
    assert out.decisions["model.layers.1.self_attn.qkv_proj"] == "quantized"
    assert out.decisions["lm_head"] == "unquantized"


@pytest.mark.parametrize("version", VERSIONS)
def test_modelopt_fused_shards_by_exact_name(version: str) -> None:
    """ModelOpt is_layer_excluded on a fused module: a bare shard leaf (`q_a_proj`) excludes nothing
    from 0.24 on (is_layer_skipped compares shard prefixes exactly; the substring test runs on the
    fused name)."""
    rel = _release(version)
    packed = {"fused_qkv_a_proj": ["q_a_proj", "kv_a_proj_with_mqa"]}
    got = rel.leaf("modelopt_fp4", "model.layers.0.self_attn.fused_qkv_a_proj", ["q_a_proj"], packed)
    if version != "0.11.0":
        assert got == "kept"
    # the shard named in full, alone, makes the shards disagree
    got = rel.leaf("modelopt_fp4", "model.layers.0.self_attn.fused_qkv_a_proj",
                   ["model.layers.0.self_attn.q_a_proj"], packed)
    assert got.startswith("error") or got == "excluded"


@pytest.mark.parametrize("version", VERSIONS)
def test_load_weights_fingerprints(version: str) -> None:
    _release(version)
    fps = V.load_weights_fingerprints(version, V.TRACKED_CLASSES)
    assert set(fps) == set(V.TRACKED_CLASSES)
    assert all(v == "absent" or len(v) == 16 for v in fps.values())
    assert fps["LlamaForCausalLM"] != "absent"
