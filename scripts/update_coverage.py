#!/usr/bin/env python3
"""Rewrite docs/coverage.md from the target data and the extracted release knowledge.

    python scripts/update_coverage.py          # rewrite docs/coverage.md
    python scripts/update_coverage.py --check  # exit 1 if docs/coverage.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ckptlint.targets.coverage import coverage, markdown  # noqa: E402

DOC = ROOT / "docs" / "coverage.md"


def main(argv: list[str]) -> int:
    text = markdown(coverage())
    if "--check" in argv:
        if not DOC.is_file() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC.relative_to(ROOT)} is out of date: run python scripts/update_coverage.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
