"""Rule documentation rendered from the registry (``ckptlint rules --format markdown``).

The README's rule table is this output, kept in sync by ``scripts/update_readme_rules.py``
and checked by ``tests/test_rule_docs.py``.
"""

from __future__ import annotations

from ckptlint.rules import ALL_RULES


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table() -> str:
    lines = ["| Code | Name | Summary | Consequences |", "|---|---|---|---|"]
    for r in ALL_RULES:
        cons = ", ".join(f"`{c.value}`" for c in r.consequences) or "—"
        lines.append(f"| `{r.code}` | `{r.name}` | {_cell(r.summary.rstrip('.'))} | {cons} |")
    return "\n".join(lines) + "\n"
