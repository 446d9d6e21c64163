"""Comparing the framework's decisions with ckptlint's, and the reviewed allow-list.

An adapter turns what the framework's own code says about one runtime module into a ``Verdict``
(built quantized, built unquantized, or a construction error such as SGLang's "some but not all
shards" ValueError). ``compare`` lines the verdicts up with ckptlint's ``ModuleDecision``s and returns
one ``Disagreement`` per module where they differ. ``Allow`` holds ``conformance/allow.toml``: known
harness limits, each with a reason; an entry that matches no disagreement in a run is stale.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, NamedTuple

from conformance.ckptside import ModuleDecision, Side

ALLOW_FILE = Path(__file__).resolve().parent / "allow.toml"


class Verdict(NamedTuple):
    quantized: bool | None  # None: the framework raises while building the module (error)
    detail: str = ""  # the method class built, the entry that matched, or the error text

    @property
    def says(self) -> str:
        if self.quantized is None:
            return f"error ({self.detail})" if self.detail else "error"
        return ("quantized" if self.quantized else "unquantized") + (f" ({self.detail})" if self.detail else "")


class Disagreement(NamedTuple):
    framework: str
    version: str
    level: str  # "leaf" (skip-list matcher) | "config" (from_config + get_quant_method) | "source"
    method: str  # ckptlint method key (quark, compressed-tensors, modelopt, fp8, gptq, ...)
    source: str  # fixture path, case CODE/name, or probe id
    module: str
    entries: tuple[str, ...]  # the skip list (as ckptlint fed it to the matcher)
    framework_says: str
    ckptlint_says: str

    def line(self) -> str:
        ent = ", ".join(self.entries[:4]) + (" ..." if len(self.entries) > 4 else "")
        return (f"{self.framework} {self.version} [{self.level}] {self.method} {self.source} :: {self.module} "
                f"(skip list: {ent or '-'}): framework says {self.framework_says} / ckptlint says {self.ckptlint_says}")


def ckptlint_says(md: ModuleDecision) -> str:
    if md.conflict:
        return "error (fused shards disagree)"
    return "quantized" if md.quantized else "unquantized"


def is_harness_failure(v: Verdict) -> bool:
    """The adapter could not run the framework's code (``harness: ...``): never an agreement."""
    return v.quantized is None and v.detail.startswith("harness:")


def agrees(v: Verdict, md: ModuleDecision) -> bool:
    if is_harness_failure(v):
        return False
    if v.quantized is None:
        return md.conflict
    return not md.conflict and v.quantized == md.quantized


def compare(side: Side, verdicts: dict[str, Verdict], *, level: str, source: str,
            entries: Iterable[str] | None = None) -> list[Disagreement]:
    fw, _, version = side.target.partition("==")
    out = []
    for name, v in verdicts.items():
        md = side.modules.get(name)
        if md is None:
            # a whole-source verdict (``<from_config>``): the framework's code did not run at all
            if name.startswith("<") and is_harness_failure(v):
                out.append(Disagreement(fw, version, level, side.method_key or "", source, name, (), v.says,
                                        "a decision per module"))
            continue
        if agrees(v, md):
            continue
        ents = tuple(entries) if entries is not None else (side.exclude_draft if md.role == "draft"
                                                             else side.exclude_main)
        out.append(Disagreement(fw, version, level, side.method_key or "", source, name, ents, v.says,
                                ckptlint_says(md)))
    return out


@dataclass
class AllowEntry:
    framework: str
    reason: str
    versions: list[str] = field(default_factory=lambda: ["*"])
    level: str = "*"
    method: str = "*"
    source: str = "*"
    module: str = "*"
    says: str = "*"  # glob on "framework says X / ckptlint says Y"
    used: int = 0

    def matches(self, d: Disagreement) -> bool:
        return (d.framework == self.framework and any(fnmatch.fnmatchcase(d.version, v) for v in self.versions)
                and fnmatch.fnmatchcase(d.level, self.level) and fnmatch.fnmatchcase(d.method, self.method)
                and fnmatch.fnmatchcase(d.source, self.source) and fnmatch.fnmatchcase(d.module, self.module)
                and fnmatch.fnmatchcase(f"framework says {d.framework_says} / ckptlint says {d.ckptlint_says}",
                                        self.says))


class Allow:
    """conformance/allow.toml: ``[[allow]]`` tables (framework, reason, and globs on versions,
    level, method, source, module, says). Every entry needs a reason."""

    def __init__(self, path: Path = ALLOW_FILE) -> None:
        doc = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        self.entries = []
        for raw in doc.get("allow", []):
            if not str(raw.get("reason", "")).strip():
                raise ValueError(f"{path}: allow entry without a reason: {raw}")
            self.entries.append(AllowEntry(**raw))

    def split(self, found: Iterable[Disagreement]) -> tuple[list[Disagreement], list[Disagreement]]:
        """(disagreements not allowed, allowed ones); counts each entry's use."""
        bad, ok = [], []
        for d in found:
            hit = next((e for e in self.entries if e.matches(d)), None)
            if hit is None:
                bad.append(d)
            else:
                hit.used += 1
                ok.append(d)
        return bad, ok

    def stale(self, frameworks: Iterable[str] | None = None) -> list[AllowEntry]:
        """Entries (of the frameworks run) that matched nothing."""
        fws = set(frameworks) if frameworks is not None else None
        return [e for e in self.entries if e.used == 0 and (fws is None or e.framework in fws)]
