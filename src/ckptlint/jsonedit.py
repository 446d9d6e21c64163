"""Minimal edits of a JSON text: append to an array or add a member to an object (at its end or before a
given key), leaving every other byte as it was (line endings, number formatting, escapes, spacing, key
order, duplicate keys).

The text must already parse with ``json.loads``. Positions come from a small scanner over its tokens;
where ``json.loads`` keeps the last of duplicate keys, so do :func:`find` and the edits. New values
are laid out like their surroundings: a multi-line container gets one item per line at the
indentation of its siblings (as ``json.dumps(indent=...)`` would write them), an inline one stays
inline, with the file's own separators.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ckptlint.jsonlimits import loads

_WS = re.compile(r"[ \t\r\n]*")
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^ \t\r\n{}\[\]:,"]+')

Member = tuple  # (key or None, key start, key end, value start, value end, child Node or None)


class EditError(ValueError):
    """The text is not JSON this module can edit, or the edit would not give the expected document."""


class Node:
    """A container in the text: ``start`` at its bracket, ``end`` after its closing bracket;
    ``members``: (key or None, key start, key end, value start, value end, child container or None)."""

    __slots__ = ("kind", "start", "end", "members")

    def __init__(self, kind: str, start: int) -> None:
        self.kind, self.start, self.end = kind, start, -1
        self.members: list[Member] = []

    def last(self, key: str) -> Member | None:
        for m in reversed(self.members):
            if m[0] == key:
                return m
        return None


def parse(text: str) -> Node:
    """The container tree of a JSON text (which ``json.loads`` accepts) whose top level is an object
    or an array. Iterative: nesting depth costs no stack."""
    stack: list[list[Any]] = []  # [node, state, key, key start, key end]
    root: Node | None = None
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise EditError(f"unexpected character at offset {pos}")
        tok, start = m.group(), m.start()
        pos = _WS.match(text, m.end()).end()  # type: ignore[union-attr]
        if not stack:
            if root is not None or tok not in ("{", "["):
                raise EditError("the document is not one object or array")
            root = Node("object" if tok == "{" else "array", start)
            stack.append([root, "key" if tok == "{" else "value", None, -1, -1])
            continue
        frame = stack[-1]
        node = frame[0]
        if tok in ("}", "]"):
            node.end = start + 1
            stack.pop()
            if stack:
                parent = stack[-1][0]
                parent.members[-1] = (*parent.members[-1][:4], node.end, node)
            continue
        if tok == ",":
            frame[1] = "key" if node.kind == "object" else "value"
            continue
        if tok == ":":
            frame[1] = "value"
            continue
        if frame[1] == "key":
            frame[2], frame[3], frame[4], frame[1] = json.loads(tok), start, start + len(tok), "colon"
            continue
        child = Node("object" if tok == "{" else "array", start) if tok in ("{", "[") else None
        node.members.append((frame[2], frame[3], frame[4], start, start + len(tok), child)
                            if node.kind == "object" else (None, -1, -1, start, start + len(tok), child))
        frame[1] = "after"
        if child is not None:
            stack.append([child, "key" if tok == "{" else "value", None, -1, -1])
    if root is None or stack:
        raise EditError("unterminated JSON text")
    return root


def find(root: Node, path: list[str]) -> tuple[Node, Member | None]:
    """(the object holding the last key of ``path``, that member or None); raises EditError when a
    key on the way is missing or not an object."""
    node = root
    for i, key in enumerate(path):
        member = node.last(key) if node.kind == "object" else None
        if i == len(path) - 1:
            if node.kind != "object":
                raise EditError(f"{'.'.join(path[:i]) or 'the document'} is not an object")
            return node, member
        if member is None or member[5] is None or member[5].kind != "object":
            raise EditError(f"{'.'.join(path[:i + 1])} is not an object")
        node = member[5]
    raise EditError("empty path")


# --- layout ---------------------------------------------------------------------------------

def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _line_indent(text: str, pos: int) -> str:
    line_start = max(text.rfind("\n", 0, pos), text.rfind("\r", 0, pos)) + 1
    return text[line_start:pos][: len(text[line_start:pos]) - len(text[line_start:pos].lstrip(" \t"))]


def _unit(text: str) -> str:
    """One level of indentation, as the file uses it (two spaces when it shows none)."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and line != stripped:
            return line[: len(line) - len(stripped)]
    return "  "


def _first(node: Node) -> int:
    """Where the first member starts (its key in an object)."""
    return node.members[0][1 if node.kind == "object" else 3]


def _multiline(text: str, node: Node) -> bool:
    between = text[node.start:_first(node)] if node.members else text[node.start:node.end]
    return "\n" in between or "\r" in between


def _item_sep(text: str) -> str:
    return ", " if ", " in text else ","


def _kv_sep(text: str, node: Node) -> str:
    """What separates a key from its value in ``node`` (``": "`` when it has no member)."""
    if node.members:
        return text[node.members[-1][2]:node.members[-1][3]]
    return ": "


def container(text: str, items: list[str], opener: str, indent: str, multiline: bool) -> str:
    """A new array (``opener`` "[") or object ("{") holding ``items`` (already JSON), laid out at
    ``indent`` (the indentation of the line that holds it)."""
    close = "]" if opener == "[" else "}"
    if not items:
        return opener + close
    if not multiline:
        return opener + _item_sep(text).join(items) + close
    nl, inner = _newline(text), indent + _unit(text)
    return opener + nl + inner + ("," + nl + inner).join(items) + nl + indent + close


# --- edits ----------------------------------------------------------------------------------------

def _append(text: str, node: Node, items: list[str]) -> str:
    """Append ``items`` (array values, or ``"key": value`` pairs for an object) to a non-empty container."""
    last = node.members[-1]
    first_of_last = last[1] if node.kind == "object" else last[3]
    if len(node.members) > 1:
        sep = text[node.members[-2][4]:first_of_last]
    else:
        sep = "," + text[node.start + 1:first_of_last] if _multiline(text, node) else _item_sep(text)
    return text[:last[4]] + "".join(sep + it for it in items) + text[last[4]:]


def _insert(text: str, node: Node, index: int, items: list[str]) -> str:
    """Insert ``items`` before the member at ``index`` of a non-empty container, with its separators."""
    if index >= len(node.members):
        return _append(text, node, items)
    at = node.members[index][1 if node.kind == "object" else 3]
    if len(node.members) > 1:
        a, b = node.members[0], node.members[1]
        sep = text[a[4]:b[1] if node.kind == "object" else b[3]]
    else:
        sep = "," + text[node.start + 1:at] if _multiline(text, node) else _item_sep(text)
    return text[:at] + "".join(it + sep for it in items) + text[at:]


def _multiline_holder(text: str, obj: Node) -> bool:
    return _multiline(text, obj) if obj.members else ("\n" in text or "\r" in text)


def extend(text: str, path: list[str], key: str, items: list[Any], kind: str, before: str | None = None) -> str:
    """Add ``items`` to the container at ``path`` + ``key``: array values as JSON text (``kind``
    "array"), or (key, value as JSON text) pairs (``kind`` "object"); at the end, or in an object before the
    first member named ``before`` (where order matters: GPTQ `dynamic` rules). The container is created where
    ``key`` is absent or ``null``; any other value is an EditError (its type is never changed)."""
    if not items:
        return text
    obj, member = find(parse(text), [*path, key])
    if kind == "object":
        target = member[5] if member is not None and member[5] is not None and member[5].members else obj
        sep = _kv_sep(text, target)
        items = [json.dumps(k, ensure_ascii=False) + sep + v for k, v in items]
    indent = member_indent(text, obj)
    multiline = _multiline_holder(text, obj)
    opener = "[" if kind == "array" else "{"
    if member is None:
        pair = json.dumps(key, ensure_ascii=False) + _kv_sep(text, obj) + container(text, items, opener, indent,
                                                                                     multiline)
        if obj.members:
            return _append(text, obj, [pair])
        return text[:obj.start] + container(text, [pair], "{", _line_indent(text, obj.start), multiline) \
            + text[obj.end:]
    child = member[5]
    if child is None and text[member[3]:member[4]] == "null":
        return text[:member[3]] + container(text, items, opener, indent, multiline) + text[member[4]:]
    if child is None or child.kind != kind:
        raise EditError(f"{'.'.join([*path, key])} is not an {kind}")
    if not child.members:
        return text[:child.start] + container(text, items, opener, indent, multiline) + text[child.end:]
    if before is not None and kind == "object":
        index = next((i for i, m in enumerate(child.members) if m[0] == before), len(child.members))
        return _insert(text, child, index, items)
    return _append(text, child, items)


def member_indent(text: str, obj: Node) -> str:
    """The indentation of ``obj``'s members (of the line a new member goes on)."""
    if obj.members and _multiline(text, obj):
        return _line_indent(text, obj.members[-1][1])
    return _line_indent(text, obj.start) + _unit(text)


def check(new_text: str, expected: Any) -> None:
    """Raise EditError unless ``new_text`` parses to ``expected``."""
    try:
        got = loads(new_text)
    except ValueError as exc:
        raise EditError(f"the edited text is not JSON ({exc})") from None
    if got != expected:
        raise EditError("the edited text does not parse to the intended document")
