"""Tensor parallelism of attention heads (QKVParallelLinear) and of block-FP8 MoE partitions, as the
released sources split them: whole q heads per rank, k/v heads replicated when the ranks outnumber
them (linear.py QKVParallelLinear, both frameworks, every release), and vLLM 0.30+ refining an FP8
MoE block that the TP partition does not fill (fused_moe/oracle/fp8.py)."""

from __future__ import annotations

from ckptlint.testing.models import DenseDims, all_linears, dense_spec
from ckptlint.testing.published import qwen3_235b_a22b_fp8
from helpers import build, run

SG = ("sglang==0.5.5", "sglang==0.5.15", "sglang==0.5.23")
VL_OLD = ("vllm==0.11.0", "vllm==0.24.0", "vllm==0.28.0")
VL_NEW = ("vllm==0.30.0", "vllm==0.33.0")


def dp8(report, target):
    return [(f.code, f.module, f.error_text) for f in report.findings
            if f.target == target and f.code.startswith("DP80") and f.severity.value == "error"]


def _llama_fp8_block(heads: int, kv: int, hd: int = 128, hidden: int = 4096):
    d = DenseDims(hidden=hidden, intermediate=14336, heads=heads, kv_heads=kv, head_dim=hd, num_hidden_layers=1,
                  vocab=128256)
    cfg = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    return dense_spec(d, all_linears("fp8_block"), cfg)


def test_kv_heads_replicated_when_tp_exceeds_them(tmp_path):
    # 32 q / 8 kv heads of 128 at TP 16: q holds 2 heads (256) per rank, k and v one whole head (128,
    # replicated twice), so the 128-block check passes; kv_dim / TP = 64 would not.
    rep = run(build(tmp_path, _llama_fp8_block(32, 8)), *SG, *VL_OLD, *VL_NEW, tp=16)
    for t in (*SG, *VL_OLD, *VL_NEW):
        assert dp8(rep, t) == [], t


def test_heads_that_do_not_split_fail_in_the_attention_assert(tmp_path):
    # 6 q / 3 kv heads at TP 2: the model's attention asserts total_num_kv_heads % tp_size == 0 (llama.py,
    # both frameworks) before any linear layer is built; the widths (384 per rank) would divide.
    rep = run(build(tmp_path, _llama_fp8_block(6, 3, hidden=768)), "sglang==0.5.23", "vllm==0.33.0", tp=2)
    for t in ("sglang==0.5.23", "vllm==0.33.0"):
        assert ("DP802", "model.layers.0.self_attn.qkv_proj", "AssertionError") in dp8(rep, t)
    # ... and at TP 4, 3 kv heads are neither a multiple of 4 nor 4 a multiple of 3
    rep = run(build(tmp_path / "tp4", _llama_fp8_block(12, 3, hidden=1536)), "vllm==0.33.0", tp=4)
    assert ("DP802", "model.layers.0.self_attn.qkv_proj", "AssertionError") in dp8(rep, "vllm==0.33.0")


def test_qwen3_235b_fp8_at_tp8(tmp_path):
    # Attention (64 q / 4 kv heads of 128): q 1024, k/v 128 per rank -- clean everywhere. The experts'
    # intermediate size 1536 / 8 = 192 is not a multiple of 128: SGLang (every release, Fp8MoEMethod
    # .create_weights) and vLLM 0.11-0.28 raise; vLLM 0.30+ refine the block to gcd(128, 128, 192,
    # 4096) = 64 >= 32 and load (upstream: QwenLM/Qwen3#1485, vllm-project/vllm#17569).
    path = build(tmp_path, qwen3_235b_a22b_fp8())
    rep = run(path, *SG, *VL_OLD, *VL_NEW, tp=8)
    text = "ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128."
    for t in (*SG, *VL_OLD):
        found = dp8(rep, t)
        assert found and {(c, e) for c, _, e in found} == {("DP803", text)}, (t, found)
        assert {m for _, m, _ in found} == {"model.layers.0.mlp.experts"}  # (the same for layer 1, folded)
    for t in VL_NEW:
        assert dp8(rep, t) == [], t
    # served with expert parallelism (each rank holds whole experts) or at TP 4 (384): clean everywhere
    for kw in ({"tp": 8, "ep": 8}, {"tp": 4}):
        rep = run(path, *SG, *VL_OLD, *VL_NEW, **kw)
        for t in (*SG, *VL_OLD, *VL_NEW):
            assert dp8(rep, t) == [], (kw, t)
