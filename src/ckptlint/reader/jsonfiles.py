"""Read the JSON side files (config.json, hf_quant_config.json, the index) with Python semantics.

Frameworks read these files with Python's ``json`` module, so Python's rules decide what is
valid (``NaN`` is accepted, a duplicate key keeps the later value). Duplicate keys are
reported anyway, because the earlier value is silently lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class JsonRead:
    obj: Any = None
    text: str | None = None
    error: str | None = None  # why the file could not be read or parsed
    unreadable: bool = False  # the error is an I/O error, not bad JSON
    duplicates: list[str] = field(default_factory=list)  # "key" or "parent.key"


def read_json(path: str) -> JsonRead:
    out = JsonRead()
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        out.error = f"cannot be read ({e.strerror or e})"
        out.unreadable = True
        return out
    return parse_json_bytes(raw)


def parse_json_bytes(raw: bytes) -> JsonRead:
    """Parse the bytes of a JSON side file (however they were obtained)."""
    out = JsonRead()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        out.text = raw.decode("utf-8", "replace")
        out.error = f"is not valid UTF-8 (byte {e.start})"
        return out
    out.text = text
    try:
        out.obj = json.loads(text)
    except RecursionError:
        out.error = "is not valid JSON: nested too deeply"
        return out
    except json.JSONDecodeError as e:
        msg = e.msg[:-3] if e.msg.endswith(" at") else e.msg
        out.error = f"is not valid JSON: {msg} at line {e.lineno} column {e.colno}"
        return out
    except ValueError as e:
        out.error = f"is not valid JSON: {str(e).splitlines()[0]}"
        return out
    # Every key is followed by exactly one ':'; more colons than keys means a colon inside a
    # string or a duplicate key (which the plain parse hides): only then parse again with a hook.
    if text.count(":") == _count_keys(out.obj):
        return out
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

    json.loads(text, object_pairs_hook=hook)
    out.duplicates = dups
    return out


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
