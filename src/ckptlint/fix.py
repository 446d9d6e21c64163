"""``ckptlint fix``: the minimal skip-list change that makes one target's per-module decisions match
what the checkpoint stores.

Only additions are made (entries appended to the list the target actually reads, in the file it
reads: ``config.json``'s ``quantization_config`` when present, else ``hf_quant_config.json``). The
file keeps its indentation and key order. The result is verified before it is offered: the target
must have no load-error / silent-corruption finding left that an entry can fix, and no other default
target may get a new load error from the added entries.
"""

from __future__ import annotations

import copy
import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ckptlint.deployment import Deployment
from ckptlint.engine import check_loaded
from ckptlint.findings import Finding
from ckptlint.fsutil import atomic_write
from ckptlint.reader import load_checkpoint
from ckptlint.targets import Target, newest_targets

SERIOUS = ("load-error", "silent-corruption")


@dataclass
class FixPlan:
    file: str | None = None  # relative to the checkpoint root
    key_path: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    diff: str = ""
    new_text: str | None = None
    not_fixable: list[tuple[Finding, str]] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    regressions: list[Finding] = field(default_factory=list)


def _indent_of(text: str) -> int | str | None:
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and line != stripped:
            ws = line[: len(line) - len(stripped)]
            return "\t" if ws.startswith("\t") else len(ws)
    return None


def plan_fix(path: str, target: Target, deployment: Deployment | None = None,
             others: list[Target] | None = None) -> FixPlan:
    deployment = deployment or Deployment()
    ckpt = load_checkpoint(path)
    report = check_loaded(ckpt, [target], deployment)
    out = FixPlan()
    plan = report.plans.get(target.id)
    suggestions: list[tuple[Finding, list[str]]] = []
    for f in report.findings:
        if f.target != target.id or f.consequence.value not in SERIOUS:
            continue
        if f.code == "QD401" and f.data.get("not_fixable"):
            out.not_fixable.append((f, f.data["not_fixable"]))
        elif f.code == "QD401" and f.data.get("direction") == "unquantized-into-quantized":
            suggestions.append((f, list(f.data.get("suggested_entries", []))))
        elif f.code == "QD401":
            out.not_fixable.append((f, f"needs `{f.data.get('matched_entry')}` removed from the skip list, or the "
                                       "module stored unquantized; ckptlint only appends entries"
                                    if f.data.get("matched_entry") else "the target never quantizes this module"))
        elif f.data.get("server_flag"):
            out.not_fixable.append((f, f"fixed by a server flag, not by the config: start the server with "
                                       f"{f.data['server_flag']}"))
        else:
            out.not_fixable.append((f, "not a skip-list problem (missing or mis-shaped tensors, or an "
                                       "unsupported target): a config change cannot fix it"))
    if not suggestions or plan is None or plan.quant is None:
        return out
    source = plan.quant.source_file
    key = plan.exclude_key or (plan.method.exclude_keys_hf_quant_config if source == "hf_quant_config.json"
                               and plan.method.exclude_keys_hf_quant_config else plan.method.exclude_keys)[0]
    text = ckpt.texts.get(source)
    if text is None:
        text = (Path(path) / source).read_text(encoding="utf-8")
    # Verify against the target; findings an entry does not resolve (the release ignores the skip list
    # for that module, e.g. a compressed-tensors FusedMoE on vLLM 0.11) become "not fixable" and their
    # entries are dropped, then the edit is rebuilt from what works.
    for _ in range(2):
        additions = list(dict.fromkeys(e for _, entries in suggestions for e in entries))
        doc, new_text, added = _edit(text, source, key, additions)
        edited = copy.copy(ckpt)
        if source == "config.json":
            edited.config = doc
        else:
            edited.hf_quant_config = doc
        after = check_loaded(edited, [target], deployment)
        remaining = [f for f in after.findings if f.target == target.id and f.consequence.value in SERIOUS
                     and f.code == "QD401" and f.data.get("direction") == "unquantized-into-quantized"]
        stuck_modules = {m for f in remaining for m in (f.data.get("modules") or [f.module])}
        stuck = [(f, e) for f, e in suggestions if stuck_modules & set(f.data.get("modules") or [f.module])]
        if not stuck:
            break
        for f, _ in stuck:
            out.not_fixable.append((f, f"no `{key}` entry makes {target.resolved} build this module unquantized "
                                       "(it does not apply the skip list to it)"))
        suggestions = [(f, e) for f, e in suggestions if (f, e) not in stuck]
        if not suggestions:
            return out
    out.remaining = remaining
    out.file, out.added, out.new_text = source, added, new_text
    out.key_path = ["quantization_config" if source == "config.json" else "quantization", key]
    out.diff = "".join(difflib.unified_diff(text.splitlines(True), new_text.splitlines(True),
                                            f"a/{source}", f"b/{source}"))
    others = [t for t in (others if others is not None else newest_targets()) if t.resolved != target.resolved]
    if others:
        before = check_loaded(ckpt, others, deployment)
        after_o = check_loaded(edited, others, deployment)
        seen = {(f.target, f.code, f.module) for f in before.findings if f.consequence.value == "load-error"}
        out.regressions = [f for f in after_o.findings if f.consequence.value == "load-error"
                           and (f.target, f.code, f.module) not in seen]
    return out


def _edit(text: str, source: str, key: str, additions: list[str]) -> tuple[dict, str, list[str]]:
    """Append ``additions`` to the skip list ``key``, keeping indentation and key order."""
    doc = json.loads(text)
    section = doc["quantization_config"] if source == "config.json" else doc["quantization"]
    current = section.get(key)
    if not isinstance(current, list):
        current = section[key] = []
    added = [e for e in additions if e not in current]
    current.extend(added)
    new_text = json.dumps(doc, indent=_indent_of(text), ensure_ascii=False)
    if text.endswith("\n"):
        new_text += "\n"
    return doc, new_text, added


def write_fix(path: str, fix: FixPlan, backup: bool = True) -> list[str]:
    """Apply atomically: temp file in the same directory, fsync, rename. Returns notes for the user."""
    notes: list[str] = []
    assert fix.file is not None and fix.new_text is not None
    dest = Path(path) / fix.file
    if backup:
        orig = dest.with_name(dest.name + ".orig")
        if orig.exists():
            notes.append(f"kept the existing {orig.name} (it is the older original)")
        else:
            atomic_write(orig, dest.read_bytes())
            notes.append(f"original saved as {orig.name}")
    atomic_write(dest, fix.new_text.encode("utf-8"))
    return notes
