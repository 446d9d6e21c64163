"""GitHub Actions workflow-command annotations (``ckptlint check --format github``).

One ``::error``/``::warning``/``::notice`` line per finding (severity error/warning/info), with
``file``, ``line``, ``col``, ``endColumn`` where the finding has a line in a text file of the
checkpoint (:func:`ckptlint.render.locate.anchor`; paths relative to the working directory, the
repository root in CI) and a ``title`` naming the rule and the target, followed by the full plain
text report.

GitHub shows at most 10 error and 10 warning annotations per step (and 50 per job) and drops the
rest silently, so at most ``PER_TYPE`` annotations of each type are printed (errors first, the
report's order within a type); a summary line says how many findings were annotated, and the
plain report after it always lists every finding.

Text from the checkpoint is first made printable (:func:`ckptlint.render.safe.clean`: control
characters and lone surrogates as escapes), then escaped by the runner's rules: in the message
``%``, ``\\r``, ``\\n`` become ``%25``, ``%0D``, ``%0A``; in property values also ``:`` and ``,``
become ``%3A`` and ``%2C``. The plain report quotes names from the checkpoint (tensor names,
config values), so it is printed between ``::stop-commands::TOKEN`` and ``::TOKEN::`` with a random
token: a line in it that looks like a workflow command is not run (and the text report defuses
such lines anyway).
"""

from __future__ import annotations

import secrets

from ckptlint.engine import Report
from ckptlint.findings import Finding, Severity
from ckptlint.render import text as text_render
from ckptlint.render.locate import Anchor, ArtifactPaths, Locators, anchor
from ckptlint.render.safe import clean
from ckptlint.verdict import NO_VERDICT, verdicts

COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
PER_TYPE = 10  # annotations GitHub shows per type and step
PER_JOB = 50  # annotations GitHub shows per job
NO_VERDICT_TITLE = "::warning title=ckptlint no verdict"  # how a release with no verdict is annotated


def escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(s: str) -> str:
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding, a: Anchor, paths: ArtifactPaths) -> str:
    props: list[tuple[str, str]] = []
    file = paths.rel(a.file) if a.file else None
    if file:
        props.append(("file", clean(file)))
        if a.span is not None:
            props += [("line", str(a.span.line)), ("endLine", str(a.span.line)),
                      ("col", str(a.span.column)), ("endColumn", str(a.span.end_column))]
    title = f"ckptlint {f.code} {f.name}".rstrip() + (f" ({f.target})" if f.target else "")
    props.append(("title", clean(title)))
    message = f"[{f.consequence.value}] " + clean(f.message)
    if f.error_text:
        message += f"\nThe framework prints: {clean(f.error_text)}"
    if f.hint:
        message += f"\nFix: {clean(f.hint)}"
    head = ",".join(f"{k}={escape_property(v)}" for k, v in props)
    return f"::{COMMAND[f.severity]} {head}::{escape_data(message)}"


def annotations(report: Report) -> list[tuple[int, str]]:
    """Every finding's annotation as (severity rank, workflow command), in report order, then a
    warning for each release with no verdict (ckptlint.verdict: it is not "loads")."""
    paths = ArtifactPaths(report.checkpoint.root)
    locs = Locators(report.checkpoint.texts)
    out = [(f.severity.rank, annotation(f, anchor(report, f, locs), paths)) for f in report.findings]
    for v in verdicts(report):
        if v.status == NO_VERDICT and v.no_verdict is not None:
            title = escape_property(clean(f"({v.target})"))
            out.append((Severity.WARNING.rank,
                        f"{NO_VERDICT_TITLE} {title}::{escape_data(clean(v.label + ': ' + v.no_verdict[1]))}"))
    return out


def report_text(report: Report) -> str:
    """The plain report printed after the annotations (no colour: a log)."""
    return text_render.render(report)


def assemble(per_checkpoint: list[list[tuple[int, str]]], texts: list[str]) -> str:
    """Annotations of one or more checkpoints (at most ``PER_TYPE`` per type, ``PER_JOB`` in all,
    errors first), a summary line, then the plain reports inside a stop-commands block."""
    everything = [a for anns in per_checkpoint for a in anns]
    chosen: list[tuple[int, str]] = []
    for sev in (Severity.ERROR, Severity.WARNING, Severity.INFO):
        of_type = [a for a in everything if a[0] == sev.rank]
        chosen += of_type[: min(PER_TYPE, PER_JOB - len(chosen))]
    lines = [line for _, line in chosen]
    total = len(everything)
    unknown = sum(1 for _, line in everything if line.startswith(NO_VERDICT_TITLE))
    if total:
        counts = {s: sum(1 for r, _ in chosen if r == s.rank) for s in COMMAND}
        lines.append(f"ckptlint: {total - unknown} finding(s)"
                     + (f", {unknown} release(s) with no verdict" if unknown else "") + f"; annotated {counts[Severity.ERROR]} error(s), "
                     f"{counts[Severity.WARNING]} warning(s), {counts[Severity.INFO]} notice(s)"
                     + (f" (GitHub shows at most {PER_TYPE} per type and step)" if len(chosen) < total else "")
                     + "; the full report follows.")
    token = f"ckptlint-{secrets.token_hex(16)}"
    lines.append(f"::stop-commands::{token}")
    return "\n".join(lines) + "\n" + "".join(texts) + f"::{token}::\n"


def render(report: Report) -> str:
    return assemble([annotations(report)], [report_text(report)])
