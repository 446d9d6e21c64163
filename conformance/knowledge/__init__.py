"""Release knowledge extracted from the released wheels, committed as generated data.

Each extractor reads one release's unpacked sources (``conformance.wheels.source_dir``) by AST (no
import of the package, no torch) and returns a JSON-able dict; ``write`` stamps it with the wheel's
sha256, the extractor's version and a digest of the content, and writes
``src/ckptlint/targets/extracted/<framework>/<version>/<name>.json``, which ckptlint reads at run
time (``ckptlint.targets.extracted``). Regenerate with ``scripts/conformance.py extract FW VER``
(or ``--all``); ``tests/test_extracted_data.py`` fails when the committed files drift from their
extractor or from each other.

``EXTRACTORS`` maps a file name to ``(function(framework, version, root) -> dict, version_of())``:
another extractor (per-class facts, ``classes``) is added next to ``registry`` the same way.
"""

from __future__ import annotations

from typing import Any, Callable

from conformance.knowledge import classes, registry
from conformance.knowledge.common import extractor_version, write, stamp, content_digest, EXTRACTED_DIR

Extractor = Callable[[str, str, Any], dict[str, Any]]

# name -> (extract(framework, version, root) -> dict, the module whose source versions it)
EXTRACTORS: dict[str, tuple[Extractor, Any]] = {
    "registry": (registry.extract, registry),
    "classes": (classes.extract_classes, classes),
}

__all__ = ["extracted_extra", "EXTRACTORS", "EXTRACTED_DIR", "extractor_version", "write", "stamp", "content_digest", "run"]


def run(framework: str, version: str, names: list[str] | None = None, *, download: bool = True) -> list[str]:
    """Extract ``names`` (default: every extractor) for one release and write their files; returns
    the paths written, relative to the repository."""
    from conformance import wheels

    root = wheels.source_dir(framework, version, download=download)
    whl = wheels.wheel_path(framework, version, download=download)
    out = []
    for name in names or list(EXTRACTORS):
        fn, module = EXTRACTORS[name]
        doc = fn(framework, version, root)
        writer = getattr(module, "write", write)  # (an extractor may render its own file)
        out.append(writer(framework, version, name, doc, whl, extractor_version(module)))
    return out


def extracted_extra() -> list[tuple[str, str]]:
    """(framework, version) of every release that already has extracted data (``--all`` keeps a
    release extracted ahead of its target data file current too)."""
    out = []
    if EXTRACTED_DIR.is_dir():
        for fw in sorted(p.name for p in EXTRACTED_DIR.iterdir() if p.is_dir()):
            out += [(fw, v.name) for v in sorted((EXTRACTED_DIR / fw).iterdir()) if v.is_dir()]
    return out
