"""DP8xx deployment-shape rules, GPU data, `ckptlint gpus` / `inspect`, and the per-GPU memory
arithmetic checked against totals computed by hand from the model dimensions."""

from __future__ import annotations

import json
import math

import pytest

from ckptlint.cli import main
from ckptlint.deployment import default_hardware
from ckptlint.hardware import get_gpu, gpu_data, support
from ckptlint.inspect import inspect_checkpoint
from ckptlint.reader import load_checkpoint
from ckptlint.targets import resolve
from ckptlint.testing.models import Layout, MoeDims, Spec, deepseek_dims, glm5_quark_mxfp4, modelopt_nvfp4, moe_modules
from ckptlint.deployment import Deployment
from helpers import build, run

BLOCK_N_576 = "ValueError: Weight output_partition_size = 576 is not divisible by weight quantization block_n = 128."

# DeepSeek-V3 (config.json of deepseek-ai/DeepSeek-V3), without the MTP layer.
DSV3 = dict(hidden=7168, intermediate=18432, moe_intermediate=2048, n_routed_experts=256, n_shared_experts=1,
            first_k_dense_replace=3, q_lora_rank=1536, kv_lora_rank=512, heads=128, qk_nope=128, qk_rope=64,
            v_head=128, vocab=129280, num_nextn_predict_layers=0)


def fp8_block_spec(d: MoeDims) -> Spec:
    """DeepSeek-style block FP8: every linear FP8 with 128x128 scales except embeddings, LM head, router."""
    quant = {"expert", "shared_expert", "dense_mlp", "attn"}
    layout = Layout(lambda m: "fp8_block" if m.category in quant else None)
    cfg = d.config()
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                                  "weight_block_size": [128, 128]}
    return Spec(cfg, layout.tensors(moe_modules(d, with_mtp=False)))


def dp(rep, code=None, target=None):
    return [f for f in rep.findings if f.code.startswith("DP") and (code is None or f.code == code)
            and (target is None or f.target == target)]


@pytest.fixture(scope="module")
def dsv3_small(tmp_path_factory):
    """DeepSeek-V3 dimensions, 4 layers (3 dense + 1 MoE): enough for every module type."""
    return build(tmp_path_factory.mktemp("dsv3s"), fp8_block_spec(deepseek_dims(num_hidden_layers=4, **DSV3)))


# --- GPU data ---------------------------------------------------------------------------------
def test_gpu_data_every_fact_has_a_source():
    data = gpu_data()
    assert {"mi300x", "mi325x", "mi350x", "mi355x", "h100", "h200", "b200", "b300", "gb200", "rtx-pro-6000"} <= set(data.gpus)
    for g in data.gpus.values():
        assert g.source and g.memory > 0
    for a in data.architectures.values():
        assert a.source
        for per_fw in a.support.values():
            assert all(s.source and s.note for s in per_fw.values())


def test_default_hardware_keeps_its_default_and_names_a_chosen_gpu():
    assert default_hardware("fp8", "fp8_block") == ("NVIDIA H100 (sm90)", "cuda")
    assert default_hardware("modelopt", "nvfp4") == ("NVIDIA B200 (sm100)", "cuda")
    assert default_hardware("quark", "mxfp4") == ("AMD MI355X (gfx950)", "rocm")
    assert default_hardware("quark", "mxfp4", "cuda") == ("an NVIDIA GPU", "cuda")
    assert default_hardware("fp8", "fp8", None, "mi300x") == ("AMD MI300X (gfx942)", "rocm")
    assert support(get_gpu("mi300x"), "mxfp4", "vllm").level == "emulated"


def test_gpus_command_text_and_json(capsys):
    with pytest.raises(SystemExit) as e:
        main(["gpus", "--format", "json"])
    assert e.value.code == 0
    rows = {r["key"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["mi355x"]["formats"]["nvfp4"]["sglang"]["level"] == "unsupported"
    assert rows["h200"]["memory_bytes"] == 141 * 10**9
    with pytest.raises(SystemExit):
        main(["gpus"])
    assert "rtx-pro-6000" in capsys.readouterr().out


def test_unknown_gpu_and_bad_ep_are_usage_errors(dsv3_small, capsys):
    for args in (["--gpu", "tpu-v5"], ["--tp", "4", "--ep", "3"]):
        with pytest.raises(SystemExit) as e:
            main(["check", str(dsv3_small), *args])
        assert e.value.code == 2


# --- DP801 gpu-format-support -----------------------------------------------------------------
def test_dp801_nvfp4_on_mi355x(tmp_path):
    path = build(tmp_path, modelopt_nvfp4(deepseek_dims()))
    rep = run(path, "sglang==0.5.23", "vllm==0.33.0", gpu="mi355x")
    (sg,) = dp(rep, "DP801", "sglang==0.5.23")
    assert sg.consequence.value == "load-error" and "AMD MI355X (gfx950)" in sg.message
    assert any("AMD MI355X" in a for a in sg.assumptions)
    (vl,) = dp(rep, "DP801", "vllm==0.33.0")
    assert vl.consequence.value == "degraded" and "emulated" in vl.message


def test_dp801_quark_mxfp4_on_mi300x_is_emulated(tmp_path):
    rep = run(build(tmp_path, glm5_quark_mxfp4()), "vllm==0.33.0", gpu="mi300x")
    (f,) = dp(rep, "DP801")
    assert f.consequence.value == "degraded" and f.severity.value == "warning"
    assert "AMD MI300X (gfx942)" in f.message and "EMULATION" in f.message


def test_dp801_passes_on_the_native_gpu(tmp_path):
    rep = run(build(tmp_path, glm5_quark_mxfp4()), "sglang==0.5.23", "vllm==0.33.0")  # default: MI355X
    assert dp(rep, "DP801") == []
    rep = run(build(tmp_path, modelopt_nvfp4(deepseek_dims()), name="nv"), "sglang==0.5.23", "vllm==0.33.0", gpu="b200")
    assert dp(rep, "DP801") == []


# --- DP802 tp-shard-indivisible ---------------------------------------------------------------
def test_dp802_tp6_splits_kv_b_proj(dsv3_small):
    rep = run(dsv3_small, "sglang==0.5.23", tp=6)
    got = {f.module: f for f in dp(rep, "DP802")}
    # kv_b_proj: 128 heads x (128 + 128) = 32768 out features, column parallel.
    assert got["model.layers.0.self_attn.kv_b_proj"].error_text == "AssertionError: 32768 is not divisible by 6"
    assert "model.layers.3.mlp.experts" in got  # 2048 / 6


def test_dp802_experts_over_ep(tmp_path):
    d = deepseek_dims(num_hidden_layers=2, first_k_dense_replace=1, n_routed_experts=6, hidden=256,
                      moe_intermediate=256, intermediate=256, q_lora_rank=256, kv_lora_rank=128, heads=2,
                      qk_nope=128, qk_rope=64, v_head=128, vocab=256, num_nextn_predict_layers=0)
    path = build(tmp_path, fp8_block_spec(d))
    rep = run(path, "sglang==0.5.23", "vllm==0.33.0", tp=4, ep=4)
    assert [f.module for f in dp(rep, "DP802", "sglang==0.5.23")] == ["model.layers.1.mlp.experts"]
    assert dp(rep, "DP802", "vllm==0.33.0") == []  # vLLM splits unevenly
    assert dp(run(path, "sglang==0.5.23", tp=2, ep=2), "DP802") == []


# --- DP803 fp8-block-partition ----------------------------------------------------------------
def test_dp803_block_fp8_clean_at_tp8_fails_at_tp32(dsv3_small):
    for tp in (1, 8, 16):
        assert dp(run(dsv3_small, "sglang==0.5.23", "vllm==0.33.0", tp=tp)) == [], tp
    rep = run(dsv3_small, "sglang==0.5.23", "vllm==0.33.0", tp=32)
    for t in ("sglang==0.5.23", "vllm==0.33.0"):
        got = {f.module: f for f in dp(rep, "DP803", t)}
        # dense MLP gate/up: 18432 / 32 = 576, not a multiple of 128.
        assert got["model.layers.0.mlp.gate_up_proj"].error_text == BLOCK_N_576
        assert got["model.layers.0.mlp.gate_up_proj"].consequence.value == "load-error"
        # experts: 2048 / 32 = 64. SGLang raises; vLLM 0.30+ refines the block to gcd(128, 128, 64,
        # 7168) = 64 >= 32 and loads (fused_moe/oracle/fp8.py refine_fp8_moe_block_shape).
        if t.startswith("sglang"):
            assert got["model.layers.3.mlp.experts"].error_text == (
                "ValueError: The output_size of gate's and up's weight = 64 is not divisible by weight quantization block_n = 128.")
        else:
            assert "model.layers.3.mlp.experts" not in got


def test_dp803_dp_attention_keeps_attention_whole(dsv3_small):
    rep = run(dsv3_small, "sglang==0.5.23", tp=24)  # o_proj K 16384 / 24: indivisible
    assert any(f.module.endswith("self_attn.o_proj") for f in dp(rep, "DP802"))
    rep = run(dsv3_small, "sglang==0.5.23", tp=24, dp_attention=True)
    assert not any("self_attn" in (f.module or "") for f in dp(rep))


# --- DP804 group-partition --------------------------------------------------------------------
def test_dp804_mxfp4_moe_split_group(tmp_path):
    path = build(tmp_path, glm5_quark_mxfp4())  # moe_intermediate 32 = one MXFP4 group
    rep = run(path, "sglang==0.5.23", "vllm==0.33.0", tp=2)
    got = dp(rep, "DP804", "vllm==0.33.0")
    assert got and all(f.consequence.value == "load-error" and f.data["size"] == 16 for f in got)
    assert dp(run(path, "sglang==0.5.23", "vllm==0.33.0"), "DP804") == []


def test_dp804_row_parallel_text_on_vllm(tmp_path):
    d = MoeDims(moe_intermediate=64, num_hidden_layers=4)
    spec = glm5_quark_mxfp4(d)
    rep = run(build(tmp_path, spec), "vllm==0.33.0", tp=4)  # 64 / 4 = 16 per rank
    assert dp(rep, "DP804")


# --- DP805 fp8-fnuz-conversion ----------------------------------------------------------------
def test_dp805_fp8_on_mi300x_only(dsv3_small):
    rep = run(dsv3_small, "sglang==0.5.23", "vllm==0.33.0", gpu="mi300x", tp=8)
    got = dp(rep, "DP805")
    assert len(got) == 2 and all(f.severity.value == "info" and "240" in f.message for f in got)
    assert dp(run(dsv3_small, "vllm==0.33.0", gpu="mi355x", tp=8), "DP805") == []
    assert dp(run(dsv3_small, "vllm==0.33.0", gpu="mi300x", tp=8), "DP801") == []  # FP8 is native there


# --- inspect: memory arithmetic on a full DeepSeek-V3 FP8 shape --------------------------------
def _fp8(n, k):
    return n * k + 4 * math.ceil(n / 128) * math.ceil(k / 128)


def _expected_dsv3(tp: int) -> tuple[int, float]:
    """(total bytes, per-GPU bytes) of DeepSeek-V3 block FP8 under SGLang's layout, by hand."""
    H, I, Im, E, L, dense, V = 7168, 18432, 2048, 256, 61, 3, 129280
    qa, kva = _fp8(1536, H), _fp8(512 + 64, H)  # fused_qkv_a_proj_with_mqa: ReplicatedLinear
    qb, kvb, o = _fp8(128 * 192, 1536), _fp8(128 * 256, 512), _fp8(H, 128 * 128)
    norms = 2 * (H + H + 1536 + 512)  # input/post-attention, q_a, kv_a layernorms (BF16)
    dense_mlp = 2 * _fp8(I, H) + _fp8(H, I)
    experts = E * (2 * _fp8(Im, H) + _fp8(H, Im))
    shared = 2 * _fp8(Im, H) + _fp8(H, Im)
    router = 2 * E * H + 4 * E  # BF16 gate + F32 e_score_correction_bias
    embed = lm_head = 2 * V * H
    final_norm = 2 * H
    total = (L * (qa + kva + qb + kvb + o + norms) + dense * dense_mlp
             + (L - dense) * (experts + shared + router) + embed + lm_head + final_norm)
    replicated = L * (qa + kva + norms) + (L - dense) * router + final_norm
    sharded = L * (qb + kvb + o) + dense * dense_mlp + (L - dense) * (experts + shared) + embed + lm_head
    return total, replicated + sharded / tp


@pytest.fixture(scope="module")
def dsv3_full(tmp_path_factory):
    return build(tmp_path_factory.mktemp("dsv3"), fp8_block_spec(deepseek_dims(num_hidden_layers=61, **DSV3)),
                 shards=16)


def test_inspect_dsv3_fp8_memory_8_vs_4_h200(dsv3_full):
    ckpt = load_checkpoint(str(dsv3_full))
    (t,) = resolve("sglang==0.5.23")
    total, per8 = _expected_dsv3(8)
    ins8 = inspect_checkpoint(ckpt, t, Deployment(tp=8, gpu="h200"))
    assert ins8.total_bytes == total
    assert abs(ins8.per_gpu_bytes - per8) <= 1
    hbm = 141 * 10**9
    assert ins8.reserve_bytes == round(0.08 * hbm)
    assert ins8.kv_cache_bytes == hbm - ins8.per_gpu_bytes - ins8.reserve_bytes and ins8.fits
    _, per4 = _expected_dsv3(4)
    ins4 = inspect_checkpoint(ckpt, t, Deployment(tp=4, gpu="h200"))
    assert abs(ins4.per_gpu_bytes - per4) <= 1 and ins4.fits is False
    # EP 8 inside TP 8 splits whole experts: the same bytes per GPU as TP 8.
    ins_ep = inspect_checkpoint(ckpt, t, Deployment(tp=8, ep=8, gpu="h200"))
    assert abs(ins_ep.per_gpu_bytes - per8) <= 1
    assert 0.9 < ins8.quantized_bytes / ins8.total_bytes < 1
    assert set(ins8.by_dtype) == {"F8_E4M3", "F32", "BF16"}


def test_inspect_cli_json_and_text(dsv3_full, capsys):
    with pytest.raises(SystemExit) as e:
        main(["inspect", str(dsv3_full), "--gpu", "h200", "--tp", "4", "--format", "json"])
    assert e.value.code == 1  # does not fit: inspect fails
    out = json.loads(capsys.readouterr().out)
    assert out["fits"] is False and out["fit"] == "weights-exceed" and out["gpu"] == "h200" and out["tp"] == 4
    with pytest.raises(SystemExit):
        main(["inspect", str(dsv3_full), "--gpu", "h200", "--tp", "8"])
    text = capsys.readouterr().out
    assert "fits" in text and "NVIDIA H200 (sm90)" in text and "fp8_block" in text
