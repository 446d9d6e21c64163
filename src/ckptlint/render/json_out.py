"""JSON report (schema_version 1): plain json.dump (lone surrogates as escapes), nothing else on stdout;
``jsonl`` writes the same document on one line per checkpoint."""

from __future__ import annotations

from ckptlint.engine import Report
from ckptlint.render.safe import dumps


def render(report: Report) -> str:
    return dumps(report.to_json(), indent=2) + "\n"


def render_line(report: Report) -> str:
    """The same document on one line (``--format jsonl``: one line per checkpoint)."""
    return dumps(report.to_json(), separators=(",", ":")) + "\n"
