"""A realistic-shape GLM-5.2 Quark MXFP4 checkpoint as sparse files (> 100 GB apparent size): the
findings need no tensor data, the reader touches only headers, and the predicted errors are the
exact texts reported upstream for GLM-5.2-MXFP4 + MTP on SGLang 0.5.15.post1 (sglang PR #30379 /
#30265: `param.shape=[6144,6144] uint8 vs loaded_weight.shape=[6144,12288] bf16` for eh_proj and
`The size of tensor a (3072) must match the size of tensor b (6144)` in the fused MoE)."""

from __future__ import annotations

import os
import time

from ckptlint.testing.models import MoeDims, glm5_quark_mxfp4
from helpers import build, errors, run

GLM52 = MoeDims(num_hidden_layers=20, hidden=6144, n_routed_experts=256, moe_intermediate=2048,
                intermediate=12288, first_k_dense_replace=3, q_lora_rank=2048, kv_lora_rank=512, heads=64,
                qk_nope=192, qk_rope=64, v_head=256, vocab=154880, index_heads=32, index_head_dim=128)


def test_sparse_glm52_over_100gb(tmp_path):
    path = build(tmp_path, glm5_quark_mxfp4(GLM52), shards=24, sparse=True)
    apparent = sum(os.path.getsize(p) for p in path.glob("*.safetensors"))
    on_disk = sum(os.stat(p).st_blocks * 512 for p in path.glob("*.safetensors"))
    assert apparent > 100 * 10**9
    assert on_disk < 200 * 10**6  # sparse: only headers hit the disk
    t0 = time.perf_counter()
    rep = run(path, "sglang==0.5.15", "sglang==0.5.23", "vllm==0.33.0")
    elapsed = time.perf_counter() - t0
    assert elapsed < 30
    for shard in rep.checkpoint.shards.values():
        assert shard.bytes_read <= shard.header_len + 8 + 65536
    errs = {f.module: f for f in errors(rep, "sglang==0.5.15")}
    assert errs["model.eh_proj"].error_text == (
        "AssertionError: param.shape=torch.Size([6144, 6144]) param.dtype=torch.uint8 "
        "loaded_weight.shape=torch.Size([6144, 12288]) loaded_weight.dtype=torch.bfloat16")
    assert errs["model.decoder.mlp.experts"].error_text == (
        "RuntimeError: The size of tensor a (3072) must match the size of tensor b (6144) at non-singleton dimension 1")
    assert len(errs["model.decoder.mlp.experts"].tensors) == 50
    assert errs["model.decoder.mlp.experts"].data["tensor_count"] == 256 * 3
    assert errors(rep, "sglang==0.5.23") == [] and errors(rep, "vllm==0.33.0") == []
