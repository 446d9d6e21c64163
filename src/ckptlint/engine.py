"""The check pipeline: read once, simulate per target, run rules, select, apply the baseline,
aggregate for display, sort."""

from __future__ import annotations

import gc
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptlint import __version__
from ckptlint.baseline import fingerprint
from ckptlint.checkpoint import Checkpoint
from ckptlint.deployment import Deployment
from ckptlint.findings import Finding, Severity
from ckptlint.reader import load_checkpoint
from ckptlint.rules import ALL_RULES
from ckptlint.rules.base import RuleContext
from ckptlint.simulate import Plan, simulate
from ckptlint.targets import Target
from ckptlint.userregex import RegexScope
from ckptlint.verdict import verdicts

if TYPE_CHECKING:
    from ckptlint.selection import Selection

SCHEMA_VERSION = 1


@dataclass
class Report:
    checkpoint: Checkpoint
    targets: list[Target]
    findings: list[Finding]
    plans: dict[str, Plan] = field(default_factory=dict)
    deployment: Deployment = field(default_factory=Deployment)
    timings: dict[str, float] = field(default_factory=dict)
    # Findings dropped after the check (ckptlint.selection, ckptlint.baseline) and the config file used.
    ignored: dict[str, int] = field(default_factory=lambda: {"by_config": 0, "by_baseline": 0})
    config_file: str | None = None
    # The selected findings, one per module, before the baseline (see finish), and the findings
    # configuration or the baseline left out.
    selected: list[Finding] = field(default_factory=list)
    accepted: list["Accepted"] = field(default_factory=list)
    # How the input given became this checkpoint, when it is not the path itself (a shard file
    # checked as the checkpoint directory that holds it).
    input_note: str | None = None
    # What a target range leaves out (newer verified releases below its upper bound, or unverified
    # releases newer than the data): ckptlint.targets.range_note.
    range_notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, Any]:
        sev = {s.value: 0 for s in Severity}
        cons: dict[str, int] = {}
        per_target: dict[str, dict[str, int]] = {}
        for f in self.findings:
            sev[f.severity.value] += 1
            cons[f.consequence.value] = cons.get(f.consequence.value, 0) + 1
            key = f.target or "(checkpoint)"
            per_target.setdefault(key, {})
            per_target[key][f.consequence.value] = per_target[key].get(f.consequence.value, 0) + 1
        return {"total": len(self.findings), "by_severity": sev, "by_consequence": cons, "by_target": per_target,
                "ignored": dict(self.ignored)}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "ckptlint_version": __version__,
            "checkpoint": self.checkpoint.root,
            "targets": [t.id for t in self.targets],
            "resolved_targets": {t.id: t.resolved for t in self.targets},
            "deployment": {"speculative": self.deployment.speculative, "platform": self.deployment.platform,
                           "tp": self.deployment.tp, "gpu": self.deployment.gpu},
            "assumed_deployment": {tid: p.deployment_text for tid, p in self.plans.items() if p.deployment_text},
            "findings": [f.to_json() for f in self.findings],
            "summary": self.counts(),
            "config_file": self.config_file,
            **({"accepted": [a.to_json() for a in self.accepted]} if self.accepted else {}),
            "verdicts": {v.target: v.to_json() for v in verdicts(self)},
            **({"input": {"note": self.input_note}} if self.input_note else {}),
            **({"target_notes": list(self.range_notes)} if self.range_notes else {}),
        }


@dataclass
class Accepted:
    """A finding left out of the report by configuration (``by="config"``: rule selection, a
    per-tensor or per-module ignore) or by a baseline (``by="baseline"``), with the reason given."""

    finding: Finding
    by: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {**self.finding.to_json(), "accepted_by": self.by, "reason": self.reason}


def check(path: str, targets: list[Target], deployment: Deployment | None = None,
          selection: "Selection | None" = None, baseline: set[str] | None = None) -> Report:
    """Read ``path`` and check it (see :func:`check_loaded`)."""
    t0 = time.perf_counter()
    # The pipeline allocates hundreds of thousands of small objects that all live until the report
    # is rendered: cyclic garbage collection would only rescan them (about a third of the run time
    # on a 92,000-tensor checkpoint), so it is paused for the check.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        ckpt = load_checkpoint(path)
        report = check_loaded(ckpt, targets, deployment, selection, baseline)
    finally:
        if was_enabled:
            # Move what the check built out of the collector's reach before turning it back on: the
            # first collection would otherwise rescan every one of those objects.
            gc.freeze()
            gc.enable()
    report.timings["read"] = time.perf_counter() - t0 - sum(report.timings.values())
    return report


def check_loaded(ckpt: Checkpoint, targets: list[Target], deployment: Deployment | None = None,
                 selection: "Selection | None" = None, baseline: set[str] | None = None,
                 regexes: "RegexScope | None" = None) -> Report:
    """Run the rules on an already-read checkpoint (also used by ``fix`` to verify an edit), then
    :func:`finish` the report: select, apply the baseline, aggregate for display. The config's
    regular expressions get the time budgets of ``regexes`` (default: a fresh scope for this check)."""
    deployment = deployment or Deployment()
    t1 = time.perf_counter()
    findings, plans, sim = run_rules(ckpt, targets, deployment, regexes)
    report = Report(ckpt, targets, [], plans, deployment)
    finish(report, findings, selection, baseline)
    report.timings.update({"simulate": sim, "rules": time.perf_counter() - t1 - sim})
    return report


def run_rules(ckpt: Checkpoint, targets: list[Target], deployment: Deployment,
              regexes: "RegexScope | None" = None) -> tuple[list[Finding], dict[str, Plan], float]:
    """Every rule on the checkpoint and on each target's plan: (findings, one per module, plans, seconds
    simulating). The targets' simulations share one scope of config regexes (``regexes``; None: a fresh
    one), so a pattern undecided on one target's names is not run again on the next."""
    if regexes is None:
        regexes = RegexScope()
    rules = [r() for r in ALL_RULES]
    findings: list[Finding] = []
    ctx = RuleContext(checkpoint=ckpt, deployment=deployment)
    for rule in rules:
        if rule.scope == "checkpoint":
            findings.extend(rule.check(ctx))
    plans: dict[str, Plan] = {}
    sim = 0.0
    for target in targets:
        s0 = time.perf_counter()
        plan = simulate(ckpt, target, deployment, regexes) if ckpt.config is not None else None
        sim += time.perf_counter() - s0
        if plan is not None:
            plans[target.id] = plan
        tctx = RuleContext(checkpoint=ckpt, deployment=deployment, target=target, plan=plan)
        for rule in rules:
            if rule.scope == "target":
                findings.extend(rule.check(tctx))
    return findings, plans, sim


def finish(report: Report, findings: list[Finding], selection: "Selection | None" = None,
           baseline: set[str] | None = None) -> None:
    """The pipeline after the rules, in this order: select (rule selection, per-tensor and
    per-module ignores), apply the baseline, aggregate for display, sort.

    Selection and baseline see one finding per module, so ignoring or baselining one module never
    hides another module's finding; ``report.selected`` keeps the selected per-module findings
    (what ``--write-baseline`` records). What they leave out is kept, aggregated the same way, in
    ``report.accepted`` with its reason, so verdicts can still say what the framework will do."""
    accepted: list[tuple[Finding, str, str]] = []
    if selection is not None:
        kept = []
        for f in findings:
            why = selection.dropped_because(f)
            if why is None:
                kept.append(f)
            else:
                accepted.append((f, "config", why))
        report.ignored["by_config"] += len(findings) - len(kept)
        findings = kept
    report.selected = findings
    if baseline is not None:
        kept = []
        for f in findings:
            if fingerprint(f) in baseline:
                accepted.append((f, "baseline", "accepted in the baseline"))
            else:
                kept.append(f)
        report.ignored["by_baseline"] += len(findings) - len(kept)
        findings = kept
    report.findings = aggregate(findings)
    report.findings.sort(key=Finding.sort_key)
    report.accepted = _aggregate_accepted(accepted)


def _aggregate_accepted(accepted: list[tuple[Finding, str, str]]) -> list[Accepted]:
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f, by, why in accepted:
        groups.setdefault((by, why), []).append(f)
    out = [Accepted(f, by, why) for (by, why), fs in groups.items() for f in aggregate(fs)]
    out.sort(key=lambda a: a.finding.sort_key())
    return out


_LAYER_INDEX = re.compile(r"(?<=\.)\d+(?=\.)")


def aggregate(findings: list[Finding]) -> list[Finding]:
    """Fold findings that repeat layer after layer into one.

    Same rule, target, consequence and direction on modules whose names differ only in their
    numeric components (``model.layers.3.mlp.gate_up_proj`` … ``model.layers.77.…``) become one
    finding naming the first module, the pattern and the count, with every tensor and suggested
    entry kept in its data (tensors capped at 50 like any finding).
    """
    groups: dict[tuple, list[Finding]] = {}
    order: list[tuple] = []
    for f in findings:
        if f.module is None or f.target is None:
            key = ("single", id(f))
        else:
            pattern = _LAYER_INDEX.sub("*", f.module)
            key = (f.code, f.target, f.consequence, pattern, f.data.get("direction"),
                   tuple(i.get("kind") for i in f.data.get("issues", [])[:1]))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(f)
    out: list[Finding] = []
    for key in order:
        fs = groups[key]
        if len(fs) == 1:
            out.append(fs[0])
            continue
        first = fs[0]
        pattern = key[3]
        tensors = [t for f in fs for t in f.tensors]
        data = dict(first.data)
        for f in fs[1:]:
            for k, v in f.data.items():
                if isinstance(v, list) and isinstance(data.get(k), list):
                    data[k] = data[k] + [x for x in v if x not in data[k]]
        modules = [f.module for f in fs]
        data["modules"] = modules[:50]
        data["module_count"] = len(modules)
        data["tensor_count"] = sum(f.data.get("tensor_count", len(f.tensors)) for f in fs)
        out.append(Finding(code=first.code, name=first.name, consequence=first.consequence,
                           severity=first.severity, target=first.target, module=first.module, tensors=tensors,
                           file=first.file,
                           hint=(first.hint + f"; likewise for the other {len(fs) - 1} module(s)"
                                 + ("; `ckptlint fix` writes every entry" if "suggested_entries" in data else "")
                                 if first.hint else None),
                           hint_note=first.hint_note, error_text=first.error_text,
                           family=first.family, family_hint=first.family_hint,
                           brief=(first.brief + f" (and {len(fs) - 1} more module(s) matching `{pattern}`)"
                                  if first.brief else None),
                           assumptions=first.assumptions, data=data,
                           message=first.message + f" [the same for {len(fs) - 1} more module(s) matching "
                                   f"`{pattern}`]"))
    return out
