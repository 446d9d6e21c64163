"""Baselines: accept today's findings, fail only on new ones.

``ckptlint check PATH --write-baseline FILE`` stores one fingerprint per current finding;
``ckptlint check PATH --baseline FILE`` drops every finding whose fingerprint is in FILE.
Both work on the findings of single modules, before findings that repeat layer after layer are
aggregated for display (``ckptlint.engine.finish``): a baseline that accepts one module's defect
never hides the same defect appearing in another module. (Baselines written before this wrote
one fingerprint per aggregated finding, for its first module only: rewrite them.)

A fingerprint is built from what identifies the defect, not from how it is worded:
the rule code, the requested target (``sglang==0.5.15``; none for checkpoint-wide findings),
the subject (the runtime module, or else the file relative to the checkpoint root) and the
first tensor name in natural order. Messages, hints, severities and the order of findings
do not enter it, so a reworded message or a reordered report keeps the baseline valid.

File format (JSON, written atomically)::

    {"ckptlint_baseline": 1, "ckptlint_version": "0.1.0",
     "findings": [{"fingerprint": "…", "code": "QD401", "target": "sglang==0.5.15",
                   "subject": "model.eh_proj", "tensor": "model.layers.78.eh_proj.weight"}]}

Entries may be deleted by hand; an entry whose fields no longer hash to its ``fingerprint``,
a missing file, invalid JSON or a wrong shape is a :class:`BaselineError` (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional


from ckptlint.findings import natural_key

if TYPE_CHECKING:
    from ckptlint.findings import Finding

BASELINE_VERSION = 1


class BaselineError(ValueError):
    """An unusable baseline file: a usage error (exit 2)."""


def fields(f: "Finding") -> dict[str, Optional[str]]:
    """The fingerprinted fields. A lone surrogate (a name from a JSON string with an unpaired ``\\ud800``)
    is written as its escape text, so the baseline file is plain UTF-8 text that reads back (a
    baseline holding a lone surrogate is refused) and hashes the same."""
    from ckptlint.render.safe import surrogates_escaped

    tensor = min(f.tensors, key=natural_key) if f.tensors else None
    subject = f.module or f.file
    return {"code": f.code, "target": f.target,
            "subject": surrogates_escaped(subject) if subject else subject,
            "tensor": surrogates_escaped(tensor) if tensor else tensor}


def _hash(flds: dict[str, Optional[str]]) -> str:
    key = json.dumps([flds["code"], flds["target"], flds["subject"], flds["tensor"]], ensure_ascii=False)
    import hashlib  # (here: a check without a baseline does not need it)

    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def fingerprint(f: "Finding") -> str:
    return _hash(fields(f))


def _models():
    """The strict baseline-file schema (pydantic, imported only when a baseline file is read)."""
    from pydantic import BaseModel, ConfigDict

    class _Entry(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        fingerprint: str
        code: str
        target: Optional[str]
        subject: Optional[str]
        tensor: Optional[str]


    class _File(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        ckptlint_baseline: int
        ckptlint_version: Optional[str] = None
        findings: list[_Entry]
    return _Entry, _File


def dumps(findings: Iterable["Finding"]) -> str:
    from ckptlint import __version__

    entries = {}
    for f in findings:
        flds = fields(f)
        entries[_hash(flds)] = {"fingerprint": _hash(flds), **flds}
    ordered = sorted(entries.values(), key=lambda e: (e["target"] or "", e["code"], natural_key(e["subject"] or ""),
                                                        e["tensor"] or ""))
    doc = {"ckptlint_baseline": BASELINE_VERSION, "ckptlint_version": __version__, "findings": ordered}
    from ckptlint.render.safe import dumps

    return dumps(doc, indent=2) + "\n"


def write(path: str | Path, findings: Iterable["Finding"]) -> int:
    """Write the baseline atomically; returns the number of fingerprints."""
    from ckptlint.fsutil import write_output

    text = dumps(findings)
    try:
        write_output(path, text.encode("utf-8"))
    except OSError as exc:
        raise BaselineError(f"{path}: cannot write baseline: {exc.strerror or exc}") from None
    return len(json.loads(text)["findings"])


# A baseline with 100,000+ fingerprints is about 25 MB.
BASELINE_CAP = 64 << 20


def load(path: str | Path) -> set[str]:
    """The fingerprints stored in a baseline file."""
    from ckptlint.config import UnusableFile, load_json

    p = Path(path)
    if not p.exists() and not p.is_symlink():
        raise BaselineError(f"{p}: baseline file not found (create it with --write-baseline)")
    try:
        # capped, regular files only, UTF-8, bounded nesting, no lone surrogates
        data: Any = load_json(p, BASELINE_CAP, "baseline")
    except UnusableFile as exc:
        raise BaselineError(f"not a usable ckptlint baseline: {exc}") from None
    from pydantic import ValidationError

    _, file_model = _models()
    try:
        doc = file_model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise BaselineError(f"{p}: not a ckptlint baseline ({where}: {err['msg']})") from None
    if doc.ckptlint_baseline != BASELINE_VERSION:
        raise BaselineError(f"{p}: baseline format {doc.ckptlint_baseline} is not supported "
                            f"(this ckptlint writes format {BASELINE_VERSION})")
    out: set[str] = set()
    for i, e in enumerate(doc.findings):
        flds = {"code": e.code, "target": e.target, "subject": e.subject, "tensor": e.tensor}
        if _hash(flds) != e.fingerprint:
            raise BaselineError(f"{p}: findings[{i}]: fingerprint does not match its fields "
                                "(edited by hand? delete the entry or rewrite the baseline)")
        out.add(e.fingerprint)
    return out


def filter_findings(findings: Iterable["Finding"], known: set[str]) -> tuple[list["Finding"], int]:
    """(findings not in the baseline, number dropped)."""
    kept, dropped = [], 0
    for f in findings:
        if fingerprint(f) in known:
            dropped += 1
        else:
            kept.append(f)
    return kept, dropped
