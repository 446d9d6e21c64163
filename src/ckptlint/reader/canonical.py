"""Accept clean safetensors headers fast: a typed ``msgspec`` decode, or any clean header.

Both functions return None for anything they do not accept, and :mod:`ckptlint.reader.parse`
then validates the header the slow way (which finds and reports every problem). They never
report anything themselves.
"""

from __future__ import annotations

import operator
import re
from itertools import repeat
from typing import Annotated, Any

import msgspec

from ckptlint.checkpoint import DTYPE_BITS, TensorInfo
from ckptlint.reader.entries import MAX_48, U64_MAX

# Shapes of more dimensions are left to the validator, whose size computation stops at 64 bits (48-bit
# dimensions multiplied out without a bound would cost time quadratic in the rank).
MAX_FAST_RANK = 8
_SHAPES: dict[tuple, tuple] = {}
_DTYPES = {d: d for d in DTYPE_BITS}

_U48 = Annotated[int, msgspec.Meta(ge=0, le=MAX_48)]


class _Entry(msgspec.Struct, forbid_unknown_fields=True):
    """One tensor entry as the format defines it: exactly these three fields, plain JSON integers
    (no float, no bool, no sign) within 48 bits. Anything else fails the decode."""

    dtype: str
    shape: tuple[_U48, ...]
    data_offsets: tuple[_U48, _U48]


_DECODE = msgspec.json.Decoder(dict[str, _Entry]).decode
_DECODE_META = msgspec.json.Decoder(dict[str, str]).decode
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
# An optional leading ``"__metadata__"`` object of plain strings (how the reference writer puts it
# first), cut off before the typed decode of the entries.
_STR = rb'[^"\\\x00-\x1f]*'
_META = re.compile(rb'\{"__metadata__":\{((?:"' + _STR + rb'":"' + _STR + rb'")(?:,"' + _STR + rb'":"' + _STR
                   + rb'")*)?\},')
# (dtype, shape) -> (dtype, shared shape tuple, byte length), or None: not a clean layout
_LAYOUTS: dict[tuple, tuple[str, tuple[int, ...], int] | None] = {}
_DT, _SH, _OFF = (operator.attrgetter(f) for f in ("dtype", "shape", "data_offsets"))
_FIRST, _SECOND, _NBYTES = (operator.itemgetter(i) for i in range(3))


Columns = tuple[list[str], list[str], list[tuple[int, ...]]]  # names, dtypes, shapes, in header order


def scan_clean(raw: bytes, rel: str) -> tuple[dict[str, TensorInfo], int, dict[str, str] | None] | None:
    """:func:`scan_columns` with the tensors as ``TensorInfo`` by name (None: not accepted)."""
    got = scan_columns(raw)
    if got is None:
        return None
    (names, dtypes, shapes), end, meta = got
    return tensor_map(names, dtypes, shapes, rel), end, meta


def tensor_map(names: list[str], dtypes: list[str], shapes: list[tuple[int, ...]], rel: str) -> dict[str, TensorInfo]:
    """``TensorInfo`` by name from a clean header's columns (built in C)."""
    return dict(zip(names, map(tuple.__new__, repeat(TensorInfo), zip(names, dtypes, shapes, repeat(rel)))))


def scan_columns(raw: bytes) -> tuple[Columns, int, dict[str, str] | None] | None:
    """Accept a clean header with one typed decode (``msgspec``, in C) and column checks: its
    columns, the end of its data buffer and its metadata.

    Taken only for headers that start with ``{``, contain no backslash (so no escape, no lone
    surrogate, and no quote inside a string) and no ``-0``
    (which serde reads as a float). The decode checks the JSON and every entry's fields and
    integer types; counting the colons in the bytes then proves there was no repeated name or field
    (a JSON decoder keeps the last copy). The checks of :func:`fast_validate` follow on whole
    columns (known dtype, byte lengths, offsets contiguous from 0 in file order), so no
    per-tensor Python code runs. None means "not clean, or not sure": the JSON path decides (and
    reports).
    """
    # (a dash is rare in a header: one byte's search, a memchr, rules most headers out of the
    # two-byte search for "-0", which costs about a fifth of the decode)
    if raw[:1] != b"{" or b"\\" in raw or (b"-" in raw and b"-0" in raw):
        return None
    meta: dict[str, str] | None = None
    body = raw
    if raw.startswith(b'{"__metadata__":'):
        m = _META.match(raw)
        if m is None:
            return None
        inner = m.group(1)
        meta = _DECODE_META(b"{" + inner + b"}") if inner else {}
        if inner and inner.count(b'":"') != len(meta):  # a repeated metadata key
            return None
        body = b"{" + raw[m.end():]
    try:
        entries = _DECODE(body)
    except _DECODE_ERRORS:
        return None
    count = len(entries)
    # Every member of an object has one ':' after its key, and no number holds one: the colons in
    # the bytes are the entries' members (each entry: its name and at least its three fields, more
    # if one was repeated) plus any inside a name. Exactly four per entry therefore proves no
    # repeated name or field (a colon inside a name only sends the header to the JSON path).
    # (A one-byte count: about half the time of counting '":'.)
    if not count or "__metadata__" in entries or body.count(b":") != 4 * count:
        return None
    values = entries.values()
    # one lookup per tensor; None: a (dtype, shape) not seen before (computed once, then looked up
    # again) or not a clean layout
    layouts = list(map(_LAYOUTS.get, zip(map(_DT, values), map(_SH, values))))
    if None in layouts:
        keys = list(zip(map(_DT, values), map(_SH, values)))
        for key in set(keys).difference(_LAYOUTS):
            _LAYOUTS[key] = _parse_layout(*key)
        layouts = list(map(_LAYOUTS.__getitem__, keys))
        if None in layouts:
            return None
    offsets = list(map(_OFF, values))
    begins = list(map(_FIRST, offsets))
    stops = list(map(_SECOND, offsets))
    if begins[0] != 0 or begins[1:] != stops[:-1] or list(map(operator.sub, stops, begins)) != list(map(_NBYTES, layouts)):
        return None
    return (list(entries), list(map(_FIRST, layouts)), list(map(_SECOND, layouts))), stops[-1], meta


def _parse_layout(dt: str, dims: tuple[int, ...]) -> tuple[str, tuple[int, ...], int] | None:
    """("F8_E4M3", (7168, 2048)) -> ("F8_E4M3", shared (7168, 2048), byte length); None for an
    unknown dtype, a rank over :data:`MAX_FAST_RANK`, a size that is not whole bytes, or an empty
    tensor of rank > 2 (the JSON path reports on those). Dimensions are already within 48 bits."""
    bits = DTYPE_BITS.get(dt)
    if bits is None or len(dims) > MAX_FAST_RANK:
        return None
    numel = 1
    for d in dims:
        numel *= d
    if numel > U64_MAX or (numel == 0 and len(dims) > 2) or numel * bits % 8:
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
