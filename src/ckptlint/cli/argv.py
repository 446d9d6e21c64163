"""The command line of ``ckptlint check``, parsed without typer (whose import costs ~40 ms, more than
a tenth of a DeepSeek-V3-scale check).

:func:`parse` reads the parameters the command declares (:class:`ckptlint.cli.common.Decl`: the
same declarations typer is given) and accepts only what it reads exactly as typer (click) does:
long and short options as separate words, flags, ``--`` and the arguments. It returns None for
anything else (``--help``, ``--opt=value``, joined short options, a value that starts with ``-``,
an unknown option, a value a type or range refuses, a missing argument), and the command line then
goes to the typer app, which prints the help or the error. ``tests/test_cli_argv.py`` checks the
values it returns against typer's on a corpus of command lines.
"""

from __future__ import annotations

import inspect
import os
import re
import typing
from enum import Enum
from typing import Any, Callable

from ckptlint.cli.common import Decl

# What click's int and float types read (they call int() and float()), in the spellings this parser
# takes; any other spelling ("+8", " 8", "1_0", "8.", "1e-1") goes to typer.
_INT = re.compile(r"(?:0|[1-9][0-9]{0,17})\Z")
_FLOAT = re.compile(r"(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?\Z")


class _Param:
    __slots__ = ("name", "kind", "many", "type", "flag", "off", "lo", "hi", "required", "default")


def _params(func: Callable[..., Any]) -> tuple[dict[str, tuple[_Param, bool]], _Param | None, dict[str, _Param]] | None:
    """(option word -> (parameter, value it sets for a flag)), the argument, every parameter by name."""
    words: dict[str, tuple[_Param, bool]] = {}
    argument = None
    every: dict[str, _Param] = {}
    for p in inspect.signature(func).parameters.values():
        ann = p.annotation
        decl = next((m for m in getattr(ann, "__metadata__", ()) if isinstance(m, Decl)), None)
        if decl is None:
            return None
        t = ann.__origin__
        optional = typing.get_origin(t) is typing.Union and type(None) in typing.get_args(t)
        if optional:
            t = next(a for a in typing.get_args(t) if a is not type(None))
        q = _Param()
        q.name, q.kind, q.default = p.name, decl.kind, p.default
        q.required = p.default is inspect.Parameter.empty
        q.many = typing.get_origin(t) is list
        q.type = typing.get_args(t)[0] if q.many else t
        q.lo, q.hi = decl.kwargs.get("min"), decl.kwargs.get("max")
        q.flag = q.type is bool
        q.off = None
        if set(decl.kwargs) - {"help", "min", "max", "metavar", "rich_help_panel"}:  # (help-only settings)
            return None  # something this parser does not read the way typer does
        every[p.name] = q
        if decl.kind == "Argument":
            if argument is not None or not q.many:
                return None
            argument = q
            continue
        for d in decl.args:
            on, _, off = d.partition("/")
            words[on] = (q, True)
            if off:
                words[off] = (q, False)
    return words, argument, every


def _value(q: _Param, text: str) -> tuple[bool, Any]:
    """(accepted, value) for an option's text."""
    t = q.type
    if t is str:
        return True, text
    if isinstance(t, type) and issubclass(t, Enum):
        for member in t:
            if member.value == text:
                return True, member
        return False, None
    if t is int:
        if not _INT.match(text):
            return False, None
        v: Any = int(text)
    elif t is float:
        if not _FLOAT.match(text):
            return False, None
        v = float(text)
    else:
        return False, None
    if (q.lo is not None and v < q.lo) or (q.hi is not None and v > q.hi):
        return False, None
    return True, v


def parse(func: Callable[..., Any], args: list[str], prog: str = "ckptlint") -> dict[str, Any] | None:
    """The keyword arguments typer would call ``func`` with for ``args``, or None (let typer parse)."""
    if os.environ.get(f"_{prog.upper().replace('-', '_')}_COMPLETE"):
        return None  # click's shell completion
    found = _params(func)
    if found is None:
        return None
    words, argument, every = found
    values: dict[str, Any] = {}
    positional: list[str] = []
    it = iter(args)
    for a in it:
        if a == "--":
            positional.extend(it)
            break
        if a[:1] != "-" or a == "-":
            positional.append(a)
            continue
        hit = words.get(a)
        if hit is None:
            return None  # --help, --opt=value, -qf, an unknown option: typer says what it is
        q, on = hit
        if q.flag:
            values[q.name] = on
            continue
        text = next(it, None)
        if text is None or text[:1] == "-":
            return None
        ok, v = _value(q, text)
        if not ok:
            return None
        if q.many:
            values.setdefault(q.name, []).append(v)
        else:
            values[q.name] = v
    if argument is None or not positional:
        return None
    values[argument.name] = positional
    out: dict[str, Any] = {}
    for name, q in every.items():
        if name in values:
            out[name] = values[name]
        elif q.required:
            return None
        else:
            out[name] = q.default
    return out
