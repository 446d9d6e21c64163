"""How the reader reports a problem: findings built with the rule class that owns them.

Every reader rule is declared in the rule catalogue, :mod:`ckptlint.rules` (``SF1xx`` shard files
/ the safetensors container: ``shard_file``; ``IX2xx`` the index and the set of files:
``index_file``; ``CF30x`` config file syntax: ``config_file``), and detected in the reader
(``header``, ``parse``, ``entries``, ``layout``, ``index``, ``fileset``, ``configs``), which builds
the finding with the rule's class: it carries the rule's code and name from the moment it is made.
The texts the ``safetensors`` library prints are in :mod:`ckptlint.rules.shard_file`, with the
rules that quote them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ckptlint.findings import Consequence, Finding
from ckptlint.rules.shard_file import (ST, ST_HEADER_LENGTH, ST_INCOMPLETE, ST_INFO, ST_JSON, ST_MISALIGNED, ST_OVERFLOW,
                                       ST_TOO_LARGE, ST_TOO_SMALL, ST_UTF8)

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

# safetensors' Rust error variant behind each text it prints (for data["safetensors_error"]).
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
