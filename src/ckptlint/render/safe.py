"""Text from a checkpoint, made safe to print.

Tensor names, config strings, index keys and a server's error text come from whoever published
the checkpoint. Printed as they are they can break the output or act on the reader:

* a lone surrogate (``"\\ud800"`` in a JSON string parses to one) cannot be encoded as UTF-8, so
  writing it fails; every renderer writes it as the escape ``\\ud800`` instead (in JSON and SARIF
  that is the JSON escape, which reads back as the same string);
* control characters (ESC sequences recolour or rewrite a terminal, ``\\r`` and ``\\n`` forge
  lines) are written as ``\\x1b``, ``\\r``, ``\\n``, ``\\u0085`` … in the text and Markdown reports;
* a line that a CI runner would take for a workflow command (``::error …`` at the start of a line,
  ``##[`` anywhere) is defused by a backslash (``\\::error``, ``#\\#[``) in the text report.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls, DEL, C1 controls, the Unicode line and paragraph separators, lone surrogates.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_COMMAND_LINE = re.compile(r"^(\s*)::")


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def clean(text: str) -> str:
    """``text`` with every control character and lone surrogate written as an escape."""
    return _UNPRINTABLE.sub(_escape_char, text) if _UNPRINTABLE.search(text) else text


def defuse_commands(text: str) -> str:
    """``text`` with workflow-command syntax broken: ``::`` starting a line, ``##[`` anywhere."""
    if "::" in text:
        text = "\n".join(_COMMAND_LINE.sub(r"\1\\::", line) for line in text.split("\n"))
    return text.replace("##[", "#\\#[")


def surrogates_escaped(text: str) -> str:
    """JSON text (as ``json.dumps(ensure_ascii=False)`` writes it) with each lone surrogate as its
    ``\\uXXXX`` escape: valid UTF-8, and the same value when read back. A surrogate can only occur
    inside a JSON string, where the escape means the same code unit."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _SURROGATE.search(text) else text


def dumps(doc: Any, **kw: Any) -> str:
    """``json.dumps`` for output files: UTF-8 as is, lone surrogates escaped."""
    return surrogates_escaped(json.dumps(doc, ensure_ascii=False, **kw))
