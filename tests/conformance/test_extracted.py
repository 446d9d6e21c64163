"""The committed extracted release knowledge against the wheels themselves (opt-in, marker
``conformance``): each file names the sha256 of the wheel it was read from, and extracting that wheel
again gives the committed content.

    python -m pytest -m conformance tests/conformance/test_extracted.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance import knowledge, wheels
from conformance.knowledge import common

pytestmark = pytest.mark.conformance

FILES = sorted(common.EXTRACTED_DIR.glob("*/*/*.json"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(common.EXTRACTED_DIR)))
def test_extracted_file_is_the_wheels(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    fw, ver, name = doc["framework"], doc["version"], path.stem
    if name not in knowledge.EXTRACTORS:
        pytest.skip(f"no extractor {name} on this branch")
    try:
        whl = wheels.wheel_path(fw, ver, download=False)
        root = wheels.source_dir(fw, ver, download=False)
    except wheels.WheelUnavailable as exc:
        pytest.skip(str(exc))
    assert common.file_sha256(whl) == doc["wheel_sha256"], f"{whl.name} is not the wheel {path} was read from"
    fn, module = knowledge.EXTRACTORS[name]
    again = common.stamp(fw, ver, fn(fw, ver, root), whl, common.extractor_version(module))
    assert again == doc, f"re-extracting {fw}=={ver} changes {path.name}: run scripts/conformance.py extract {fw} {ver}"
