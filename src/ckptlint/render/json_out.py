"""JSON report (schema_version 1): plain json.dump, nothing else on stdout."""

from __future__ import annotations

import json

from ckptlint.engine import Report


def render(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"
