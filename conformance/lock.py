"""The lock file (conformance/lock.json): per target, the digest of its target data and the digest of
the wheel sources (the tracked functions' fingerprints) it was last checked against.

Offline: ``data_digest`` reads only ckptlint's own target data, so the normal test suite
(tests/test_conformance_lock.py) can tell when target data changed without a conformance run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

LOCK_FILE = Path(__file__).resolve().parent / "lock.json"


def data_digest(target: str) -> str:
    """sha256 of the target's merged data (its TOML file after ``extends``), canonical JSON."""
    from ckptlint.targets import _merged

    fw, _, version = target.partition("==")
    doc = _merged(fw, version)
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def sources_digest(fingerprints: dict[str, str]) -> str:
    h = hashlib.sha256()
    for k in sorted(fingerprints):
        h.update(f"{k}={fingerprints[k]}\n".encode())
    return h.hexdigest()


def read() -> dict[str, Any]:
    try:
        return json.loads(LOCK_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"targets": {}}


def write(entries: dict[str, dict[str, Any]]) -> None:
    doc = read()
    doc.setdefault("targets", {}).update(entries)
    doc["targets"] = dict(sorted(doc["targets"].items()))
    LOCK_FILE.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def status(targets: list[str]) -> dict[str, str]:
    """target -> "ok" | "data changed" | "not locked"."""
    locked = read().get("targets", {})
    out = {}
    for t in targets:
        e = locked.get(t)
        out[t] = "not locked" if e is None else ("ok" if e.get("data") == data_digest(t) else "data changed")
    return out
