"""Names and fields with characters that ``str.isdigit()`` accepts but ``int()`` does not (superscripts
such as ``²``) are data like any other: a finding or nothing, never an internal error (exit 3)."""

from __future__ import annotations

import json
import subprocess
import sys

from ckptlint.findings import natural_key
from ckptlint.reader.header import parse_lfs_pointer
from ckptlint.testing.builder import write_checkpoint


def ckptlint(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckptlint", *args], capture_output=True, text=True, timeout=120)


def test_layer_component_with_a_superscript_digit(tmp_path):
    write_checkpoint(tmp_path, config={"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 2},
                     tensors=[("model.layers.\u00b2.mlp.down_proj.weight", "BF16", (8, 16)),
                              ("model.layers.0.mlp.down_proj.weight", "BF16", (8, 16))], shards=1)
    r = ckptlint("check", str(tmp_path), "-q", "-f", "json")
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["summary"] is not None


def test_natural_key_with_a_superscript_component():
    names = ["model.layers.10.x", "model.layers.\u00b2.x", "model.layers.2.x"]
    assert sorted(names, key=natural_key) == ["model.layers.2.x", "model.layers.10.x", "model.layers.\u00b2.x"]


def test_lfs_pointer_with_a_non_ascii_size():
    ptr = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + "\nsize \u00b2\n".encode()
    info = parse_lfs_pointer(ptr)
    assert info is not None and "size" not in info and info["oid"] == "sha256:" + "0" * 64
