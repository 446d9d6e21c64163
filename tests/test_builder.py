"""The synthetic checkpoint builder, checked against the real safetensors library (0.8.0)."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from ckptlint.testing import (
    DELETE,
    parse_listing,
    shard_name,
    tensor_nbytes,
    write_checkpoint,
    write_safetensors,
)

LISTING = """
# a comment line
model.embed_tokens.weight            BF16     [128, 64]
model.layers.0.mlp.down_proj.weight  F8_E4M3  [64, 128]   # trailing comment

model.layers.0.mlp.down_proj.weight_scale  F32  []
model.layers.0.mlp.experts.0.w1.weight     F4   [64, 32]
model.layers.0.mlp.experts.0.w1.scale      F8_E8M0 [64, 1]
model.layers.0.empty                       I64  [0, 4]
model.layers.0.f6                          F6_E2M3 [4, 4]
model.layers.0.f6b                         F6_E3M2 [8]
model.norm.weight                          F16  [64]
"""


def _open(path):
    with safe_open(str(path), framework="numpy") as f:
        keys = list(f.keys())
        return (
            {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in keys},
            f.metadata(),
        )


def test_parse_listing():
    specs = parse_listing(LISTING)
    assert specs[0] == ("model.embed_tokens.weight", "BF16", (128, 64))
    assert specs[2] == ("model.layers.0.mlp.down_proj.weight_scale", "F32", ())
    assert len(specs) == 9


@pytest.mark.parametrize("bad", ["a BF16", "a [1]", "a BF16 [1, x]", "a b c [1]"])
def test_parse_listing_rejects_bad_lines(bad):
    with pytest.raises(ValueError, match="line 1"):
        parse_listing(bad)


@pytest.mark.parametrize("sparse", [True, False])
def test_valid_file_opens_with_safetensors(tmp_path, sparse):
    p = tmp_path / "x.safetensors"
    w = write_safetensors(p, LISTING, metadata={"format": "pt", "k": "v"}, sparse=sparse)
    got, meta = _open(p)
    assert got == {n: (d, s) for n, d, s in parse_listing(LISTING)}
    assert meta == {"format": "pt", "k": "v"}
    assert w.header_len % 8 == 0
    assert w.size == 8 + w.header_len + w.data_len == os.path.getsize(p)
    # offsets contiguous in the order given
    pos = 0
    for n, d, s in parse_listing(LISTING):
        assert w.offsets[n] == (pos, pos + tensor_nbytes(d, s))
        pos += tensor_nbytes(d, s)
    assert pos == w.data_len == w.nbytes


def test_sparse_and_dense_files_are_byte_identical(tmp_path):
    a = write_safetensors(tmp_path / "a.safetensors", LISTING, sparse=True).path
    b = write_safetensors(tmp_path / "b.safetensors", LISTING, sparse=False).path
    assert a.read_bytes() == b.read_bytes()


def test_header_matches_reference_writer(tmp_path):
    """Same tensors in the reference writer's order give the same bytes as safetensors' writer."""
    arrays = {"b": np.zeros((3, 5), np.float32), "a": np.zeros((7,), np.float32), "c": np.zeros((2, 2), np.int8)}
    ref = tmp_path / "ref.safetensors"
    save_file(arrays, str(ref), metadata={"format": "np"})
    # reference order: alignment descending (F32 before I8), then name
    ours = write_safetensors(tmp_path / "ours.safetensors", [("a", "F32", (7,)), ("b", "F32", (3, 5)), ("c", "I8", (2, 2))],
                             metadata={"format": "np"}, sparse=False).path
    assert ours.read_bytes() == ref.read_bytes()


def test_sparse_huge_file_costs_no_disk(tmp_path):
    w = write_safetensors(tmp_path / "big.safetensors", "w U8 [1000000, 1000000]")  # ~1 TB apparent
    st = os.stat(w.path)
    assert st.st_size > 10**12
    assert st.st_blocks * 512 < 10 * 2**20
    got, _ = _open(w.path)
    assert got == {"w": ("U8", (1000000, 1000000))}


def test_crafted_options(tmp_path):
    p = tmp_path / "c.safetensors"
    write_safetensors(p, "a U8 [2]\nb U8 [2]", declared_header_len=2**60)
    assert struct.unpack("<Q", p.read_bytes()[:8])[0] == 2**60
    write_safetensors(p, "a U8 [2]", entry_override={"a": {"shape": DELETE, "x": 1}}, pad=False)
    header = json.loads(p.read_bytes()[8:-2])
    assert header == {"a": {"dtype": "U8", "data_offsets": [0, 2], "x": 1}}
    write_safetensors(p, "a U8 [2]", duplicate_key="a", pad=False)
    assert p.read_bytes()[8:].count(b'"a":') == 2
    write_safetensors(p, "a U8 [2]", offsets_override={"a": [1, 3]}, append_bytes=b"xy", truncate_to=12)
    assert os.path.getsize(p) == 12
    write_safetensors(p, "a U8 [2]", raw_header=b"{}", data_len=5)
    assert p.read_bytes() == struct.pack("<Q", 2) + b"{}" + b"\0" * 5
    with pytest.raises(ValueError):
        write_safetensors(p, "a F4 [3]")
    write_safetensors(p, "a F4 [3]\nb XX [2]", strict=False)  # 2 bytes + 2 bytes


def test_write_checkpoint_sharded(tmp_path):
    root = write_checkpoint(tmp_path / "ck", config={"model_type": "llama"}, tensors=LISTING, shards=3,
                            hf_quant_config={"quantization": {"quant_algo": "FP8"}})
    names = sorted(os.listdir(root))
    assert names == ["config.json", "hf_quant_config.json"] + [shard_name(i, 3) for i in (1, 2, 3)] + [
        "model.safetensors.index.json"]
    assert (root / "config.json").read_text() == json.dumps({"model_type": "llama"}, indent=2) + "\n"
    index = json.loads((root / "model.safetensors.index.json").read_text())
    specs = parse_listing(LISTING)
    assert index["metadata"]["total_size"] == sum(tensor_nbytes(d, s) for _, d, s in specs)
    assert set(index["weight_map"]) == {n for n, _, _ in specs}
    seen = {}
    for shard in set(index["weight_map"].values()):
        got, meta = _open(root / shard)
        assert meta == {"format": "pt"}
        seen.update(got)
        assert all(index["weight_map"][k] == shard for k in got)
    assert seen == {n: (d, s) for n, d, s in specs}


def test_write_checkpoint_single_and_mapping(tmp_path):
    one = write_checkpoint(tmp_path / "one", tensors="a F32 [2]")
    assert sorted(os.listdir(one)) == ["config.json", "model.safetensors"]
    m = write_checkpoint(tmp_path / "m", config=None, tensors="a F32 [2]\nb F32 [3]",
                         shards={"a": "x.safetensors", "b": "y.safetensors"})
    assert sorted(os.listdir(m)) == ["model.safetensors.index.json", "x.safetensors", "y.safetensors"]
    raw = write_checkpoint(tmp_path / "raw", config="{not json", tensors="a F32 [2]", index={"weight_map": {}})
    assert (raw / "config.json").read_text() == "{not json"
    assert json.loads((raw / "model.safetensors.index.json").read_text()) == {"weight_map": {}}
    with pytest.raises(ValueError):
        write_checkpoint(tmp_path / "bad", tensors="a F32 [2]", shards={"b": "x.safetensors"})
