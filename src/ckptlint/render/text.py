"""Plain-text report: one line per finding, grouped by target, readable in a terminal."""

from __future__ import annotations

from ckptlint.engine import Report
from ckptlint.findings import Finding


def _line(f: Finding) -> list[str]:
    subject = f.module or (f.tensors[0] if f.tensors else None) or f.file or ""
    head = f"  {f.severity.value:<7} {f.code} [{f.consequence.value}] {subject}: {f.message}"
    out = [head]
    if f.error_text:
        out.append(f"          framework prints: {f.error_text}")
    if f.hint:
        out.append(f"          fix: {f.hint}")
    if f.assumptions:
        out.append(f"          assumes: {'; '.join(f.assumptions)}")
    return out


def render(report: Report, verbose: bool = False) -> str:
    ck = report.checkpoint
    lines = [f"{ck.root}: {len(ck.tensors)} tensors in {len(ck.shards)} shard file(s)"]
    general = [f for f in report.findings if f.target is None]
    if general:
        lines.append("checkpoint")
        for f in general:
            lines.extend(_line(f))
    for t in report.targets:
        plan = report.plans.get(t.id)
        bits = []
        if plan is not None:
            if plan.arch_name:
                bits.append(plan.arch_name)
            if plan.quant is not None:
                bits.append(f"{plan.quant.method_key}"
                            + (f" {plan.quant.default_scheme.name}" if plan.quant.default_scheme else ""))
            if plan.draft is not None:
                bits.append(f"draft {plan.draft.cls}")
        label = t.id if t.id == t.resolved else f"{t.id} (rules of {t.resolved})"
        mine = [f for f in report.findings if f.target == t.id]
        lines.append(f"{label}" + (f"  [{', '.join(bits)}]" if bits else "") + ("" if mine else ": no findings"))
        if plan is not None and plan.deployment_text and (mine or verbose):
            lines.append(f"  assuming {plan.deployment_text}")
        for f in mine:
            lines.extend(_line(f))
    c = report.counts()
    sev = c["by_severity"]
    summary = f"{sev['error']} error(s), {sev['warning']} warning(s), {sev['info']} info"
    lines.append("")
    lines.append(f"Found {c['total']} finding(s): {summary}.")
    lines.extend(matrix(report))
    return "\n".join(lines) + "\n"


CONSEQUENCE_COLUMNS = ("load-error", "silent-corruption", "degraded", "hygiene")


def matrix(report: Report) -> list[str]:
    """One row per target, one column per consequence: which releases will load the checkpoint."""
    if not report.targets:
        return []
    width = max(len(t.id) for t in report.targets)
    head = "target".ljust(width) + "  " + "  ".join(c.rjust(len(c)) for c in CONSEQUENCE_COLUMNS) + "  verdict"
    rows = ["", head]
    shared = [f for f in report.findings if f.target is None]
    for t in report.targets:
        counts = {c: 0 for c in CONSEQUENCE_COLUMNS}
        for f in report.findings:
            if f.target == t.id or f.target is None:
                counts[f.consequence.value] += 1
        verdict = ("will not load" if counts["load-error"] else
                   "loads, wrong outputs" if counts["silent-corruption"] else
                   "loads, degraded" if counts["degraded"] else "loads")
        rows.append(t.id.ljust(width) + "  " + "  ".join(str(counts[c]).rjust(len(c)) for c in CONSEQUENCE_COLUMNS)
                    + f"  {verdict}")
    if shared:
        rows.append("(checkpoint-wide findings are counted on every row)")
    return rows
