"""Findings do not depend on the interpreter's hash seed (sets of file names, dict orders)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ckptlint.testing.builder import write_checkpoint

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
          "hidden_size": 64, "torch_dtype": "bfloat16",
          "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                  "ignored_layers": ["model.layers.0.self_attn.o_proj"]}}
LISTING = """
model.embed_tokens.weight                     BF16     [64, 64]
model.layers.0.self_attn.o_proj.weight        F8_E4M3  [64, 64]
model.layers.0.self_attn.o_proj.weight_scale  F32      []
lm_head.weight                                BF16     [64, 64]
"""
SHARDS = {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
          "model.layers.0.self_attn.o_proj.weight": "model-00001-of-00002.safetensors",
          "model.layers.0.self_attn.o_proj.weight_scale": "model-00002-of-00002.safetensors",
          "lm_head.weight": "model-00002-of-00002.safetensors"}


def test_qd401_file_is_the_weights_shard_whatever_the_hash_seed(tmp_path):
    """An FP8 o_proj listed in ignored_layers is built BF16; its weight and scale sit in two shards.
    The finding names the weight's shard on every run (it used to pick from a set)."""
    write_checkpoint(tmp_path, config=CONFIG, tensors=LISTING, shards=SHARDS)
    files = set()
    for seed in ("1", "2", "3", "4", "5"):
        out = subprocess.run([sys.executable, "-m", "ckptlint", "check", str(tmp_path), "-q", "--isolated",
                              "--select", "QD401", "-t", "vllm==0.33.0", "-f", "json"],
                             capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed})
        findings = json.loads(out.stdout)["findings"]
        assert [f["code"] for f in findings] == ["QD401"], out.stdout
        files.add(findings[0]["file"])
    assert files == {"model-00001-of-00002.safetensors"}
