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

File format (JSON, written atomically). One checkpoint (format 1, as every release wrote it)::

    {"ckptlint_baseline": 1, "ckptlint_version": "0.1.0",
     "findings": [{"fingerprint": "…", "code": "QD401", "target": "sglang==0.5.15",
                   "subject": "model.eh_proj", "tensor": "model.layers.78.eh_proj.weight"}]}

Several checkpoints in one run (format 2): the same entries under each checkpoint's key::

    {"ckptlint_baseline": 2, "ckptlint_version": "0.1.0",
     "checkpoints": {"models/glm5": {"findings": [...]}, "hf://org/repo": {"findings": [...]}}}

A checkpoint's key (:func:`key`) is its directory relative to the directory that holds the baseline
file, with ``/`` separators (so the file stays valid wherever the repository is cloned and whichever
directory ckptlint runs from), or ``hf://ORG/REPO`` without a revision (a new revision keeps its
baseline). ``--write-baseline`` writes format 1 for one checkpoint and format 2 for several;
``--baseline`` reads both: format 1 only with one checkpoint (its fingerprints name no checkpoint),
format 2 with any number, each checkpoint taking its own key's entries (a checkpoint the file has no
key for has no accepted findings, and the run says so).

Entries may be deleted by hand; an entry whose fields no longer hash to its ``fingerprint``,
a missing file, invalid JSON or a wrong shape is a :class:`BaselineError` (exit 2).

Reading is bounded: the file is at most :data:`BASELINE_CAP` bytes, and it is decoded straight into
the schema (msgspec structs, :func:`_decoder`) with no untyped intermediate: an entry that is not a
full entry (``{}``), a string longer than :data:`MAX_FIELD`, or more than :data:`MAX_ENTRIES` entries
stops the decode where it is met, so a hostile file costs a small multiple of its size (about 3x,
measured in ``tests/test_hardening_json.py``), never the hundred-fold of a generic JSON tree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterable, Optional, Union

import msgspec
from msgspec import Meta, Struct


from ckptlint import __version__
from ckptlint.config import UnusableFile, read_capped, utf8_bytes
from ckptlint.findings import natural_key
from ckptlint.fsutil import write_output
from ckptlint.jsonlimits import TOO_DEEP
from ckptlint.render import safe

if TYPE_CHECKING:
    from ckptlint.findings import Finding

BASELINE_VERSION = 2  # the newest format this ckptlint writes (1 for one checkpoint, 2 for several)


class BaselineError(ValueError):
    """An unusable baseline file: a usage error (exit 2)."""


def fields(f: "Finding") -> dict[str, Optional[str]]:
    """The fingerprinted fields. A lone surrogate (a name from a JSON string with an unpaired ``\\ud800``)
    is written as its escape text, so the baseline file is plain UTF-8 text that reads back (a
    baseline holding a lone surrogate is refused) and hashes the same."""
    tensor = min(f.tensors, key=natural_key) if f.tensors else None
    subject = f.module or f.file
    return {"code": f.code, "target": f.target,
            "subject": safe.surrogates_escaped(subject) if subject else subject,
            "tensor": safe.surrogates_escaped(tensor) if tensor else tensor}


def _hash(flds: dict[str, Optional[str]]) -> str:
    key = json.dumps([flds["code"], flds["target"], flds["subject"], flds["tensor"]], ensure_ascii=False)
    import hashlib  # (here: a check without a baseline does not need it)

    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def fingerprint(f: "Finding") -> str:
    return _hash(fields(f))


# Bounds of the schema: more entries than a 64 MiB file of the smallest entries could hold, and
# strings as long as the longest tensor names ckptlint reports (a 1,000,000-character name reads back).
MAX_ENTRIES = 1_000_000
MAX_FIELD = 1 << 20
MAX_CHECKPOINTS = 100_000
_Field = Annotated[str, Meta(max_length=MAX_FIELD)]
_Short = Annotated[str, Meta(max_length=256)]


class _Entry(Struct, forbid_unknown_fields=True):
    fingerprint: Annotated[str, Meta(pattern="^[0-9a-f]{32}$")]
    code: _Short
    target: Union[_Short, None]
    subject: Union[_Field, None]
    tensor: Union[_Field, None]


_Entries = Annotated[list[_Entry], Meta(max_length=MAX_ENTRIES)]


class _Version(Struct):  # only the format number; the rest of the file is skipped, not built
    ckptlint_baseline: int


class _File1(Struct, forbid_unknown_fields=True):
    ckptlint_baseline: int
    findings: _Entries
    ckptlint_version: Union[_Short, None] = None


class _Checkpoint(Struct, forbid_unknown_fields=True):
    findings: _Entries


class _File2(Struct, forbid_unknown_fields=True):
    ckptlint_baseline: int
    checkpoints: Annotated[dict[_Field, _Checkpoint], Meta(max_length=MAX_CHECKPOINTS)]
    ckptlint_version: Union[_Short, None] = None


# The schema's decoders (strict: no unknown field, no coercion), built on first use.
_TYPES = {"version": _Version, "1": _File1, "2": _File2}
_DECODERS: dict[str, Any] = {}


def _decoder(which: str):
    if which not in _DECODERS:
        _DECODERS[which] = msgspec.json.Decoder(_TYPES[which]).decode
    return _DECODERS[which]


def entries(findings: Iterable["Finding"]) -> list[dict[str, Optional[str]]]:
    entries = {}
    for f in findings:
        flds = fields(f)
        for k in ("subject", "tensor"):
            if flds[k] is not None and len(flds[k]) > MAX_FIELD:  # type: ignore[arg-type]
                raise BaselineError(f"a {f.code} finding's {k} is {len(flds[k]):,} characters, more than a "  # type: ignore[arg-type]
                                    f"baseline holds ({MAX_FIELD:,}): cannot write a baseline that reads back")
        entries[_hash(flds)] = {"fingerprint": _hash(flds), **flds}
    return sorted(entries.values(), key=lambda e: (e["target"] or "", e["code"], natural_key(e["subject"] or ""),
                                                   e["tensor"] or ""))


def dumps(findings: Iterable["Finding"]) -> str:
    """A format-1 baseline (one checkpoint)."""
    doc = {"ckptlint_baseline": 1, "ckptlint_version": __version__, "findings": entries(findings)}
    return safe.dumps(doc, indent=2) + "\n"


def dumps_many(per_checkpoint: dict[str, list[dict[str, Optional[str]]]]) -> str:
    """A format-2 baseline: each checkpoint's :func:`entries` under its :func:`key`."""
    doc = {"ckptlint_baseline": 2, "ckptlint_version": __version__,
           "checkpoints": {k: {"findings": per_checkpoint[k]} for k in sorted(per_checkpoint)}}
    return safe.dumps(doc, indent=2) + "\n"


def key(checkpoint: str, baseline_file: str | Path) -> str:
    """The key of ``checkpoint`` (the checkpoint a PATH stands for) in a format-2 baseline at
    ``baseline_file``: ``hf://ORG/REPO`` without its revision, else the directory relative to the baseline
    file's directory, with ``/`` separators."""
    import os

    if checkpoint.startswith("hf://"):
        return checkpoint.partition("@")[0].rstrip("/")
    rel = os.path.relpath(os.path.abspath(checkpoint), os.path.dirname(os.path.abspath(baseline_file)))
    return Path(rel).as_posix()


def write(path: str | Path, findings: Iterable["Finding"]) -> int:
    """Write a format-1 baseline atomically; returns the number of fingerprints."""
    return _write(path, dumps(findings))


def write_many(path: str | Path, per_checkpoint: dict[str, list[dict[str, Optional[str]]]]) -> int:
    """Write a format-2 baseline (keys from :func:`key`) atomically; returns the number of fingerprints."""
    return _write(path, dumps_many(per_checkpoint))


def _write(path: str | Path, text: str) -> int:
    try:
        write_output(path, text.encode("utf-8"))
    except OSError as exc:
        raise BaselineError(f"{path}: cannot write baseline: {exc.strerror or exc}") from None
    return text.count('"fingerprint": ')


# A baseline with 100,000+ fingerprints is about 25 MB.
BASELINE_CAP = 64 << 20


class Loaded:
    """A baseline file read and checked: :meth:`known` gives a checkpoint's fingerprints."""

    def __init__(self, path: Path, version: int, single: set[str] | None, keyed: dict[str, set[str]] | None) -> None:
        self.path, self.version, self.single, self.keyed = path, version, single, keyed

    def known(self, checkpoint: str) -> tuple[set[str], str | None]:
        """(the fingerprints accepted for ``checkpoint``, a note when the file has none for it)."""
        if self.keyed is None:
            return self.single or set(), None
        k = key(checkpoint, self.path)
        if k in self.keyed:
            return self.keyed[k], None
        return set(), (f"baseline {self.path} has no entry for {k!r}: every finding of this checkpoint is new "
                       "(add it with --write-baseline)")


def load(path: str | Path) -> set[str]:
    """The fingerprints stored in a format-1 baseline file (one checkpoint)."""
    got = load_file(path)
    if got.keyed is not None:
        raise BaselineError(f"{path}: a baseline of several checkpoints (format 2): name the checkpoint")
    return got.single or set()


def load_file(path: str | Path) -> Loaded:
    """Read a baseline file of either format, bounded (see the module docstring)."""
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        raise BaselineError(f"{p}: baseline file not found (create it with --write-baseline)")
    try:
        # capped, regular files only, UTF-8 (a UTF-8 byte-order mark dropped)
        raw = utf8_bytes(read_capped(p, BASELINE_CAP, "baseline"), str(p), "baseline")
    except UnusableFile as exc:
        raise BaselineError(f"not a usable ckptlint baseline: {exc}") from None

    def decode(which: str):
        try:
            return _decoder(which)(raw)
        except msgspec.ValidationError as exc:
            msg, _, at = str(exc).partition(" - at `")
            where = at.rstrip("`").removeprefix("$").lstrip(".") or "(top level)"
            raise BaselineError(f"{p}: not a ckptlint baseline ({where}: {msg})") from None
        except msgspec.DecodeError as exc:
            raise BaselineError(f"not a usable ckptlint baseline: {p}: invalid JSON: {exc}") from None
        except RecursionError:  # (msgspec's own limit, met while skipping a value nested ~1,000 deep)
            raise BaselineError(f"not a usable ckptlint baseline: {p}: invalid JSON: {TOO_DEEP}") from None

    version = decode("version").ckptlint_baseline
    if version not in (1, 2):
        raise BaselineError(f"{p}: baseline format {version} is not supported "
                            f"(this ckptlint reads formats 1 and {BASELINE_VERSION})")
    doc = decode(str(version))

    def checked(entries, where: str) -> set[str]:
        # (a lone surrogate escape is refused by the decoder: every string here is text)
        out: set[str] = set()
        for i, e in enumerate(entries):
            flds = {"code": e.code, "target": e.target, "subject": e.subject, "tensor": e.tensor}
            if _hash(flds) != e.fingerprint:
                raise BaselineError(f"{p}: {where}[{i}]: fingerprint does not match its fields "
                                    "(edited by hand? delete the entry or rewrite the baseline)")
            out.add(e.fingerprint)
        return out

    if version == 1:
        return Loaded(p, 1, checked(doc.findings, "findings"), None)
    return Loaded(p, 2, None, {k: checked(c.findings, f"checkpoints.{k}.findings") for k, c in doc.checkpoints.items()})


def filter_findings(findings: Iterable["Finding"], known: set[str]) -> tuple[list["Finding"], int]:
    """(findings not in the baseline, number dropped)."""
    kept, dropped = [], 0
    for f in findings:
        if fingerprint(f) in known:
            dropped += 1
        else:
            kept.append(f)
    return kept, dropped
