"""The reader's clean-header scan (``canonical.scan_clean``): a typed msgspec decode and column
checks. It must accept only what the JSON path accepts as clean, with the same result (every clean
header the reference writer makes, among them), and decline everything else (the JSON path then
reads and reports it)."""

from __future__ import annotations

import json
import os
import struct
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlint.checkpoint import DTYPE_BITS
from ckptlint.reader import canonical, parse
from ckptlint.reader.header import ShardInfo, ShardRead
from ckptlint.reader import load_checkpoint
from ckptlint.testing.builder import write_safetensors


def _json_path(text: str):
    """What the reader's JSON path makes of a header: (tensors, data end, metadata) when it finds
    it clean (no finding at all), else None."""
    raw = text.encode()
    res = ShardRead(info=ShardInfo(file="x", size=0))
    end = _data_end(text)
    with mock.patch.object(parse, "scan_columns", lambda raw: None):
        parse.parse_header(raw, len(raw), 8 + len(raw) + end, "x", res)
    if res.issues or res.fatal:
        return None
    return res.tensors, res.info.data_bytes, res.metadata


def _data_end(text: str) -> int:
    try:
        obj = json.loads(text)
        return max((v["data_offsets"][1] for k, v in obj.items() if k != "__metadata__"), default=0)
    except (ValueError, TypeError, KeyError, IndexError):
        return 0


def _entry(name: str, dtype: str, shape: list[int], b: int, e: int) -> str:
    return json.dumps({name: {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}}, separators=(",", ":"))[1:-1]


GOOD = ('{"__metadata__":{"format":"pt"},' + _entry("a.weight", "BF16", [2, 3], 0, 12) + ","
        + _entry("a.weight_scale", "F32", [2], 12, 20) + "}")


def test_canonical_header_is_read_without_json(tmp_path, monkeypatch):
    p = tmp_path / "model.safetensors"
    write_safetensors(p, "m.w BF16 [4, 8]\nm.s F32 [4]\nn.w F8_E4M3 [16, 16]", metadata={"format": "pt"})

    def no_json(text):
        raise AssertionError("the JSON path was taken")

    monkeypatch.setattr(parse, "_loads", no_json)
    ck = load_checkpoint(p)
    assert ck.issues == []
    assert {n: (t.dtype, t.shape) for n, t in ck.tensors.items()} == {
        "m.w": ("BF16", (4, 8)), "m.s": ("F32", (4,)), "n.w": ("F8_E4M3", (16, 16))}


def test_reference_writer_layout_is_canonical(tmp_path):
    import numpy as np
    from safetensors.numpy import save_file

    p = tmp_path / "ref.safetensors"
    save_file({"z": np.zeros((3, 1), np.float16), "a": np.zeros((2,), np.int64), "m": np.zeros((), np.uint8),
               "b.w": np.zeros((4, 4), np.float32)}, str(p), metadata={"format": "pt"})
    raw = p.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    text = raw[8:8 + n].decode()
    got = canonical.scan_clean(text.encode(), "x")
    assert got is not None
    assert got == _json_path(text)
    assert list(got[0]) == ["a", "b.w", "z", "m"]  # file order, as the writer lays out the data


# Clean, though not in the reference writer's exact layout: accepted, with the JSON path's result.
OTHER_CLEAN = {
    "spaces after separators": json.dumps({k: v for k, v in json.loads(GOOD).items() if k != "__metadata__"}),
    "fields in another order": '{"a":{"shape":[2],"dtype":"F32","data_offsets":[0,8]}}',
    "tensor named dtype": '{' + _entry("dtype", "F32", [2], 0, 8) + "}",
    # a dash that is not "-0" does not decline (a one-byte search rules most headers out of the "-0" one)
    "dash in a name": '{' + _entry("a-1.w", "F32", [2], 0, 8) + "," + _entry("b-", "F32", [2], 8, 16) + "}",
    "newlines and indentation": json.dumps({k: v for k, v in json.loads(GOOD).items() if k != "__metadata__"},
                                           indent=2),
}

DECLINED = {
    "duplicate field in an entry": '{"a":{"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]}}',
    "minus zero": '{"a":{"dtype":"F32","shape":[2,-0],"data_offsets":[0,0]}}',
    "minus zero in a name": '{' + _entry("a-0", "F32", [2], 0, 8) + "}",
    # the colon count that proves no repeated name or field also counts a colon inside a name
    "colon in a name": '{' + _entry("a:b", "F32", [2], 0, 8) + "}",
    "boolean dimension": '{"a":{"dtype":"F32","shape":[true],"data_offsets":[0,4]}}',
    "exponent in an offset": '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8e0]}}',
    "metadata with a nested object": '{"__metadata__":{"k":{}},' + _entry("a", "F32", [2], 0, 8) + "}",
    "escaped name": '{' + _entry('a"b', "F32", [2], 0, 8) + '}',
    "unicode escape": '{"\\u0061":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
    "duplicate name": '{' + _entry("a", "F32", [2], 0, 8) + "," + _entry("a", "F32", [2], 8, 16) + "}",
    "duplicate metadata key": '{"__metadata__":{"k":"1","k":"2"},' + _entry("a", "F32", [2], 0, 8) + "}",
    "metadata not first": '{' + _entry("a", "F32", [2], 0, 8) + ',"__metadata__":{"format":"pt"}}',
    "metadata value not a string": '{"__metadata__":{"k":1},' + _entry("a", "F32", [2], 0, 8) + "}",
    "gap in offsets": '{' + _entry("a", "F32", [2], 0, 8) + "," + _entry("b", "F32", [2], 16, 24) + "}",
    "overlapping entries": '{' + _entry("a", "F32", [2], 0, 8) + "," + _entry("b", "F32", [2], 4, 16) + "}",
    "first entry not at 0": '{' + _entry("a", "F32", [2], 4, 8) + "}",
    "offsets out of file order": '{' + _entry("a", "F32", [2], 8, 16) + "," + _entry("b", "F32", [2], 0, 8) + "}",
    "wrong byte length": '{' + _entry("a", "F32", [3], 0, 8) + "}",
    "unknown dtype": '{' + _entry("a", "F128", [2], 0, 32) + "}",
    "dimension over 48 bits": '{' + _entry("a", "U8", [2**48], 0, 2**48) + "}",
    "leading zero": '{"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}}',
    "negative dimension": '{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}',
    "float dimension": '{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}',
    "extra key": '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}',
    "trailing comma": '{' + _entry("a", "F32", [2], 0, 8) + ",}",
    "missing comma": '{' + _entry("a", "F32", [2], 0, 8) + _entry("b", "F32", [2], 8, 16) + "}",
    "junk between entries": '{' + _entry("a", "F32", [2], 0, 8) + ",x," + _entry("b", "F32", [2], 8, 16) + "}",
    "junk after the object": GOOD + "x",
    "no closing brace": GOOD[:-1],
    "tensor named __metadata__": '{' + _entry("__metadata__", "F32", [2], 0, 8) + "}",
    "control character in name": '{' + _entry("a\tb", "F32", [2], 0, 8).replace("\\t", "\t") + "}",
    "sub-byte size": '{' + _entry("a", "F4", [3], 0, 2) + "}",
    "empty tensor of rank 3": '{' + _entry("a", "F32", [0, 2, 2], 0, 0) + "}",
    "no tensors": '{"__metadata__":{"format":"pt"}}',
}


@pytest.mark.parametrize("case", sorted(OTHER_CLEAN))
def test_other_clean_layouts_are_accepted_with_the_json_result(case):
    text = OTHER_CLEAN[case]
    got = canonical.scan_clean(text.encode(), "x")
    assert got is not None
    assert got == _json_path(text)


def test_good_header_is_accepted():
    assert canonical.scan_clean((GOOD + "   ").encode(), "x") == _json_path(GOOD)


@pytest.mark.parametrize("case", sorted(DECLINED))
def test_declined_headers_go_to_the_json_path(tmp_path, monkeypatch, case):
    text = DECLINED[case]
    assert canonical.scan_clean(text.encode(), "x") is None
    # ...and the reader's verdict is the JSON path's, finding for finding.
    raw = text.encode()
    raw += b" " * (-len(raw) % 8)
    p = tmp_path / "model.safetensors"
    p.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 64)
    with_scan = load_checkpoint(p)
    monkeypatch.setattr(parse, "scan_columns", lambda raw: None)
    without = load_checkpoint(p)
    assert with_scan.tensors == without.tensors
    assert [(f.code, f.message) for f in with_scan.issues] == [(f.code, f.message) for f in without.issues]


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=10)
entries = st.lists(st.tuples(names, st.sampled_from(sorted(DTYPE_BITS)), st.lists(st.integers(0, 5), max_size=3)),
                   max_size=6)
metas = st.none() | st.dictionaries(names, names, max_size=3)


def _plain(s: str) -> bool:
    # (text "-0" anywhere sends a header to the JSON path, which tells a -0 number from a name; so
    # does a metadata string that starts with ':', whose opening quote and colon look like the end
    # of a key, and a tensor name with any ':' in it (the scan counts the colons of the entries))
    return '"' not in s and "\\" not in s and "-0" not in s and not s.startswith(":") \
        and not any(ord(c) < 32 for c in s)


def _whole(dtype: str, shape: list[int]) -> bool:
    numel = 1
    for d in shape:
        numel *= d
    return numel * DTYPE_BITS[dtype] % 8 == 0 and not (numel == 0 and len(shape) > 2)


@settings(max_examples=4 * int(os.environ.get("CKPTLINT_FUZZ_EXAMPLES", "50")), deadline=None, database=None)
@given(entries, metas, st.integers(0, 2))
def test_scan_agrees_with_the_json_path(items, meta, gap):
    """Random compact headers (any names, including ones that need escapes, any dtype and shape,
    sometimes a gap in the offsets): whenever the scan accepts, it returns what the JSON path
    returns; a clean header whose strings need no escaping is always accepted."""
    obj: dict = {} if meta is None else {"__metadata__": meta}
    pos = 0
    for i, (name, dtype, shape) in enumerate(items):
        numel = 1
        for d in shape:
            numel *= d
        size = numel * DTYPE_BITS[dtype] // 8
        start = pos + (gap if i == 1 else 0)
        obj[name] = {"dtype": dtype, "shape": shape, "data_offsets": [start, start + size]}
        pos = start + size
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    got = canonical.scan_clean(text.encode(), "x")
    if got is not None:
        assert got == _json_path(text)
    names_ = [n for n, _, _ in items]
    clean = (items and len(set(names_)) == len(names_) and "__metadata__" not in names_
             and all(_plain(n) and ":" not in n and _whole(d, s) for n, d, s in items)
             and (meta is None or all(_plain(k) and _plain(v) for k, v in meta.items()))
             and (gap == 0 or len(items) < 2))
    if clean:
        assert got is not None
        assert list(got[0]) == names_
