"""Accept clean safetensors headers fast: the reference writer's exact layout, or any clean header.

Both functions return None for anything they do not accept, and :mod:`ckptlint.reader.parse`
then validates the header the slow way (which finds and reports every problem). They never
report anything themselves.
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from typing import Any

from ckptlint.checkpoint import DTYPE_BITS, TensorInfo
from ckptlint.reader.entries import MAX_48, U64_MAX

# Shapes of more dimensions are left to the validator, whose size computation stops at 64 bits (48-bit
# dimensions multiplied out without a bound would cost time quadratic in the rank).
MAX_FAST_RANK = 8
_SHAPES: dict[tuple, tuple] = {}
_DTYPES = {d: d for d in DTYPE_BITS}

# The reference writer's exact layout (serde_json, compact, fields in declaration order), as one
# regular expression per tensor entry: a string key without escapes or control characters, then
# {"dtype":"X","shape":[d,...],"data_offsets":[b,e]} with JSON integers (no sign, no leading zero,
# at most 15 digits), then a comma that starts the next key, or the end of the object. Captured:
# the name, the dtype and shape text together (`F8_E4M3","shape":[7168,2048`: a few hundred
# distinct values per checkpoint, each parsed once), and the two offsets.
_NUM = r"(?:0|[1-9][0-9]{0,14})"
_STR = r'[^"\\\x00-\x1f]*'
_CANON_ENTRY = re.compile(
    rf'"({_STR})":\{{"dtype":"([A-Z0-9_]{{1,16}}","shape":\[(?:{_NUM}(?:,{_NUM})*)?)\],'
    rf'"data_offsets":\[({_NUM}),({_NUM})\]\}}(?:,(?=")|\Z)')
_CANON_ENTRY_FIXED = len('"":{"dtype":"],"data_offsets":[,]}')  # characters outside the groups
_CANON_META = re.compile(rf'\{{"__metadata__":\{{((?:"{_STR}":"{_STR}")(?:,"{_STR}":"{_STR}")*)?\}},')
_SHAPE_SEP = '","shape":['
# dtype-and-shape text -> (dtype, shared shape tuple, byte length), or None: not a clean layout
_LAYOUTS: dict[str, tuple[str, tuple[int, ...], int] | None] = {}
_FIRST, _SECOND, _NBYTES = (operator.itemgetter(i) for i in range(3))


def scan_canonical(text: str, rel: str) -> tuple[dict[str, TensorInfo], int, dict[str, str] | None] | None:
    """Accept a clean header in the reference writer's exact layout without a JSON parser.

    One regular-expression pass extracts every entry, and the header is accepted only if the
    entries (after an optional ``__metadata__`` object of strings) cover the text between the outer
    braces exactly: what is accepted is then a JSON object that ``json.loads`` reads with the same
    keys and values. The checks of :func:`fast_validate` follow, on whole columns at once (known
    dtype, 48-bit values, byte lengths, offsets contiguous from 0 in file order, no duplicate
    names), so the per-tensor work runs in C. None means "not this layout, or not clean": the
    JSON path decides (and reports).
    """
    end = len(text)
    while end and text[end - 1] == " ":  # the writer pads the header to 8 bytes with spaces
        end -= 1
    if end < 2 or text[end - 1] != "}":
        return None
    end -= 1
    meta: dict[str, str] | None = None
    pos = 1
    if text.startswith('{"__metadata__":'):
        m = _CANON_META.match(text, 0, end)
        if m is None:
            return None
        body = m.group(1)
        meta = json.loads("{" + body + "}") if body else {}
        if body and body.count('":"') != len(meta):  # a repeated metadata key
            return None
        pos = m.end()
    entries = _CANON_ENTRY.findall(text, pos, end)
    count = len(entries)
    if not count:
        return None
    # Matches never overlap and lie inside [pos, end): they cover it exactly iff their lengths
    # (fixed characters + captured text + one comma between neighbours) add up to its length.
    if count * _CANON_ENTRY_FIXED + sum(map(len, itertools.chain.from_iterable(entries))) + count - 1 != end - pos:
        return None
    names, keys, begins, ends = zip(*entries)
    for key in set(keys).difference(_LAYOUTS):
        _LAYOUTS[key] = _parse_layout(key)
    layouts = list(map(_LAYOUTS.__getitem__, keys))
    if None in layouts or begins[0] != "0" or begins[1:] != ends[:-1]:
        return None
    stops = list(map(int, ends))
    starts = [0, *stops[:-1]]
    if list(map(operator.sub, stops, starts)) != list(map(_NBYTES, layouts)) or stops[-1] > MAX_48:
        return None
    infos = map(tuple.__new__, itertools.repeat(TensorInfo),
                zip(names, map(_FIRST, layouts), map(_SECOND, layouts), itertools.repeat(rel)))
    tensors = dict(zip(names, infos))
    if len(tensors) != count or "__metadata__" in tensors:
        return None
    return tensors, stops[-1], meta


def _parse_layout(key: str) -> tuple[str, tuple[int, ...], int] | None:
    """``F8_E4M3","shape":[7168,2048`` -> ("F8_E4M3", (7168, 2048), byte length); None for an
    unknown dtype, a dimension over 48 bits, a size that is not whole bytes, or an empty tensor
    of rank > 2 (the JSON path reports on those)."""
    dt, _, sh = key.partition(_SHAPE_SEP)
    bits = DTYPE_BITS.get(dt)
    if bits is None:
        return None
    dims = tuple(int(d) for d in sh.split(",")) if sh else ()
    numel = 1
    for d in dims:
        if d > MAX_48:
            return None
        numel *= d
        if numel > U64_MAX:  # (the JSON path reports it; stopping keeps this linear in the rank)
            return None
    if (numel == 0 and len(dims) > 2) or numel * bits % 8:
        return None
    return _DTYPES[dt], _SHAPES.setdefault(dims, dims), numel * bits // 8


def fast_validate(obj: dict[str, Any], rel: str) -> tuple[dict[str, TensorInfo], int, int, dict[str, str] | None] | None:
    """Accept a header that is entirely clean, in one tight pass; None means "look closer".

    Clean: every entry has exactly dtype/shape/data_offsets, a known dtype, shape and offsets
    made of plain ints within 48 bits, whole bytes, the right byte length, and offsets
    contiguous from 0 *in JSON order* (how the reference writer lays files out; a contiguous
    chain in JSON order is also contiguous after sorting). Returns (tensors, data end,
    number of JSON keys, metadata).
    """
    meta = obj.get("__metadata__")
    keys = len(obj)
    if meta is not None:
        if type(meta) is not dict:
            return None
        for v in meta.values():
            if type(v) is not str:
                return None
        keys += len(meta)
    tensors: dict[str, TensorInfo] = {}
    bits_get = DTYPE_BITS.get
    shapes_setdefault = _SHAPES.setdefault
    dtypes_get = _DTYPES.get
    TI = TensorInfo
    prev = 0
    for name, e in obj.items():
        if name == "__metadata__":
            continue  # (checked above)
        if type(e) is not dict or len(e) != 3:
            return None
        try:
            dt = e["dtype"]
            sh = e["shape"]
            b, end = e["data_offsets"]
            bits = bits_get(dt)
        except (KeyError, TypeError, ValueError):
            return None
        if bits is None or type(b) is not int or type(end) is not int or b != prev or end < b or end > MAX_48 \
                or type(sh) is not list:
            return None
        if len(sh) > MAX_FAST_RANK:
            return None
        numel = 1
        for d in sh:
            if type(d) is not int or d < 0 or d > MAX_48:
                return None
            numel *= d
        if (end - b) * 8 != numel * bits or (numel == 0 and len(sh) > 2):
            return None
        prev = end
        # Share equal shape tuples and dtype strings between tensors (thousands of experts have the
        # same shape): a million-tensor checkpoint then needs one object per distinct shape, not per tensor.
        tsh = tuple(sh)
        tsh = shapes_setdefault(tsh, tsh)
        dt = dtypes_get(dt, dt)
        tensors[name] = TI(name, dt, tsh, rel)
    return tensors, prev, keys + 3 * len(tensors), meta
