"""Read the JSON side files (config.json, hf_quant_config.json, the index) with Python semantics.

Frameworks read these files with Python's ``json`` module, so Python's rules decide what is
valid (``NaN`` is accepted, a duplicate key keeps the later value). Duplicate keys are
reported anyway, because the earlier value is silently lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from ckptlint.fsutil import FileRefused, read_capped
from ckptlint.jsonlimits import NOT_DECODED, TOO_DEEP, JsonLimitError, loads, too_deep, try_fast

MIB = 1 << 20
# What ckptlint reads of each JSON side file at most (a larger file, or one that is not a regular
# file, is a finding and is not read). Real config.json / hf_quant_config.json files are kilobytes;
# a per-layer hf_quant_config.json (MIXED_PRECISION) of a Kimi-K2-size model is a few MB. An index
# has one ~100-byte entry per tensor: about 100 MB for the 1,000,000-tensor benchmark. The caps
# bound the memory a parse can take (a JSON document of small objects takes ~10x its size).
CONFIG_CAP = 64 * MIB
INDEX_CAP = 256 * MIB


@dataclass
class JsonRead:
    obj: Any = None
    text: str | None = None
    # an ASCII file read with a ``text_cap`` that kept it: its bytes instead of ``text`` (see Texts)
    ascii_bytes: bytes | None = None
    error: str | None = None  # why the file could not be read or parsed
    unreadable: bool = False  # the error is an I/O error, not bad JSON
    refused: bool = False  # not read: larger than ckptlint reads
    duplicates: list[str] = field(default_factory=list)  # "key" or "parent.key"


def read_json(path: str, cap: int = CONFIG_CAP, shards: tuple[str, ...] = (), text_cap: int | None = None) -> JsonRead:
    """Read and parse the JSON file at ``path``; one that is not a regular file or holds more than
    ``cap`` bytes is not read (``error`` says why). ``shards`` and ``text_cap``: see
    :func:`parse_json_bytes`."""
    out = JsonRead()
    try:
        raw = read_capped(path, cap)
    except FileRefused as e:  # not a regular file, or too large
        out.error = e.why
        out.unreadable = True
        out.refused = e.too_large
        return out
    except OSError as e:
        out.error = f"cannot be read ({e.strerror or e})"
        out.unreadable = True
        return out
    return parse_json_bytes(raw, shards, text_cap)


def parse_json_bytes(raw: bytes, shards: tuple[str, ...] = (), text_cap: int | None = None) -> JsonRead:
    """Parse the bytes of a JSON side file (however they were obtained).

    ``shards`` (for an index: the shard files present) lets an index of the usual form, with
    only ``weight_map`` and ``metadata`` and every value one of those names, be decoded with the
    values checked against them and shared (one string per shard, not one per tensor); any
    other index is decoded like every JSON file. ``text_cap``: an ASCII file is not decoded to a
    string unless the JSON path needs one, and keeps its bytes as ``ascii_bytes`` (for pointing
    findings at a line, :class:`ckptlint.checkpoint.Texts`) only up to that size (a
    1,000,000-tensor index is ~100 MB)."""
    out = JsonRead()
    text: str | None = None
    if text_cap is not None and raw.isascii():
        if len(raw) <= text_cap:
            out.ascii_bytes = raw
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            out.text = raw.decode("utf-8", "replace")
            out.error = f"is not valid UTF-8 (byte {e.start})"
            return out
        out.text = text
    try:
        # (jsonlimits: msgspec first, Python's json for what it refuses; the nesting and number limits)
        obj = _decode_index(raw, shards) if shards else _UNSET
        if obj is _UNSET:
            obj = try_fast(raw)
        if obj is NOT_DECODED:
            if text is None:  # (an ASCII file read without its text: Python's json reads the text)
                text = out.text = raw.decode("ascii")
            obj = loads(text, python_only=True)
        elif too_deep(obj):
            raise JsonLimitError(TOO_DEEP, limit=True)
        out.obj = obj
    except JsonLimitError as e:
        out.error = f"is not valid JSON: {e.message}" if not e.limit else f"is {e.message}"
        out.refused = e.limit
        return out
    # Every key is followed by exactly one ':'; more colons than keys means a colon inside a
    # string or a duplicate key (which the plain parse hides): only then parse again with a hook.
    # (the count in the bytes is the count in the text: no UTF-8 sequence holds the byte of ':')
    if raw.count(b":") == _count_keys(out.obj):
        return out
    if text is None:
        text = out.text = raw.decode("ascii")
    dups: list[str] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(pairs)
        if len(d) != len(pairs):
            seen: set[str] = set()
            for k, _ in pairs:
                if k in seen and k not in dups:
                    dups.append(k)
                seen.add(k)
        return d

    loads(text, object_pairs_hook=hook)
    out.duplicates = dups
    return out


# Raw index text kept for locating findings at a line (SARIF) only up to this size: a 1,000,000-tensor
# index is ~100 MB of text plus a dict of the same entries, and memory must stay bounded.
MAX_KEPT_TEXT = 16 * 2**20
_UNSET = object()
_INDEX_DECODERS: dict[tuple[str, ...], Any] = {}


def _decode_index(raw: bytes, shards: tuple[str, ...]) -> Any:
    """An index with no keys but ``weight_map`` and ``metadata`` and every ``weight_map`` value among
    ``shards``, as a dict; _UNSET for any other (then decoded like every JSON file)."""
    dec = _INDEX_DECODERS.get(shards)
    if dec is None:
        from typing import Literal

        index = msgspec.defstruct("Index", [("weight_map", dict[str, Literal[shards]]),  # type: ignore[valid-type]
                                            ("metadata", Any, msgspec.UNSET)], forbid_unknown_fields=True)
        if len(_INDEX_DECODERS) >= 64:  # one per checkpoint directory: many in one run stay bounded
            _INDEX_DECODERS.clear()
        dec = _INDEX_DECODERS[shards] = msgspec.json.Decoder(index).decode
    try:
        doc = dec(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return _UNSET
    if doc.metadata is msgspec.UNSET:
        return {"weight_map": doc.weight_map}
    return {"metadata": doc.metadata, "weight_map": doc.weight_map}


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _count_keys(obj: Any) -> int:
    n = 0
    stack = [obj]
    while stack:
        x = stack.pop()
        if type(x) is dict:
            n += len(x)
            vals = x.values()
            if len(x) > 64 and set(map(type, vals)) <= _SCALARS:  # a big flat map (an index's weight_map)
                continue
            for v in vals:
                if type(v) is dict or type(v) is list:
                    stack.append(v)
        elif type(x) is list:
            for v in x:
                if type(v) is dict or type(v) is list:
                    stack.append(v)
    return n


def jtype(v: Any, integers: bool = False) -> str:
    """JSON type name of a parsed value (``integers``: say "integer" rather than "number" for ints)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) and integers:
        return "integer"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"
