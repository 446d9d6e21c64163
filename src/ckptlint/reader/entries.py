"""Validate the tensor entries of a parsed safetensors header, one by one.

A header that is not clean (see :mod:`ckptlint.reader.parse`) goes through :class:`Validator`:
each entry's keys, dtype, shape and data offsets are checked, and every problem is recorded
against the rule that owns it. Problems of one kind in one file become one finding (the first
problem in the message, the count, the first 50 in ``data["problems"]``). :mod:`ckptlint.reader.layout`
then walks the offsets and reports.

The rules (SF106-SF112, SF118: :class:`~ckptlint.rules.shard_file.EntryProblem`) are declared in
:mod:`ckptlint.rules.shard_file`; :func:`grouped_finding` builds their findings.
"""

from __future__ import annotations

import json
from typing import Any

from ckptlint.checkpoint import DTYPE_BITS, TensorInfo
from ckptlint.findings import Finding
from ckptlint.reader.jsonfiles import jtype
from ckptlint.reader.report import shard_finding
from ckptlint.rules.shard_file import (EntryProblem, ShardInvalidMetadata, ShardInvalidTensorEntry, ShardSpecDeviation,
                                       ShardUnknownDtype)

U64_MAX = 2**64 - 1
MAX_48 = 2**48 - 1
SERDE_MAX_DEPTH = 127  # serde_json refuses JSON nested deeper than this (checked with 0.8.0)
MAX_PROBLEMS_LISTED = 50
_ENTRY_KEYS = frozenset(("dtype", "shape", "data_offsets"))


def grouped_finding(rule: type[EntryProblem], rel: str, items: list[tuple[str, str]]) -> Finding:
    """The finding of ``rule`` for every ``(tensor, problem)`` of its kind in shard ``rel`` (the
    message in the rule's words: its ``lead``, ``headline``, ``error_text`` and ``hint``)."""
    name, problem = items[0]
    more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
    subject = "" if name == "__metadata__" else f"tensor {name!r}: "
    tensors = [t for t, _ in items if t != "__metadata__"]
    data = {"problems": [{"tensor": t, "problem": rule.describe(p)} for t, p in items[:MAX_PROBLEMS_LISTED]],
            "count": len(items)}
    return shard_finding(rule, rel, f"{rule.lead}{subject}{rule.headline(problem)}{more}",
                         rule.error_text(name, problem), consequence=rule.consequences[0], tensors=tensors,
                         hint=rule.hint, data=data)


class _NegZero(int):
    """``-0`` in the JSON: Python reads int 0, serde reads the float -0.0 (a type error)."""


def parse_int(s: str) -> int:
    """``parse_int`` for ``json.loads`` that marks ``-0`` (see :class:`_NegZero`)."""
    return _NegZero(0) if s == "-0" else int(s)


def jtype_int(v: Any) -> str:
    return jtype(v, integers=True)


def _short(v: Any, limit: int = 60) -> str:
    try:
        s = json.dumps(v, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        s = repr(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


class Validator:
    """One pass over the parsed header's entries (:meth:`run`); :func:`~ckptlint.reader.layout.report_layout`
    then walks the offsets and reports."""

    def __init__(self, obj: dict[str, Any], n: int, size: int, rel: str) -> None:
        self.obj = obj
        self.n = n
        self.size = size
        self.rel = rel
        self.keys_total = 0
        self.dups: dict[int, tuple[Any, list[str]]] = {}
        # rule -> list of (tensor, problem)
        self.problems: dict[type[EntryProblem], list[tuple[str, str]]] = {}
        self.recs: list[tuple[int, int, str, int]] = []  # (begin, end, name, expected bytes or -1)
        self.tensors: dict[str, TensorInfo] = {}
        self.metadata: dict[str, str] | None = None
        self.overflow: list[str] = []
        self.unplaced = 0  # entries whose data_offsets are unusable
        self.too_deep: list[str] = []  # extra keys nested deeper than serde_json allows
        self.sub_byte: list[tuple[str, str]] = []

    def bad(self, rule: type[EntryProblem], name: str, problem: str) -> None:
        self.problems.setdefault(rule, []).append((name, problem))

    def run(self) -> None:
        keys_total = len(self.obj)
        for name, e in self.obj.items():
            if name == "__metadata__":
                self._metadata(e)
                continue
            if type(e) is not dict:
                self.bad(ShardInvalidTensorEntry, name, f"entry is a JSON {jtype_int(e)}, not an object")
                self.unplaced += 1
                continue
            keys_total += len(e)
            ok = self._fields(name, e)
            b, end = self._offsets(name, e)
            if b < 0:
                self.unplaced += 1
                continue
            if not ok:
                self.recs.append((b, end, name, -1))
                continue
            dt, sh = e["dtype"], e["shape"]
            self.recs.append((b, end, name, self._nbytes(name, dt, sh)))
            self.tensors[name] = TensorInfo(name, dt, tuple(sh), self.rel)
        self.keys_total += keys_total

    def _fields(self, name: str, e: dict[str, Any]) -> bool:
        """Check an entry's keys, dtype and shape; False when its size cannot be known."""
        bad = self.bad
        ok = True
        if len(e) != 3 or e.keys() != _ENTRY_KEYS:
            missing = [k for k in ("dtype", "shape", "data_offsets") if k not in e]
            if missing:
                bad(ShardInvalidTensorEntry, name, f"entry has no {', '.join(missing)}")
                ok = False
            extra = [k for k in e if k not in _ENTRY_KEYS]
            if extra:
                bad(ShardSpecDeviation, name, f"entry has extra key(s) {', '.join(map(repr, extra))}")
                for k in extra:
                    if 2 + _depth(e[k]) > SERDE_MAX_DEPTH:
                        self.too_deep.append(name)
        dt = e.get("dtype")
        bits = DTYPE_BITS.get(dt) if type(dt) is str else None
        if bits is None and "dtype" in e:
            if type(dt) is str:
                bad(ShardUnknownDtype, name, dt)
            else:
                bad(ShardInvalidTensorEntry, name, f"dtype is a JSON {jtype_int(dt)}, not a string")
            ok = False
        sh = e.get("shape")
        if type(sh) is list:
            for d in sh:
                if type(d) is not int or d < 0 or d > U64_MAX:
                    why = " (-0 is read as a float)" if isinstance(d, _NegZero) else ""
                    bad(ShardInvalidTensorEntry, name,
                        f"shape {_short(sh)} is not a list of non-negative 64-bit integers{why}")
                    return False
                if d > MAX_48:
                    bad(ShardSpecDeviation, name, f"dimension {d} exceeds the format's 48-bit limit")
        elif "shape" in e:
            bad(ShardInvalidTensorEntry, name, f"shape is a JSON {jtype_int(sh)}, not an array")
            return False
        return ok

    def _offsets(self, name: str, e: dict[str, Any]) -> tuple[int, int]:
        """An entry's ``[begin, end]``; begin -1 when they are unusable."""
        off = e.get("data_offsets")
        if type(off) is list and len(off) == 2:
            b, end = off
            if type(b) is int and type(end) is int and 0 <= b <= U64_MAX and 0 <= end <= U64_MAX:
                if end > MAX_48:
                    self.bad(ShardSpecDeviation, name, f"data offset {end} exceeds the format's 48-bit limit")
                return b, end
            why = " (-0 is read as a float)" if isinstance(b, _NegZero) or isinstance(end, _NegZero) else ""
            self.bad(ShardInvalidTensorEntry, name,
                     f"data_offsets {_short(off)} is not two non-negative 64-bit integers{why}")
            return -1, end
        if "data_offsets" in e:
            self.bad(ShardInvalidTensorEntry, name, f"data_offsets {_short(off)} is not a [begin, end] pair")
        return -1, 0

    def _nbytes(self, name: str, dt: str, sh: list[int]) -> int:
        """Bytes a well-formed entry needs; -1 when that overflows or is not whole bytes (recorded)."""
        bits = DTYPE_BITS[dt]
        numel = element_count(sh)
        if numel is None or numel * bits > U64_MAX:
            self.overflow.append(name)
            return -1
        nbits = numel * bits
        if nbits & 7:
            self.sub_byte.append((name, f"{dt} {_short(sh)}: {numel} elements x {bits} bits = {nbits} bits"))
            return -1
        return nbits >> 3

    def _metadata(self, m: Any) -> None:
        if m is None:
            return
        if type(m) is not dict:
            self.bad(ShardInvalidMetadata, "__metadata__", f"__metadata__ is a JSON {jtype_int(m)}, not an object")
            return
        self.keys_total += len(m)
        nonstr = [k for k, v in m.items() if type(v) is not str]
        if nonstr:
            k = nonstr[0]
            self.bad(ShardInvalidMetadata, "__metadata__",
                     f"__metadata__ value for {k!r} is a JSON {jtype_int(m[k])}, not a string"
                     + (f" (and {len(nonstr) - 1} more)" if len(nonstr) > 1 else ""))
        else:
            self.metadata = m


def element_count(shape: Any) -> int | None:
    """The product of ``shape``'s dimensions (each at most 64 bits), or None when it overflows 64 bits.

    As safetensors computes it (a checked multiplication, dimension by dimension), a product that
    overflows on the way is an overflow even if a later dimension is 0. Stopping there keeps the
    cost linear in the rank: a shape of 200,000 dimensions of 2 is never multiplied out.
    """
    n = 1
    for d in shape:
        n *= d
        if n > U64_MAX:
            return None
    return n


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
