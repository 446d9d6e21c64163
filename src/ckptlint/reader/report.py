"""How the reader reports a problem: findings built by the rule that owns them, and the error
texts the ``safetensors`` library prints.

Each reader rule is declared once, next to its detection (``header``, ``parse``, ``entries``,
``layout``, ``index``, ``fileset``, ``configs``); the finding carries the rule's code and name
from the moment it is made. Codes: ``SF1xx`` shard files / the safetensors container, ``IX2xx``
the index and the set of files, ``CF30x`` config file syntax.

The quoted library texts were taken by running ``safetensors`` 0.8.0 ``safe_open`` on crafted
files (see ``tests/test_malformed.py``, which checks them against the library). Texts that
carry a position (``at line 1 column 17``) or a serde detail are quoted up to that detail only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ckptlint.findings import Consequence, Finding

if TYPE_CHECKING:
    from ckptlint.rules.base import ReaderRule

# Entries kept of any list or map in a finding's data (the count of all of them is given beside it).
MAX_LISTED = 50
# Up to this many shards with the same problem (missing, a bad name) get a finding each; more are
# named in one finding (a few, and how many): 20,000 missing shards must not make 20,000 findings
# on every target.
MAX_SHARD_FINDINGS = 10
LOAD = Consequence.LOAD_ERROR
HYGIENE = Consequence.HYGIENE
SILENT = Consequence.SILENT_CORRUPTION

# --- texts printed by safetensors 0.8.0 (python binding, SafetensorError) ----------------
ST = "Error while deserializing header: "
ST_TOO_SMALL = ST + "header too small"
ST_TOO_LARGE = ST + "header too large"
ST_HEADER_LENGTH = ST + "invalid header length"
ST_UTF8 = ST + "invalid UTF-8 in header"
ST_JSON = ST + "invalid JSON in header"
ST_OFFSET = ST + "invalid offset for tensor `{name}`"
ST_OVERFLOW = ST + "overflow computing buffer size from shape and/or element type"
ST_MISALIGNED = (
    ST + "The slice is slicing for subbytes dtypes, and the slice does not end up at a byte "
    "boundary, this is invalid."
)
ST_INFO = ST + "invalid shape, data type, or offset for tensor"
ST_INCOMPLETE = ST + "incomplete metadata, file not fully covered"
ST_IS_DIR = "No such device (os error 19)"
ST_NOT_FOUND = "No such file or directory: {path}"

# safetensors' Rust error variant behind each text (for data["safetensors_error"]).
VARIANT = {
    ST_TOO_SMALL: "HeaderTooSmall",
    ST_TOO_LARGE: "HeaderTooLarge",
    ST_HEADER_LENGTH: "InvalidHeaderLength",
    ST_UTF8: "InvalidHeader",
    ST_JSON: "InvalidHeaderDeserialization",
    ST_OVERFLOW: "ValidationOverflow",
    ST_MISALIGNED: "MisalignedSlice",
    ST_INFO: "TensorInvalidInfo",
    ST_INCOMPLETE: "MetadataIncompleteBuffer",
}

LFS_HINT = (
    'fetch the weights: `git lfs pull --include="*.safetensors"` in the clone (LFS downloads '
    "whole files although ckptlint reads only the first bytes of each), or download the repo "
    "with `hf download <repo>` / `huggingface-cli download <repo>`"
)


def listed(items: Any) -> Any:
    """The first :data:`MAX_LISTED` entries of a list or dict, for a finding's data."""
    if len(items) <= MAX_LISTED:
        return items
    if isinstance(items, dict):
        return dict(list(items.items())[:MAX_LISTED])
    return list(items)[:MAX_LISTED]


def first_tensors(shards: list[str], mapped: Callable[[str], list[str]]) -> tuple[list[str], int]:
    """The first tensors the index maps to ``shards`` (as many as a finding lists), and how many in all."""
    first: list[str] = []
    count = 0
    for v in shards:
        ts = mapped(v)
        count += len(ts)
        if len(first) < MAX_LISTED:
            first += ts[:MAX_LISTED - len(first)]
    return first, count


def shard_finding(rule: "type[ReaderRule]", rel: str, what: str, error_text: str | None, *,
                  consequence: Consequence = LOAD, tensors: list[str] | None = None, hint: str | None = None,
                  data: dict[str, Any] | None = None) -> Finding:
    """A finding of ``rule`` about shard file ``rel``; ``error_text`` (what safetensors prints)
    also names the library's error variant in ``data["safetensors_error"]``."""
    d = dict(data or {})
    if error_text and error_text.startswith(ST):
        variant = "InvalidOffset" if error_text.startswith(ST + "invalid offset") else None
        for k, v in VARIANT.items():
            if error_text.startswith(k):
                variant = v
                break
        if variant:
            d.setdefault("safetensors_error", variant)
    return Finding(code=rule.code, name=rule.name, consequence=consequence, message=f"{rel}: {what}", file=rel,
                   tensors=list(tensors or []), hint=hint, error_text=error_text, data=d)


def file_finding(rule: "type[ReaderRule]", consequence: Consequence, file: str | None, what: str,
                 **kw: Any) -> Finding:
    """A finding of ``rule`` about ``file`` (the index, a config file; None: the directory)."""
    message = f"{file}: {what}" if file else what
    return Finding(code=rule.code, name=rule.name, consequence=consequence, message=message, file=file, **kw)
