"""The conformance suite needs the framework wheels (downloaded into the cache on first use): it runs
only with ``pytest -m conformance tests/conformance`` (the marker is deselected by default)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
