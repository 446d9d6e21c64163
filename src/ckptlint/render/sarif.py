"""SARIF 2.1.0 report (``ckptlint check --format sarif``), for GitHub code scanning and SARIF viewers.

One run. ``tool.driver.rules`` lists every registered rule (id = code, name, summary, the
"What it does" section, the whole rule doc as help); each finding is a result with its rule's
``ruleId``/``ruleIndex``, a ``level`` from its severity (info → ``note``), and one location:

* ``physicalLocation``: the line of ``config.json`` / ``hf_quant_config.json`` /
  ``model.safetensors.index.json`` the finding is about (:func:`ckptlint.render.locate.anchor`),
  or the file without a region when there is no such line (a binary shard is never given a
  region, so nothing tries to line-hash it); the shard holding the tensor goes in
  ``relatedLocations``. URIs are relative to ``%SRCROOT%``, the directory ckptlint ran in (the
  repository root in CI), because GitHub resolves relative URIs against the repository root and
  ignores ``originalUriBaseIds``; ``originalUriBaseIds`` also defines ``CHECKPOINT``, the
  checkpoint directory relative to ``%SRCROOT%``. A checkpoint outside the working directory gets
  absolute ``file://`` URIs (GitHub drops those: they are not in the repository).
* ``logicalLocations``: the runtime module (kind ``module``) and the checkpoint tensors (kind
  ``member``).

``partialFingerprints`` hash what identifies the defect, not its wording or line: rule code,
requested target (docs/decisions.md#output-details: fingerprints include the target), subject (runtime module, else
file) and first tensor in natural order, i.e. the same fields as a ``--baseline`` fingerprint.
``primaryLocationLineHash`` is derived from it, so upload-sarif does not hash file lines itself.
The run's invocation says ``executionSuccessful: true`` whatever the exit code: findings are not
a failed run (exit codes 2 and 3 print no report). GitHub takes at most 25,000 results per run:
beyond that the most severe are kept and ``properties.results_left_out`` counts the rest (the text
and JSON reports have them all). Findings left out by a baseline or a per-tensor / per-module ignore
are results too,
with ``suppressions`` (kind ``external``, status ``accepted``, the reason as justification): code
scanning shows them dismissed rather than fixed, since the defect is still there.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from ckptlint import __version__
from ckptlint.engine import Report
from ckptlint.findings import Finding, Severity, natural_key
from ckptlint.render.locate import Anchor, ArtifactPaths, Locators, Span, anchor
from ckptlint.render.safe import dumps
from ckptlint.rules import ALL_RULES
from ckptlint.rules.base import Rule
from ckptlint.verdict import NO_VERDICT, verdicts

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
SRCROOT = "%SRCROOT%"
CHECKPOINT = "CHECKPOINT"
MAX_DESCRIPTION = 1024  # GitHub: shortDescription/fullDescription text
MAX_RESULTS = 25_000  # GitHub: results per run

LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_FAMILY = {"SF": "safetensors", "IX": "index", "CF": "config", "QD": "quantization", "SC": "scales-and-shapes",
           "MT": "mtp", "TG": "target"}


def _clip(text: str, limit: int = MAX_DESCRIPTION) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _information_uri() -> str | None:
    """The project's home page from the installed distribution's metadata, if it declares one."""
    try:
        from importlib.metadata import PackageNotFoundError, metadata

        md = metadata("ckptlint")
    except (ImportError, PackageNotFoundError):
        return None
    home = md.get("Home-page")
    if home and home.startswith(("http://", "https://")):
        return home
    for entry in md.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        url = url.strip()
        if url.startswith(("http://", "https://")) and label.strip().lower() in ("homepage", "home", "source", "repository"):
            return url
    return None


def rule_level(r: type[Rule]) -> str:
    ranks = [c.default_severity for c in r.consequences] or [Severity.WARNING]
    return LEVEL[max(ranks, key=lambda s: s.rank)]


def rule_help_markdown(r: type[Rule]) -> str:
    parts = [f"# {r.name} ({r.code})", "", f"{r.summary.rstrip('.')}."]
    for title, body in r.doc_sections().items():
        parts += ["", f"## {title}", body]
    return "\n".join(parts)


def rule_descriptor(r: type[Rule]) -> dict[str, Any]:
    sections = r.doc_sections()
    help_md = rule_help_markdown(r)
    family = _FAMILY.get(r.code[:2], r.code[:2].lower())
    return {
        "id": r.code,
        "name": r.name,
        "shortDescription": {"text": _clip(r.summary.rstrip("."))},
        "fullDescription": {"text": _clip(sections.get("What it does") or r.summary)},
        "help": {"text": help_md, "markdown": help_md},
        "defaultConfiguration": {"level": rule_level(r)},
        "properties": {"tags": ["ckptlint", family], "scope": r.scope,
                       "consequences": [c.value for c in r.consequences]},
    }


def fingerprint(f: Finding) -> str:
    """Code, requested target, subject (module or file), first tensor: stable across runs and rewording."""
    tensor = min(f.tensors, key=natural_key) if f.tensors else None
    key = json.dumps([f.code, f.target, f.module or f.file, tensor], ensure_ascii=False)
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _region(span: Span) -> dict[str, int]:
    return {"startLine": span.line, "startColumn": span.column, "endLine": span.line, "endColumn": span.end_column}


def _artifact(paths: ArtifactPaths, file: str) -> dict[str, str]:
    loc = {"uri": paths.uri(file)}
    if paths.inside:
        loc["uriBaseId"] = SRCROOT
    return loc


def _message(f: Finding) -> str:
    text = (f"{f.target}: " if f.target else "") + f.message
    if f.error_text:
        text += f"\nThe framework prints: {f.error_text}"
    if f.hint:
        text += f"\nFix: {f.hint}"
    return text


def _result(report: Report, f: Finding, index: dict[str, int], a: Anchor, paths: ArtifactPaths,
            occurrence: int, fp: str) -> dict[str, Any]:
    res: dict[str, Any] = {"ruleId": f.code}
    if f.code in index:
        res["ruleIndex"] = index[f.code]
    res["level"] = LEVEL[f.severity]
    res["message"] = {"text": _message(f)}
    location: dict[str, Any] = {}
    if a.file:
        phys: dict[str, Any] = {"artifactLocation": _artifact(paths, a.file)}
        if a.span is not None:
            phys["region"] = _region(a.span)
        location["physicalLocation"] = phys
    logical = []
    if f.module:
        logical.append({"fullyQualifiedName": f.module, "name": f.module.rsplit(".", 1)[-1], "kind": "module"})
    for t in f.tensors:
        logical.append({"fullyQualifiedName": t, "name": t.rsplit(".", 1)[-1], "kind": "member"})
    if logical:
        location["logicalLocations"] = logical
    res["locations"] = [location] if location else []
    related = [r for r in a.related if r != a.file]
    if related:
        res["relatedLocations"] = [
            {"id": i + 1, "physicalLocation": {"artifactLocation": _artifact(paths, r)},
             "message": {"text": "safetensors shard holding the tensor"}}
            for i, r in enumerate(related)]
    res["partialFingerprints"] = {"ckptlint/v1": fp, "primaryLocationLineHash": f"{fp[:16]}:{occurrence}"}
    props: dict[str, Any] = {"consequence": f.consequence.value, "severity": f.severity.value, "target": f.target}
    if f.target:
        resolved = next((t.resolved for t in report.targets if t.id == f.target), None)
        if resolved and resolved != f.target:
            props["resolved_target"] = resolved
    if f.error_text:
        props["error_text"] = f.error_text
    if f.hint:
        props["hint"] = f.hint
    if f.assumptions:
        props["assumptions"] = list(f.assumptions)
    if f.file:
        props["file"] = f.file
    if f.data.get("tensor_count"):
        props["tensor_count"] = f.data["tensor_count"]
    res["properties"] = props
    return res


def _category(paths: ArtifactPaths, root: str) -> str:
    """The checkpoint, for ``automationDetails.id``: one analysis per checkpoint directory."""
    if paths.dir_rel:
        return paths.dir_rel.rstrip("/")
    if paths.inside:
        return os.path.basename(paths.abs_dir) or "."
    return root.rstrip("/")


def _invocation(report: Report) -> dict[str, Any]:
    """The run's invocation, with a warning notification for each release that has no verdict (not
    simulated, newer than the target data, container only: ckptlint.verdict), which is not a result
    of the checkpoint but must not read as a clean pass."""
    inv: dict[str, Any] = {"executionSuccessful": True}
    notes = [{"level": "warning", "descriptor": {"id": "no-verdict"},
              "message": {"text": f"{v.target}: {v.label}: {v.no_verdict[1]}"}}
             for v in verdicts(report) if v.status == NO_VERDICT and v.no_verdict is not None]
    if notes:
        inv["toolExecutionNotifications"] = notes
    return inv


def to_sarif(report: Report, cwd: str | None = None) -> dict[str, Any]:
    rules = [rule_descriptor(r) for r in ALL_RULES]
    index = {r.code: i for i, r in enumerate(ALL_RULES)}
    for f in report.findings:  # a code the registry does not know (should not happen): describe it anyway
        if f.code not in index:
            index[f.code] = len(rules)
            rules.append({"id": f.code, "name": f.name or f.code, "shortDescription": {"text": f.name or f.code},
                          "fullDescription": {"text": f.name or f.code}, "help": {"text": f.name or f.code},
                          "defaultConfiguration": {"level": LEVEL[f.severity]}})
    paths = ArtifactPaths(report.checkpoint.root, cwd)
    locs = Locators(report.checkpoint.texts)
    findings = report.findings
    if len(findings) > MAX_RESULTS:  # GitHub rejects larger runs: keep the most severe, in report order
        keep = set(map(id, sorted(findings, key=lambda f: -f.severity.rank)[:MAX_RESULTS]))
        findings = [f for f in findings if id(f) in keep]
    seen: dict[str, int] = {}
    results = []
    for f in findings:
        fp = fingerprint(f)
        seen[fp] = seen.get(fp, 0) + 1
        results.append(_result(report, f, index, anchor(report, f, locs), paths, seen[fp], fp))
    accepted = [a for a in report.accepted if a.reason != "rule not selected"]  # (rules the user did not ask for)
    for a in accepted[: max(0, MAX_RESULTS - len(results))]:
        # Left out by configuration or a baseline: still a result, marked suppressed with the reason, so
        # code scanning keeps the alert dismissed instead of calling the defect fixed.
        fp = fingerprint(a.finding)
        seen[fp] = seen.get(fp, 0) + 1
        res = _result(report, a.finding, index, anchor(report, a.finding, locs), paths, seen[fp], fp)
        res["suppressions"] = [{"kind": "external", "status": "accepted", "justification": a.reason}]
        results.append(res)
    driver: dict[str, Any] = {"name": "ckptlint", "version": __version__, "semanticVersion": __version__}
    info = _information_uri()
    if info:
        driver["informationUri"] = info
    driver["rules"] = rules
    base_ids: dict[str, Any] = {
        SRCROOT: {"description": {"text": "The directory ckptlint ran in (the repository root in CI)."}}}
    ckpt_base: dict[str, Any] = {"uri": paths.dir_uri,
                                 "description": {"text": "The checkpoint directory."}}
    if paths.inside:
        ckpt_base["uriBaseId"] = SRCROOT
    if ckpt_base["uri"]:
        base_ids[CHECKPOINT] = ckpt_base
    else:  # the checkpoint is the working directory itself
        base_ids[CHECKPOINT] = {"uriBaseId": SRCROOT, "description": ckpt_base["description"]}
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "automationDetails": {"id": f"ckptlint/{_category(paths, report.checkpoint.root)}/"},
        "originalUriBaseIds": base_ids,
        "invocations": [_invocation(report)],
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": {
            "checkpoint": report.checkpoint.root,
            "targets": [t.id for t in report.targets],
            "resolved_targets": {t.id: t.resolved for t in report.targets},
            "assumed_deployment": {tid: p.deployment_text for tid, p in report.plans.items() if p.deployment_text},
            "summary": {k: v for k, v in report.counts().items() if k in ("total", "by_severity", "by_consequence")},
            "results_left_out": len(report.findings) - len(findings),
            "verdicts": {v.target: v.to_json() for v in verdicts(report)},
        },
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def render(report: Report) -> str:
    return dumps(to_sarif(report), indent=2) + "\n"
