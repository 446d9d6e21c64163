"""Read and validate one safetensors header without touching tensor data.

Layout: 8-byte little-endian u64 ``N``, then ``N`` bytes of UTF-8 JSON, then the data buffer.
Validation follows what the reference reader checks (docs/frameworks/formats.md#reader-validation), but every
problem is reported instead of only the first one, and things the reference reader tolerates
but the format text forbids (extra keys in an entry, values over 48 bits, a header that does not
start with ``{``) are reported as hygiene.

Bytes read per file: at most ``8 + N`` (or 1,024 for a Git LFS pointer / tiny file).
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import os
import re
import stat as stat_mod
from dataclasses import dataclass, field
from typing import Any, Protocol

from ckptlint.checkpoint import DTYPE_BITS, ShardInfo, TensorInfo
from ckptlint.findings import Consequence, Finding
from ckptlint.reader import codes as C
from ckptlint.reader.jsonfiles import jtype

MAX_HEADER = 100_000_000
U64_MAX = 2**64 - 1
MAX_48 = 2**48 - 1
SERDE_MAX_DEPTH = 127  # serde_json refuses JSON nested deeper than this (checked with 0.8.0)
LFS_MAGIC = b"version https://git-lfs.github.com/spec/v1"
LFS_READ = 1024
_ENTRY_KEYS = frozenset(("dtype", "shape", "data_offsets"))
_DTYPE_LIST = ", ".join(f"`{d}`" for d in DTYPE_BITS)
LOAD = Consequence.LOAD_ERROR
HYGIENE = Consequence.HYGIENE


@dataclass
class ShardRead:
    info: ShardInfo
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    issues: list[Finding] = field(default_factory=list)
    fatal: bool = False  # the header could not be parsed at all: no tensors
    refused: bool = False  # safetensors would refuse to open this file
    lfs: dict[str, Any] | None = None  # Git LFS pointer: {"oid":..., "size":...}
    unreadable: str | None = None  # why the file could not be read at all
    missing: bool = False  # the source found no such file (a remote 404); the loader reports IX204
    metadata: dict[str, str] | None = None


class _NegZero(int):
    """``-0`` in the JSON: Python reads int 0, serde reads the float -0.0 (a type error)."""


def _parse_int(s: str) -> int:
    return _NegZero(0) if s == "-0" else int(s)


def _reject_constant(s: str) -> Any:
    raise ValueError(f"{s} is not valid JSON")


def _jtype(v: Any) -> str:
    return jtype(v, integers=True)


def _short(v: Any, limit: int = 60) -> str:
    try:
        s = json.dumps(v, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        s = repr(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _read_exact(f: Any, n: int) -> bytes:
    chunks = []
    left = n
    while left > 0:
        b = f.read(left)
        if not b:
            break
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def parse_lfs_pointer(data: bytes) -> dict[str, Any] | None:
    """Return ``{"oid": ..., "size": ...}`` if ``data`` is a Git LFS pointer file, else None."""
    if not data.startswith(LFS_MAGIC):
        return None
    out: dict[str, Any] = {}
    for line in data.decode("utf-8", "replace").splitlines()[1:]:
        key, _, value = line.partition(" ")
        if key == "oid":
            out["oid"] = value.strip()
        elif key == "size" and value.strip().isascii() and value.strip().isdigit():
            out["size"] = int(value.strip())
    return out


class ByteSource(Protocol):
    """What :func:`read_header` reads from: a file of known ``size`` read by byte ranges.

    ``read(offset, length)`` returns at most ``length`` bytes (fewer only at the end of the
    data) and raises ``OSError`` when the bytes cannot be had; ``bytes_read`` counts the bytes
    actually received (for a remote file: every byte that came over the wire).
    """

    size: int
    bytes_read: int

    def read(self, offset: int, length: int) -> bytes: ...


class _LocalFile:
    """A local file as a :class:`ByteSource` (sequential reads; seeks only if asked)."""

    __slots__ = ("f", "size", "bytes_read", "pos")

    def __init__(self, f: Any, size: int) -> None:
        self.f, self.size, self.bytes_read, self.pos = f, size, 0, 0

    def read(self, offset: int, length: int) -> bytes:
        if offset != self.pos:
            self.f.seek(offset)
        b = _read_exact(self.f, length)
        self.pos = offset + len(b)
        self.bytes_read += len(b)
        return b


def read_shard(path: str, rel: str, st: os.stat_result | None = None) -> ShardRead:
    """Read the header of the safetensors file at ``path`` (``rel``: name for messages)."""
    try:
        if st is None:
            st = os.stat(path)
    except OSError as e:
        why = "is a broken symlink" if os.path.islink(path) else f"cannot be read ({e.strerror})"
        return _unreadable(rel, why, C.ST_NOT_FOUND.format(path=rel))
    if stat_mod.S_ISDIR(st.st_mode):
        return _unreadable(rel, "is a directory, not a file", C.ST_IS_DIR)
    if not stat_mod.S_ISREG(st.st_mode):
        return _unreadable(rel, "is not a regular file", None)
    try:
        with open(path, "rb", buffering=0) as f:
            return read_header(rel, _LocalFile(f, st.st_size))
    except OSError as e:
        return _unreadable(rel, f"cannot be read ({e.strerror or e})", str(e))


def read_header(rel: str, src: ByteSource) -> ShardRead:
    """Read and validate the header of one safetensors file from ``src`` (local or remote).

    Reads ``[0, 8)``, then (for a Git LFS pointer) ``[8, 1024)`` or the header ``[8, 8 + N)``;
    never the data buffer. An ``OSError`` from ``src`` becomes an SF117 (unreadable) finding
    whose text is the error's ``why`` attribute when it has one.
    """
    size = src.size
    info = ShardInfo(file=rel, size=size)
    res = ShardRead(info=info)
    try:
        try:
            head = src.read(0, 8)
            if len(head) < 8:
                res.fatal = res.refused = True
                what = "is empty (0 bytes)" if not head else f"is only {len(head)} bytes long"
                res.issues.append(_f(C.SF_TOO_SMALL, rel, f"{what}; a safetensors file starts with an 8-byte header length",
                                     C.ST_TOO_SMALL, hint="re-download or re-export this file"))
                return res
            if head == LFS_MAGIC[:8]:
                rest = src.read(8, LFS_READ - 8)
                lfs = parse_lfs_pointer(head + rest)
                if lfs is not None:
                    res.lfs = lfs
                    res.fatal = res.refused = True
                    return res
            n = int.from_bytes(head, "little")
            if n > MAX_HEADER:
                res.fatal = res.refused = True
                res.issues.append(_f(C.SF_HEADER_TOO_LARGE, rel,
                                     f"header length field claims {n:,} bytes, over the 100,000,000-byte limit "
                                     "(not a safetensors file, or a corrupted one)", C.ST_TOO_LARGE,
                                     data={"header_len": n}, hint="re-download or re-export this file"))
                return res
            if 8 + n > size:
                res.fatal = res.refused = True
                info.header_len = n
                res.issues.append(_f(C.SF_HEADER_LENGTH, rel,
                                     f"header length field claims {n:,} bytes but the file has only {size:,} bytes "
                                     "(truncated inside the header)", C.ST_HEADER_LENGTH,
                                     data={"header_len": n, "size": size}, hint="re-download or re-export this file"))
                return res
            info.header_len = n
            raw = src.read(8, n)
        finally:
            info.bytes_read = src.bytes_read
    except OSError as e:
        why = getattr(e, "why", None) or f"cannot be read ({e.strerror or e})"
        out = _unreadable(rel, why, getattr(e, "error_text", str(e)))
        out.info.bytes_read = src.bytes_read
        return out
    if len(raw) < n:  # the file shrank while we read it
        res.fatal = res.refused = True
        res.issues.append(_f(C.SF_HEADER_LENGTH, rel, f"file ended after {len(raw):,} of {n:,} header bytes",
                             C.ST_HEADER_LENGTH))
        return res
    _parse_and_validate(raw, n, size, rel, res)
    return res


def _unreadable(rel: str, why: str, error_text: str | None) -> ShardRead:
    res = ShardRead(info=ShardInfo(file=rel, size=0), fatal=True, refused=True, unreadable=why)
    res.issues.append(_f(C.SF_UNREADABLE, rel, why, error_text,
                         hint="replace it with the real safetensors file (re-download or re-export)"))
    return res


def _utf8_error(e: UnicodeDecodeError) -> str:
    """Rust's ``Utf8Error`` text for the same bytes (what safetensors prints): a multi-byte
    sequence cut off by the end of the header is "incomplete", anything else "invalid"."""
    if e.reason == "unexpected end of data":
        return f"incomplete utf-8 byte sequence from index {e.start}"
    return f"invalid utf-8 sequence of {e.end - e.start} bytes from index {e.start}"


def _f(code: str, rel: str, what: str, error_text: str | None, *, consequence: Consequence = LOAD,
       tensors: list[str] | None = None, hint: str | None = None, data: dict[str, Any] | None = None) -> Finding:
    d = dict(data or {})
    if error_text and error_text.startswith(C.ST):
        variant = "InvalidOffset" if error_text.startswith(C.ST + "invalid offset") else None
        for k, v in C.VARIANT.items():
            if error_text.startswith(k):
                variant = v
                break
        if variant:
            d.setdefault("safetensors_error", variant)
    return Finding(code=code, consequence=consequence, message=f"{rel}: {what}", file=rel,
                   tensors=list(tensors or []), hint=hint, error_text=error_text, data=d)


def _parse_and_validate(raw: bytes, n: int, size: int, rel: str, res: ShardRead) -> None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        res.fatal = res.refused = True
        res.issues.append(_f(C.SF_NOT_UTF8, rel, f"header is not valid UTF-8 (byte {e.start} of the header)",
                             f"{C.ST_UTF8}: {_utf8_error(e)}",
                             data={"position": e.start}, hint="re-export this file"))
        return
    if raw[:1] == b"{":
        quick = _scan_canonical(text, rel)
        if quick is not None and 8 + n + quick[1] == size:
            res.tensors, res.info.data_bytes, res.metadata = quick
            res.info.n_tensors = len(res.tensors)
            return
    obj, err = _loads(text)
    if err is not None:
        res.fatal = res.refused = True
        res.issues.append(_f(C.SF_INVALID_JSON, rel, f"header is not valid JSON: {err}", C.ST_JSON,
                             hint="re-export this file"))
        return
    if type(obj) is not dict:
        res.fatal = res.refused = True
        what = f"header is a JSON {_jtype(obj)}, not an object"
        res.issues.append(_f(C.SF_INVALID_JSON, rel, what, C.ST_JSON,
                             hint="re-export this file"))
        return
    if raw[:1] != b"{":
        res.issues.append(_f(C.SF_SPEC_DEVIATION, rel,
                             "header deviates from the safetensors format (the library tolerates it): "
                             f"header starts with {raw[:1]!r}, not '{{' (leading whitespace)", None,
                             consequence=HYGIENE, hint="re-export with the reference writer; older readers may be stricter"))
    slow = "\\u" in text or "-0" in text
    if not slow:
        fast = _fast_validate(obj, rel)
        if fast is not None and 8 + n + fast[1] == size and text.count(":") == fast[2]:
            # clean header (the common case): no per-problem bookkeeping needed
            res.tensors, res.info.data_bytes, _, res.metadata = fast
            res.info.n_tensors = len(res.tensors)
            return
    v = _Validator(obj, n, size, rel)
    v.run()
    if not slow and text.count(":") > v.keys_total:
        slow = True  # more key/value separators than keys we saw: maybe duplicate keys
    if slow:
        # Re-parse with hooks that see what Python's json hides: duplicate keys, lone
        # surrogates, and "-0" (which serde reads as a float).
        dups: list[tuple[Any, list[str]]] = []

        def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            d = dict(pairs)
            if len(d) != len(pairs):
                seen: set[str] = set()
                names = []
                for k, _ in pairs:
                    if k in seen and k not in names:
                        names.append(k)
                    seen.add(k)
                dups.append((d, names))
            return d

        try:
            obj2 = json.loads(text, object_pairs_hook=hook, parse_int=_parse_int, parse_constant=_reject_constant)
        except (ValueError, RecursionError):  # pragma: no cover - the first parse succeeded
            obj2 = obj
        bad = _lone_surrogate(obj2) if "\\u" in text else None
        if bad is not None:
            res.fatal = res.refused = True
            res.issues.append(_f(C.SF_INVALID_JSON, rel,
                                 f"header is not valid JSON: string {bad!r} contains an unpaired UTF-16 surrogate escape",
                                 C.ST_JSON, hint="re-export this file"))
            return
        v = _Validator(obj2, n, size, rel)
        v.dups = {id(d): (d, names) for d, names in dups}
        v.run()
    v.finish(res)


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


def _scan_canonical(text: str, rel: str) -> tuple[dict[str, TensorInfo], int, dict[str, str] | None] | None:
    """Accept a clean header in the reference writer's exact layout without a JSON parser.

    One regular-expression pass extracts every entry, and the header is accepted only if the
    entries (after an optional ``__metadata__`` object of strings) cover the text between the outer
    braces exactly: what is accepted is then a JSON object that ``json.loads`` reads with the same
    keys and values. The checks of :func:`_fast_validate` follow, on whole columns at once (known
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
    if (numel == 0 and len(dims) > 2) or numel * bits % 8:
        return None
    return _DTYPES[dt], _SHAPES.setdefault(dims, dims), numel * bits // 8


def _fast_validate(obj: dict[str, Any], rel: str) -> tuple[dict[str, TensorInfo], int, int, dict[str, str] | None] | None:
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


def _loads(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text, parse_constant=_reject_constant), None
    except RecursionError:
        return None, "nested too deeply"
    except json.JSONDecodeError as e:
        msg = e.msg[:-3] if e.msg.endswith(" at") else e.msg
        return None, f"{msg} at line {e.lineno} column {e.colno}"
    except ValueError as e:  # NaN/Infinity, integers with too many digits
        return None, str(e).splitlines()[0]


def _lone_surrogate(obj: Any) -> str | None:
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for k, v in x.items():
                try:
                    k.encode("utf-8")
                except UnicodeEncodeError:
                    return k.encode("utf-8", "backslashreplace").decode()
                stack.append(v)
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, str):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                return x.encode("utf-8", "backslashreplace").decode()
    return None


class _Validator:
    """One pass over the parsed header: entries, then the sorted offsets walk."""

    def __init__(self, obj: dict[str, Any], n: int, size: int, rel: str) -> None:
        self.obj = obj
        self.n = n
        self.size = size
        self.rel = rel
        self.keys_total = 0
        self.dups: dict[int, tuple[Any, list[str]]] = {}
        # code -> list of (tensor, problem)
        self.problems: dict[str, list[tuple[str, str]]] = {}
        self.recs: list[tuple[int, int, str, int]] = []  # (begin, end, name, expected bytes or -1)
        self.tensors: dict[str, TensorInfo] = {}
        self.metadata: dict[str, str] | None = None
        self.overflow: list[str] = []
        self.unplaced = 0  # entries whose data_offsets are unusable
        self.too_deep: list[str] = []  # extra keys nested deeper than serde_json allows
        self.sub_byte: list[tuple[str, str]] = []

    def _bad(self, code: str, name: str, problem: str) -> None:
        self.problems.setdefault(code, []).append((name, problem))

    def run(self) -> None:
        obj = self.obj
        bits_map = DTYPE_BITS
        entry_keys = _ENTRY_KEYS
        recs = self.recs
        tensors = self.tensors
        rel = self.rel
        keys_total = len(obj)
        bad = self._bad
        TI = TensorInfo
        prod = math.prod
        for name, e in obj.items():
            if name == "__metadata__":
                self._metadata(e)
                continue
            if type(e) is not dict:
                bad(C.SF_BAD_ENTRY, name, f"entry is a JSON {_jtype(e)}, not an object")
                self.unplaced += 1
                continue
            keys_total += len(e)
            ok = True
            if len(e) != 3 or e.keys() != entry_keys:
                missing = [k for k in ("dtype", "shape", "data_offsets") if k not in e]
                if missing:
                    bad(C.SF_BAD_ENTRY, name, f"entry has no {', '.join(missing)}")
                    ok = False
                extra = [k for k in e if k not in entry_keys]
                if extra:
                    bad(C.SF_SPEC_DEVIATION, name, f"entry has extra key(s) {', '.join(map(repr, extra))}")
                    for k in extra:
                        if 2 + _depth(e[k]) > SERDE_MAX_DEPTH:
                            self.too_deep.append(name)
            dt = e.get("dtype")
            bits = bits_map.get(dt) if type(dt) is str else None
            if bits is None and "dtype" in e:
                if type(dt) is str:
                    bad(C.SF_UNKNOWN_DTYPE, name, dt)
                else:
                    bad(C.SF_BAD_ENTRY, name, f"dtype is a JSON {_jtype(dt)}, not a string")
                ok = False
            sh = e.get("shape")
            if type(sh) is list:
                for d in sh:
                    if type(d) is not int or d < 0 or d > U64_MAX:
                        ok = False
                        why = " (-0 is read as a float)" if isinstance(d, _NegZero) else ""
                        bad(C.SF_BAD_ENTRY, name, f"shape {_short(sh)} is not a list of non-negative 64-bit integers{why}")
                        break
                    if d > MAX_48:
                        bad(C.SF_SPEC_DEVIATION, name, f"dimension {d} exceeds the format's 48-bit limit")
            elif "shape" in e:
                ok = False
                bad(C.SF_BAD_ENTRY, name, f"shape is a JSON {_jtype(sh)}, not an array")
            off = e.get("data_offsets")
            if type(off) is list and len(off) == 2:
                b, end = off
                if type(b) is int and type(end) is int and 0 <= b <= U64_MAX and 0 <= end <= U64_MAX:
                    if end > MAX_48:
                        bad(C.SF_SPEC_DEVIATION, name, f"data offset {end} exceeds the format's 48-bit limit")
                else:
                    b = -1
                    why = " (-0 is read as a float)" if isinstance(b, _NegZero) or isinstance(end, _NegZero) else ""
                    bad(C.SF_BAD_ENTRY, name, f"data_offsets {_short(off)} is not two non-negative 64-bit integers{why}")
            else:
                b = -1
                end = 0
                if "data_offsets" in e:
                    bad(C.SF_BAD_ENTRY, name, f"data_offsets {_short(off)} is not a [begin, end] pair")
            if b < 0:
                self.unplaced += 1
                continue
            if not ok:
                recs.append((b, end, name, -1))
                continue
            numel = prod(sh)
            if numel > U64_MAX or (numel == 0 and len(sh) > 2 and _mul_overflows(sh)):
                self.overflow.append(name)
                recs.append((b, end, name, -1))
            else:
                nbits = numel * bits
                if nbits > U64_MAX:
                    self.overflow.append(name)
                    recs.append((b, end, name, -1))
                elif nbits & 7:
                    self.sub_byte.append((name, f"{dt} {sh}: {numel} elements x {bits} bits = {nbits} bits"))
                    recs.append((b, end, name, -1))
                else:
                    recs.append((b, end, name, nbits >> 3))
            tensors[name] = TI(name, dt, tuple(sh), rel)
        self.keys_total += keys_total

    def _metadata(self, m: Any) -> None:
        if m is None:
            return
        if type(m) is not dict:
            self._bad(C.SF_BAD_METADATA, "__metadata__", f"__metadata__ is a JSON {_jtype(m)}, not an object")
            return
        self.keys_total += len(m)
        nonstr = [k for k, v in m.items() if type(v) is not str]
        if nonstr:
            k = nonstr[0]
            self._bad(C.SF_BAD_METADATA, "__metadata__",
                      f"__metadata__ value for {k!r} is a JSON {_jtype(m[k])}, not a string"
                      + (f" (and {len(nonstr) - 1} more)" if len(nonstr) > 1 else ""))
        else:
            self.metadata = m

    def finish(self, res: ShardRead) -> None:
        rel = self.rel
        info = res.info
        out = res.issues
        problems = self.problems
        # duplicate keys (slow path only)
        top_dups: list[str] = []
        meta_dups: list[str] = []
        for d, names in self.dups.values():
            if d is self.obj:
                for k in names:
                    if k == "__metadata__":
                        self._bad(C.SF_BAD_METADATA, "__metadata__", "__metadata__ appears twice")
                    else:
                        top_dups.append(k)
            elif d is self.obj.get("__metadata__"):
                meta_dups.extend(names)
            else:
                for name, e in self.obj.items():
                    if e is d:
                        self._bad(C.SF_BAD_ENTRY, name, f"entry has duplicate field(s) {', '.join(names)}")
                        break
        # offsets walk
        recs = self.recs
        recs.sort()
        prev = 0
        data_bytes = 0
        first = True
        for b, end, name, expected in recs:
            if end < b:
                self._bad(C.SF_BAD_OFFSETS, name, f"data_offsets [{b}, {end}] end before they begin")
            elif b != prev:
                if first:
                    what = f"first tensor starts at byte {b} of the data buffer, not 0"
                elif b > prev:
                    what = f"gap of {b - prev} bytes before it (begins at {b}, previous tensor ends at {prev})"
                else:
                    what = f"overlaps the previous tensor (begins at {b}, previous tensor ends at {prev})"
                self._bad(C.SF_BAD_OFFSETS, name, what)
            first = False
            if end >= b:
                data_bytes += end - b
                if expected >= 0 and end - b != expected:
                    self._bad(C.SF_SIZE_MISMATCH, name,
                              f"data_offsets span {end - b} bytes but dtype and shape need {expected}")
            if end > prev:
                prev = end
        if self.too_deep:
            out.append(_f(C.SF_INVALID_JSON, rel,
                          f"header is not valid JSON for safetensors: an extra key in tensor {self.too_deep[0]!r} is "
                          f"nested more than {SERDE_MAX_DEPTH} levels deep (serde_json's recursion limit)",
                          C.ST_JSON, tensors=self.too_deep, hint="re-export this file"))
        for name in self.overflow:
            self._bad(C.SF_SIZE_OVERFLOW, name, "element count x dtype bits overflows 64 bits")
        for name, why in self.sub_byte:
            self._bad(C.SF_SUB_BYTE, name, f"{why}, not a whole number of bytes")
        info.data_bytes = data_bytes
        info.n_tensors = len(self.tensors)
        res.tensors = self.tensors
        res.metadata = self.metadata
        layout_bad = any(c in problems for c in (C.SF_BAD_OFFSETS, C.SF_SIZE_MISMATCH, C.SF_SIZE_OVERFLOW, C.SF_SUB_BYTE))
        # coverage of the file by the data buffer
        file_end = 8 + self.n + prev
        if file_end > self.size:
            beyond = [name for b, end, name, _ in recs if 8 + self.n + end > self.size]
            missing = file_end - self.size
            out.append(_f(C.SF_TRUNCATED, rel,
                          f"file is truncated: the header places tensor data up to byte {file_end:,} but the file has "
                          f"{self.size:,} bytes ({missing:,} bytes missing, {len(beyond)} tensor(s) affected)",
                          C.ST_INCOMPLETE, tensors=beyond,
                          data={"expected_size": file_end, "size": self.size, "missing_bytes": missing},
                          hint="the download or export was interrupted: fetch this file again"))
            layout_bad = True
        elif file_end < self.size and not self.unplaced:
            extra = self.size - file_end
            out.append(_f(C.SF_TRAILING, rel,
                          f"{extra:,} trailing bytes after the last tensor's data (file has {self.size:,} bytes, "
                          f"the header accounts for {file_end:,})", C.ST_INCOMPLETE,
                          data={"expected_size": file_end, "size": self.size, "trailing_bytes": extra},
                          hint="re-export the file; safetensors refuses data it cannot account for"))
            layout_bad = True
        for code, items in sorted(problems.items()):
            out.append(self._grouped(code, items))
        if top_dups:
            cons = LOAD if layout_bad else HYGIENE
            effect = ("safetensors keeps the later entry, and the layout left is invalid (see the other findings)"
                      if layout_bad else "safetensors silently keeps the later entry")
            out.append(_f(C.SF_DUPLICATE_KEY, rel,
                          f"header defines tensor {top_dups[0]!r}"
                          + (f" and {len(top_dups) - 1} more" if len(top_dups) > 1 else "")
                          + f" more than once; {effect}",
                          C.ST_INCOMPLETE if layout_bad else None, consequence=cons, tensors=top_dups,
                          hint="re-export the file so every tensor name appears once"))
        if meta_dups:
            out.append(_f(C.SF_DUPLICATE_KEY, rel,
                          f"__metadata__ defines key {meta_dups[0]!r} more than once; the later value is kept",
                          None, consequence=HYGIENE, data={"metadata_keys": meta_dups}))
        res.refused = any(f.consequence is LOAD for f in out)

    def _grouped(self, code: str, items: list[tuple[str, str]]) -> Finding:
        rel = self.rel
        name, problem = items[0]
        more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
        subject = "" if name == "__metadata__" else f"tensor {name!r}: "
        tensors = [t for t, _ in items if t != "__metadata__"]
        data = {"problems": [{"tensor": t, "problem": p} for t, p in items[:50]], "count": len(items)}
        cons = LOAD
        hint = "re-export this file with a current safetensors writer"
        if code == C.SF_UNKNOWN_DTYPE:
            err = f"{C.ST_JSON}: unknown variant `{problem}`, expected one of {_DTYPE_LIST}"
            what = f"{subject}unknown dtype {problem!r}, not a safetensors dtype code"
            data["problems"] = [{"tensor": t, "problem": f"unknown dtype {p!r}"} for t, p in items[:50]]
            hint = "write a dtype code safetensors knows (F8_E4M3, not F8_E4M3FN; upper case)"
        elif code == C.SF_BAD_ENTRY:
            err = C.ST_JSON
            what = f"invalid tensor entry: {subject}{problem}"
        elif code == C.SF_BAD_METADATA:
            err = C.ST_JSON
            what = f"invalid header metadata: {problem}"
            hint = "__metadata__ must map strings to strings (e.g. {\"format\": \"pt\"})"
        elif code == C.SF_BAD_OFFSETS:
            err = C.ST_OFFSET.format(name=name)
            what = f"invalid data_offsets: {subject}{problem}"
        elif code == C.SF_SIZE_MISMATCH:
            err = C.ST_INFO
            what = f"tensor size does not match dtype and shape: {subject}{problem}"
        elif code == C.SF_SIZE_OVERFLOW:
            err = C.ST_OVERFLOW
            what = f"tensor size overflows: {subject}{problem}"
        elif code == C.SF_SUB_BYTE:
            err = C.ST_MISALIGNED
            what = f"sub-byte tensor does not fill whole bytes: {subject}{problem}"
        elif code == C.SF_SPEC_DEVIATION:
            err = None
            cons = HYGIENE
            what = f"header deviates from the safetensors format (the library tolerates it): {subject}{problem}"
            hint = "re-export with the reference writer; other readers may be stricter"
        else:  # pragma: no cover - every code above
            err = None
            what = f"{subject}{problem}"
        return _f(code, rel, what + more, err, consequence=cons, tensors=tensors, hint=hint, data=data)


def _depth(v: Any) -> int:
    """Nesting depth of arrays/objects in ``v`` (0 for a scalar), without recursion."""
    if type(v) is not list and type(v) is not dict:
        return 0
    best = 0
    stack = [(v, 1)]
    while stack:
        x, d = stack.pop()
        if d > best:
            best = d
        for c in (x.values() if type(x) is dict else x):
            if type(c) is list or type(c) is dict:
                stack.append((c, d + 1))
    return best


def _mul_overflows(shape: list[int]) -> bool:
    p = 1
    for d in shape:
        p *= d
        if p > U64_MAX:
            return True
    return False
