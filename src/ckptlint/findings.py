"""Findings: what a check reports, and how severity follows from consequence."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


class Consequence(str, Enum):
    """What the framework will do with the checkpoint (docs/decisions.md#consequence-and-severity)."""

    LOAD_ERROR = "load-error"
    SILENT_CORRUPTION = "silent-corruption"
    DEGRADED = "degraded"
    HYGIENE = "hygiene"

    @property
    def default_severity(self) -> Severity:
        return _DEFAULT_SEVERITY[self]


_DEFAULT_SEVERITY = {
    Consequence.LOAD_ERROR: Severity.ERROR,
    Consequence.SILENT_CORRUPTION: Severity.ERROR,
    Consequence.DEGRADED: Severity.WARNING,
    Consequence.HYGIENE: Severity.INFO,
}

MAX_TENSORS_LISTED = 50


@dataclass
class Finding:
    """One reported problem.

    ``code``/``name`` identify the rule; ``consequence`` is per finding (the same rule can
    predict a load error on one target and a silent failure on another); ``severity``
    defaults from the consequence.
    """

    code: str
    consequence: Consequence
    message: str
    name: str = ""
    severity: Severity | None = None
    target: str | None = None
    module: str | None = None
    tensors: list[str] = field(default_factory=list)
    file: str | None = None
    hint: str | None = None
    error_text: str | None = None
    assumptions: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity is None:
            self.severity = self.consequence.default_severity
        if len(self.tensors) > MAX_TENSORS_LISTED:
            self.data.setdefault("tensor_count", len(self.tensors))
            self.tensors = self.tensors[:MAX_TENSORS_LISTED]

    def sort_key(self) -> tuple:
        return (
            self.target or "",
            self.file or "",
            natural_key(self.module or (self.tensors[0] if self.tensors else "")),
            self.code,
            self.message,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value if self.severity else None,
            "consequence": self.consequence.value,
            "target": self.target,
            "module": self.module,
            "tensors": list(self.tensors),
            "file": self.file,
            "message": self.message,
            "hint": self.hint,
        }
        if self.error_text:
            out["error_text"] = self.error_text
        if self.assumptions:
            out["assumptions"] = list(self.assumptions)
        if self.data:
            out["data"] = self.data
        return out


def natural_key(text: str) -> tuple:
    """Sort ``layers.2`` before ``layers.10``."""
    parts: list[Any] = []
    for chunk in text.split("."):
        parts.append((0, int(chunk), "") if chunk.isdecimal() else (1, 0, chunk))
    return tuple(parts)
