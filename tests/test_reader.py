"""load_checkpoint on valid input: agreement with safetensors, Checkpoint fields, bytes read."""

from __future__ import annotations

import json
import os
import time

import pytest
from safetensors import safe_open

from ckptlint.checkpoint import TensorInfo
from ckptlint.deployment import Deployment
from ckptlint.findings import Consequence
from ckptlint.reader import NotACheckpoint, load_checkpoint
from ckptlint.rules import ALL_RULES
from ckptlint.rules.base import DOC_SECTIONS, ReaderRule, RuleContext
from ckptlint.testing import parse_listing, shard_name, write_checkpoint, write_safetensors

# The rules the reader detects: the container families (shard files, the index and the file set,
# config file syntax), all declared in the rule catalogue.
READER_RULES = tuple(r for r in ALL_RULES if issubclass(r, ReaderRule))

VALID = {
    "dense": """
        model.embed_tokens.weight BF16 [128, 64]
        model.layers.0.self_attn.q_proj.weight F8_E4M3 [64, 64]
        model.layers.0.self_attn.q_proj.weight_scale F32 []
        model.norm.weight F32 [64]
    """,
    "sub-byte": """
        w.fp4 F4 [64, 32]
        w.fp4_odd_rows F4 [3, 2]
        w.f6a F6_E2M3 [4, 4]
        w.f6b F6_E3M2 [4]
        w.scale F8_E8M0 [64, 2]
    """,
    "scalars-and-empty": """
        s.f32 F32 []
        s.u8 U8 []
        e.rows I64 [0, 8]
        e.cols BF16 [8, 0]
        e.all F16 [0]
    """,
    "every-dtype": "\n".join(
        f"t.{d.lower()} {d} [2, 4]"
        for d in ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
                  "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"]
    ),
}


def _oracle(path):
    with safe_open(str(path), framework="numpy") as f:
        return {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in f.keys()}


@pytest.mark.parametrize("name", sorted(VALID))
def test_single_file_matches_safetensors(tmp_path, name):
    p = tmp_path / "model.safetensors"
    w = write_safetensors(p, VALID[name], metadata={"format": "pt"})
    ck = load_checkpoint(p)
    assert ck.issues == []
    assert {n: (t.dtype, t.shape) for n, t in ck.tensors.items()} == _oracle(p)
    assert ck.is_single_file and ck.root == str(p) and ck.config is None
    info = ck.shards["model.safetensors"]
    assert (info.size, info.header_len, info.n_tensors, info.data_bytes) == (w.size, w.header_len, len(ck.tensors), w.nbytes)
    assert info.bytes_read == 8 + w.header_len
    for n, t in ck.tensors.items():
        assert t == TensorInfo(n, t.dtype, t.shape, "model.safetensors")  # built by the fast path
        assert type(t.shape) is tuple


def test_reference_writer_files(tmp_path):
    import numpy as np
    from safetensors.numpy import save_file

    p = tmp_path / "ref.safetensors"
    save_file({"z": np.zeros((3, 1), np.float16), "a": np.zeros((2,), np.int64), "m": np.zeros((), np.uint8)}, str(p))
    ck = load_checkpoint(p)
    assert ck.issues == []
    assert {n: (t.dtype, t.shape) for n, t in ck.tensors.items()} == _oracle(p)


def test_offsets_out_of_json_order_are_valid(tmp_path):
    # valid file whose JSON lists tensors in another order than their data (takes the slow path)
    p = tmp_path / "x.safetensors"
    write_safetensors(p, "a U8 [2]\nb U8 [3]\nz U8 [0]", offsets_override={"a": [3, 5], "b": [0, 3], "z": [5, 5]})
    assert _oracle(p) == {"a": ("U8", (2,)), "b": ("U8", (3,)), "z": ("U8", (0,))}
    ck = load_checkpoint(p)
    assert ck.issues == []
    assert sorted(ck.tensors) == ["a", "b", "z"]
    assert ck.shards["x.safetensors"].data_bytes == 5


def test_sharded_checkpoint_fields(tmp_path):
    cfg = {"model_type": "llama", "quantization_config": {"quant_method": "fp8"}}
    quant = {"quantization": {"quant_algo": "FP8"}}
    root = write_checkpoint(tmp_path / "ck", config=cfg, hf_quant_config=quant, tensors=VALID["dense"], shards=2)
    ck = load_checkpoint(root)
    assert ck.issues == []
    assert ck.config == cfg and ck.hf_quant_config == quant
    assert ck.index_file == "model.safetensors.index.json"
    # The index is kept without its weight_map (compared with the headers while reading, then dropped to
    # bound memory on million-tensor checkpoints); its size is recorded.
    raw_index = json.loads((root / ck.index_file).read_text())
    assert ck.index == {**{k: v for k, v in raw_index.items() if k != "weight_map"},
                        "weight_map_entries": len(raw_index["weight_map"])}
    assert set(ck.texts) == {"config.json", "hf_quant_config.json", "model.safetensors.index.json"}
    assert ck.texts["config.json"] == (root / "config.json").read_text()
    assert not ck.is_single_file and ck.root == str(root)
    assert set(ck.shards) == {shard_name(1, 2), shard_name(2, 2)}
    assert {n: (t.dtype, t.shape) for n, t in ck.tensors.items()} == {n: (d, s) for n, d, s in parse_listing(VALID["dense"])}
    for n, t in ck.tensors.items():
        assert t.file == raw_index["weight_map"][n]
    assert load_checkpoint(os.fspath(root)).tensors == ck.tensors  # str and PathLike


def test_shards_without_index(tmp_path):
    root = write_checkpoint(tmp_path / "ck", tensors=VALID["dense"], shards=3, index=False)
    ck = load_checkpoint(root)
    assert ck.issues == [] and ck.index is None and ck.index_file is None
    assert len(ck.shards) == 3 and len(ck.tensors) == 4


def test_single_file_reads_config_beside_it(tmp_path):
    root = write_checkpoint(tmp_path / "ck", config={"model_type": "x"}, tensors="a F32 [2]")
    ck = load_checkpoint(root / "model.safetensors")
    assert ck.is_single_file and ck.config == {"model_type": "x"} and ck.issues == []
    assert list(ck.texts) == ["config.json"]


def test_unreferenced_shard_tensors_are_not_added(tmp_path):
    root = write_checkpoint(tmp_path / "ck", tensors="a F32 [2]\nb F32 [2]", shards=2)
    write_safetensors(root / "model_mtp.safetensors", "mtp.w F32 [2]")
    ck = load_checkpoint(root)
    assert "mtp.w" not in ck.tensors and "model_mtp.safetensors" not in ck.shards
    [f] = ck.issues
    assert f.code == "IX209" and f.consequence is Consequence.HYGIENE and f.tensors == ["mtp.w"]


def test_not_a_checkpoint(tmp_path):
    with pytest.raises(NotACheckpoint):
        load_checkpoint(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotACheckpoint):
        load_checkpoint(tmp_path / "empty")
    (tmp_path / "w.bin").write_bytes(b"x")
    with pytest.raises(NotACheckpoint):
        load_checkpoint(tmp_path / "w.bin")
    only_quant = tmp_path / "q"
    only_quant.mkdir()
    (only_quant / "hf_quant_config.json").write_text("{}")
    with pytest.raises(NotACheckpoint):
        load_checkpoint(only_quant)
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    with pytest.raises(NotACheckpoint, match="broken symlink"):
        load_checkpoint(tmp_path / "dangling")


def test_config_only_directory_is_a_checkpoint_without_weights(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    ck = load_checkpoint(tmp_path)
    assert [f.code for f in ck.issues] == ["IX210"]


def test_bytes_read_is_header_only_on_100gb_sparse_checkpoint(tmp_path):
    listing = "\n".join(f"model.layers.{i}.mlp.experts.{e}.w F8_E4M3 [7168, 18432]" for i in range(20) for e in range(40))
    root = write_checkpoint(tmp_path / "big", tensors=listing, shards=4)
    ck = load_checkpoint(root)
    assert ck.issues == []
    assert sum(s.size for s in ck.shards.values()) > 100 * 10**9
    for s in ck.shards.values():
        assert s.bytes_read <= s.header_len + 8 + 65536
        assert s.bytes_read == s.header_len + 8
    assert ck.bytes_read < 10**6


def test_gc_state_is_restored(tmp_path):
    import gc

    root = write_checkpoint(tmp_path / "ck", tensors="a F32 [2]")
    assert gc.isenabled()
    load_checkpoint(root)
    assert gc.isenabled()
    gc.disable()
    try:
        load_checkpoint(root)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_reading_is_fast_enough(tmp_path):
    """A scaled-down smoke check (the real benchmark lives in benchmarks/)."""
    listing = [(f"model.layers.{i // 300}.mlp.experts.{i % 300}.down_proj.weight", "F8_E4M3", (7168, 2048))
               for i in range(20000)]
    root = write_checkpoint(tmp_path / "ck", tensors=listing, shards=40)
    t = time.perf_counter()
    ck = load_checkpoint(root)
    elapsed = time.perf_counter() - t
    assert len(ck.tensors) == 20000 and ck.issues == []
    assert elapsed < 2.0, elapsed


def test_reader_rules_are_registered_and_documented():
    codes = [r.code for r in READER_RULES]
    assert len(codes) == len(set(codes))
    assert {r.code for r in READER_RULES} == {r.code for r in ALL_RULES if r.code.startswith(("SF1", "IX2", "CF30"))}
    for rule in READER_RULES:
        assert tuple(rule.doc_sections()) == DOC_SECTIONS, rule
        assert all(rule.doc_sections()[s] for s in DOC_SECTIONS), rule
        assert rule.name.replace("-", "").isalnum() and rule.name == rule.name.lower()
        assert rule.summary and "\n" not in rule.summary and not rule.summary.endswith(".")
        # IX204 is reported per target (its consequence depends on the release); the rest once.
        assert rule.consequences and rule.scope == ("target" if rule.code == "IX204" else "checkpoint")


def test_reader_rule_surfaces_issues(tmp_path):
    root = write_checkpoint(tmp_path / "ck", config=None, tensors="a F32 [2]")
    ck = load_checkpoint(root)
    ctx = RuleContext(checkpoint=ck, deployment=Deployment())
    found = [f for rule in READER_RULES for f in rule().check(ctx)]
    assert [(f.code, f.name) for f in found] == [("CF301", "config-missing")]


def test_reader_rules_leave_the_checkpoint_findings_as_read(tmp_path):
    """Rules only read what the reader found: surfacing a finding (and re-targeting IX204 for each
    release) never changes the finding in ``Checkpoint.issues``."""
    from ckptlint.targets import resolve

    root = write_checkpoint(tmp_path / "ck", config=None, tensors="a F32 [2]\nb F32 [2]", shards=2)
    (root / shard_name(2, 2)).unlink()
    ck = load_checkpoint(root)
    before = [f.to_json() for f in ck.issues]
    assert {f["code"] for f in before} == {"CF301", "IX204"}
    found = []
    for target in (None, *resolve("sglang"), *resolve("vllm")):
        ctx = RuleContext(checkpoint=ck, deployment=Deployment(), target=target)
        for rule in READER_RULES:
            if (rule.scope == "target") == (target is not None):
                found += list(rule().check(ctx))
    assert [f.to_json() for f in ck.issues] == before
    retargeted = [f for f in found if f.target is not None]
    assert retargeted and all(f.code == "IX204" and f.name == "index-missing-shard" for f in retargeted)
