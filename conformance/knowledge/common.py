"""Stamping and writing extracted data (shared by every extractor)."""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXTRACTED_DIR = REPO / "src" / "ckptlint" / "targets" / "extracted"
FORMAT = 1


def extractor_version(module: Any) -> str:
    """``<module name>/<sha256 prefix of its normalised source>``: any change to the extractor's code
    (not to its comments or formatting) makes the committed data stale until it is regenerated."""
    src = inspect.getsource(module)
    norm = ast.unparse(ast.parse(src))
    return f"{module.__name__.rsplit('.', 1)[-1]}/{hashlib.sha256(norm.encode()).hexdigest()[:16]}"


def content_digest(doc: dict[str, Any]) -> str:
    """sha256 of the document's canonical JSON without its ``digest`` field."""
    body = {k: v for k, v in doc.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def stamp(framework: str, version: str, doc: dict[str, Any], wheel: Path, extractor: str) -> dict[str, Any]:
    out = {"format": FORMAT, "framework": framework, "version": version, "extractor": extractor,
           "wheel": wheel.name, "wheel_sha256": file_sha256(wheel), **doc}
    out["digest"] = content_digest(out)
    return out


def write(framework: str, version: str, name: str, doc: dict[str, Any], wheel: Path, extractor: str) -> str:
    dest = EXTRACTED_DIR / framework / version / f"{name}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(stamp(framework, version, doc, wheel, extractor), indent=1, sort_keys=True) + "\n"
    dest.write_text(text, encoding="utf-8")
    return str(dest.relative_to(REPO))
