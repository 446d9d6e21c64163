"""Side JSON files are decoded by msgspec, with Python's json deciding whatever msgspec refuses: the
result must be what Python's json (which the frameworks use) makes of the same bytes, and an
index of the usual form takes a typed decode whose values are shared per shard."""

from __future__ import annotations

import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlint.reader import jsonfiles
from ckptlint.reader.jsonfiles import parse_json_bytes

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=8)
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                         max_leaves=20)


def _same(a, b) -> bool:
    """Equal as Python's json would give them (NaN equal to NaN, types compared too)."""
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return a == b


@settings(max_examples=4 * int(os.environ.get("CKPTLINT_FUZZ_EXAMPLES", "50")), deadline=None, database=None)
@given(documents, st.booleans())
def test_side_files_decode_as_pythons_json(doc, indent):
    text = json.dumps(doc, indent=2 if indent else None, ensure_ascii=False)
    got = parse_json_bytes(text.encode())
    assert got.error is None
    assert _same(got.obj, json.loads(text))


def test_what_msgspec_refuses_is_read_as_pythons_json():
    for text in ['{"a": NaN}', '{"a": 1e400}', '{"a": "\\ud800"}', '{"a": ' + "9" * 30 + "}", '{"a": -Infinity}']:
        got = parse_json_bytes(text.encode())
        assert got.error is None, text
        assert _same(got.obj, json.loads(text)), text
    assert parse_json_bytes(b'{"a": 1,}').error.startswith("is not valid JSON: ")
    # nesting beyond the one limit of every JSON path (jsonlimits.MAX_DEPTH, serde_json's 127): refused,
    # both where the parsers would recurse past their own limit and where they would not
    for depth in (128, 900, 5000):
        got = parse_json_bytes(b"[" * depth + b"]" * depth)
        assert got.error.startswith("is nested too deeply (more than 127 levels") and got.refused
    assert parse_json_bytes(b"[" * 127 + b"]" * 127).error is None


SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")


def _index(**extra) -> bytes:
    wm = {f"model.layers.{i}.mlp.down_proj.weight": SHARDS[i % 2] for i in range(6)}
    return json.dumps({"metadata": {"total_size": 96}, "weight_map": wm, **extra}).encode()


def test_usual_index_is_decoded_typed_with_one_string_per_shard(monkeypatch):
    calls = []
    real = jsonfiles._decode_index
    monkeypatch.setattr(jsonfiles, "_decode_index", lambda raw, shards: calls.append(shards) or real(raw, shards))
    raw = _index()
    got = parse_json_bytes(raw, SHARDS)
    assert calls == [SHARDS]
    assert got.obj == json.loads(raw)
    values = list(got.obj["weight_map"].values())
    assert len({id(v) for v in values}) == 2  # shared, not one string per tensor
    assert real(raw, SHARDS) is not jsonfiles._UNSET


def test_other_indexes_fall_back_to_the_plain_decode():
    for raw in (_index(extra_key=1),  # a key besides weight_map and metadata
                _index().replace(SHARDS[1].encode(), b"model-00003-of-00002.safetensors"),  # a shard not present
                json.dumps({"weight_map": {"a": 1}}).encode()):  # not a string
        assert jsonfiles._decode_index(raw, SHARDS) is jsonfiles._UNSET
        assert _same(parse_json_bytes(raw, SHARDS).obj, json.loads(raw))


def test_repeated_index_keys_are_still_reported():
    raw = b'{"weight_map": {"a": "%s", "a": "%s"}}' % (SHARDS[0].encode(), SHARDS[1].encode())
    got = parse_json_bytes(raw, SHARDS)
    assert got.obj == {"weight_map": {"a": SHARDS[1]}}
    assert got.duplicates == ["a"]


_RAW_CASES = [
    b'{"weight_map": {"a.weight": "model-00001-of-00002.safetensors"}, "metadata": {"total_size": 4}}',
    b'{"weight_map": {"a.weight": "x", "a.weight": "y"}}',  # a repeated key
    b'{"weight_map": {"a:b": "x"}}',  # a colon inside a string
    b'{"weight_map": {"a.weight": "x",}}',  # not JSON
    '{"weight_map": {"\u00e9": "x"}}'.encode(),  # not ASCII
    b'\xef\xbb\xbf{"a": 1}',  # a BOM
    b'{"a": "\xff"}',  # not UTF-8
    b'{"a": NaN, "b": 1e400}',  # only Python's json
]


def test_a_large_index_keeps_no_text_and_parses_the_same():
    """Above ``text_cap`` an ASCII file is decoded without making a string of it (the index of a
    1,000,000-tensor checkpoint is ~100 MB): the value, the repeated keys and the error are what the
    uncapped parse gives; the text is kept wherever the JSON path needed it anyway."""
    for raw in _RAW_CASES:
        full, capped = parse_json_bytes(raw), parse_json_bytes(raw, text_cap=8)
        assert _same(capped.obj, full.obj) and capped.error == full.error, raw
        assert capped.duplicates == full.duplicates, raw
        # only the plain index needs no string; every other case went through Python's json
        assert capped.text == (None if raw is _RAW_CASES[0] else full.text), raw
        assert capped.ascii_bytes is None, raw  # above the cap nothing is kept for locating findings
    # up to the cap an ASCII file keeps its bytes, decoded only when a finding is pointed at it
    kept = parse_json_bytes(_RAW_CASES[0], text_cap=len(_RAW_CASES[0]))
    assert kept.text is None and kept.ascii_bytes == _RAW_CASES[0]


def test_texts_decode_ascii_bytes_on_first_use():
    from ckptlint.checkpoint import Texts

    texts = Texts({"config.json": "{}"})
    texts["model.safetensors.index.json"] = b'{"weight_map": {}}'
    assert texts.length("model.safetensors.index.json") == 18
    assert dict.__getitem__(texts, "model.safetensors.index.json") == b'{"weight_map": {}}'  # not decoded yet
    assert texts.get("model.safetensors.index.json") == '{"weight_map": {}}'
    assert type(dict.__getitem__(texts, "model.safetensors.index.json")) is str  # decoded once, kept
    assert texts["config.json"] == "{}" and texts.get("missing") is None and texts.length("missing") is None
