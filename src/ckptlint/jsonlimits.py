"""The one way into every JSON document ckptlint reads, local or remote, with the same limits.

Documents: ``config.json``, ``hf_quant_config.json``, the index (:mod:`ckptlint.reader.jsonfiles`,
for a directory and for the Hub alike), baselines and JSON settings (:func:`ckptlint.config.load_json`),
the Hub API's answers (:mod:`ckptlint.reader.remote`) and ``fix``'s editor (:mod:`ckptlint.fix`,
:mod:`ckptlint.jsonedit`). The safetensors header has its own reader (serde_json's rules,
:mod:`ckptlint.reader.parse`) with the same nesting limit.

Limits, the same on every path:

* **Nesting**: at most :data:`MAX_DEPTH` (127) levels of arrays and objects, serde_json's recursion
  limit (which the safetensors header is held to). Python's ``json`` reads deeper documents, up to
  its recursion limit (about 1,000 levels), but everything ckptlint does with a document afterwards
  (copies, comparisons, rendering) would then need the same depth of Python stack; no real config
  or index is nested more than a few levels. A deeper document is refused (``limit``: a limit of
  ckptlint's, not an error for Python's json) before anything else sees it.
* **Numbers**: an integer written with more than :data:`MAX_INT_DIGITS` (4,300) digits is an error,
  as it is for Python's ``json`` at its default ``sys.int_info.default_max_str_digits`` (frameworks
  fail on it the same way); the bound is applied here, before any conversion, whatever the
  interpreter's setting.

Numbers computed from these (a partition is a product of a few config values) can be longer than the
values read: :func:`allow_computed_digits`, called when the command line starts, lets such a result be
printed up to :data:`COMPUTED_DIGITS` digits (Python's default refuses more than 4,300, with an
error). Text is never converted to an integer above :data:`MAX_INT_DIGITS` digits: JSON here, TOML
settings by :func:`ckptlint.config.load_toml` (a run of more digits is refused before tomllib sees it),
HTTP numbers by :func:`ckptlint.reader.hubhttp.http_number`.

Every problem is a :class:`JsonLimitError` (a ``ValueError``) whose message is one line; callers
turn it into a finding or a usage error. No path raises ``RecursionError`` or an integer-conversion
error: the depth is measured without recursion, and a parser's own ``RecursionError`` on a
document deeper than its limit is caught here.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import msgspec

MAX_DEPTH = 127  # serde_json's recursion limit (checked with serde_json 1.0 / safetensors 0.8.0)
MAX_INT_DIGITS = 4300  # Python's default int/str conversion limit (sys.int_info.default_max_str_digits)


COMPUTED_DIGITS = 50_000  # ten products of two 4,300-digit values; printed in well under a second


def allow_computed_digits() -> None:
    """Let integers of up to :data:`COMPUTED_DIGITS` digits be printed (see the module docstring)."""
    import sys

    get = getattr(sys, "get_int_max_str_digits", None)
    if get is not None and 0 < get() < COMPUTED_DIGITS:
        sys.set_int_max_str_digits(COMPUTED_DIGITS)


class JsonLimitError(ValueError):
    """A document that is not valid JSON (``limit`` False) or beyond ckptlint's limits (``limit`` True)."""

    def __init__(self, message: str, *, limit: bool = False, line: int | None = None,
                 column: int | None = None) -> None:
        super().__init__(message)
        self.message, self.limit, self.line, self.column = message, limit, line, column


TOO_DEEP = f"nested too deeply (more than {MAX_DEPTH} levels of arrays and objects; ckptlint reads at most {MAX_DEPTH})"


def _int(text: str) -> int:
    digits = len(text) - (text[0] == "-")
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {digits:,} digits (more than {MAX_INT_DIGITS:,}, Python's limit)")
    return int(text)


_fast = msgspec.json.Decoder().decode


def loads(data: bytes | str, *, fast: Callable[[bytes], Any] | None = None, python_only: bool = False,
          object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """Parse ``data`` with Python's ``json`` semantics within the limits above.

    msgspec decodes the documents Python's json reads (the same values, the later of repeated keys)
    several times faster; whatever it refuses (NaN, 1e400, a lone surrogate escape, a BOM, a huge
    integer, deep nesting) Python's json decides, with its own error text. ``fast``: another msgspec
    decoder to try first (a typed one); ``python_only`` (the caller tried :func:`try_fast` already)
    or ``object_pairs_hook``: Python's json only."""
    obj: Any = NOT_DECODED
    if object_pairs_hook is None and not python_only:
        obj = try_fast(data, fast)
    if obj is NOT_DECODED:
        try:
            text = data if isinstance(data, str) else data.decode("utf-8")
            obj = json.loads(text, parse_int=_int, object_pairs_hook=object_pairs_hook)
        except RecursionError:
            raise JsonLimitError(TOO_DEEP, limit=True) from None
        except json.JSONDecodeError as e:
            msg = e.msg[:-3] if e.msg.endswith(" at") else e.msg
            raise JsonLimitError(f"{msg} at line {e.lineno} column {e.colno}", line=e.lineno, column=e.colno) from None
        except ValueError as e:  # from _int, or a number Python cannot convert
            raise JsonLimitError(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    if too_deep(obj):
        raise JsonLimitError(TOO_DEEP, limit=True)
    return obj


NOT_DECODED = object()


def try_fast(data: bytes | str, decoder: Callable[[bytes], Any] | None = None) -> Any:
    """``data`` decoded by msgspec (``decoder``, else the untyped one), or :data:`NOT_DECODED` where
    msgspec refuses it (then :func:`loads` with ``python_only`` decides). The depth is not checked here."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    try:
        return (decoder or _fast)(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return NOT_DECODED


_SCALARS = frozenset({str, int, float, bool, type(None)})


def too_deep(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a parsed document nests arrays and objects more than ``limit`` levels (no recursion)."""
    stack = [(obj, 1)]
    while stack:
        x, d = stack.pop()
        vals = x.values() if type(x) is dict else x if type(x) is list else None
        if vals is None:
            continue
        if d > limit:
            return True
        if len(vals) > 64 and set(map(type, vals)) <= _SCALARS:  # a big flat map or list (a weight_map)
            continue
        stack.extend((v, d + 1) for v in vals if type(v) is dict or type(v) is list)
    return False
