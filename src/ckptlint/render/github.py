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

Escaping follows the runner's rules: in the message ``%``, ``\\r``, ``\\n`` become ``%25``,
``%0D``, ``%0A``; in property values also ``:`` and ``,`` become ``%3A`` and ``%2C``. The plain
report quotes names from the checkpoint (tensor names, config values), so it is printed between
``::stop-commands::TOKEN`` and ``::TOKEN::`` with a random token: a line in it that looks like a
workflow command is not run.
"""

from __future__ import annotations

import secrets

from ckptlint.engine import Report
from ckptlint.findings import Finding, Severity
from ckptlint.render import text as text_render
from ckptlint.render.locate import Anchor, ArtifactPaths, Locators, anchor

COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
PER_TYPE = 10  # annotations GitHub shows per type and step
PER_JOB = 50  # annotations GitHub shows per job


def escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(s: str) -> str:
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding, a: Anchor, paths: ArtifactPaths) -> str:
    props: list[tuple[str, str]] = []
    file = paths.rel(a.file) if a.file else None
    if file:
        props.append(("file", file))
        if a.span is not None:
            props += [("line", str(a.span.line)), ("endLine", str(a.span.line)),
                      ("col", str(a.span.column)), ("endColumn", str(a.span.end_column))]
    title = f"ckptlint {f.code} {f.name}".rstrip() + (f" ({f.target})" if f.target else "")
    props.append(("title", title))
    message = f"[{f.consequence.value}] " + f.message
    if f.error_text:
        message += f"\nThe framework prints: {f.error_text}"
    if f.hint:
        message += f"\nFix: {f.hint}"
    head = ",".join(f"{k}={escape_property(v)}" for k, v in props)
    return f"::{COMMAND[f.severity]} {head}::{escape_data(message)}"


def render(report: Report) -> str:
    paths = ArtifactPaths(report.checkpoint.root)
    locs = Locators(report.checkpoint.texts)
    chosen: list[Finding] = []
    for sev in (Severity.ERROR, Severity.WARNING, Severity.INFO):
        of_type = [f for f in report.findings if f.severity is sev]
        chosen += of_type[: min(PER_TYPE, PER_JOB - len(chosen))]
    lines = [annotation(f, anchor(report, f, locs), paths) for f in chosen]
    total = len(report.findings)
    if total:
        counts = {s: sum(1 for f in chosen if f.severity is s) for s in COMMAND}
        lines.append(f"ckptlint: {total} finding(s); annotated {counts[Severity.ERROR]} error(s), "
                     f"{counts[Severity.WARNING]} warning(s), {counts[Severity.INFO]} notice(s)"
                     + (f" (GitHub shows at most {PER_TYPE} per type and step)" if len(chosen) < total else "")
                     + "; the full report follows.")
    token = f"ckptlint-{secrets.token_hex(16)}"
    lines.append(f"::stop-commands::{token}")
    return "\n".join(lines) + "\n" + text_render.render(report) + f"::{token}::\n"
