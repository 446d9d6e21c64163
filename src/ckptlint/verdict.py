"""What each release will do with the checkpoint: one verdict per checked release.

A verdict comes from the worst consequence among the findings for that release and the
checkpoint-wide findings, **including the findings left out** by configuration (rule selection,
per-tensor / per-module ignores) or by a baseline: a baselined load error still crashes the
server. When the worst consequence comes only from left-out findings, the verdict says so
("will not load (accepted in baseline)"); the exit code follows the reported findings only.

A release that cannot load the architecture or quant method at all (TG601) is "not supported by
this release" rather than one more "will not load".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from ckptlint.engine import Report
    from ckptlint.findings import Finding

CONSEQUENCES = ("load-error", "silent-corruption", "degraded", "hygiene")
UNSUPPORTED_CODE = "TG601"

# status -> the words the reports use
LABELS = {
    "not-supported": "not supported by this release",
    "will-not-load": "will not load",
    "wrong-outputs": "loads, wrong outputs",
    "degraded": "loads, degraded",
    "loads": "loads",
}
_BY_CONSEQUENCE = {"load-error": "will-not-load", "silent-corruption": "wrong-outputs", "degraded": "degraded"}
ACCEPTED_WORDS = {"baseline": "accepted in baseline", "config": "ignored by configuration"}
FAILING = ("not-supported", "will-not-load", "wrong-outputs")


@dataclass(frozen=True)
class Verdict:
    target: str
    status: str  # a key of LABELS
    counts: dict[str, int]  # reported findings by consequence (checkpoint-wide ones included)
    accepted_by: tuple[str, ...] = ()  # "baseline" / "config": the status comes only from left-out findings
    because: "Finding | None" = None  # the first finding that sets the status

    @property
    def label(self) -> str:
        text = LABELS[self.status]
        if self.accepted_by:
            text += " (" + ", ".join(ACCEPTED_WORDS[b] for b in self.accepted_by) + ")"
        return text

    @property
    def loads(self) -> bool:
        """The server starts and serves correct outputs (possibly degraded)."""
        return self.status in ("loads", "degraded")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.status, "label": self.label, "accepted_by": list(self.accepted_by),
                               "counts": dict(self.counts)}
        if self.because is not None:
            f = self.because
            out["because"] = {"code": f.code, "module": f.module, "file": f.file, "message": f.message}
        return out


def _status(findings: Iterable["Finding"]) -> str:
    found = {f.consequence.value for f in findings}
    if any(f.code == UNSUPPORTED_CODE for f in findings):
        return "not-supported"
    for c in CONSEQUENCES[:3]:
        if c in found:
            return _BY_CONSEQUENCE[c]
    return "loads"


_RANK = {s: i for i, s in enumerate(("loads", "degraded", "wrong-outputs", "will-not-load", "not-supported"))}


def verdict(report: "Report", target_id: str) -> Verdict:
    mine = [f for f in report.findings if f.target in (target_id, None)]
    left_out = [a for a in report.accepted if a.finding.target in (target_id, None)]
    counts = {c: 0 for c in CONSEQUENCES}
    for f in mine:
        counts[f.consequence.value] += 1
    reported = _status(mine)
    everything = [*mine, *(a.finding for a in left_out)]
    status = _status(everything)
    by: tuple[str, ...] = ()
    if _RANK[status] > _RANK[reported]:
        worst = [a for a in left_out if _RANK[_status([a.finding])] == _RANK[status]]
        by = tuple(b for b in ("baseline", "config") if any(a.by == b for a in worst))
    because = next((f for f in everything if status != "loads" and _status([f]) == status), None)
    return Verdict(target_id, status, counts, by, because)


def verdicts(report: "Report") -> list[Verdict]:
    return [verdict(report, t.id) for t in report.targets]
