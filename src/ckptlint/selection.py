"""Which findings are reported: rule selection and per-tensor / per-module ignores.

A *selector* names rules the way ruff does: a full code (``QD401``), a code prefix of the
two-letter family plus zero to two digits (``QD``, ``QD4``, ``QD40``), a rule name
(``quantization-mismatch``), or ``ALL``. An unknown selector is a usage error.

Selection is resolved in layers, the configuration file first and then the command line.
Within a layer: if ``select`` is given it replaces the rules enabled so far, otherwise the
previous layer's set is kept (all rules before the first layer); ``extend-select`` adds rules;
``ignore`` removes them. When a rule is matched by both a select-type and an ignore selector
of the same layer, the more specific selector wins (a code or name beats ``QD4``, which beats
``QD``, which beats ``ALL``); on a tie ``ignore`` wins. So ``ignore = ["QD"]`` with
``extend-select = ["QD401"]`` keeps QD401 only, as in ruff.

Per-tensor and per-module ignores are tables ``{pattern, codes, reason}``: a finding is
dropped when its code matches one of ``codes`` and

* per-tensor: the finding lists tensors and **every** listed tensor name matches ``pattern``
  (``fnmatch``, case-sensitive; ``*`` also matches dots), so a finding that also involves a
  tensor outside the pattern is still reported;
* per-module: the finding's ``module`` (the runtime module name shown in the output and by
  ``ckptlint plan``) matches ``pattern``.

Selection runs on the findings of single modules, before they are aggregated for display
(``ckptlint.engine.finish``), so an ignore that names one module never hides another module's
finding. Dropped findings count in the report's ``summary.ignored.by_config``; they do not
affect the exit code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Iterable, Sequence

from ckptlint.rules import ALL_RULES

if TYPE_CHECKING:
    from ckptlint.findings import Finding

_PREFIX_RE = re.compile(r"^[A-Z]{2}\d{0,3}$")
_EXACT = 100  # specificity of a full code or a rule name


class SelectorError(ValueError):
    """An unknown rule code, prefix or name."""


def all_codes() -> list[str]:
    return [r.code for r in ALL_RULES]


def resolve_selector(selector: str) -> tuple[frozenset[str], int]:
    """The rule codes a selector names and its specificity; raises SelectorError if it names none."""
    key = selector.strip()
    if key.upper() == "ALL":
        return frozenset(all_codes()), 0
    for r in ALL_RULES:
        if r.code == key.upper() or r.name == key.lower():
            return frozenset({r.code}), _EXACT
    up = key.upper()
    if _PREFIX_RE.match(up):
        codes = frozenset(c for c in all_codes() if c.startswith(up))
        if codes:
            return codes, len(up)
    raise SelectorError(f"unknown rule code, prefix or name {selector!r} (see `ckptlint rules`)")


def check_selectors(selectors: Iterable[str]) -> None:
    for s in selectors:
        resolve_selector(s)


@dataclass
class Layer:
    select: Sequence[str] | None = None
    extend_select: Sequence[str] = ()
    ignore: Sequence[str] = ()

    def apply(self, enabled: set[str]) -> set[str]:
        chosen: dict[str, int] = {}
        ignored: dict[str, int] = {}
        for s in (*(self.select or ()), *self.extend_select):
            codes, spec = resolve_selector(s)
            for c in codes:
                chosen[c] = max(chosen.get(c, -1), spec)
        for s in self.ignore:
            codes, spec = resolve_selector(s)
            for c in codes:
                ignored[c] = max(ignored.get(c, -1), spec)
        out: set[str] = set()
        for c in all_codes():
            base = (c in chosen) if self.select is not None else (c in enabled or c in chosen)
            if c in ignored and ignored[c] >= chosen.get(c, -1):
                continue
            if base:
                out.add(c)
        return out


def resolve_layers(layers: Iterable[Layer]) -> set[str]:
    enabled = set(all_codes())
    for layer in layers:
        enabled = layer.apply(enabled)
    return enabled


@dataclass
class IgnoreRule:
    """One per-tensor or per-module ignore entry (``kind`` is "tensor" or "module")."""

    kind: str
    pattern: str
    codes: Sequence[str]
    reason: str

    def __post_init__(self) -> None:
        self._codes: frozenset[str] = frozenset().union(*(resolve_selector(c)[0] for c in self.codes))

    def matches(self, f: "Finding") -> bool:
        if f.code not in self._codes:
            return False
        if self.kind == "module":
            return f.module is not None and fnmatchcase(f.module, self.pattern)
        return bool(f.tensors) and all(fnmatchcase(t, self.pattern) for t in f.tensors)


@dataclass
class Selection:
    enabled: set[str] = field(default_factory=lambda: set(all_codes()))
    ignores: list[IgnoreRule] = field(default_factory=list)

    def keeps(self, f: "Finding") -> bool:
        return self.dropped_because(f) is None

    def dropped_because(self, f: "Finding") -> str | None:
        """Why ``f`` is left out (None: it is reported): the rule is not selected, or the reason of
        the first per-tensor / per-module ignore that matches it."""
        if f.code not in self.enabled:
            return "rule not selected"
        for r in self.ignores:
            if r.matches(f):
                return f"per-{r.kind}-ignores `{r.pattern}`: {r.reason}"
        return None


def filter_findings(findings: Iterable["Finding"], selection: Selection) -> tuple[list["Finding"], int]:
    """(kept findings in their order, number dropped)."""
    kept, dropped = [], 0
    for f in findings:
        if selection.keeps(f):
            kept.append(f)
        else:
            dropped += 1
    return kept, dropped


def split_flags(values: Sequence[str] | None) -> list[str] | None:
    """Command-line selectors: repeatable and comma-separated (``--select QD401,MT701``)."""
    if values is None:
        return None
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


def build(layers: Iterable[Layer], ignores: Iterable[IgnoreRule] = ()) -> Selection:
    layers = list(layers)
    for layer in layers:
        # `--select ""` (an unset variable in a CI script) would switch every rule off silently.
        if layer.select is not None and not layer.select and not layer.extend_select:
            raise SelectorError("--select names no rule, which would switch every check off "
                                "(name codes, prefixes or ALL)")
    return Selection(enabled=resolve_layers(layers), ignores=list(ignores))
