"""Parse a safetensors header and validate it, the way the reference reader does.

Validation follows what the reference reader checks (docs/frameworks/formats.md#reader-validation),
but every problem is reported instead of only the first one, and things the reference reader
tolerates but the format text forbids (extra keys in an entry, values over 48 bits, a header that
does not start with ``{``) are reported as hygiene.

Three paths, cheapest first: a clean header without escapes, decoded by ``msgspec`` into typed
entries and checked column by column (:func:`ckptlint.reader.canonical.scan_clean`), any other
clean header (``json.loads`` and one tight pass), and the validator that names every problem
(:mod:`ckptlint.reader.entries`, then :mod:`ckptlint.reader.layout`).

The rules (SF104, SF105) are declared in :mod:`ckptlint.rules.shard_file`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ckptlint.reader.canonical import fast_validate, scan_columns, tensor_map
from ckptlint.reader.entries import SERDE_MAX_DEPTH, Validator, jtype_int, parse_int
from ckptlint.reader.layout import report_layout
from ckptlint.reader.report import HYGIENE, shard_finding
from ckptlint.rules.shard_file import ST_JSON, ST_UTF8, ShardHeaderInvalidJson, ShardHeaderNotUtf8, ShardSpecDeviation

if TYPE_CHECKING:
    from ckptlint.reader.header import ShardRead


def _reject_constant(s: str) -> Any:
    raise ValueError(f"{s} is not valid JSON")


def _utf8_error(e: UnicodeDecodeError) -> str:
    """Rust's ``Utf8Error`` text for the same bytes (what safetensors prints): a multi-byte
    sequence cut off by the end of the header is "incomplete", anything else "invalid"."""
    if e.reason == "unexpected end of data":
        return f"incomplete utf-8 byte sequence from index {e.start}"
    return f"invalid utf-8 sequence of {e.end - e.start} bytes from index {e.start}"


def _invalid_json(res: "ShardRead", rel: str, what: str) -> None:
    res.fatal = res.refused = True
    res.issues.append(shard_finding(ShardHeaderInvalidJson, rel, what, ST_JSON, hint="re-export this file"))


def parse_header(raw: bytes, n: int, size: int, rel: str, res: "ShardRead", columns: bool = False) -> None:
    """Parse and validate the ``n`` header bytes ``raw`` of a ``size``-byte file into ``res``.
    ``columns``: a clean header's tensors go to ``res.columns`` (names, dtypes, shapes), not to
    ``res.tensors`` (the shard-reading child process sends columns)."""
    ascii_only = raw.isascii()  # (then valid UTF-8: decoding cannot fail, and waits until the JSON path needs it)
    if not ascii_only:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            res.fatal = res.refused = True
            res.issues.append(shard_finding(ShardHeaderNotUtf8, rel,
                                            f"header is not valid UTF-8 (byte {e.start} of the header)",
                                            f"{ST_UTF8}: {_utf8_error(e)}",
                                            data={"position": e.start}, hint="re-export this file"))
            return
    if raw[:1] == b"{":
        quick = scan_columns(raw)
        if quick is not None and 8 + n + quick[1] == size:
            cols, res.info.data_bytes, res.metadata = quick
            res.info.n_tensors = len(cols[0])
            if columns:
                res.columns = cols
            else:
                res.tensors = tensor_map(*cols, rel)
            return
    if ascii_only:
        text = raw.decode("ascii")
    obj, err = _loads(text)
    if err is not None:
        _invalid_json(res, rel, f"header is not valid JSON: {err}")
        return
    if type(obj) is not dict:
        _invalid_json(res, rel, f"header is a JSON {jtype_int(obj)}, not an object")
        return
    if raw[:1] != b"{":
        res.issues.append(shard_finding(ShardSpecDeviation, rel,
                                        "header deviates from the safetensors format (the library tolerates it): "
                                        f"header starts with {raw[:1]!r}, not '{{' (leading whitespace)", None,
                                        consequence=HYGIENE,
                                        hint="re-export with the reference writer; older readers may be stricter"))
    slow = "\\u" in text or "-0" in text
    if not slow:
        fast = fast_validate(obj, rel)
        if fast is not None and 8 + n + fast[1] == size and text.count(":") == fast[2]:
            # clean header (the common case): no per-problem bookkeeping needed
            res.tensors, res.info.data_bytes, _, res.metadata = fast
            res.info.n_tensors = len(res.tensors)
            return
    v = Validator(obj, n, size, rel)
    v.run()
    if not slow and text.count(":") > v.keys_total:
        slow = True  # more key/value separators than keys we saw: maybe duplicate keys
    if slow:
        v = _reparse(text, obj, n, size, rel, res)
        if v is None:
            return
    if v.too_deep:
        res.issues.append(shard_finding(
            ShardHeaderInvalidJson, rel,
            f"header is not valid JSON for safetensors: an extra key in tensor {v.too_deep[0]!r} is "
            f"nested more than {SERDE_MAX_DEPTH} levels deep (serde_json's recursion limit)",
            ST_JSON, tensors=v.too_deep, hint="re-export this file"))
    report_layout(v, res)


def _reparse(text: str, obj: dict[str, Any], n: int, size: int, rel: str, res: "ShardRead") -> Validator | None:
    """Parse again with hooks that see what Python's json hides: duplicate keys, lone surrogates,
    and "-0" (which serde reads as a float). None: the header is invalid JSON after all (reported)."""
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
        obj2 = json.loads(text, object_pairs_hook=hook, parse_int=parse_int, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # pragma: no cover - the first parse succeeded
        obj2 = obj
    bad = _lone_surrogate(obj2) if "\\u" in text else None
    if bad is not None:
        _invalid_json(res, rel, f"header is not valid JSON: string {bad!r} contains an unpaired UTF-16 surrogate escape")
        return None
    v = Validator(obj2, n, size, rel)
    v.dups = {id(d): (d, names) for d, names in dups}
    v.run()
    return v


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
