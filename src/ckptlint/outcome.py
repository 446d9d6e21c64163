"""The result of checking one checkpoint (what :mod:`ckptlint.batch` produces and
:mod:`ckptlint.render.multi` renders): kept below both, so that neither imports the other upwards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    path: str
    outputs: dict[str, str] = field(default_factory=dict)  # format -> the report in it
    annotations: list[tuple[int, str]] = field(default_factory=list)  # github: (severity rank, line)
    targets: list[str] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    failing: bool = False
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # for stderr
    seconds: float = 0.0
    baseline_entries: tuple[str, list] | None = None  # --write-baseline of several: (key, entries)
