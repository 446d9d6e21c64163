#!/usr/bin/env python3
"""Rewrite the rule table in README.md from the rule registry.

The table lies between ``<!-- rules:start -->`` and ``<!-- rules:end -->`` and is exactly
``ckptlint rules --format markdown``. Run after adding or changing a rule:

    python scripts/update_readme_rules.py          # rewrite README.md
    python scripts/update_readme_rules.py --check  # exit 1 if README.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ckptlint.render.rules import markdown_table  # noqa: E402

START, END = "<!-- rules:start -->", "<!-- rules:end -->"


def render(readme: str) -> str:
    if readme.count(START) != 1 or readme.count(END) != 1 or readme.index(START) > readme.index(END):
        raise SystemExit(f"README.md must contain {START} and {END} once each, in that order")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{markdown_table()}{END}{tail}"


def main(argv: list[str]) -> int:
    path = ROOT / "README.md"
    old = path.read_text(encoding="utf-8")
    new = render(old)
    if "--check" in argv:
        if new != old:
            print("README.md rule table is out of date: run python scripts/update_readme_rules.py", file=sys.stderr)
            return 1
        return 0
    if new != old:
        path.write_text(new, encoding="utf-8")
        print("README.md: rule table updated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
