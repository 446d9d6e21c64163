"""What each release will do with the checkpoint: one verdict per checked release.

A verdict comes from the worst consequence among the findings for that release and the
checkpoint-wide findings, **including the findings left out** by configuration (rule selection,
per-tensor / per-module ignores) or by a baseline: a baselined load error still crashes the
server. When the worst consequence comes only from left-out findings, the verdict says so
("will not load (accepted in baseline)"); the exit code follows the reported findings only.

A release that cannot load the architecture or quant method at all (TG601) is "not supported by
this release" rather than one more "will not load".

**No verdict.** A release on which ckptlint could not predict the load gets ``no-verdict``
instead of ``loads`` (or ``degraded``), with the reason (``Verdict.no_verdict``):

* ``container-only``: the checkpoint has no ``config.json`` to simulate with (a lone
  ``.safetensors`` file checked as a container only);
* ``not-simulated``: ckptlint has no loading data for the architecture or quantization method on
  that release (TG603);
* ``not-verified``: the requested release is newer than every release in the target data (TG602
  warning): the data of the newest verified release says nothing about it.

A finding that makes the load fail still decides (``will-not-load`` and ``wrong-outputs`` rank
above ``no-verdict``: a checkpoint without a readable config, or whose headers are broken, fails
whatever the release). The state comes from the targets and plans, not from the TG602/TG603
findings, so ignoring those rules does not turn "no verdict" into "loads". A generic simulation
(TG604) is a simulation: it gives a verdict, labelled "(generic rules)"; one from the facts extracted
from the release's wheel (TG605) too, labelled "(extracted data)".

Exit status: a release with no verdict makes ``check`` exit 1 (fail closed), unless
``--no-verdict pass`` (settings: ``no-verdict = "pass"``) relaxes it; see docs/ci.md.
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
    "no-verdict": "no verdict",
    "loads": "loads",
}
# why a release has no verdict -> the words the matrix adds to "no verdict"
NO_VERDICT_WORDS = {"container-only": "container only, no config.json", "not-simulated": "not simulated",
                    "not-verified": "release newer than the data"}
_BY_CONSEQUENCE = {"load-error": "will-not-load", "silent-corruption": "wrong-outputs", "degraded": "degraded"}
ACCEPTED_WORDS = {"baseline": "accepted in baseline", "config": "ignored by configuration"}
FAILING = ("not-supported", "will-not-load", "wrong-outputs")
NO_VERDICT = "no-verdict"


@dataclass(frozen=True)
class Verdict:
    target: str
    status: str  # a key of LABELS
    counts: dict[str, int]  # reported findings by consequence (checkpoint-wide ones included)
    accepted_by: tuple[str, ...] = ()  # "baseline" / "config": the status comes only from left-out findings
    because: "Finding | None" = None  # the first finding that sets the status
    no_verdict: tuple[str, str] | None = None  # status "no-verdict": (a key of NO_VERDICT_WORDS, the reason)
    generic: bool = False  # simulated with the generic architecture rules (TG604)
    extracted: bool = False  # simulated from facts extracted from the release's wheel (TG605)

    @property
    def label(self) -> str:
        text = LABELS[self.status]
        if self.no_verdict is not None:
            text += f" ({NO_VERDICT_WORDS[self.no_verdict[0]]})"
        elif self.generic and self.status != "not-supported":
            text += " (generic rules)"
        elif self.extracted and self.status != "not-supported":
            text += " (extracted data)"
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
        if self.no_verdict is not None:
            out["no_verdict"] = {"why": self.no_verdict[0], "reason": self.no_verdict[1]}
        if self.generic:
            out["generic"] = True
        if self.extracted:
            out["extracted"] = True
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


def why_no_verdict(report: "Report", target_id: str) -> tuple[str, str] | None:
    """(why, reason) when ckptlint could not predict the load on this release (see the module doc)."""
    target = next((t for t in report.targets if t.id == target_id), None)
    if report.checkpoint.config is None:
        return ("container-only", "no config.json: the files were checked as safetensors containers only "
                                  "(headers, offsets, sizes), no load was simulated")
    plan = report.plans.get(target_id)
    if plan is not None and plan.not_simulated is not None and plan.unsupported is None:
        return ("not-simulated", plan.not_simulated)
    if target is not None and target.note and target.note_level == "warning":
        return ("not-verified", target.note)
    return None


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
    plan = report.plans.get(target_id)
    generic = bool(plan is not None and plan.generic and plan.simulated)
    extracted = bool(plan is not None and plan.extracted and plan.simulated and not generic)
    nv = why_no_verdict(report, target_id) if status in ("loads", "degraded") else None
    if nv is not None:
        return Verdict(target_id, NO_VERDICT, counts, (), None, nv, generic, extracted)
    return Verdict(target_id, status, counts, by, because, None, generic, extracted)


def verdicts(report: "Report") -> list[Verdict]:
    return [verdict(report, t.id) for t in report.targets]
