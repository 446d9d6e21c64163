"""A corpus of malformed checkpoints: each gives its specific finding, and nothing raises.

Single-file container cases are also opened with safetensors 0.8.0: where the library
refuses the file, one of our load-error findings quotes the start of its error message
(``error_text``); where it opens the file, we report no load error.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from safetensors import safe_open

from ckptlint.findings import Consequence
from ckptlint.reader import load_checkpoint
from ckptlint.rules import ALL_RULES
from ckptlint.testing import shard_name, write_checkpoint, write_safetensors

LOAD = Consequence.LOAD_ERROR
SILENT = Consequence.SILENT_CORRUPTION
HYGIENE = Consequence.HYGIENE
E = '{"dtype":"U8","shape":[2],"data_offsets":[0,2]}'
LFS = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"a" * 64 + b"\nsize 4943162336\n"
TWO = "a U8 [2]\nb U8 [2]"
S1, S2 = shard_name(1, 2), shard_name(2, 2)


@dataclass
class Case:
    id: str
    build: Callable[[Path], Path]  # builds under tmp_path, returns what to load
    code: str
    fragment: str
    consequence: Consequence = LOAD
    file: str | None = "x.safetensors"


def sf(**kw) -> Callable[[Path], Path]:
    """One file ``x.safetensors`` written by the builder with crafted options."""
    tensors = kw.pop("tensors", TWO)

    def build(tmp: Path) -> Path:
        return write_safetensors(tmp / "x.safetensors", tensors, **kw).path

    return build


def raw(data: bytes) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        p = tmp / "x.safetensors"
        p.write_bytes(data)
        return p

    return build


def header(text: str | bytes, data_len: int = 2) -> Callable[[Path], Path]:
    b = text.encode() if isinstance(text, str) else text
    return sf(raw_header=b, data_len=data_len)


def ck(**kw) -> Callable[[Path], Path]:
    """A checkpoint directory from write_checkpoint; ``after`` edits it further."""
    after = kw.pop("after", None)
    kw.setdefault("tensors", TWO)

    def build(tmp: Path) -> Path:
        root = write_checkpoint(tmp / "ck", **kw)
        if after:
            after(root)
        return root

    return build


def _dir_named_shard(root: Path) -> None:
    (root / "model.safetensors").unlink()
    (root / "model.safetensors").mkdir()


def _broken_symlink(root: Path) -> None:
    (root / "model.safetensors").unlink()
    os.symlink("../../blobs/deadbeef", root / "model.safetensors")


def _lfs(*names: str) -> Callable[[Path], None]:
    def after(root: Path) -> None:
        for n in names:
            (root / n).write_bytes(LFS)

    return after


def _index(weight_map: dict | None = None, **extra) -> Callable[[Path], None]:
    def after(root: Path) -> None:
        p = root / "model.safetensors.index.json"
        index = json.loads(p.read_text())
        if weight_map is not None:
            index["weight_map"] = weight_map
        index.update(extra)
        p.write_text(json.dumps(index, indent=2))

    return after


def _write(name: str, content: str) -> Callable[[Path], None]:
    def after(root: Path) -> None:
        (root / name).write_text(content)

    return after


CASES = [
    # --- header length / framing
    Case("header-len-0", header(b"", 0), "SF105", "not valid JSON"),
    Case("header-len-1", header(b"{", 0), "SF105", "not valid JSON"),
    Case("header-len-beyond-file", sf(declared_header_len=4096), "SF103", "truncated inside the header"),
    Case("header-len-2^60-sparse", sf(declared_header_len=2**60, truncate_to=2**40), "SF102", "100,000,000-byte limit"),
    Case("header-len-just-over-100MB", sf(declared_header_len=100_000_001, truncate_to=200_000_000), "SF102",
         "100,000,001"),
    Case("empty-file", raw(b""), "SF101", "is empty (0 bytes)"),
    Case("five-byte-file", raw(b"\x10\0\0\0\0"), "SF101", "only 5 bytes"),
    Case("truncated-mid-header", sf(truncate_to=20), "SF103", "truncated inside the header"),
    # --- header text
    Case("non-utf8", header(b'{"\xff\xfe":' + E.encode() + b"}"), "SF104", "not valid UTF-8"),
    # a multi-byte sequence cut off by the end of the header: Rust says "incomplete", not "invalid"
    Case("non-utf8-incomplete-at-end", raw(struct.pack("<Q", 8) + b'{"a":1}\xc2' + b"\0" * 8), "SF104",
         "not valid UTF-8"),
    Case("invalid-json", header('{"a": {"dtype": "U8",'), "SF105", "not valid JSON"),
    Case("json-array", header("[1, 2]"), "SF105", "JSON array, not an object"),
    Case("json-string", header('"abc"'), "SF105", "JSON string, not an object"),
    Case("deep-nesting-100000", header("[" * 100_000 + "]" * 100_000, 0), "SF105", "nested too deeply"),
    Case("deep-object-nesting", header('{"a":' * 50_000 + "1" + "}" * 50_000, 0), "SF105", "nested too deeply"),
    Case("nan-constant", header('{"__metadata__":{"a":NaN},"a":' + E + "}"), "SF105", "NaN"),
    Case("lone-surrogate", header('{"\\ud800":' + E + "}"), "SF105", "surrogate"),
    Case("trailing-garbage-in-header", header('{"a":' + E + "}xx"), "SF105", "Extra data"),
    Case("leading-whitespace", sf(tensors="a U8 [2]", leading="  "), "SF118", "leading whitespace", HYGIENE),
    # --- duplicate keys
    Case("duplicate-tensor-key-breaks-layout",
         sf(tensors="a U8 [2]", duplicate_key=("a", {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]})),
         "SF115", "more than once", LOAD),
    Case("duplicate-tensor-key-benign", sf(tensors="a U8 [2]", duplicate_key="a"), "SF115", "silently keeps the later",
         HYGIENE),
    Case("duplicate-field-in-entry", header('{"a":{"dtype":"U8","dtype":"U8","shape":[2],"data_offsets":[0,2]}}'),
         "SF107", "duplicate field(s) dtype"),
    Case("duplicate-metadata", header('{"__metadata__":{},"__metadata__":{},"a":' + E + "}"), "SF108", "appears twice"),
    Case("duplicate-metadata-key", header('{"__metadata__":{"k":"1","k":"2"},"a":' + E + "}"), "SF115",
         "__metadata__ defines key 'k'", HYGIENE),
    # --- __metadata__
    Case("metadata-non-string-value", sf(metadata={"format": "pt", "step": 1000}), "SF108", "'step' is a JSON integer"),
    Case("metadata-not-object", sf(extra_pairs=[("__metadata__", ["pt"])]), "SF108", "JSON array, not an object"),
    # --- entries
    Case("unknown-dtype", sf(entry_override={"a": {"dtype": "F8_E4M3FN"}}), "SF106", "unknown dtype 'F8_E4M3FN'"),
    Case("lowercase-dtype", sf(entry_override={"b": {"dtype": "u8"}}), "SF106", "unknown dtype 'u8'"),
    Case("dtype-not-string", sf(entry_override={"a": {"dtype": 8}}), "SF107", "dtype is a JSON integer"),
    Case("negative-dim", sf(entry_override={"a": {"shape": [-2]}}), "SF107", "shape [-2]"),
    Case("float-dim", sf(entry_override={"a": {"shape": [2.0]}}), "SF107", "shape [2.0]"),
    Case("bool-dim", sf(entry_override={"a": {"shape": [True, 2]}}), "SF107", "shape [true, 2]"),
    Case("negative-zero-dim", header('{"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}}', 0), "SF107", "-0"),
    Case("dim-over-u64", sf(entry_override={"a": {"shape": [2**64]}}), "SF107", "64-bit"),
    Case("shape-not-list", sf(entry_override={"a": {"shape": {"x": 2}}}), "SF107", "shape is a JSON object"),
    Case("dims-overflow", sf(entry_override={"a": {"shape": [2**40, 2**40]}}), "SF111", "overflows 64 bits"),
    Case("dims-overflow-before-zero", sf(entry_override={"a": {"shape": [2**40, 2**40, 0]}}), "SF111", "overflows"),
    Case("missing-field", header('{"a":{"dtype":"U8","shape":[2]}}', 0), "SF107", "has no data_offsets"),
    Case("entry-not-object", sf(entry_override={"b": [1, 2]}), "SF107", "entry is a JSON array"),
    Case("offsets-not-pair", sf(entry_override={"a": {"data_offsets": [0, 1, 2]}}), "SF107", "not a [begin, end] pair"),
    Case("offsets-strings", sf(offsets_override={"a": ["0", "2"]}), "SF107", "not two non-negative"),
    Case("extra-key-in-entry", sf(entry_override={"a": {"quant": "nf4"}}), "SF118", "extra key(s) 'quant'", HYGIENE),
    # --- layout
    Case("offsets-overlap", sf(offsets_override={"b": [1, 3]}, data_len=3), "SF109", "overlaps the previous tensor"),
    Case("offsets-gap", sf(offsets_override={"b": [3, 5]}, data_len=5), "SF109", "gap of 1 bytes"),
    Case("offsets-not-from-0", sf(tensors="a U8 [2]", offsets_override={"a": [1, 3]}, data_len=3), "SF109",
         "not 0"),
    Case("offsets-end-before-begin", sf(tensors="a U8 [0]", offsets_override={"a": [2, 0]}, data_len=0), "SF109",
         "end before they begin"),
    Case("offsets-beyond-file", sf(offsets_override={"b": [2, 400]}, data_len=4), "SF110", "span 398 bytes"),
    Case("offsets-beyond-file-truncated", sf(tensors="a U8 [2]\nb U8 [400]", data_len=4), "SF113", "398 bytes missing"),
    Case("size-not-numel-x-bytes", sf(tensors="a F32 [2]", offsets_override={"a": [0, 4]}, data_len=4), "SF110",
         "need 8"),
    Case("sub-byte-misaligned", sf(tensors="a F4 [3]", strict=False), "SF112", "12 bits"),
    Case("sub-byte-wrong-length", sf(tensors="a F4 [4]", offsets_override={"a": [0, 1]}, data_len=1), "SF110",
         "need 2"),
    Case("data-offset-over-48-bits", sf(tensors="a U8 [2]", entry_override={"a": {"shape": [2**48 + 1]}},
                                         offsets_override={"a": [0, 2**48 + 1]}), "SF118", "48-bit", HYGIENE),
    Case("trailing-bytes", sf(append_bytes=b"\0" * 7), "SF114", "7 trailing bytes"),
    Case("truncated-mid-data", sf(tensors="a F32 [1000]", truncate_to=1000), "SF113", "bytes missing"),
    # --- not a safetensors file at all
    Case("lfs-pointer", raw(LFS), "SF116", "Git LFS pointer"),
    Case("lfs-pointers-in-two-shards", ck(shards=2, after=_lfs(S1, S2)), "SF116", f"{S1}, {S2}", file=S1),
    Case("directory-named-safetensors", ck(after=_dir_named_shard), "SF117", "is a directory",
         file="model.safetensors"),
    Case("broken-symlink-shard", ck(after=_broken_symlink), "SF117", "broken symlink", file="model.safetensors"),
    # --- index
    Case("index-invalid-json", ck(shards=2, after=_write("model.safetensors.index.json", '{"weight_map": {')),
         "IX201", "not valid JSON", file="model.safetensors.index.json"),
    Case("index-not-object", ck(shards=2, after=_write("model.safetensors.index.json", "[]")), "IX201",
         "JSON array", file="model.safetensors.index.json"),
    Case("index-no-weight-map", ck(shards=2, after=_write("model.safetensors.index.json", '{"metadata": {}}')),
         "IX202", "has no weight_map", file="model.safetensors.index.json"),
    Case("index-weight-map-not-object", ck(shards=2, after=_index(weight_map=[S1, S2])), "IX202",
         "weight_map is a JSON array", file="model.safetensors.index.json"),
    Case("index-weight-map-value-not-string", ck(shards=2, after=_index(weight_map={"a": S1, "b": 2})), "IX202",
         "'b' is a JSON number", file="model.safetensors.index.json"),
    Case("index-missing-shard", ck(shards=2, after=_index(weight_map={"a": S1, "b": S2, "c": shard_name(3, 2)})),
         "IX204", "does not exist", file="model.safetensors.index.json"),
    Case("index-dotdot-path", ck(shards=2, after=_index(weight_map={"a": S1, "b": "../x.safetensors"})), "IX203",
         "is a path", file="model.safetensors.index.json"),
    Case("index-absolute-path", ck(shards=2, after=_index(weight_map={"a": S1, "b": "/etc/x.safetensors"})), "IX203",
         "absolute path", file="model.safetensors.index.json"),
    Case("index-backslash-path", ck(shards=2, after=_index(weight_map={"a": S1, "b": "..\\x.safetensors"})), "IX203",
         "is a path", file="model.safetensors.index.json"),
    Case("index-dot-name", ck(shards=2, after=_index(weight_map={"a": S1, "b": ".."})), "IX203",
         "not a file name", file="model.safetensors.index.json"),
    Case("index-not-safetensors-name", ck(shards=2, after=_index(weight_map={"a": S1, "b": "config.json"})), "IX203",
         "not a .safetensors file", file="model.safetensors.index.json"),
    Case("index-tensor-missing-everywhere", ck(shards=2, after=_index(weight_map={"a": S1, "b": S2, "c": S2})),
         "IX205", "simply not there", SILENT, file="model.safetensors.index.json"),
    Case("index-tensor-in-other-shard", ck(shards=2, after=_index(weight_map={"a": S2, "b": S1})), "IX205",
         f"found in {S1}", HYGIENE, file="model.safetensors.index.json"),
    Case("index-tensor-only-in-unreferenced-file",
         ck(shards=2, after=lambda r: (write_safetensors(r / "extra.safetensors", "c U8 [1]"),
                                       _index(weight_map={"a": S1, "b": S2, "c": S2})(r))),
         "IX205", "only in unreferenced file(s) (extra.safetensors)", SILENT, file="model.safetensors.index.json"),
    Case("tensor-in-two-shards", ck(tensors="a U8 [2]\nb U8 [2]\na2 U8 [2]", shards={"a": S1, "b": S2, "a2": S2},
                                    after=lambda r: write_safetensors(r / S2, "b U8 [2]\na U8 [2]", metadata={"format": "pt"})),
         "IX206", "same dtype and shape", HYGIENE, file=S2),
    Case("tensor-in-two-shards-different", ck(shards=2, after=lambda r: write_safetensors(r / S2, "b U8 [2]\na F32 [2]")),
         "IX206", "U8 [2] vs F32 [2]", SILENT, file=S2),
    Case("tensor-not-in-index", ck(tensors="a U8 [2]\nb U8 [2]\nc U8 [2]", shards=2,
                                   after=_index(weight_map={"a": S1, "c": S2})), "IX207",
         "not listed in weight_map", HYGIENE, file="model.safetensors.index.json"),
    Case("total-size-wrong", ck(shards=2, total_size=12345), "IX208", "total_size is 12,345", HYGIENE,
         file="model.safetensors.index.json"),
    Case("total-size-is-file-sizes",
         ck(shards=2, after=lambda r: _index(metadata={"total_size": sum(os.path.getsize(r / s) for s in (S1, S2))})(r)),
         "IX208", "equals the sum of the shard file sizes", HYGIENE, file="model.safetensors.index.json"),
    Case("total-size-not-int", ck(shards=2, after=_index(metadata={"total_size": "4GB"})), "IX211", "'4GB'", HYGIENE,
         file="model.safetensors.index.json"),
    Case("unreferenced-shard", ck(shards=2, after=lambda r: write_safetensors(r / "model_mtp.safetensors", "m U8 [1]")),
         "IX209", "not referenced by model.safetensors.index.json", HYGIENE, file="model_mtp.safetensors"),
    Case("index-duplicate-key",
         ck(shards=2, after=_write("model.safetensors.index.json",
                                   f'{{"weight_map": {{"a": "{S1}", "a": "{S1}", "b": "{S2}"}}}}')),
         "IX212", "'a' appear(s) more than once", HYGIENE, file="model.safetensors.index.json"),
    Case("no-weights", lambda tmp: (tmp / "config.json").write_text("{}") and tmp, "IX210", "no weight files",
         file=None),
    Case("only-bin-weights",
         lambda tmp: ((tmp / "config.json").write_text("{}"), (tmp / "pytorch_model.bin").write_bytes(b"x"), tmp)[-1],
         "IX210", "pytorch_model.bin", HYGIENE, file=None),
    # --- config files
    Case("config-missing", ck(config=None), "CF301", "missing", file="config.json"),
    Case("config-invalid-json", ck(config='{"model_type": "llama",}'), "CF302", "not valid JSON", file="config.json"),
    Case("config-not-utf8", ck(config=b'{"model_type": "\xff"}'), "CF302", "not valid UTF-8", file="config.json"),
    Case("config-not-object", ck(config="[1, 2]"), "CF303", "JSON array, not an object", file="config.json"),
    Case("config-is-directory", ck(config=None, after=lambda r: (r / "config.json").mkdir()), "CF302",
         "is a directory, not a regular file", file="config.json"),
    Case("config-duplicate-key", ck(config='{"quantization_config": {}, "quantization_config": {"a": 1}}'), "CF304",
         "'quantization_config'", HYGIENE, file="config.json"),
    Case("quant-config-invalid-json", ck(hf_quant_config="{"), "CF302", "not valid JSON", file="hf_quant_config.json"),
    Case("quant-config-not-object", ck(hf_quant_config="null"), "CF303", "JSON null", file="hf_quant_config.json"),
]


def test_corpus_is_large_and_ids_unique():
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


RULE_NAMES = {r.code: r.name for r in ALL_RULES}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed(tmp_path, case):
    target = case.build(tmp_path)
    ck = load_checkpoint(target)  # must not raise
    hits = [f for f in ck.issues if f.code == case.code]
    assert hits, [(f.code, f.message) for f in ck.issues]
    f = next((f for f in hits if case.fragment in f.message), None)
    assert f is not None, [h.message for h in hits]
    assert f.consequence is case.consequence, f
    assert f.file == case.file
    for g in ck.issues:
        assert "\n" not in g.message
        if g.file:
            assert g.message.startswith(g.file) or g.message.startswith(g.file.split(",")[0]), g.message
        assert not os.path.isabs(g.file or "x")
        # named by the rule that owns the code when the reader makes it (no rule renames it later)
        assert g.name == RULE_NAMES[g.code] and g.target is None
    if ck.is_single_file:
        _agrees_with_safetensors(target, ck)
    for s in ck.shards.values():
        assert s.bytes_read <= (s.header_len or 0) + 8 + 65536


def _agrees_with_safetensors(path: Path, ck) -> None:
    ours = [f for f in ck.issues if f.code.startswith("SF") and f.consequence is LOAD]
    try:
        with safe_open(str(path), framework="numpy") as h:
            list(h.keys())
    except Exception as e:  # noqa: BLE001 - any refusal
        msg = str(e)
        assert ours, f"safetensors refuses ({msg}) but we report no load error"
        assert any(f.error_text and msg.startswith(f.error_text) for f in ours), (msg, [f.error_text for f in ours])
    else:
        assert not ours, [f.message for f in ours]


def test_huge_claimed_header_is_not_allocated(tmp_path):
    p = write_safetensors(tmp_path / "x.safetensors", TWO, declared_header_len=2**60, truncate_to=2**40).path
    ck = load_checkpoint(p)
    [f] = ck.issues
    assert f.code == "SF102" and f.error_text == "Error while deserializing header: header too large"
    assert ck.shards["x.safetensors"].bytes_read == 8


def test_every_problem_is_reported(tmp_path):
    p = write_safetensors(
        tmp_path / "x.safetensors", "a U8 [2]\nb F32 [2]\nc U8 [2]\nd XX [1]\ne U8 [1]",
        strict=False, entry_override={"e": {"shape": [-1]}},
        offsets_override={"b": [2, 6], "c": [11, 13]}, metadata={"n": 1}).path
    ck = load_checkpoint(p)
    codes = sorted(f.code for f in ck.issues)
    assert codes == ["SF106", "SF107", "SF108", "SF109", "SF110"], [f.message for f in ck.issues]
    # invalid entries contribute no tensors; well-formed ones do
    assert sorted(ck.tensors) == ["a", "b", "c"]


def test_lfs_pointer_finding_lists_files_and_fix(tmp_path):
    root = write_checkpoint(tmp_path / "ck", tensors=TWO, shards=2)
    for s in (S1, S2):
        (root / s).write_bytes(LFS)
    ck = load_checkpoint(root)
    [f] = [f for f in ck.issues if f.code == "SF116"]
    assert set(f.data["files"]) == {S1, S2}
    assert f.data["files"][S1] == {"oid": "sha256:" + "a" * 64, "size": 4943162336}
    assert 'git lfs pull --include="*.safetensors"' in f.hint and "hf download" in f.hint
    assert sorted(f.tensors) == ["a", "b"]
    assert ck.tensors == {}
    assert all(s.bytes_read <= 1024 for s in ck.shards.values())


def test_fatal_shard_contributes_no_tensors(tmp_path):
    root = write_checkpoint(tmp_path / "ck", tensors=TWO, shards=2,
                            shard_options={S2: {"raw_header": b"{not json", "data_len": 2}})
    ck = load_checkpoint(root)
    assert list(ck.tensors) == ["a"]
    assert [f.code for f in ck.issues] == ["SF105"]  # no index-vs-header noise for the broken shard


def test_raw_length_field_claims(tmp_path):
    p = tmp_path / "x.safetensors"
    p.write_bytes(struct.pack("<Q", 2) + b"{}")
    assert load_checkpoint(p).issues == []
